// Package validation is the wire format of kubemedic-validate's report:
// what an active GPU test (DCGM diagnostics, NCCL all-reduce, nvbandwidth)
// found, per GPU by UUID, written as the test pod's termination message
// and read by the remediator's validation gate. It uses the standard
// library only, so the node program and the remediator share it.
package validation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Schema names this report format.
const Schema = "kubemedic.io/validation/v1"

// MaxReport is the most a report may take: the kubelet keeps at most 4096
// bytes of a container's termination message.
const MaxReport = 4096

// Verdict is a test's answer, for the node or one GPU.
type Verdict string

const (
	// VerdictPass: the test ran and every check passed.
	VerdictPass Verdict = "Pass"
	// VerdictFail: the test ran and a check failed.
	VerdictFail Verdict = "Fail"
	// VerdictNoAnswer: the test could not say (it could not run, timed
	// out, its output was unparseable or truncated, no GPU was visible).
	// Never a pass.
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
	// names it.
	Model string `json:"model,omitempty"`
	// Verdict is the node's: Pass only when every GPU passed.
	Verdict Verdict `json:"verdict"`
	// Reason says why it failed or gave no answer.
	Reason string `json:"reason,omitempty"`
	// GPUs are the verdicts per GPU.
	GPUs []GPUResult `json:"gpus,omitempty"`
}

// GPUResult is one GPU's verdict.
type GPUResult struct {
	UUID    string  `json:"uuid"`
	Verdict Verdict `json:"verdict"`
	// Failed are the tool's checks that failed on this GPU, e.g. memory.
	Failed []string `json:"failed,omitempty"`
	// Detail is what the tool said, or the value measured against its
	// floor.
	Detail string `json:"detail,omitempty"`
}

// Encode is the report as a termination message, at most MaxReport bytes:
// a report too long loses its details and reason, shortened alike, never a
// GPU's UUID or verdict; one that cannot fit even so is an error.
func Encode(r Report) (string, error) {
	if err := r.check(); err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode the validation report: %w", err)
	}
	for _, keep := range []int{256, 128, 64, 24, 0} {
		if len(b) <= MaxReport {
			return string(b), nil
		}
		s := r
		s.Reason = cut(r.Reason, keep*2)
		s.GPUs = make([]GPUResult, len(r.GPUs))
		for i, g := range r.GPUs {
			g.Detail = cut(g.Detail, keep)
			if keep == 0 && len(g.Failed) > 2 {
				g.Failed = append(g.Failed[:2:2], fmt.Sprintf("+%d", len(g.Failed)-2))
			}
			s.GPUs[i] = g
		}
		if b, err = json.Marshal(s); err != nil {
			return "", fmt.Errorf("encode the validation report: %w", err)
		}
	}
	if len(b) <= MaxReport {
		return string(b), nil
	}
	return "", fmt.Errorf("the validation report of %d GPUs takes %d bytes with every detail cut, more than the %d a termination message keeps", len(r.GPUs), len(b), MaxReport)
}

// Decode reads a report, strictly: an unknown field, schema or verdict, a
// GPU without a UUID, or a Pass with a GPU that did not pass is an error
// naming the field.
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
	return r, nil
}

func (r Report) check() error {
	switch {
	case r.Schema != Schema:
		return fmt.Errorf("validation report: schema %q, want %q", r.Schema, Schema)
	case strings.TrimSpace(r.Test) == "":
		return errors.New("validation report: test is empty")
	case !r.Verdict.valid():
		return fmt.Errorf("validation report: verdict %q is not Pass, Fail or NoAnswer", r.Verdict)
	case r.Verdict == VerdictPass && len(r.GPUs) == 0:
		return errors.New("validation report: verdict Pass names no GPU")
	}
	for i, g := range r.GPUs {
		switch {
		case strings.TrimSpace(g.UUID) == "":
			return fmt.Errorf("validation report: gpus[%d].uuid is empty", i)
		case !g.Verdict.valid():
			return fmt.Errorf("validation report: gpus[%d].verdict %q is not Pass, Fail or NoAnswer", i, g.Verdict)
		case r.Verdict == VerdictPass && g.Verdict != VerdictPass:
			return fmt.Errorf("validation report: verdict Pass but gpus[%d] (%s) is %s", i, g.UUID, g.Verdict)
		}
	}
	return nil
}

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

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return ""
	}
	i := n - 3
	for i > 0 && !utf8Start(s[i]) {
		i--
	}
	return s[:i] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
