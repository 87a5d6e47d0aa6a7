package validation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

// Schema names this report format.
const Schema = "kubemedic.io/validation/v1"

// MaxReport is the most a report may take: the kubelet keeps at most 4096
// bytes of a container's termination message.
const MaxReport = 4096

// The tests kubemedic-validate runs, as Report.Test names them.
const (
	TestDCGM        = "dcgm"
	TestNCCL        = "nccl"
	TestNVBandwidth = "nvbandwidth"
)

// Bounds of a report's fields, those of the NodeOperation's
// status.validation where it keeps them.
const (
	maxTest        = 64
	maxModel       = 128
	maxReason      = 1024
	maxTool        = 256
	maxGPUs        = 64
	maxFailed      = 16
	maxFailedName  = 64
	maxDetail      = 256
	maxMeasured    = 8
	maxMeasureName = 32
)

// Verdict is a test's answer, for the node or one GPU.
type Verdict string

const (
	// VerdictPass: the test ran and every check passed.
	VerdictPass Verdict = "Pass"
	// VerdictFail: the test ran and a check failed.
	VerdictFail Verdict = "Fail"
	// VerdictNoAnswer: the test could not say (it could not run, timed
	// out, its output was unparseable or truncated, no GPU was visible,
	// no floor is known for the GPU model). Never a pass.
	VerdictNoAnswer Verdict = "NoAnswer"
)

func (v Verdict) valid() bool {
	return v == VerdictPass || v == VerdictFail || v == VerdictNoAnswer
}

// Report is one test's result.
type Report struct {
	Schema string `json:"schema"`
	// Test is the test that ran: dcgm, nccl or nvbandwidth.
	Test string `json:"test"`
	// Model is the GPU model the results were judged by, as the driver
	// names it (nvidia-smi's name, e.g. "NVIDIA H100 80GB HBM3").
	Model string `json:"model,omitempty"`
	// Verdict is the node's: Pass only when every GPU passed; Fail when
	// a check failed, on a GPU or on the node as a whole (an all-reduce
	// below its floor names no single GPU); NoAnswer otherwise.
	Verdict Verdict `json:"verdict"`
	// Reason says why it failed or gave no answer, and what was compared
	// with what.
	Reason string `json:"reason,omitempty"`
	// Tool is the command that ran and the version it reported, e.g.
	// "dcgmi diag -r 2 (DCGM 4.2.3, driver 580.82.09)".
	Tool string `json:"tool,omitempty"`
	// Seconds is how long the tool ran.
	Seconds int64 `json:"seconds,omitempty"`
	// Measured are the node-wide values against their floors, e.g. the
	// all-reduce bus bandwidth.
	Measured []Measurement `json:"measured,omitempty"`
	// GPUs are the verdicts per GPU, in the node's order.
	GPUs []GPUResult `json:"gpus,omitempty"`
}

// GPUResult is one GPU's verdict.
type GPUResult struct {
	// UUID is the GPU's, as gpuwire.NormalizeUUID writes it.
	UUID    string  `json:"uuid"`
	Verdict Verdict `json:"verdict"`
	// Failed are the tool's checks that failed on this GPU, e.g.
	// "memory" (DCGM), "h2d" (nvbandwidth, below its floor).
	Failed []string `json:"failed,omitempty"`
	// Detail is what the tool said, or why this GPU got no answer.
	Detail string `json:"detail,omitempty"`
	// Measured are this GPU's values against their floors.
	Measured []Measurement `json:"measured,omitempty"`
}

// Measurement is a value a test measured and the floor it was held to,
// both in GB/s (10^9 bytes per second, as nccl-tests and nvbandwidth
// report them).
type Measurement struct {
	// Name is the floor's name: nccl-busbw, h2d, d2h or d2d.
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Floor float64 `json:"floor"`
}

// Below reports whether the value is under its floor.
func (m Measurement) Below() bool { return m.Value < m.Floor }

// String is "h2d 38.2 GB/s < floor 41.0".
func (m Measurement) String() string {
	op := ">="
	if m.Below() {
		op = "<"
	}
	return fmt.Sprintf("%s %.1f GB/s %s floor %.1f", m.Name, m.Value, op, m.Floor)
}

