package gpu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
)

// fieldReader reads nvidia-smi CSV fields and remembers what they say
// about the device: "[N/A]" and "[Not Supported]" are N/A (unknown, not a
// fault), "[GPU is lost]" marks the device lost, and other bracketed values
// ("[Unknown Error]") are read errors.
type fieldReader struct {
	lost    bool
	readErr []string
	bad     error
}

// unsupported reports a value that says the GPU or driver lacks the
// field: "[N/A]", "[Not Supported]", and N/A as -q writes it.
func (r *fieldReader) unsupported(v string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(v), "[]")) {
	case "n/a", "not supported", "not available":
		return true
	}
	return false
}

func (r *fieldReader) special(name, v string) bool {
	if !strings.HasPrefix(v, "[") && v != "N/A" {
		return false
	}
	switch strings.ToLower(strings.Trim(v, "[]")) {
	case "n/a", "not supported", "not available":
	case "gpu is lost":
		r.lost = true
	default:
		r.readErr = append(r.readErr, name+": "+v)
	}
	return true
}

func (r *fieldReader) count(name, v string) Count {
	if r.special(name, v) {
		return Count{}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		r.fail(fmt.Errorf("%s: bad number %q", name, v))
		return Count{}
	}
	return Count{Value: n, Known: true}
}

func (r *fieldReader) flag(name, v string) Flag {
	if r.special(name, v) {
		return Flag{}
	}
	switch strings.ToLower(v) {
	case "yes", "1", "true", "enabled":
		return Flag{Value: true, Known: true}
	case "no", "0", "false", "disabled":
		return Flag{Known: true}
	}
	r.fail(fmt.Errorf("%s: bad value %q", name, v))
	return Flag{}
}

// verdictFlag reads a verdict flag: Yes or No. Unlike flag, any other
// value is a read error of this device, not a failure of the whole output,
// so that a value this parser has not seen loses no other evidence.
func (r *fieldReader) verdictFlag(name, v string) Flag {
	v = strings.TrimSpace(v)
	if r.special(name, v) {
		return Flag{}
	}
	switch strings.ToLower(v) {
	case "yes":
		return Flag{Value: true, Known: true}
	case "no":
		return Flag{Known: true}
	}
	r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
	return Flag{}
}

// verdictCount reads a verdict counter, as verdictFlag.
func (r *fieldReader) verdictCount(name, v string) Count {
	if r.special(name, v) {
		return Count{}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
		return Count{}
	}
	return Count{Value: n, Known: true}
}

// recovery reads gpu_recovery_action. The real H100 printed "None"; the
// other names and numbers are gpuaction's (NVIDIA's names, matched without
// case, spaces, underscores or dashes). Any other value is a read error,
// never a guessed action.
func (r *fieldReader) recovery(name, v string) Recovery {
	if r.special(name, v) {
		return Recovery{}
	}
	if a, ok := gpuaction.Parse(v); ok {
		return Recovery{Action: a, Known: true}
	}
	r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
	return Recovery{}
}

func (r *fieldReader) fail(err error) {
	if r.bad == nil {
		r.bad = err
	}
}

func (r *fieldReader) apply(d *Device) {
	if r.lost {
		d.Lost, d.Err = true, "GPU is lost"
	}
	d.ReadErr = strings.Join(r.readErr, "; ")
}
