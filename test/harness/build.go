package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
)

// GoBuild builds the main package pkg (e.g. "./cmd/kubemedic-detect",
// relative to the repository root) once per test process and returns the
// binary's path. Tests run the real binary where the process boundary is
// what they test: exit codes, stdout, children left behind.
func GoBuild(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	root, err := repoRoot()
	if err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	if builtDir == "" {
		// Not tb.TempDir: the binary outlives the test that built it.
		if builtDir, err = os.MkdirTemp("", "kubemedic-bin-"); err != nil {
			tb.Fatalf("build %s: %v", pkg, err)
		}
	}
	out := filepath.Join(builtDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}
