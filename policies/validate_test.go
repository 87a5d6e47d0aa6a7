package policies_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func basePolicy() *v1alpha1.RemediationPolicy {
	p := &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: "GPUXidError", Reason: "XidResetRequired"}},
			Steps: []v1alpha1.RemediationStep{
				{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}},
				{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot", Drain: &v1alpha1.DrainSpec{}}},
				{Name: "hold", StepAction: v1alpha1.StepAction{Quarantine: true}},
			},
		},
	}
	policies.SetDefaults(p)
	return p
}

func pct(s string) *intstr.IntOrString  { v := intstr.FromString(s); return &v }
func count(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }

// TestValidateRemediationPolicy covers the edges of the rules that the
// invalid-file table does not: values just inside and just outside each bound.
func TestValidateRemediationPolicy(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*v1alpha1.RemediationPolicy)
		want   string // substring of the one expected error; "" = valid
	}{
		{desc: "base policy is valid", mutate: func(*v1alpha1.RemediationPolicy) {}},
		{desc: "maxUnhealthy 0 is a valid count (any unhealthy node opens the breaker)", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = count(0) }},
		{desc: "maxUnhealthy 0% is valid", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = pct("0%") }},
		{desc: "maxUnhealthy 100% is valid", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = pct("100%") }},
		{desc: "maxUnhealthy 101% is not", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = pct("101%") }, want: `percentage must be between 0% and 100%, got "101%"`},
		{desc: "a quoted count is not a percentage", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = pct("3") }, want: `got "3" (write a count without quotes, 3, or add %)`},
		{desc: "maxConcurrent 0% is not", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxConcurrent = pct("0%") }, want: `percentage must be between 1% and 100%`},
		{desc: "maxConcurrent 1 is valid", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxConcurrent = count(1) }},
		{desc: "window crossing midnight explicitly", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"}}
		}},
		{desc: "window ending at 24:00", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "20:00", End: "24:00", TimeZone: "UTC"}}
		}},
		{desc: "crossesMidnight with end after start contradicts itself", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "01:00", End: "04:00", CrossesMidnight: true, TimeZone: "UTC"}}
		}, want: `crossesMidnight is set, so end must be before start "01:00"`},
		{desc: "empty window", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "01:00", End: "01:00", TimeZone: "UTC"}}
		}, want: `must be after start "01:00"`},
		{desc: "24:00 is no start", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "24:00", End: "23:00", CrossesMidnight: true, TimeZone: "UTC"}}
		}, want: `spec.safety.maintenanceWindows[0].start`},
		{desc: "duplicate days", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat", "Sat"}, Start: "01:00", End: "02:00", TimeZone: "UTC"}}
		}, want: `spec.safety.maintenanceWindows[0].days[1]: Duplicate value: "Sat"`},
		{desc: "Local is not an IANA zone", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "01:00", End: "02:00", TimeZone: "Local"}}
		}, want: `not an IANA time zone name`},
		{desc: "attempt cap 0", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.AttemptCap = &v1alpha1.AttemptCap{MaxAttempts: 0, Window: &metav1.Duration{Duration: time.Hour}}
		}, want: `spec.safety.attemptCap.maxAttempts: Invalid value: 0: must be between 1 and 100`},
		{desc: "zero step timeout", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Steps[0].Timeout = &metav1.Duration{} }, want: `spec.steps[0].timeout: Invalid value: "0s": must be a positive duration`},
		{desc: "for 0s acts at once and is valid", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Conditions[0].For = &metav1.Duration{} }},
		{desc: "a step with neither operation nor quarantine", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Steps[0].Operation = "" }, want: `spec.steps[0].operation: Required value: set operation`},
		{desc: "quarantine step with drain", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[2].Drain = &v1alpha1.DrainSpec{Mode: "Evict", Timeout: &metav1.Duration{Duration: time.Minute}}
		}, want: `spec.steps[2].drain: Forbidden: a quarantine step takes no drain`},
		{desc: "validate on a step that drains is valid", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[1].Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag", Timeout: &metav1.Duration{Duration: 20 * time.Minute}}
		}},
		{desc: "validate on a quarantine step", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[2].Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		}, want: `spec.steps[2].validate: Forbidden: a quarantine step takes no validate`},
		{desc: "validate on a step that does not cordon", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[0].Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		}, want: `spec.steps[0].cordon: Invalid value: false: validate is set, so the step must cordon`},
		{desc: "the policy's validate on a step that does not cordon", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		}, want: `spec.steps[0].cordon: Invalid value: false: the policy's validate applies to step reset, so the step must cordon`},
		{desc: "the policy's validate, every operation step cordons", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[0].Cordon = true
			p.Spec.Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		}},
		{desc: "validate without a template", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[1].Validate = &v1alpha1.ValidateSpec{}
		}, want: `spec.steps[1].validate.operation: Required value`},
		{desc: "validate with a zero timeout", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[1].Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag", Timeout: &metav1.Duration{}}
		}, want: `spec.steps[1].validate.timeout: Invalid value: "0s": must be a positive duration`},
		{desc: "drain rule without a match", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Steps[1].Drain.Rules = []v1alpha1.DrainRule{{Mode: v1alpha1.DrainSkip}}
		}, want: `spec.steps[1].drain.rules[0]: Required value: a drain rule needs namespaces or a podSelector`},
		{desc: "bad label selector operator", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "nvidia.com/gpu.count", Operator: "Has"}}}
		}, want: `spec.nodeSelector.matchExpressions[0].operator: Invalid value: "Has"`},
		{desc: "condition status must be an enum value", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Conditions[0].Status = "true" }, want: `spec.conditions[0].status: Unsupported value: "true"`},
		{desc: "priority out of range", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Priority = 5000 }, want: `spec.priority: Invalid value: 5000`},
		{desc: "namespace on a cluster-scoped kind", mutate: func(p *v1alpha1.RemediationPolicy) { p.Namespace = "default" }, want: `metadata.namespace: Forbidden: this kind is cluster-scoped`},
		{desc: "topology key must be a label key", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.FailureDomain = &v1alpha1.FailureDomain{TopologyKey: "rack id", MaxConcurrent: intstr.FromInt32(1)}
		}, want: `spec.safety.failureDomain.topologyKey: Invalid value: "rack id"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := basePolicy()
			tc.mutate(p)
			errs := policies.Validate(p)
			if tc.want == "" {
				require.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			require.Contains(t, errs[0].Error(), tc.want)
		})
	}
}

func TestCheckReclaimOverride(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		require.NoError(t, err)
		return &metav1.Duration{Duration: v}
	}
	cluster := &v1alpha1.ClusterReclaimPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.ClusterReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{
			Idle:        &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: *d("2h")},
			MaxLifetime: d("168h"),
		}},
	}
	for _, tc := range []struct {
		desc string
		ns   v1alpha1.ReclaimRules
		want []string // substrings, one per error
	}{
		{desc: "inherits everything", ns: v1alpha1.ReclaimRules{}},
		{desc: "tighter everywhere", ns: v1alpha1.ReclaimRules{
			Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 10, Window: *d("1h")}, MaxLifetime: d("72h"), MaxPending: d("1h"), GracePeriod: d("15m"),
		}},
		{desc: "equal is not looser", ns: v1alpha1.ReclaimRules{
			Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: *d("2h")}, MaxLifetime: d("168h"), GracePeriod: d("1h"),
		}},
		{desc: "lower threshold and longer window", ns: v1alpha1.ReclaimRules{
			Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 1, Window: *d("3h")},
		}, want: []string{
			`spec.idle.utilizationBelowPercent: Invalid value: 1: 1 is looser than ClusterReclaimPolicy "default" (5)`,
			`spec.idle.window: Invalid value: "3h0m0s": 3h0m0s is looser than ClusterReclaimPolicy "default" (2h0m0s)`,
		}},
		{desc: "longer lifetime", ns: v1alpha1.ReclaimRules{MaxLifetime: d("200h")}, want: []string{`spec.maxLifetime: Invalid value: "200h0m0s"`}},
		{desc: "grace longer than the cluster default", ns: v1alpha1.ReclaimRules{GracePeriod: d("2h")}, want: []string{`spec.gracePeriod: Invalid value: "2h0m0s": 2h0m0s is looser than ClusterReclaimPolicy "default" (1h0m0s)`}},
		{desc: "cluster without a pending limit allows any", ns: v1alpha1.ReclaimRules{MaxPending: d("1000h")}},
		{desc: "snooze longer than the cluster default", ns: v1alpha1.ReclaimRules{MaxSnooze: d("48h")}, want: []string{`spec.maxSnooze: Invalid value: "48h0m0s"`}},
		{desc: "a namespace cannot allow opt-out or drop the notice", ns: v1alpha1.ReclaimRules{AllowOptOut: ptr.To(true), RequireNotice: ptr.To(false)}, want: []string{
			`spec.allowOptOut: Invalid value: true: true is looser`, `spec.requireNotice: Invalid value: false: false is looser`}},
		{desc: "a namespace may forbid opt-out and require the notice", ns: v1alpha1.ReclaimRules{AllowOptOut: ptr.To(false), RequireNotice: ptr.To(true)}},
		{desc: "a namespace cannot put itself in dry run", ns: v1alpha1.ReclaimRules{DryRun: &v1alpha1.ReclaimDryRun{Enabled: true}},
			want: []string{`spec.dryRun.enabled: Invalid value: true: true is looser`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ns := &v1alpha1.ReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "team"}, Spec: v1alpha1.ReclaimPolicySpec{ReclaimRules: tc.ns}}
			errs := policies.CheckReclaimOverride(ns, cluster)
			require.Len(t, errs, len(tc.want), "%v", errs)
			for i, w := range tc.want {
				require.Contains(t, errs[i].Error(), w)
			}
		})
	}
}

func TestSelectsNamespace(t *testing.T) {
	c := &v1alpha1.ClusterReclaimPolicy{Spec: v1alpha1.ClusterReclaimPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "research"}},
		ExemptNamespaces:  []string{"research-prod"},
	}}
	require.True(t, policies.SelectsNamespace(c, "a", map[string]string{"team": "research"}))
	require.False(t, policies.SelectsNamespace(c, "a", map[string]string{"team": "infra"}))
	require.False(t, policies.SelectsNamespace(c, "research-prod", map[string]string{"team": "research"}), "exempt namespaces are never governed")
	all := &v1alpha1.ClusterReclaimPolicy{}
	require.True(t, policies.SelectsNamespace(all, "", nil), "no selector governs every namespace, default included")
}

func TestValidateSetDuplicatesAndReferences(t *testing.T) {
	docs, ps := policies.Load("f.yaml", []byte(okPolicy+"---\n"+okPolicy))
	require.Empty(t, ps)
	lines := problemLines(policies.ValidateSet(docs))
	require.Equal(t, []string{
		`f.yaml:10: spec.steps[0].operation: no NodeOperationTemplate named "reboot"; load the file that defines it too, e.g. -f policies/examples/operation-templates.yaml`,
		`f.yaml:15: metadata.name: Duplicate value: "ok": RemediationPolicy "ok" is also defined at f.yaml:1`,
		`f.yaml:21: spec.steps[0].operation: no NodeOperationTemplate named "reboot"; load the file that defines it too, e.g. -f policies/examples/operation-templates.yaml`,
	}, sortedLines(lines))
}

// TestValidateSetUnknownValidationTemplate: a validate naming a template
// that no file defines is an error at its line, as an operation's is.
func TestValidateSetUnknownValidationTemplate(t *testing.T) {
	const y = `apiVersion: kubemedic.io/v1alpha1
kind: NodeOperationTemplate
metadata:
  name: reboot
spec:
  image: busybox
  command: ["true"]
---
apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: v
spec:
  conditions:
  - type: GPUXidError
  steps:
  - name: reboot
    operation: reboot
    drain: {}
    validate:
      operation: validate-dcgm-diag
`
	docs, ps := policies.Load("v.yaml", []byte(y))
	require.Empty(t, ps)
	require.Equal(t, []string{
		`v.yaml:21: spec.steps[0].validate.operation: no NodeOperationTemplate named "validate-dcgm-diag"; the loaded set has reboot`,
	}, problemLines(policies.ValidateSet(docs)))
}

func sortedLines(l []string) []string {
	out := append([]string(nil), l...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if lineOf(out[j]) < lineOf(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func lineOf(s string) int {
	parts := strings.SplitN(s, ":", 3)
	n := 0
	for _, c := range parts[1] {
		n = n*10 + int(c-'0')
	}
	return n
}
