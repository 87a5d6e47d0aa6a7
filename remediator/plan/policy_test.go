package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestCompile(t *testing.T) {
	base := func() *v1alpha1.RemediationPolicy {
		return &v1alpha1.RemediationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: v1alpha1.RemediationPolicySpec{
				Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError}},
				Steps:      []v1alpha1.RemediationStep{{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}}},
			},
		}
	}
	for _, tc := range []struct {
		desc   string
		mutate func(*v1alpha1.RemediationPolicy)
		err    string // substring; "" = compiles
	}{
		{desc: "a minimal policy compiles", mutate: func(*v1alpha1.RemediationPolicy) {}},
		{desc: "a reason that is not a regular expression", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Conditions = append(p.Spec.Conditions, v1alpha1.ConditionMatch{Type: "Ready", Reason: "Xid(("})
		}, err: "policy gpu: spec.conditions[1].reason: error parsing regexp"},
		{desc: "a node selector with a bad operator", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
		}, err: "policy gpu: spec.nodeSelector:"},
		{desc: "a node selector with a bad label value", mutate: func(p *v1alpha1.RemediationPolicy) {
			p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "not a value"}}
		}, err: "policy gpu: spec.nodeSelector:"},
		{desc: "no steps", mutate: func(p *v1alpha1.RemediationPolicy) { p.Spec.Steps = nil }, err: "policy gpu: spec.steps: at least one step is required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rp := base()
			tc.mutate(rp)
			before := rp.DeepCopy()
			p, err := Compile(rp)
			require.Equal(t, before, rp, "Compile changed its argument")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "gpu", p.Name())
		})
	}
}

// TestCompileDefaults: the compiled policy carries the defaults the API
// server would have applied, and keeps the status and annotations as read.
func TestCompileDefaults(t *testing.T) {
	rp := &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Annotations: map[string]string{v1alpha1.AnnotationResetBreaker: "1"}},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError}},
			Steps:      []v1alpha1.RemediationStep{{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot", Drain: &v1alpha1.DrainSpec{}}}},
			Safety:     v1alpha1.Safety{AttemptCap: &v1alpha1.AttemptCap{MaxAttempts: 3}, MaintenanceWindows: []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "23:00"}}},
		},
		Status: v1alpha1.RemediationPolicyStatus{LastBreakerReset: "0"},
	}
	p, err := Compile(rp)
	require.NoError(t, err)
	s := p.Obj.Spec
	require.Equal(t, corev1.ConditionTrue, s.Conditions[0].Status)
	require.Equal(t, dur(5*time.Minute), s.Conditions[0].For)
	require.Equal(t, dur(2*time.Minute), s.Steps[0].HealthyFor)
	require.Equal(t, dur(10*time.Minute), s.Steps[0].RecoveryTimeout)
	require.Equal(t, &v1alpha1.DrainSpec{Timeout: dur(10 * time.Minute), Mode: v1alpha1.DrainEvict}, s.Steps[0].Drain)
	require.Equal(t, "30%", s.Safety.MaxUnhealthy.String())
	require.Equal(t, "1", s.Safety.MaxConcurrent.String())
	require.Equal(t, dur(15*time.Minute), s.Safety.BreakerCooldown)
	require.Equal(t, dur(30*time.Minute), s.Safety.NodeCooldown)
	require.Equal(t, dur(24*time.Hour), s.Safety.AttemptCap.Window)
	require.Equal(t, "UTC", s.Safety.MaintenanceWindows[0].TimeZone)
	require.Equal(t, "0", p.Obj.Status.LastBreakerReset)
	require.Equal(t, "1", p.Obj.Annotations[v1alpha1.AnnotationResetBreaker])
	require.Nil(t, rp.Spec.Conditions[0].For, "the argument keeps its unset fields")
}

func TestUnhealthy(t *testing.T) {
	t0 := ago(10 * time.Minute)
	p := policy(t, "gpu", matching(
		v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPULost, For: dur(time.Hour)},
		v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError, Reason: "XidRebootRequired|XidResetRequired", For: dur(20 * time.Minute)},
		v1alpha1.ConditionMatch{Type: string(corev1.NodeReady), Status: corev1.ConditionFalse, For: dur(time.Minute)},
	))
	lost := cond(v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason, "GPUFellOffBus: 0000:3b:00.0", t0)
	for _, tc := range []struct {
		desc     string
		node     *corev1.Node
		found    bool
		condType string
		reason   string
		heldAt   time.Time
	}{
		{desc: "no matching condition", node: node("a")},
		{desc: "one match not yet held: HeldAt is lastTransitionTime + for", node: node("a", lost),
			found: true, condType: v1alpha1.ConditionGPULost, reason: v1alpha1.ReasonGPUFellOffBus, heldAt: t0.Add(time.Hour)},
		{desc: "of two not yet held, the one that holds first", node: node("a", lost, xid(t0)),
			found: true, condType: v1alpha1.ConditionGPUXidError, reason: v1alpha1.ReasonXidRebootRequired, heldAt: t0.Add(20 * time.Minute)},
		{desc: "one held beats one not held, whatever the order", node: node("a", lost, xid(t0), notReady),
			found: true, condType: string(corev1.NodeReady), reason: "KubeletNotReady", heldAt: ago(time.Minute).Add(time.Minute)},
		{desc: "of two held, the first matcher's", node: node("a",
			cond(v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason, "GPUCountMismatch: 7 of 8", ago(2*time.Hour)), xid(ago(time.Hour))),
			found: true, condType: v1alpha1.ConditionGPULost, reason: v1alpha1.ReasonGPUCountMismatch, heldAt: ago(time.Hour)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m, found := p.Unhealthy(tc.node, now)
			require.Equal(t, tc.found, found)
			if !found {
				return
			}
			require.Equal(t, tc.condType, string(m.Condition.Type))
			require.Equal(t, tc.reason, m.Reason)
			require.True(t, tc.heldAt.Equal(m.HeldAt), "heldAt: want %s, got %s", tc.heldAt, m.HeldAt)
			require.Equal(t, !now.Before(tc.heldAt), m.Held(now))
		})
	}
}

