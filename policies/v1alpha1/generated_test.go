package v1alpha1_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedFilesUpToDate regenerates the deepcopy code and the CRDs into
// a temporary directory and fails when the committed files differ: someone
// changed the types and forgot `make generate`.
func TestGeneratedFilesUpToDate(t *testing.T) {
	cg := os.Getenv("CONTROLLER_GEN")
	if cg == "" {
		if testing.Short() {
			t.Skip("CONTROLLER_GEN is not set (make test sets it); skipped in -short mode")
		}
		t.Fatal("CONTROLLER_GEN is not set: run this test through `make test`, which installs controller-gen and sets it")
	}
	tmp := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(cg, args...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "controller-gen %v: %s", args, out)
	}
	run("object", "paths=./...", "output:object:dir="+tmp)
	run("crd", "paths=./...", "output:crd:dir="+filepath.Join(tmp, "crds"))

	want, err := os.ReadFile(filepath.Join(tmp, "zz_generated.deepcopy.go"))
	require.NoError(t, err)
	got, err := os.ReadFile("zz_generated.deepcopy.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "zz_generated.deepcopy.go is stale: run `make generate`")

	gen, err := filepath.Glob(filepath.Join(tmp, "crds", "*.yaml"))
	require.NoError(t, err)
	committed, err := filepath.Glob("../../deploy/crds/*.yaml")
	require.NoError(t, err)
	require.Len(t, committed, len(gen), "deploy/crds holds other files than the generated CRDs: run `make generate`")
	for _, g := range gen {
		want, err := os.ReadFile(g)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("../../deploy/crds", filepath.Base(g)))
		require.NoError(t, err, "deploy/crds lacks %s: run `make generate`", filepath.Base(g))
		require.Equal(t, string(want), string(got), "deploy/crds/%s is stale: run `make generate`", filepath.Base(g))
	}
}
