package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = cli.Main(args, &o, &e)
	return code, o.String(), e.String()
}

func write(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	return p
}

const twenty = `# An ops-written policy with a typo in the breaker.
apiVersion: kubemedic.io/v1alpha1
kind: NodeOperationTemplate
metadata:
  name: reboot
spec:
  successCriterion: NodeRebooted
  image: debian:bookworm-slim
---
apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: gpu-lost
spec:
  conditions:
  - type: GPULost
  steps:
  - name: reboot
    operation: reboot
  safety:
    maxUnhealthy: twenty
`

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	bad := write(t, dir, "bad.yaml", twenty)
	good := write(t, dir, "good.yaml", strings.Replace(twenty, "twenty", `"20%"`, 1))
	empty := write(t, dir, "empty.yaml", "# nothing yet\n")
	foreign := write(t, dir, "deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n")

	for _, tc := range []struct {
		desc      string
		args      []string
		code      int
		stdout    []string // exact lines
		stderrHas string
	}{
		{desc: "valid file", args: []string{"policy", "validate", "-f", good}, code: 0, stderrHas: "valid: 2 documents in 1 files (1 NodeOperationTemplate, 1 RemediationPolicy)"},
		{desc: "the issue's example", args: []string{"policy", "validate", "-f", bad}, code: 1,
			stdout: []string{bad + `:21: spec.safety.maxUnhealthy: must be a count or a percentage like "20%", got "twenty"`}, stderrHas: "1 problems"},
		{desc: "positional files work too", args: []string{"policy", "validate", bad}, code: 1,
			stdout: []string{bad + `:21: spec.safety.maxUnhealthy: must be a count or a percentage like "20%", got "twenty"`}},
		{desc: "missing file", args: []string{"policy", "validate", "-f", filepath.Join(dir, "nope.yaml")}, code: 1,
			stdout: []string{filepath.Join(dir, "nope.yaml") + ": no such file or directory"}},
		{desc: "empty file", args: []string{"policy", "validate", "-f", empty}, code: 1,
			stdout: []string{empty + ": file holds no YAML documents; expected kubemedic.io/v1alpha1 objects (ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy)"}},
		{desc: "non-kubemedic kind", args: []string{"policy", "validate", "-f", foreign}, code: 1,
			stdout: []string{foreign + `:1: apiVersion: Deployment "apps/v1" is not a kubemedic kind: expected apiVersion kubemedic.io/v1alpha1 and one of ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy`}},
		{desc: "one bad file among good ones fails the run", args: []string{"policy", "validate", "-f", good, "-f", foreign}, code: 1},
		{desc: "no files is a usage error", args: []string{"policy", "validate"}, code: 2, stderrHas: "no files given: use -f FILE or -f DIR"},
		{desc: "unknown flag is a usage error", args: []string{"policy", "validate", "--frobnicate"}, code: 2, stderrHas: "unknown flag: --frobnicate"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, out, errOut := run(tc.args...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			if tc.stdout != nil {
				require.Equal(t, tc.stdout, strings.Split(strings.TrimSpace(out), "\n"))
			}
			require.Contains(t, errOut, tc.stderrHas)
		})
	}
}

func TestValidateExamples(t *testing.T) {
	code, out, errOut := run("policy", "validate", "-f", "../../../policies/examples")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Empty(t, out)

	// Each example file also validates on its own next to the templates it uses.
	files, err := filepath.Glob("../../../policies/examples/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8)
	for _, f := range files {
		code, out, errOut := run("policy", "validate", "-f", "../../../policies/examples/operation-templates.yaml", "-f", f)
		if filepath.Base(f) == "operation-templates.yaml" {
			code, out, errOut = run("policy", "validate", "-f", f)
		}
		require.Equal(t, 0, code, "%s:\n%s%s", f, out, errOut)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := run("--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "policy")
	require.Contains(t, out, "demo")
	code, out, _ = run("policy", "validate", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "FILE:LINE: FIELD: WHAT IS WRONG")
	require.Contains(t, out, "Exit status: 0 when every document is valid, 1 when there are problems")
}

// TestBinaryExitCodes runs the built binary, so the exit codes are what a
// shell or CI sees.
func TestBinaryExitCodes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kubemedic")
	out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput()
	require.NoError(t, err, "%s", out)
	dir := t.TempDir()
	bad := write(t, dir, "bad.yaml", twenty)

	cmd := exec.Command(bin, "policy", "validate", "-f", bad)
	stdout, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Equal(t, bad+`:21: spec.safety.maxUnhealthy: must be a count or a percentage like "20%", got "twenty"`+"\n", string(stdout))

	require.NoError(t, exec.Command(bin, "policy", "validate", "-f", "../../../policies/examples").Run())
}
