package nccltests

import (
	"fmt"
	"math"

	"github.com/kubemedic/kubemedic/remediator/validation"
)

// Versions is "nccl-tests 2.17.6, NCCL 2.19.3+cuda12.2", or what of it
// the run printed.
func (r Run) Versions() string {
	return validation.Versions("nccl-tests", r.TestsVersion, "NCCL", r.NCCLVersion)
}

// Largest is the row of the largest message and its bus bandwidth: the
// smaller of out of place and in place.
func (r Run) Largest() (Row, float64) {
	best := r.Rows[0]
	for _, x := range r.Rows[1:] {
		if x.Size >= best.Size {
			best = x
		}
	}
	return best, math.Min(best.OutOfPlace.BusBW, best.InPlace.BusBW)
}

// nodeWide is the detail of each GPU when the all-reduce fails or cannot
// be judged: it measured the node.
const nodeWide = "all-reduce measures the node, not one GPU; nvbandwidth finds the slow link"

// Judge holds the run to the all-reduce floor of the node's GPU model (or
// the template's override). The run must have used every GPU of the pod.
func Judge(run Run, gpus []validation.GPU, overrides validation.Floors) validation.Report {
	r := validation.Report{Schema: validation.Schema, Test: validation.TestNCCL}
	model, same := validation.ModelName(gpus)
	r.Model = model
	all := func(v validation.Verdict, detail string) {
		r.GPUs = nil
		for _, g := range gpus {
			r.GPUs = append(r.GPUs, validation.GPUResult{UUID: g.UUID, Verdict: v, Detail: detail})
		}
	}
	if len(gpus) == 0 {
		r.Verdict, r.Reason = validation.VerdictNoAnswer, "no GPU visible in the test pod"
		return r
	}
	if len(run.Devices) != len(gpus) {
		r.Verdict, r.Reason = validation.VerdictNoAnswer, fmt.Sprintf("all_reduce_perf ran on %d GPUs, the pod has %d: its bandwidth is not the node's", len(run.Devices), len(gpus))
		all(validation.VerdictNoAnswer, nodeWide)
		return r
	}
	big, busbw := run.Largest()
	at := fmt.Sprintf("busbw %.1f GB/s at %s (out of place %.2f, in place %.2f)", busbw, Size(big.Size), big.OutOfPlace.BusBW, big.InPlace.BusBW)
	for _, x := range run.Rows {
		if wrong := x.OutOfPlace.Wrong + x.InPlace.Wrong; wrong > 0 {
			r.Verdict, r.Reason = validation.VerdictFail, fmt.Sprintf("all_reduce_perf found %d wrong values at %s (line %d): the GPUs summed wrong; %s", wrong, Size(x.Size), x.Line, at)
			all(validation.VerdictNoAnswer, "wrong sums: "+nodeWide)
			return r
		}
	}
	if run.OutOfBounds > 0 {
		r.Verdict, r.Reason = validation.VerdictFail, fmt.Sprintf("all_reduce_perf found %d out-of-bounds values; %s", run.OutOfBounds, at)
		all(validation.VerdictNoAnswer, nodeWide)
		return r
	}
	floor, source, ok := validation.Floor(model, validation.FloorNCCLBusBW, overrides)
	if !ok {
		if !same {
			source = "the node's GPUs are not of one model (" + model + "), so no floor applies; set --floor nccl-busbw=<GB/s>"
		}
		r.Verdict, r.Reason = validation.VerdictNoAnswer, at+"; "+source
		all(validation.VerdictNoAnswer, nodeWide)
		return r
	}
	m := validation.Measurement{Name: validation.FloorNCCLBusBW, Value: math.Round(busbw*100) / 100, Floor: floor}
	r.Measured = []validation.Measurement{m}
	if m.Below() {
		r.Verdict, r.Reason = validation.VerdictFail, fmt.Sprintf("%s < floor %.1f (%s)", at, floor, source)
		all(validation.VerdictNoAnswer, nodeWide)
		return r
	}
	r.Verdict, r.Reason = validation.VerdictPass, fmt.Sprintf("%s >= floor %.1f (%s)", at, floor, source)
	all(validation.VerdictPass, "")
	return r
}
