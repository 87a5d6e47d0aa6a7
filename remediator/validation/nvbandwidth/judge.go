package nvbandwidth

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kubemedic/kubemedic/remediator/validation"
)

// The tests kubemedic judges, by floor.
var testOf = map[string]string{
	validation.FloorH2D: "host_to_device_memcpy_ce",
	validation.FloorD2H: "device_to_host_memcpy_ce",
	validation.FloorD2D: "device_to_device_memcpy_read_ce",
}

// Floors are the floors nvbandwidth is judged by, in order.
var Floors = []string{validation.FloorH2D, validation.FloorD2H, validation.FloorD2D}

// TestOf is the nvbandwidth testcase a floor judges.
func TestOf(floor string) string { return testOf[floor] }

// Versions is "nvbandwidth v0.7, driver 550.127.08", or what of it the
// run printed.
func (r Run) Versions() string {
	return validation.Versions("nvbandwidth", r.Version, "driver", r.Driver)
}

// gpuState is what the judged tests say of one GPU.
type gpuState struct {
	failed   []string
	why      []string
	noAnswer []string
	measured []validation.Measurement
}

// columns maps the matrix's device indices to the pod's GPUs (positions
// in gpus): by bus ID when nvbandwidth listed its devices with one, else
// in PCI order.
func columns(run Run, gpus []validation.GPU) ([]int, error) {
	order := make([]int, len(gpus))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return gpus[order[a]].Index < gpus[order[b]].Index })
	if len(run.Devices) == 0 || run.Devices[0].BusID == "" {
		return order, nil
	}
	if len(run.Devices) != len(gpus) {
		return nil, fmt.Errorf("nvbandwidth lists %d devices, the pod has %d GPUs", len(run.Devices), len(gpus))
	}
	out := make([]int, len(run.Devices))
	for i, d := range run.Devices {
		found := false
		for j, g := range gpus {
			if g.BusID == d.BusID {
				out[i], found = j, true
			}
		}
		if !found {
			return nil, fmt.Errorf("nvbandwidth's device %d (%s) is no GPU nvidia-smi lists in the pod", i, d.BusID)
		}
	}
	return out, nil
}

// Judge holds the run's copy-engine bandwidths to their floors per GPU:
// the model's (validation.Floor) or the template's overrides. A floor
// that the model lacks is not judged, and said in the reason; with none
// at all there is no answer.
func Judge(run Run, gpus []validation.GPU, overrides validation.Floors) validation.Report {
	r := validation.Report{Schema: validation.Schema, Test: validation.TestNVBandwidth}
	model, same := validation.ModelName(gpus)
	r.Model = model
	if len(gpus) == 0 {
		r.Verdict, r.Reason = validation.VerdictNoAnswer, "no GPU visible in the test pod"
		return r
	}
	st := make([]gpuState, len(gpus))
	var notes, unjudged []string
	judged := 0
	col, colErr := columns(run, gpus)
	for _, name := range Floors {
		floor, source, ok := validation.Floor(model, name, overrides)
		if !ok {
			if !same {
				source = "the node's GPUs are not of one model (" + model + "); set --floor " + name + "=<GB/s>"
			}
			unjudged = append(unjudged, source)
			continue
		}
		judged++
		tname := testOf[name]
		t := run.Test(tname)
		why := ""
		switch {
		case colErr != nil:
			why = colErr.Error()
		case t == nil:
			why = tname + " is not in the output"
		case t.Status == Waived:
			why = tname + " was waived (nvbandwidth found no way to run it: no peer access between the GPUs?)"
		case t.Status == Failed:
			why = tname + " aborted: " + t.Error
		case t.Status == Incomplete:
			why = fmt.Sprintf("%s was cut short (the output ends inside it, line %d)", tname, t.Line)
		case len(t.Matrix[0]) != len(gpus):
			why = fmt.Sprintf("%s measured %d GPUs, the pod has %d", tname, len(t.Matrix[0]), len(gpus))
		case name == validation.FloorD2D && len(t.Matrix) != len(gpus):
			why = fmt.Sprintf("%s has %d rows for %d GPUs", tname, len(t.Matrix), len(gpus))
		}
		if why != "" {
			for i := range st {
				st[i].noAnswer = append(st[i].noAnswer, name)
			}
			notes = append(notes, name+": "+why)
			continue
		}
		if name == validation.FloorD2D {
			judgeD2D(t, col, floor, st, gpus)
		} else {
			judgeHost(name, t, col, floor, st)
		}
		notes = append(notes, fmt.Sprintf("%s floor %.1f (%s)", name, floor, source))
	}
	if judged == 0 {
		r.Verdict, r.Reason = validation.VerdictNoAnswer, "nothing to judge: "+strings.Join(unjudged, "; ")
		for _, g := range gpus {
			r.GPUs = append(r.GPUs, validation.GPUResult{UUID: g.UUID, Verdict: validation.VerdictNoAnswer, Detail: "no floor"})
		}
		return r
	}
	var failing, silent []string
	for i, g := range gpus {
		s := st[i]
		f := validation.Finding{Failed: s.failed, Why: s.why, Measured: s.measured}
		if len(s.noAnswer) > 0 {
			f.NoAnswer = "no answer for " + strings.Join(s.noAnswer, ", ")
		}
		gr := f.Result(g.UUID)
		switch gr.Verdict {
		case validation.VerdictFail:
			failing = append(failing, fmt.Sprintf("GPU %d (%s)", g.Index, gr.Detail))
		case validation.VerdictNoAnswer:
			silent = append(silent, fmt.Sprintf("GPU %d", g.Index))
		}
		r.GPUs = append(r.GPUs, gr)
	}
	if len(unjudged) > 0 {
		notes = append(notes, "not judged: "+strings.Join(unjudged, "; "))
	}
	switch {
	case len(failing) > 0:
		r.Verdict = validation.VerdictFail
		r.Reason = fmt.Sprintf("%d of %d GPUs below a floor: %s | %s", len(failing), len(gpus), strings.Join(failing, ", "), strings.Join(notes, "; "))
	case len(silent) > 0:
		r.Verdict, r.Reason = validation.VerdictNoAnswer, strings.Join(notes, "; ")
	default:
		r.Verdict, r.Reason = validation.VerdictPass, fmt.Sprintf("%d GPUs at or above: %s", len(gpus), strings.Join(notes, "; "))
	}
	return r
}

