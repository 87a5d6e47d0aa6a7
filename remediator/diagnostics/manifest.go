package diagnostics

import (
	"archive/tar"
	"fmt"
	"io"
	"time"
)

// ManifestFile is the bundle's first file.
const ManifestFile = "manifest.json"

// Manifest describes one bundle: what was captured where and when, and
// each file's size and SHA-256.
type Manifest struct {
	Node      string   `json:"node"`
	Operation string   `json:"operation"`
	BootID    string   `json:"bootID,omitempty"`
	Trigger   *Trigger `json:"trigger,omitempty"`
	// GPU is the UUID of the GPU the operation is about, when it names one.
	GPU     string       `json:"gpu,omitempty"`
	GPUs    []GPU        `json:"gpus,omitempty"`
	Created time.Time    `json:"created"`
	Parts   []PartResult `json:"parts"`
	Files   []File       `json:"files"`
}

// Trigger is the node condition that started the operation.
type Trigger struct {
	Type    string `json:"type,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// GPU is one GPU as nvidia-smi listed it at the capture.
type GPU struct {
	Index  string `json:"index"`
	BusID  string `json:"busID"`
	UUID   string `json:"uuid"`
	Serial string `json:"serial,omitempty"`
}

// File is one file of the bundle.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Key is a bundle's object key: <node>/<operation>.tar.gz.
func Key(node, operation string) string { return node + "/" + operation + ".tar.gz" }

// PartResult is how one part went, as the manifest records it.
type PartResult struct {
	Name      string   `json:"name"`
	File      string   `json:"file,omitempty"`
	Command   []string `json:"command,omitempty"`
	ExitCode  *int     `json:"exitCode,omitempty"`
	TimedOut  bool     `json:"timedOut,omitempty"`
	Skipped   string   `json:"skipped,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	Error     string   `json:"error,omitempty"`
	Millis    int64    `json:"durationMs"`
}

// Failed reports whether the part counts as failed in the report: it timed
// out, errored or exited non-zero. A skipped part did not fail.
func (p PartResult) Failed() bool {
	return p.Skipped == "" && (p.TimedOut || p.Error != "" || (p.ExitCode != nil && *p.ExitCode != 0))
}

// Why says in a few words why the part failed, for FailedParts.
func (p PartResult) Why() string {
	switch {
	case p.TimedOut:
		return fmt.Sprintf("%s (timed out after %s)", p.Name, time.Duration(p.Millis)*time.Millisecond)
	case p.Error != "":
		return Truncate(fmt.Sprintf("%s (%s)", p.Name, p.Error), 128)
	case p.ExitCode != nil:
		return fmt.Sprintf("%s (exit status %d)", p.Name, *p.ExitCode)
	}
	return p.Name
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// AddTar adds one regular file to a bundle: the node's (written by the
// capture) and the must-gather (built in memory) are made alike.
func AddTar(tw *tar.Writer, name string, mod time.Time, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}