// Encode is the report as a termination message, at most MaxReport bytes.
// A report too long loses, in turn until it fits: the tails of its reason
// (down to 96 bytes) and details (cut alike, marked "..."), then the measurements of the GPUs
// that passed, then all but the first two failed checks of each GPU
// (counted as "+N"); never a GPU's UUID or verdict. One that cannot fit
// even so, or that Decode would refuse, is an error.
func Encode(r Report) (string, error) {
	r = clamp(r)
	if err := r.check(); err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode the validation report: %w", err)
	}
	for _, keep := range []int{128, 64, 24, 0, -1, -2} {
		if len(b) <= MaxReport {
			return string(b), nil
		}
		if b, err = json.Marshal(shorten(r, keep)); err != nil {
			return "", fmt.Errorf("encode the validation report: %w", err)
		}
	}
	if len(b) <= MaxReport {
		return string(b), nil
	}
	return "", fmt.Errorf("the validation report of %d GPUs takes %d bytes with every detail cut, more than the %d a termination message keeps", len(r.GPUs), len(b), MaxReport)
}

// clamp cuts r's texts to their bounds, and its failed checks to
// maxFailed (the last counting the rest as "+N"): what a tool said may be
// long, the report is not.
func clamp(r Report) Report {
	r.Model, r.Reason, r.Tool = clean(r.Model, maxModel), clean(r.Reason, maxReason), clean(r.Tool, maxTool)
	gpus := make([]GPUResult, len(r.GPUs))
	for i, g := range r.GPUs {
		g.Detail = clean(g.Detail, maxDetail)
		if len(g.Failed) > maxFailed {
			g.Failed = append(g.Failed[:maxFailed-1:maxFailed-1], fmt.Sprintf("+%d", len(g.Failed)-maxFailed+1))
		}
		failed := make([]string, len(g.Failed))
		for k, f := range g.Failed {
			failed[k] = clean(f, maxFailedName)
		}
		if g.Failed != nil {
			g.Failed = failed
		}
		gpus[i] = g
	}
	if r.GPUs != nil {
		r.GPUs = gpus
	}
	return r
}

// shorten is r with details cut to keep bytes (the reason to twice that,
// but never below 96: it says what failed); keep -1 also drops the
// measurements of GPUs that passed, -2 also all but two failed checks of
// each GPU.
func shorten(r Report, keep int) Report {
	s := r
	s.Reason = cut(r.Reason, max(keep*2, 96))
	s.GPUs = make([]GPUResult, len(r.GPUs))
	for i, g := range r.GPUs {
		g.Detail = cut(g.Detail, max(keep, 0))
		if keep <= -1 && g.Verdict == VerdictPass {
			g.Measured = nil
		}
		if keep <= -2 && len(g.Failed) > 2 {
			g.Failed = append(g.Failed[:2:2], fmt.Sprintf("+%d", len(g.Failed)-2))
		}
		s.GPUs[i] = g
	}
	return s
}

// Decode reads a report strictly (see the package doc); errors name the
// field, e.g. gpus[3].uuid.
func Decode(s string) (Report, error) {
	var r Report
	if len(s) > MaxReport {
		return r, fmt.Errorf("validation report: %d bytes, more than %d", len(s), MaxReport)
	}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("validation report: %w", err)
	}
	if d.More() {
		return Report{}, errors.New("validation report: text after the report")
	}
	if err := r.check(); err != nil {
		return Report{}, err
	}
	return canonical(r), nil
}

// canonical is r with its empty lists nil: what Encode omits, Decode
// gives back as nil.
func canonical(r Report) Report {
	if len(r.Measured) == 0 {
		r.Measured = nil
	}
	if len(r.GPUs) == 0 {
		r.GPUs = nil
	}
	for i := range r.GPUs {
		g := &r.GPUs[i]
		if len(g.Failed) == 0 {
			g.Failed = nil
		}
		if len(g.Measured) == 0 {
			g.Measured = nil
		}
	}
	return r
}

