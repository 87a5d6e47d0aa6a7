package harness

import (
	"path/filepath"
	"testing"
)

// Tool returns the path of the binary name (e.g. "promtool", "amtool") in
// the test binaries' directory, BinDir, where hack/testbin.sh builds it. It
// fails the test, saying to run `make testbin`, when the binary is missing,
// and, like Start, skips the test in -short mode: a test that runs a real
// tool is an integration test.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("integration test: needs %s from `make testbin`; skipped in -short mode", name)
		return ""
	}
	dir, err := BinDir()
	if err != nil {
		tb.Fatalf("harness: %v", err)
		return ""
	}
	if err := checkBinaries(dir, name); err != nil {
		tb.Fatalf("harness: %v", err)
		return ""
	}
	return filepath.Join(dir, name)
}
