package dcgmdiag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubemedic/kubemedic/remediator/validation"
)

// Versions is "DCGM 4.2.3, driver 580.82.09", or what of it the document
// said.
func (d Diag) Versions() string { return validation.Versions("DCGM", d.Version, "driver", d.Driver) }

// gpuOf finds the node's GPU a DCGM GPU id names: by the board's serial
// number when DCGM gave it and one GPU has it, else by index.
func gpuOf(d Diag, id int, gpus []validation.GPU) (int, bool) {
	if s, ok := d.Serials[id]; ok {
		for i, g := range gpus {
			if g.Serial != "" && g.Serial == s {
				return i, true
			}
		}
	}
	for i, g := range gpus {
		if g.Index == id {
			return i, true
		}
	}
	return 0, false
}

// perGPU is what the results say of one GPU.
type perGPU struct {
	failed   []string // tests, in order, once each
	why      []string // "memory: <warning>"
	unknown  []string // "memory: status \"Inconclusive\""
	passed   int
	skipped  []string
	warnings []string
}

func addOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// Judge turns a diagnostic into a report over the node's GPUs (the test
// pod's, from nvidia-smi). A GPU fails when a test failed on it, and gets
// no answer when DCGM did not test it, when no test passed on it (all
// skipped), or when a status is one kubemedic does not know. The node
// fails when a GPU, an entity that is no GPU, or a test's summary failed;
// it gets no answer when DCGM reported a runtime error or results for a
// GPU the pod does not see.
func Judge(d Diag, gpus []validation.GPU) validation.Report {
	r := validation.Report{Schema: validation.Schema, Test: validation.TestDCGM}
	r.Model, _ = validation.ModelName(gpus)
	per := make([]perGPU, len(gpus))
	var otherFails, unmapped []string
	failedTests := map[string]bool{}
	for _, res := range d.Results {
		if res.GPU < 0 {
			if res.Status == StatusFail {
				otherFails = append(otherFails, fmt.Sprintf("%s on %s", res.Test, res.Entity))
			}
			continue
		}
		i, ok := gpuOf(d, res.GPU, gpus)
		if !ok {
			unmapped = addOnce(unmapped, fmt.Sprintf("GPU %d", res.GPU))
			if res.Status == StatusFail {
				otherFails = append(otherFails, fmt.Sprintf("%s on DCGM's GPU %d, which this pod does not see", res.Test, res.GPU))
			}
			continue
		}
		p := &per[i]
		switch res.Status {
		case StatusFail:
			failedTests[res.Test] = true
			p.failed = addOnce(p.failed, res.Test)
			msg := "failed"
			if len(res.Warnings) > 0 {
				msg = strings.Join(res.Warnings, "; ")
			}
			p.why = append(p.why, res.Test+": "+msg)
		case StatusPass:
			p.passed++
		case StatusWarn:
			p.passed++
			for _, w := range res.Warnings {
				p.warnings = addOnce(p.warnings, res.Test+": "+w)
			}
		case StatusSkip:
			p.skipped = addOnce(p.skipped, res.Test)
		default:
			p.unknown = append(p.unknown, fmt.Sprintf("%s: status %q", res.Test, res.RawStatus))
		}
	}
	for _, t := range d.FailedSummaries {
		if !failedTests[t] {
			otherFails = append(otherFails, t+" (its summary failed, no GPU's result did)")
		}
	}

	var failing, silent []string
	for i, g := range gpus {
		p := per[i]
		f := validation.Finding{Failed: p.failed, Why: p.why}
		switch {
		case len(p.unknown) > 0:
			f.NoAnswer = "kubemedic does not know " + strings.Join(p.unknown, "; ")
		case p.passed == 0 && len(p.skipped) > 0:
			f.NoAnswer = "every test skipped it: " + strings.Join(p.skipped, ", ")
		case p.passed == 0:
			f.NoAnswer = "DCGM reported no test on this GPU"
		}
		if len(p.skipped) > 0 {
			f.Notes = append(f.Notes, "skipped: "+strings.Join(p.skipped, ", "))
		}
		if len(p.warnings) > 0 {
			f.Notes = append(f.Notes, "warnings: "+strings.Join(p.warnings, "; "))
		}
		gr := f.Result(g.UUID)
		switch gr.Verdict {
		case validation.VerdictFail:
			failing = append(failing, fmt.Sprintf("GPU %d (%s)", g.Index, strings.Join(p.failed, ", ")))
		case validation.VerdictNoAnswer:
			silent = append(silent, fmt.Sprintf("GPU %d", g.Index))
		}
		r.GPUs = append(r.GPUs, gr)
	}

	switch {
	case len(failing) > 0 || len(otherFails) > 0:
		r.Verdict = validation.VerdictFail
		var parts []string
		if len(failing) > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d GPUs failed: %s", len(failing), len(gpus), strings.Join(failing, ", ")))
		}
		if len(otherFails) > 0 {
			parts = append(parts, "failed: "+strings.Join(otherFails, ", "))
		}
		r.Reason = strings.Join(parts, "; ")
	case d.RuntimeError != "":
		r.Verdict, r.Reason = validation.VerdictNoAnswer, "DCGM could not run the diagnostic: "+d.RuntimeError
	case len(unmapped) > 0:
		sort.Strings(unmapped)
		r.Verdict, r.Reason = validation.VerdictNoAnswer, fmt.Sprintf("DCGM tested %s, which nvidia-smi in the test pod does not list: its GPUs and the pod's differ", strings.Join(unmapped, ", "))
	case len(silent) > 0:
		r.Verdict, r.Reason = validation.VerdictNoAnswer, fmt.Sprintf("no answer for %s: see each GPU's detail", strings.Join(silent, ", "))
	case len(gpus) == 0:
		r.Verdict, r.Reason = validation.VerdictNoAnswer, "no GPU visible in the test pod"
	default:
		r.Verdict = validation.VerdictPass
	}
	return r
}