// judgeHost judges a host test: each GPU's column, its smallest value.
func judgeHost(name string, t *Test, col []int, floor float64, st []gpuState) {
	for c := range t.Matrix[0] {
		s := &st[col[c]]
		v, ok := math.Inf(1), false
		for _, row := range t.Matrix {
			if row[c].OK {
				v, ok = math.Min(v, row[c].GBps), true
			}
		}
		if !ok {
			s.noAnswer = append(s.noAnswer, name)
			continue
		}
		m := validation.Measurement{Name: name, Value: v, Floor: floor}
		s.measured = append(s.measured, m)
		if m.Below() {
			s.failed = append(s.failed, name)
			s.why = append(s.why, m.String())
		}
	}
}

// judgeD2D judges device to device: a GPU's value is the median of its
// links (its row and column); a link below the floor is blamed on the end
// whose median is below it, on both when neither's is.
func judgeD2D(t *Test, col []int, floor float64, st []gpuState, gpus []validation.GPU) {
	n := len(t.Matrix)
	links := make([][]float64, n)
	for i := range n {
		for j := range n {
			if i != j && t.Matrix[i][j].OK {
				links[i] = append(links[i], t.Matrix[i][j].GBps)
				links[j] = append(links[j], t.Matrix[i][j].GBps)
			}
		}
	}
	median := make([]float64, n)
	for i := range n {
		if len(links[i]) == 0 {
			st[col[i]].noAnswer = append(st[col[i]].noAnswer, validation.FloorD2D)
			median[i] = math.NaN()
			continue
		}
		sort.Float64s(links[i])
		median[i] = links[i][len(links[i])/2]
		if len(links[i])%2 == 0 {
			median[i] = (links[i][len(links[i])/2-1] + links[i][len(links[i])/2]) / 2
		}
		st[col[i]].measured = append(st[col[i]].measured, validation.Measurement{Name: validation.FloorD2D, Value: math.Round(median[i]*100) / 100, Floor: floor})
	}
	blamed := make([][]string, n)
	for i := range n {
		for j := range n {
			c := t.Matrix[i][j]
			if i == j || !c.OK || c.GBps >= floor {
				continue
			}
			link := fmt.Sprintf("d2d %d->%d %.1f GB/s < floor %.1f", gpus[col[i]].Index, gpus[col[j]].Index, c.GBps, floor)
			bi, bj := median[i] < floor, median[j] < floor
			if !bi && !bj {
				bi, bj = true, true
			}
			if bi {
				blamed[i] = append(blamed[i], link)
			}
			if bj {
				blamed[j] = append(blamed[j], link)
			}
		}
	}
	for i := range n {
		if len(blamed[i]) == 0 {
			continue
		}
		s := &st[col[i]]
		s.failed = append(s.failed, validation.FloorD2D)
		why := fmt.Sprintf("d2d median %.1f GB/s over %d links, %d below floor %.1f: %s", median[i], len(links[i]), len(blamed[i]), floor, blamed[i][0])
		if len(blamed[i]) > 1 {
			why += fmt.Sprintf(" and %d more", len(blamed[i])-1)
		}
		s.why = append(s.why, why)
	}
}
