// Package testsupport holds the small helpers that tests in several packages
// share: a log sink safe for concurrent writes, the tail of a long output
// for failure messages, a poll that waits on real processes, and the
// reset-gpu template's bus ID regex. Only tests
// import it; the shipped binaries never do (cmd/deps_test.go).
//
// Waiting on the code's own state (a fake clock, a channel) is better than
// polling; Eventually is for real processes and the kernel, where there is
// nothing to wait on but the outcome.
package testsupport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// SyncBuffer is an io.Writer safe for concurrent writes, e.g. a log sink
// shared by a server's goroutines and the test.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Tail returns the last n lines of s, for failure messages that quote a
// long log.
func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Eventually polls cond every tick until it returns true, and fails the
// test with what and describe() (the last state seen; nil for none) when
// within passes first. cond runs in the test goroutine, so a require call
// inside it stops the test at once.
func Eventually(tb testing.TB, what string, within, tick time.Duration, cond func() bool, describe func() string) {
	tb.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), tick, within, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err == nil {
		return
	}
	msg := "timed out after " + within.String() + " waiting for " + what
	if describe != nil {
		msg += "\n" + describe()
	}
	tb.Fatal(msg)
}

// ResetGPUBusRegex is the reset-gpu template's GPU_BUS_ID messageRegex, as
// the shipped policies/examples/operation-templates.yaml has it (read
// through the policy loader, which the CLI and the API server tests use
// too): the detectors' messages and the remediator's GPU history must name
// the GPU that template resets.
func ResetGPUBusRegex(t testing.TB) *regexp.Regexp {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatalf("find the repository root: %v", err)
	}
	docs, problems := policies.LoadFiles(filepath.Join(root, "policies", "examples", "operation-templates.yaml"))
	if len(problems) > 0 {
		t.Fatalf("load the example templates: %v", problems)
	}
	var found []string
	for _, d := range docs {
		tpl, ok := d.Object.(*v1alpha1.NodeOperationTemplate)
		if !ok || tpl.Name != "reset-gpu" {
			continue
		}
		for _, p := range tpl.Spec.Parameters {
			if p.Name == "GPU_BUS_ID" {
				found = append(found, p.MessageRegex)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one GPU_BUS_ID parameter of template reset-gpu in the examples, found %d", len(found))
	}
	return regexp.MustCompile(found[0])
}

// Untar reads a .tar.gz (a diagnostics bundle): its file names in order,
// and each file's contents by name and by base name.
func Untar(tb testing.TB, data []byte) (names []string, byBase map[string][]byte) {
	tb.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("untar: %v", err)
	}
	tr := tar.NewReader(gz)
	byBase = map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, byBase
		}
		if err != nil {
			tb.Fatalf("untar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			tb.Fatalf("untar %s: %v", h.Name, err)
		}
		names = append(names, h.Name)
		byBase[path.Base(h.Name)] = b
	}
}
