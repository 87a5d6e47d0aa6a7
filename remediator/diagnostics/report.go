package diagnostics

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// MaxReport is the longest termination message the kubelet keeps
// (corev1.TerminationMessagePath's 4096 bytes).
const MaxReport = 4096

// Report is what a capture pod tells the remediator, as JSON in its
// termination message.
type Report struct {
	// Result is Captured, Partial or Failed.
	Result v1alpha1.DiagnosticsResult `json:"result"`
	// Key is the bundle's object key, <node>/<operation>.tar.gz.
	Key string `json:"key,omitempty"`
	// Size and SHA256 are the bundle's.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Files are the bundle's files, manifest.json first.
	Files []string `json:"files,omitempty"`
	// FailedParts are the parts that failed or timed out.
	FailedParts []string `json:"failedParts,omitempty"`
	// Stored: the store confirmed the bundle (same SHA-256); false: it
	// waits in the node's spool.
	Stored bool `json:"stored,omitempty"`
	// Message says what happened, in words.
	Message string `json:"message,omitempty"`
	// Flushed counts the older spooled bundles this pod uploaded.
	Flushed int `json:"flushed,omitempty"`
}

// Encode is r as one JSON document of at most MaxReport bytes: when the
// file list does not fit, its tail is dropped and counted in Message (the
// manifest in the bundle lists every file).
func (r Report) Encode() []byte {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			// Only strings, ints and slices of strings: cannot happen.
			panic(err)
		}
		if len(b) <= MaxReport || (len(r.Files) == 0 && len(r.FailedParts) == 0) {
			if len(b) > MaxReport {
				r.Message = r.Message[:min(len(r.Message), 256)]
				b, _ = json.Marshal(r)
			}
			return b
		}
		if len(r.Files) > 0 {
			n := len(r.Files) / 2
			r.Message = fmt.Sprintf("%s (%d more files in manifest.json)", strings.TrimSuffix(r.Message, "."), len(r.Files)-n)
			r.Files = r.Files[:n]
			continue
		}
		r.FailedParts = r.FailedParts[:len(r.FailedParts)/2]
	}
}

// ParseReport reads a capture pod's report strictly: unknown fields, a
// result that is not Captured, Partial or Failed, a bundle without a key,
// size or well-formed SHA-256, or a Failed report that claims a bundle
// are errors.
func ParseReport(b []byte) (Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	if dec.More() {
		return Report{}, errors.New("report: more than one JSON document")
	}
	switch r.Result {
	case v1alpha1.DiagnosticsCaptured, v1alpha1.DiagnosticsPartial:
		if r.Key == "" {
			return Report{}, fmt.Errorf("report: result %s without a key", r.Result)
		}
		if r.Size <= 0 {
			return Report{}, fmt.Errorf("report: result %s with size %d", r.Result, r.Size)
		}
		if !ValidSHA256(r.SHA256) {
			return Report{}, fmt.Errorf("report: sha256 %q is not 64 hex digits", r.SHA256)
		}
	case v1alpha1.DiagnosticsFailed:
		if r.Key != "" || r.Stored {
			return Report{}, errors.New("report: result Failed with a bundle")
		}
	default:
		return Report{}, fmt.Errorf("report: result %q is not Captured, Partial or Failed", r.Result)
	}
	if r.Result == v1alpha1.DiagnosticsPartial && len(r.FailedParts) == 0 {
		return Report{}, errors.New("report: result Partial names no failed part")
	}
	return r, nil
}

// ValidSHA256 reports whether s is a SHA-256 in lower-case hex.
func ValidSHA256(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ReportFromPod reads the report a finished capture pod left in its
// container's termination message.
func ReportFromPod(pod *corev1.Pod) (Report, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if strings.TrimSpace(t.Message) == "" {
				return Report{}, fmt.Errorf("pod %s/%s: container %s left no report (empty termination message)", pod.Namespace, pod.Name, cs.Name)
			}
			r, err := ParseReport([]byte(t.Message))
			if err != nil {
				return Report{}, fmt.Errorf("pod %s/%s: container %s: %w", pod.Namespace, pod.Name, cs.Name, err)
			}
			return r, nil
		}
	}
	return Report{}, fmt.Errorf("pod %s/%s: no terminated container", pod.Namespace, pod.Name)
}

// Status is the operation's status.diagnostics for a report.
func (r Report) Status() (v1alpha1.DiagnosticsResult, *v1alpha1.DiagnosticsBundle) {
	if r.Result == v1alpha1.DiagnosticsFailed {
		return r.Result, nil
	}
	files := r.Files
	if len(files) > 64 {
		files = files[:64]
	}
	return r.Result, &v1alpha1.DiagnosticsBundle{Key: r.Key, Size: r.Size, SHA256: r.SHA256, Files: files, Stored: r.Stored}
}