// testRe is a test's name: what ValidationFailedReason and the metrics'
// test label take.
var testRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func (r Report) check() error {
	switch {
	case r.Schema != Schema:
		return fmt.Errorf("validation report: schema %q, want %q", r.Schema, Schema)
	case strings.TrimSpace(r.Test) == "":
		return errors.New("validation report: test is empty")
	case len(r.Test) > maxTest || !testRe.MatchString(r.Test):
		return fmt.Errorf("validation report: test %q is not a test name (lower case letters, digits, '-', at most %d)", cut(r.Test, maxTest), maxTest)
	case !r.Verdict.valid():
		return fmt.Errorf("validation report: verdict %q is not Pass, Fail or NoAnswer", r.Verdict)
	case r.Verdict == VerdictPass && len(r.GPUs) == 0:
		return errors.New("validation report: verdict Pass names no GPU")
	case r.Seconds < 0:
		return fmt.Errorf("validation report: seconds %d is negative", r.Seconds)
	case len(r.GPUs) > maxGPUs:
		return fmt.Errorf("validation report: %d gpus, more than %d", len(r.GPUs), maxGPUs)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"model", r.Model, maxModel}, {"reason", r.Reason, maxReason}, {"tool", r.Tool, maxTool}} {
		if err := text(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if err := checkMeasured("measured", r.Measured); err != nil {
		return err
	}
	seen := map[string]int{}
	for i, g := range r.GPUs {
		field := fmt.Sprintf("gpus[%d]", i)
		switch {
		case strings.TrimSpace(g.UUID) == "":
			return fmt.Errorf("validation report: %s.uuid is empty", field)
		case gpuwire.NormalizeUUID(g.UUID) != g.UUID:
			return fmt.Errorf("validation report: %s.uuid %q is not a GPU UUID in lower case (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", field, cut(g.UUID, maxDetail))
		case !g.Verdict.valid():
			return fmt.Errorf("validation report: %s.verdict %q is not Pass, Fail or NoAnswer", field, g.Verdict)
		case r.Verdict == VerdictPass && g.Verdict != VerdictPass:
			return fmt.Errorf("validation report: verdict Pass but %s (%s) is %s", field, g.UUID, g.Verdict)
		case len(g.Failed) > maxFailed:
			return fmt.Errorf("validation report: %s.failed has %d checks, more than %d", field, len(g.Failed), maxFailed)
		}
		if j, dup := seen[g.UUID]; dup {
			return fmt.Errorf("validation report: %s.uuid %s is gpus[%d]'s too", field, g.UUID, j)
		}
		seen[g.UUID] = i
		for k, name := range g.Failed {
			if strings.TrimSpace(name) == "" {
				return fmt.Errorf("validation report: %s.failed[%d] is empty", field, k)
			}
			if err := text(fmt.Sprintf("%s.failed[%d]", field, k), name, maxFailedName); err != nil {
				return err
			}
		}
		if err := text(field+".detail", g.Detail, maxDetail); err != nil {
			return err
		}
		if err := checkMeasured(field+".measured", g.Measured); err != nil {
			return err
		}
	}
	return nil
}

// text checks a free-text field: valid UTF-8, at most max bytes.
func text(field, v string, max int) error {
	switch {
	case !utf8.ValidString(v):
		return fmt.Errorf("validation report: %s is not valid UTF-8", field)
	case len(v) > max:
		return fmt.Errorf("validation report: %s has %d bytes, more than %d", field, len(v), max)
	}
	return nil
}

func checkMeasured(field string, ms []Measurement) error {
	if len(ms) > maxMeasured {
		return fmt.Errorf("validation report: %s has %d values, more than %d", field, len(ms), maxMeasured)
	}
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case strings.TrimSpace(m.Name) == "":
			return fmt.Errorf("validation report: %s.name is empty", f)
		case len(m.Name) > maxMeasureName || !utf8.ValidString(m.Name):
			return fmt.Errorf("validation report: %s.name is not a floor's name", f)
		case !finite(m.Value) || m.Value < 0:
			return fmt.Errorf("validation report: %s.value %v is not a bandwidth", f, m.Value)
		case !finite(m.Floor) || m.Floor < 0:
			return fmt.Errorf("validation report: %s.floor %v is not a bandwidth", f, m.Floor)
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Failing are the UUIDs of the GPUs that failed.
func Failing(r Report) []string {
	var out []string
	for _, g := range r.GPUs {
		if g.Verdict == VerdictFail {
			out = append(out, g.UUID)
		}
	}
	return out
}

// clean is s as valid UTF-8 (a tool's bytes that are not become U+FFFD),
// cut to n bytes.
func clean(s string, n int) string { return cut(strings.ToValidUTF8(s, "\uFFFD"), n) }

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return ""
	}
	i := n - 3
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// Cut is s shortened to at most n bytes on a rune boundary, marked "..."
// when cut: for the texts a report carries (bounded: a reason 1024, a
// detail 256).
func Cut(s string, n int) string { return cut(s, n) }