func TestEpisode(t *testing.T) {
	t0 := ago(time.Hour)
	ep := episodeOf(v1alpha1.ConditionGPUXidError, t0)
	require.Len(t, ep, 8)
	require.Empty(t, validation.IsValidLabelValue(ep))
	require.Equal(t, ep, episodeOf(v1alpha1.ConditionGPUXidError, t0.In(time.FixedZone("X", 3600))), "the same instant in another zone")
	require.NotEqual(t, ep, episodeOf(v1alpha1.ConditionGPUXidError, t0.Add(time.Second)), "another transition")
	require.NotEqual(t, ep, episodeOf(v1alpha1.ConditionGPULost, t0), "another condition type")
}

func TestNodePredicates(t *testing.T) {
	require.True(t, Quarantined(node("a", quarantinedNode)))
	require.False(t, Quarantined(node("a", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}
	})))
	require.True(t, OptedOut(node("a", optedOut)))
	require.False(t, OptedOut(node("a", labeled(v1alpha1.LabelRemediation, "enabled"))))
	require.False(t, OptedOut(node("a")))
}

func TestOperationName(t *testing.T) {
	// dns is a valid DNS subdomain of exactly n characters, in labels of up
	// to 63 characters, made of c.
	dns := func(c string, n int) string {
		var b strings.Builder
		for b.Len() < n {
			if b.Len() > 0 {
				b.WriteString(".")
			}
			b.WriteString(strings.Repeat(c, min(63, n-b.Len())))
		}
		s := b.String()
		require.Len(t, s, n)
		require.Empty(t, validation.IsDNS1123Subdomain(s), s)
		return s
	}
	ep := episodeOf(v1alpha1.ConditionGPUXidError, ago(time.Hour))
	long := dns("n", 253)

	t.Run("readable when it fits", func(t *testing.T) {
		name := OperationName("gpu-xid", "node-1.example.com", ep, 0)
		require.True(t, strings.HasPrefix(name, "gpu-xid.node-1.example.com."), name)
		require.True(t, strings.HasSuffix(name, "-0"), name)
		require.Empty(t, validation.IsDNS1123Subdomain(name))
	})

	t.Run("deterministic", func(t *testing.T) {
		require.Equal(t, OperationName("gpu", "node-1", ep, 1), OperationName("gpu", "node-1", ep, 1))
		require.Equal(t, OperationName(long, long, ep, 3), OperationName(long, long, ep, 3))
	})

	t.Run("a valid DNS-1123 subdomain", func(t *testing.T) {
		for _, tc := range []struct {
			desc, policy, node string
			step               int
		}{
			{desc: "short names", policy: "gpu", node: "node-1"},
			{desc: "the implicit quarantine index", policy: "gpu", node: "node-1", step: 10},
			{desc: "a 253-character node", policy: "gpu", node: long},
			{desc: "a 253-character policy", policy: dns("p", 253), node: "node-1"},
			{desc: "253-character policy and node", policy: dns("p", 253), node: long, step: 9},
			{desc: "253-character policy and node, a two-digit step", policy: dns("p", 253), node: long, step: 10},
			{desc: "the cut right after a dot", policy: dns("p", 100), node: dns("n", 131) + ".x" + dns("m", 60)},
			{desc: "the cut right after a dash", policy: dns("p", 100), node: dns("n", 131) + "-x" + dns("m", 60)},
			{desc: "the cut right before a dot", policy: dns("p", 100), node: dns("n", 132) + ".x" + dns("m", 60)},
			{desc: "the cut in a run of dashes", policy: "gpu", node: dns("n", 189) + ".a" + strings.Repeat("-", 61) + "b"},
			{desc: "a name just long enough to be cut", policy: "gpu", node: dns("n", 253-len("gpu.")-len("."+ep+"-0")+1)},
			{desc: "a name just short enough to be kept", policy: "gpu", node: dns("n", 253-len("gpu.")-len("."+ep+"-0"))},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				require.Empty(t, validation.IsDNS1123Subdomain(tc.node), "the test's node name")
				name := OperationName(tc.policy, tc.node, ep, tc.step)
				require.Empty(t, validation.IsDNS1123Subdomain(name), name)
				require.LessOrEqual(t, len(name), validation.DNS1123SubdomainMaxLength)
			})
		}
	})

	t.Run("distinct for distinct inputs", func(t *testing.T) {
		ep2 := episodeOf(v1alpha1.ConditionGPUXidError, ago(2*time.Hour))
		type in struct {
			policy, node, episode string
			step                  int
		}
		ins := []in{
			{"gpu", "node-1", ep, 0}, {"gpu", "node-1", ep, 1}, {"gpu", "node-1", ep, 10}, {"gpu", "node-1", ep, 11},
			{"gpu", "node-1", ep2, 0}, {"gpu", "node-2", ep, 0}, {"gpu-2", "node-1", ep, 0},
			// The same text split differently between policy and node.
			{"gpu.a", "node-1", ep, 0}, {"gpu", "a.node-1", ep, 0},
			{"gpu-node", "x", ep, 0}, {"gpu", "node.x", ep, 0}, {"gpu.node", "x", ep, 0},
			// Long names that differ only past the cut.
			{"gpu", long, ep, 0}, {"gpu", long[:252] + "m", ep, 0}, {"gpu", long[:250], ep, 0},
			{long, long, ep, 0}, {long, long[:252] + "m", ep, 0}, {long[:252] + "q", long, ep, 0},
			{long, long, ep, 1}, {long, long, ep2, 0},
		}
		seen := map[string]in{}
		for _, x := range ins {
			name := OperationName(x.policy, x.node, x.episode, x.step)
			prev, dup := seen[name]
			require.False(t, dup, "%+v and %+v are both named %s", prev, x, name)
			seen[name] = x
		}
	})
}

