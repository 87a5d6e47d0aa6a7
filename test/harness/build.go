package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kubemedic/kubemedic/internal/localcluster"
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
	root, err := localcluster.RepoRoot()
	if err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	if builtDir == "" {
		// Not tb.TempDir: the binary outlives the test that built it. One
		// fixed directory, so that test runs do not pile up binaries.
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		builtDir = filepath.Join(cache, "kubemedic", "test-bin")
		if err := os.MkdirAll(builtDir, 0o755); err != nil {
			tb.Fatalf("build %s: %v", pkg, err)
		}
	}
	out := filepath.Join(builtDir, filepath.Base(pkg))
	// Test packages run in parallel and may build the same binary: build
	// to a private name and rename, which never disturbs a running copy.
	tmp, err := os.CreateTemp(builtDir, filepath.Base(pkg)+".build-*")
	if err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(), pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		tb.Fatalf("build %s: %v", pkg, err)
	}
	built[pkg] = out
	return out
}
