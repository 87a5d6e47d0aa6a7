package policies_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const okPolicy = `apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: ok
spec:
  conditions:
  - type: GPULost
  steps:
  - name: reboot
    operation: reboot
`

func problemLines(ps []policies.Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func TestLoadProblems(t *testing.T) {
	for _, tc := range []struct {
		desc string
		data string
		want []string // every problem line, in order
	}{
		{
			desc: "empty file",
			data: "",
			want: []string{"f.yaml: file holds no YAML documents; expected kubemedic.io/v1alpha1 objects (ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy)"},
		},
		{
			desc: "only comments and separators",
			data: "# nothing here\n---\n---\n",
			want: []string{"f.yaml: file holds no YAML documents; expected kubemedic.io/v1alpha1 objects (ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy)"},
		},
		{
			desc: "non-kubemedic kind",
			data: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
			want: []string{`f.yaml:1: apiVersion: Deployment "apps/v1" is not a kubemedic kind: expected apiVersion kubemedic.io/v1alpha1 and one of ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy`},
		},
		{
			desc: "unknown kind in our group",
			data: "apiVersion: kubemedic.io/v1alpha1\nkind: Remediation\n",
			want: []string{`f.yaml:2: kind: "Remediation" is not a kubemedic kind: expected one of ClusterReclaimPolicy, NodeOperation, NodeOperationTemplate, ReclaimPolicy, RemediationPolicy, ValidationPolicy`},
		},
		{
			desc: "missing kind",
			data: "apiVersion: kubemedic.io/v1alpha1\nmetadata:\n  name: x\n",
			want: []string{"f.yaml:1: kind: Required value: every document needs apiVersion and kind"},
		},
		{
			desc: "not YAML",
			data: "apiVersion: kubemedic.io/v1alpha1\nkind: RemediationPolicy\n spec: x\n",
			want: []string{"f.yaml:3: not valid YAML: mapping values are not allowed in this context"},
		},
		{
			desc: "scalar document",
			data: "just a string\n",
			want: []string{"f.yaml:1: document is not a mapping; expected a kubemedic.io/v1alpha1 object"},
		},
		{
			desc: "problems in the second document carry its lines",
			data: okPolicy + "---\n" + strings.Replace(okPolicy, "name: reboot", "name: reboot\n    cordon: maybe\n    timeOut: 5m", 1),
			want: []string{
				`f.yaml:21: spec.steps[0].cordon: must be true or false, got "maybe"`,
				`f.yaml:22: spec.steps[0].timeOut: unknown field "timeOut" (did you mean "timeout"?)`,
			},
		},
		{
			desc: "a merge key is refused, not expanded",
			data: "x: &s {paused: true}\n" + strings.Replace(okPolicy, "spec:\n", "spec:\n  <<: *s\n", 1),
			want: []string{
				`f.yaml:1: x: unknown field "x"; known fields: apiVersion, kind, metadata, spec, status`,
				"f.yaml:7: spec: merge keys (<<) are not supported; write the fields out",
			},
		},
		{
			desc: "duplicate key",
			data: strings.Replace(okPolicy, "  name: ok\n", "  name: ok\n  name: again\n", 1),
			want: []string{"f.yaml:5: metadata.name: duplicate field; first set on line 4"},
		},
		{
			desc: "list where a mapping belongs, number where a string belongs",
			data: strings.Replace(okPolicy, "  - type: GPULost\n", "  - type: 42\n    for: [5m]\n", 1),
			want: []string{
				`f.yaml:7: spec.conditions[0].type: must be a string, got the number 42 (quote it)`,
				`f.yaml:8: spec.conditions[0].for: must be a duration like "90s", "10m" or "1h30m", got a list`,
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ps := policies.Load("f.yaml", []byte(tc.data))
			require.Equal(t, tc.want, problemLines(ps))
		})
	}
}

func TestLoadFilesPaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(okPolicy), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not policy"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b.yml"), []byte(strings.Replace(okPolicy, "name: ok", "name: ok2", 1)), 0o644))
	empty := t.TempDir()

	docs, ps := policies.LoadFiles(dir, filepath.Join(dir, "missing.yaml"), empty)
	require.Len(t, docs, 2, "a.yaml and sub/b.yml, not notes.txt")
	require.Equal(t, []string{
		filepath.Join(dir, "missing.yaml") + ": no such file or directory",
		empty + ": directory holds no *.yaml or *.yml files",
	}, problemLines(ps))
	require.Equal(t, filepath.Join(dir, "sub", "b.yml"), docs[1].File)
}

func TestDefaultsApplied(t *testing.T) {
	docs, ps := policies.Load("f.yaml", []byte(okPolicy+`    drain: {}
  safety:
    attemptCap: {maxAttempts: 3}
    maintenanceWindows: [{start: "01:00", end: "02:00"}]
`))
	require.Empty(t, ps)
	p := docs[0].Object.(*v1alpha1.RemediationPolicy)
	require.Equal(t, "True", string(p.Spec.Conditions[0].Status))
	require.Equal(t, 5*time.Minute, p.Spec.Conditions[0].For.Duration)
	st := p.Spec.Steps[0]
	require.Nil(t, st.Timeout, "an unset step timeout takes the template's")
	require.Equal(t, 2*time.Minute, st.HealthyFor.Duration)
	require.Equal(t, 10*time.Minute, st.RecoveryTimeout.Duration)
	require.Equal(t, v1alpha1.DrainEvict, st.Drain.Mode)
	require.Equal(t, 10*time.Minute, st.Drain.Timeout.Duration)
	s := p.Spec.Safety
	require.Equal(t, intstr.FromString("30%"), *s.MaxUnhealthy)
	require.Equal(t, intstr.FromInt32(1), *s.MaxConcurrent)
	require.Equal(t, 15*time.Minute, s.BreakerCooldown.Duration)
	require.Equal(t, 30*time.Minute, s.NodeCooldown.Duration)
	require.Equal(t, 24*time.Hour, s.AttemptCap.Window.Duration)
	require.Equal(t, "UTC", s.MaintenanceWindows[0].TimeZone)
}

func TestExplicitZeroDurationKept(t *testing.T) {
	docs, ps := policies.Load("f.yaml", []byte(strings.Replace(okPolicy, "  - type: GPULost\n", "  - type: GPULost\n    for: 0s\n", 1)))
	require.Empty(t, ps)
	require.Equal(t, time.Duration(0), docs[0].Object.(*v1alpha1.RemediationPolicy).Spec.Conditions[0].For.Duration,
		`"for: 0s" means act at once and must not be replaced by the default`)
}