// FuzzOperationName: whatever valid names go in, a valid name comes out.
// The fuzzer's strings are turned into valid DNS subdomains first, so that
// every input exercises OperationName.
func FuzzOperationName(f *testing.F) {
	f.Add("gpu", "node-1", uint8(0))
	f.Add("gpu.xid", strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 61), uint8(2))
	f.Add(strings.Repeat("p", 63)+"."+strings.Repeat("q-", 31)+"q", "n."+strings.Repeat("-", 60)+"x", uint8(10))
	ep := episodeOf(v1alpha1.ConditionGPUXidError, now)
	f.Fuzz(func(t *testing.T, policy, node string, step uint8) {
		policy, node = subdomain(policy), subdomain(node)
		if errs := validation.IsDNS1123Subdomain(policy + "." + node); len(errs) > 0 && len(policy+"."+node) <= 253 {
			t.Fatalf("subdomain made invalid names %q, %q: %v", policy, node, errs)
		}
		name := OperationName(policy, node, ep, int(step))
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("OperationName(%q, %q, %q, %d) = %q: %v", policy, node, ep, step, name, errs)
		}
		if name != OperationName(policy, node, ep, int(step)) {
			t.Fatalf("OperationName(%q, %q, %q, %d) is not deterministic", policy, node, ep, step)
		}
	})
}

// subdomain maps any string onto a valid DNS-1123 subdomain of about the
// same length and shape.
func subdomain(s string) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789.-"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(chars[int(s[i])%len(chars)])
	}
	var labels []string
	for _, l := range strings.Split(b.String(), ".") {
		l = strings.Trim(l, "-")
		if len(l) > 63 {
			l = strings.TrimRight(l[:63], "-")
		}
		if l != "" {
			labels = append(labels, l)
		}
	}
	out := strings.Join(labels, ".")
	if len(out) > 253 {
		out = strings.TrimRight(out[:253], ".-")
	}
	if out == "" {
		return "x"
	}
	return out
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	for _, tc := range []struct {
		desc, in string
		same     bool // the value is the input itself
	}{
		{desc: "a short node name is kept", in: "node-1.example.com", same: true},
		{desc: "63 characters are kept", in: strings.Repeat("a", 63), same: true},
		{desc: "64 characters are shortened", in: strings.Repeat("a", 64)},
		{desc: "a 253-character node name is shortened", in: long},
		{desc: "a cut before a dot", in: strings.Repeat("a", 49) + "." + strings.Repeat("b", 20)},
		{desc: "a cut before a dash", in: strings.Repeat("a", 49) + "-" + strings.Repeat("b", 20)},
		{desc: "nothing left of the prefix", in: strings.Repeat("-", 70)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v := LabelValue(tc.in)
			require.Empty(t, validation.IsValidLabelValue(v), v)
			require.Equal(t, v, LabelValue(tc.in), "deterministic")
			if tc.same {
				require.Equal(t, tc.in, v)
			} else {
				require.NotEqual(t, tc.in, v)
			}
		})
	}
	require.NotEqual(t, LabelValue(long), LabelValue(long[:252]+"e"), "names that differ only past the cut")
}
