// Package testsupport holds the small helpers that tests in several packages
// share: a log sink safe for concurrent writes, the tail of a long output
// for failure messages, and a poll that waits on real processes. Only tests
// import it; the shipped binaries never do (cmd/kubemedic/cli/deps_test.go).
//
// Waiting on the code's own state (a fake clock, a channel) is better than
// polling; Eventually is for real processes and the kernel, where there is
// nothing to wait on but the outcome.
package testsupport

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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
