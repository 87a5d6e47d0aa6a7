package harness

import (
	"testing"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// Tool returns the path of the binary name (e.g. "promtool", "amtool") in
// the testbin directory, localcluster.BinDir, where hack/testbin.sh builds
// it. It fails the test, saying to run `make testbin`, when the binary is
// missing, and, like Start, skips the test in -short mode: a test that runs a
// real tool is an integration test.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("integration test: needs %s from `make testbin`; skipped in -short mode", name)
		return ""
	}
	path, err := localcluster.Binary(name)
	if err != nil {
		tb.Fatalf("harness: %v", err)
		return ""
	}
	return path
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago
// (localcluster.FreePort), failing the test when there is none.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := localcluster.FreePort()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return p
}

// DiagnosticsBucket is the bucket the tests' S3 store holds.
const DiagnosticsBucket = "kubemedic-diagnostics"

// S3 runs a real S3-compatible store (versitygw from the testbin) with
// DiagnosticsBucket, stopped when the test ends. Like Tool, it fails the
// test when the binary is missing and skips it in -short mode.
func S3(tb testing.TB) *localcluster.S3 {
	tb.Helper()
	Tool(tb, localcluster.S3Binary)
	s, err := localcluster.NewS3(tb.Context(), tb.TempDir(), DiagnosticsBucket)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}
