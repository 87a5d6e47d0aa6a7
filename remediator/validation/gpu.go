package validation

import "strings"

// GPU is one GPU of the node as the test pod sees it: nvidia-smi's list,
// by which a tool's device numbers become UUIDs.
type GPU struct {
	// Index is nvidia-smi's index, in PCI bus order; CUDA numbers devices
	// the same way when CUDA_DEVICE_ORDER=PCI_BUS_ID, which
	// kubemedic-validate sets for its tools.
	Index int
	// UUID is as gpuwire.NormalizeUUID writes it.
	UUID string
	// Name is the driver's name for the model, e.g. "NVIDIA H100 80GB
	// HBM3".
	Name string
	// BusID is the normalised PCI address, e.g. "0000:3b:00.0".
	BusID string
	// Serial is the board's serial number; "" when the GPU does not
	// report one.
	Serial string
}

// ModelName is the model of the node's GPUs, as the driver names it; ok is
// false when they are not all of one model (or there are none), whose
// floors then cannot be told apart.
func ModelName(gpus []GPU) (name string, ok bool) {
	if len(gpus) == 0 {
		return "", false
	}
	name = gpus[0].Name
	for _, g := range gpus[1:] {
		if normName(g.Name) != normName(name) {
			return "mixed: " + name + ", " + g.Name, false
		}
	}
	return name, true
}

// Versions is what a tool said of its versions, for Report.Tool: the
// name-value pairs whose value is set, "DCGM 4.2.3, driver 580.82.09".
func Versions(pairs ...string) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := strings.TrimSpace(pairs[i+1]); v != "" {
			parts = append(parts, pairs[i]+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

// Finding is what a test found on one GPU, before it is a GPUResult.
type Finding struct {
	// Failed are the checks that failed, Why what each found.
	Failed, Why []string
	// NoAnswer says why the test cannot vouch for the GPU, when no
	// check failed on it.
	NoAnswer string
	// Notes are the detail of a pass: what was skipped, warned of.
	Notes    []string
	Measured []Measurement
}

// Result is the GPU's verdict: Fail when a check failed, NoAnswer when the
// test cannot vouch for it, else Pass.
func (f Finding) Result(uuid string) GPUResult {
	r := GPUResult{UUID: uuid, Measured: f.Measured}
	switch {
	case len(f.Failed) > 0:
		r.Verdict, r.Failed, r.Detail = VerdictFail, f.Failed, strings.Join(f.Why, "; ")
	case f.NoAnswer != "":
		r.Verdict, r.Detail = VerdictNoAnswer, f.NoAnswer
	default:
		r.Verdict, r.Detail = VerdictPass, strings.Join(f.Notes, "; ")
	}
	return r
}
