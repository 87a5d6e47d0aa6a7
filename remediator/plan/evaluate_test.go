package plan

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

type counts struct{ Selected, Unhealthy, Active, Quarantined int }

func TestEvaluate(t *testing.T) {
	held := ago(10 * time.Minute) // past the default for: 5m
	ep := episodeOf(v1alpha1.ConditionGPUXidError, held)
	oldEp := episodeOf(v1alpha1.ConditionGPUXidError, ago(3*time.Hour))
	gpu := policy(t, "gpu")
	xidMatch := func(reason string) policyOpt {
		return matching(v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError, Reason: reason})
	}
	withQuarantineStep := steps(
		v1alpha1.RemediationStep{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}},
		v1alpha1.RemediationStep{Name: "hold", StepAction: v1alpha1.StepAction{Quarantine: true}},
	)
	failed := ran(v1alpha1.PhaseFailed, ago(9*time.Minute), ago(8*time.Minute))
	nodesN := func(n, unhealthy int) []*corev1.Node {
		var out []*corev1.Node
		for i := range n {
			opts := []nodeOpt{}
			if i < unhealthy {
				opts = append(opts, xid(held))
			}
			out = append(out, node("n"+strconv.Itoa(i), opts...))
		}
		return out
	}
	createAll := func(n int) map[string]int {
		m := map[string]int{}
		for i := range n {
			m["n"+strconv.Itoa(i)] = 0
		}
		return m
	}

	for _, tc := range []struct {
		desc      string
		policy    *Policy
		others    []*Policy // the other valid policies, for overlaps
		nodes     []*corev1.Node
		ops       []*v1alpha1.NodeOperation
		templates []string          // nil: every template the steps name exists
		create    map[string]int    // node -> ladder index of the operation created
		holds     map[string]string // node -> hold reason
		counts    *counts
		next      time.Time
		check     func(t *testing.T, out PolicyPlan)
	}{
		{desc: "no nodes: nothing to do", policy: gpu, counts: &counts{}},
		{desc: "a healthy node is selected but not unhealthy", policy: gpu,
			nodes: []*corev1.Node{node("a")}, counts: &counts{Selected: 1}},

		// Selection.
		{desc: "nodes the nodeSelector does not select are neither counted nor remediated",
			policy: policy(t, "gpu", selecting("pool", "gpu")),
			nodes:  []*corev1.Node{node("a", labeled("pool", "gpu"), xid(held)), node("b", labeled("pool", "cpu"), xid(held)), node("c", xid(held))},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 1, Unhealthy: 1}},
		{desc: "a matchExpressions selector",
			policy: policy(t, "gpu", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "gpu", Operator: metav1.LabelSelectorOpIn, Values: []string{"a100", "h100"}},
				}}
			}),
			nodes:  []*corev1.Node{node("a", labeled("gpu", "h100"), xid(held)), node("b", labeled("gpu", "t4"), xid(held))},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 1, Unhealthy: 1}},

		// Condition matching.
		{desc: "a condition of another type does not match", policy: gpu,
			nodes:  []*corev1.Node{node("a", cond(v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason, "GPUFellOffBus: 0000:3b:00.0", held))},
			counts: &counts{Selected: 1}},
		{desc: "the condition in another status does not match", policy: gpu,
			nodes:  []*corev1.Node{node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, v1alpha1.DetectReason, xidMessage, held))},
			counts: &counts{Selected: 1}},
		{desc: "the effective reason comes from the message prefix (reason KubemedicDetect, message XidRebootRequired: ...)", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 1, Unhealthy: 1}},
		{desc: "a condition written with the specific reason itself matches too", policy: gpu,
			nodes:  []*corev1.Node{node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.ReasonXidRebootRequired, "Xid 79", held))},
			create: map[string]int{"a": 0}},
		{desc: "a message prefix naming another reason of the type does not match", policy: gpu,
			nodes:  []*corev1.Node{node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, "XidResetRequired: Xid 31 on 0000:3b:00.0", held))},
			counts: &counts{Selected: 1}},
		{desc: "the reason expression is anchored at the start: Xid does not match XidRebootRequired", policy: policy(t, "gpu", xidMatch("Xid")),
			nodes: []*corev1.Node{node("a", xid(held))}, counts: &counts{Selected: 1}},
		{desc: "the reason expression is anchored at the end: RebootRequired does not match XidRebootRequired", policy: policy(t, "gpu", xidMatch("RebootRequired")),
			nodes: []*corev1.Node{node("a", xid(held))}, counts: &counts{Selected: 1}},
		{desc: "an alternation is anchored as a whole and matches either reason", policy: policy(t, "gpu", xidMatch("XidResetRequired|XidRebootRequired")),
			nodes: []*corev1.Node{
				node("a", xid(held)),
				node("b", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, "XidResetRequired: Xid 31", held)),
				node("c", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, "XidResetRequiredSoon", "", held)),
			},
			create: map[string]int{"a": 0, "b": 0}, counts: &counts{Selected: 3, Unhealthy: 2}},
		{desc: "a regular expression over the effective reason", policy: policy(t, "gpu", xidMatch("Xid.*Required")),
			nodes: []*corev1.Node{node("a", xid(held))}, create: map[string]int{"a": 0}},
		{desc: "without a reason expression any reason matches", policy: policy(t, "gpu", xidMatch("")),
			nodes:  []*corev1.Node{node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, "Whatever", "no prefix here", held))},
			create: map[string]int{"a": 0}},
		{desc: "an unknown message prefix leaves the condition's own reason, a known one replaces it", policy: policy(t, "gpu", xidMatch(v1alpha1.DetectReason)),
			nodes: []*corev1.Node{
				node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, "NotAReason: something", held)),
				node("b", xid(held)),
			},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 2, Unhealthy: 1}},
		{desc: "a policy on Ready Unknown matches only Ready Unknown",
			policy: policy(t, "gpu", matching(v1alpha1.ConditionMatch{Type: string(corev1.NodeReady), Status: corev1.ConditionUnknown})),
			nodes: []*corev1.Node{
				node("a", cond(string(corev1.NodeReady), corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", held)),
				node("b", cond(string(corev1.NodeReady), corev1.ConditionFalse, "KubeletNotReady", "", held)),
				node("c"),
			},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 3, Unhealthy: 1}},

		// for.
		{desc: "for not yet held: NotHeldYet, counted unhealthy, Next when it will have held", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(ago(2*time.Minute)))},
			holds: map[string]string{"a": HoldNotHeldYet}, counts: &counts{Selected: 1, Unhealthy: 1}, next: now.Add(3 * time.Minute)},
		{desc: "for held exactly at now: target", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(ago(5*time.Minute)))}, create: map[string]int{"a": 0}},
		{desc: "Next is the earliest time a condition will have held", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(ago(2*time.Minute))), node("b", xid(ago(4*time.Minute))), node("c", xid(held))},
			holds: map[string]string{"a": HoldNotHeldYet, "b": HoldNotHeldYet}, create: map[string]int{"c": 0}, next: now.Add(time.Minute)},
		{desc: "for: 0 targets at once",
			policy: policy(t, "gpu", matching(v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError, For: dur(0)})),
			nodes:  []*corev1.Node{node("a", xid(now))}, create: map[string]int{"a": 0}},
		{desc: "a custom for of 1h",
			policy: policy(t, "gpu", matching(v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError, For: dur(time.Hour)})),
			nodes:  []*corev1.Node{node("a", xid(ago(30*time.Minute)))},
			holds:  map[string]string{"a": HoldNotHeldYet}, next: now.Add(30 * time.Minute)},
		{desc: "of two matching conditions, the one that has held is the trigger",
			policy: policy(t, "gpu", matching(
				v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPULost, For: dur(time.Hour)},
				v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError},
			)),
			nodes: []*corev1.Node{node("a",
				cond(v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason, "GPUFellOffBus: 0000:3b:00.0", held),
				xid(held))},
			create: map[string]int{"a": 0}, counts: &counts{Selected: 1, Unhealthy: 1},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, v1alpha1.ConditionGPUXidError, out.Create[0].Spec.Trigger.Type)
			}},
		{desc: "several target nodes: one operation each", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held)), node("b", xid(held)), node("c", xid(held))},
			create: map[string]int{"a": 0, "b": 0, "c": 0}, counts: &counts{Selected: 3, Unhealthy: 3}},

		// One operation per node.
		{desc: "an unfinished operation of another policy on the node: InProgress", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("other-op", "a", of("other", "e1", 0), phase(v1alpha1.PhaseRunning))},
			holds: map[string]string{"a": HoldInProgress}, counts: &counts{Selected: 1, Unhealthy: 1}},
		{desc: "an unfinished manual operation on the node: InProgress", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("manual", "a", phase(v1alpha1.PhaseWaitingForBudget))},
			holds: map[string]string{"a": HoldInProgress}},
		{desc: "an operation without a phase yet is unfinished: InProgress", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("manual", "a")},
			holds: map[string]string{"a": HoldInProgress}},
		{desc: "the policy's own step waiting for budget: InProgress and Active", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("mine", "a", of("gpu", ep, 0), phase(v1alpha1.PhaseWaitingForBudget))},
			holds: map[string]string{"a": HoldInProgress}, counts: &counts{Selected: 1, Unhealthy: 1, Active: 1}},
		{desc: "an operation on another node does not block this one", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("elsewhere", "b", phase(v1alpha1.PhaseRunning))},
			create: map[string]int{"a": 0}},

		// The ladder.
		{desc: "a failed operation of another policy neither blocks nor advances this policy's ladder", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("theirs", "a", of("deleted-policy", ep, 0), failed)},
			create: map[string]int{"a": 0}},
		{desc: "step 0 failed in this episode: step 1", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), failed)},
			create: map[string]int{"a": 1},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, "reboot", out.Create[0].Spec.Step)
				require.Equal(t, "reboot", out.Create[0].Spec.Operation)
			}},
		{desc: "the last step failed: the implicit quarantine one past the end of the ladder", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), failed), op("s1", "a", of("gpu", ep, 1), failed)},
			create: map[string]int{"a": 2},
			check: func(t *testing.T, out PolicyPlan) {
				o := out.Create[0]
				require.True(t, o.Spec.Quarantine)
				require.True(t, o.Spec.Urgent, "a quarantine waits for no window")
				require.Empty(t, o.Spec.Operation)
				require.Empty(t, o.Spec.Step)
				require.True(t, strings.HasPrefix(o.Spec.Reason, v1alpha1.ReasonLadderExhausted+": "), o.Spec.Reason)
			}},
		{desc: "the highest step index decides, whatever the order of the list", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("s1", "a", of("gpu", ep, 1), failed), op("s0", "a", of("gpu", ep, 0), ran(v1alpha1.PhaseSucceeded, ago(20*time.Minute), ago(19*time.Minute)))},
			create: map[string]int{"a": 2}},
		{desc: "an explicit quarantine step runs after the step before it failed", policy: policy(t, "gpu", withQuarantineStep),
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), failed)},
			create: map[string]int{"a": 1},
			check: func(t *testing.T, out PolicyPlan) {
				o := out.Create[0]
				require.True(t, o.Spec.Quarantine)
				require.True(t, o.Spec.Urgent)
				require.Equal(t, "hold", o.Spec.Step)
				require.Empty(t, o.Spec.Operation)
				require.True(t, strings.HasPrefix(o.Spec.Reason, v1alpha1.ReasonLadderExhausted+": "), o.Spec.Reason)
			}},
		{desc: "a failed explicit quarantine ends the episode", policy: policy(t, "gpu", withQuarantineStep),
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), failed), op("s1", "a", of("gpu", ep, 1), quarantineOp, failed)},
			holds: map[string]string{"a": HoldEpisodeEnded}},
		{desc: "a failed implicit quarantine ends the episode", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops: []*v1alpha1.NodeOperation{
				op("s0", "a", of("gpu", ep, 0), failed), op("s1", "a", of("gpu", ep, 1), failed),
				op("s2", "a", of("gpu", ep, 2), quarantineOp, failed),
			},
			holds: map[string]string{"a": HoldEpisodeEnded}},
		{desc: "a succeeded step ends the episode", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), ran(v1alpha1.PhaseSucceeded, ago(9*time.Minute), ago(8*time.Minute)))},
			holds: map[string]string{"a": HoldEpisodeEnded}},
		{desc: "a skipped (dry-run) step ends the episode", policy: policy(t, "gpu", dryRun),
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), dryRunOp, phase(v1alpha1.PhaseSkipped))},
			holds: map[string]string{"a": HoldEpisodeEnded}},
		{desc: "a new episode (the condition came back) starts at step 0 again", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops: []*v1alpha1.NodeOperation{
				op("old0", "a", of("gpu", oldEp, 0), ran(v1alpha1.PhaseFailed, ago(4*time.Hour), ago(4*time.Hour))),
				op("old1", "a", of("gpu", oldEp, 1), ran(v1alpha1.PhaseFailed, ago(3*time.Hour), ago(3*time.Hour))),
				op("old2", "a", of("gpu", oldEp, 2), quarantineOp, ran(v1alpha1.PhaseSucceeded, ago(2*time.Hour), ago(2*time.Hour))),
			},
			create: map[string]int{"a": 0},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, ep, out.Create[0].Labels[v1alpha1.LabelEpisode])
			}},
		{desc: "a condition posted anew while a step ran (NPD restarted by a reboot) continues the ladder", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops: []*v1alpha1.NodeOperation{
				op("old0", "a", of("gpu", oldEp, 0), ran(v1alpha1.PhaseFailed, ago(4*time.Hour), ago(4*time.Hour))),
				op("old1", "a", of("gpu", oldEp, 1), failed),
			},
			create: map[string]int{"a": 2},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, oldEp, out.Create[0].Labels[v1alpha1.LabelEpisode], "same incident, same episode")
			}},
		{desc: "an old failure that ended before the condition came back starts a new ladder", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops: []*v1alpha1.NodeOperation{
				op("old0", "a", of("gpu", oldEp, 0), ran(v1alpha1.PhaseFailed, ago(4*time.Hour), ago(4*time.Hour))),
			},
			create: map[string]int{"a": 0},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, ep, out.Create[0].Labels[v1alpha1.LabelEpisode])
			}},
		{desc: "an operation without a step index is not part of the ladder", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held))},
			ops: []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), failed, func(o *v1alpha1.NodeOperation) {
				delete(o.Labels, v1alpha1.LabelStepIndex)
			})},
			create: map[string]int{"a": 0}},

		// Overlapping policies.
		{desc: "overlap: the policy of higher priority takes the node", policy: gpu,
			others: []*Policy{policy(t, "zz-urgent", priority(10))},
			nodes:  []*corev1.Node{node("a", xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy}, counts: &counts{Selected: 1, Unhealthy: 1}},
		{desc: "overlap: the policy of higher priority creates", policy: policy(t, "zz-urgent", priority(10)),
			others: []*Policy{gpu},
			nodes:  []*corev1.Node{node("a", xid(held))},
			create: map[string]int{"a": 0}},
		{desc: "overlap: negative priority loses to the default", policy: policy(t, "a-low", priority(-1)),
			others: []*Policy{gpu},
			nodes:  []*corev1.Node{node("a", xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy}},
		{desc: "overlap at equal priority: the name that sorts first wins", policy: policy(t, "gpu-b"),
			others: []*Policy{policy(t, "gpu-a")},
			nodes:  []*corev1.Node{node("a", xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy}},
		{desc: "overlap at equal priority: the first name creates", policy: policy(t, "gpu-a"),
			others: []*Policy{policy(t, "gpu-b")},
			nodes:  []*corev1.Node{node("a", xid(held))},
			create: map[string]int{"a": 0}},
		{desc: "overlap: a policy whose condition has not held yet does not take the node", policy: gpu,
			others: []*Policy{policy(t, "zz-urgent", priority(10), matching(v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUXidError, For: dur(time.Hour)}))},
			nodes:  []*corev1.Node{node("a", xid(held))},
			create: map[string]int{"a": 0}},
		{desc: "overlap: a policy that does not select the node does not take it", policy: gpu,
			others: []*Policy{policy(t, "zz-urgent", priority(10), selecting("pool", "cpu"))},
			nodes:  []*corev1.Node{node("a", xid(held))},
			create: map[string]int{"a": 0}},
		{desc: "overlap: a paused policy of higher priority still takes the node", policy: gpu,
			others: []*Policy{policy(t, "zz-urgent", priority(10), paused)},
			nodes:  []*corev1.Node{node("a", xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy}},
		{desc: "overlap is per node", policy: gpu,
			others: []*Policy{policy(t, "zz-urgent", priority(10), selecting("pool", "a"))},
			nodes:  []*corev1.Node{node("a", labeled("pool", "a"), xid(held)), node("b", labeled("pool", "b"), xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy}, create: map[string]int{"b": 0}},

		// Holds.
		{desc: "paused: hold Paused, nothing created, counts kept", policy: policy(t, "gpu", paused),
			nodes: []*corev1.Node{node("a", xid(held))},
			ops:   []*v1alpha1.NodeOperation{op("mine", "b", of("gpu", ep, 0), phase(v1alpha1.PhaseRunning))},
			holds: map[string]string{"a": HoldPaused}, counts: &counts{Selected: 1, Unhealthy: 1, Active: 1}},
		{desc: "breaker opens: nothing created, Opened", policy: policy(t, "gpu", maxUnhealthy("1")),
			nodes:  []*corev1.Node{node("a", xid(held)), node("b", xid(held)), node("c")},
			holds:  map[string]string{"a": HoldBreakerOpen, "b": HoldBreakerOpen},
			counts: &counts{Selected: 3, Unhealthy: 2},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, 1, out.Limit)
				require.True(t, out.Breaker.Open)
				require.True(t, out.Breaker.Opened)
				require.Equal(t, v1alpha1.ReasonBreakerTripped, out.Breaker.Reason)
				require.Contains(t, out.Holds[0].Message, "2 unhealthy nodes, limit 1")
			}},
		{desc: "breaker open in the status and still over the limit: open, not newly opened",
			policy: policy(t, "gpu", maxUnhealthy("1"), breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerTripped, "")),
			nodes:  []*corev1.Node{node("a", xid(held)), node("b", xid(held))},
			holds:  map[string]string{"a": HoldBreakerOpen, "b": HoldBreakerOpen},
			check: func(t *testing.T, out PolicyPlan) {
				require.True(t, out.Breaker.Open)
				require.False(t, out.Breaker.Opened)
			}},
		{desc: "breaker cooling down: still nothing created, Next when it closes",
			policy: policy(t, "gpu", maxUnhealthy("1"), breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerCoolingDown, ""), func(p *v1alpha1.RemediationPolicy) {
				p.Status.BreakerBelowLimitSince = &metav1.Time{Time: ago(5 * time.Minute)}
			}),
			nodes: []*corev1.Node{node("a", xid(held))},
			holds: map[string]string{"a": HoldBreakerOpen},
			next:  now.Add(10 * time.Minute)},
		{desc: "a quarantined node: counted unhealthy and quarantined, nothing created", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held), quarantinedNode)},
			holds: map[string]string{"a": HoldQuarantined}, counts: &counts{Selected: 1, Unhealthy: 1, Quarantined: 1}},
		{desc: "a quarantined healthy node is counted as quarantined only", policy: gpu,
			nodes: []*corev1.Node{node("a", quarantinedNode)}, counts: &counts{Selected: 1, Quarantined: 1}},
		{desc: "an opted-out node: counted unhealthy, nothing created", policy: gpu,
			nodes: []*corev1.Node{node("a", xid(held), optedOut)},
			holds: map[string]string{"a": HoldOptedOut}, counts: &counts{Selected: 1, Unhealthy: 1}},
		{desc: "opted-out and quarantined nodes count for the breaker", policy: policy(t, "gpu", maxUnhealthy("2")),
			nodes: []*corev1.Node{node("a", xid(held), optedOut), node("b", xid(held), quarantinedNode), node("c", xid(held))},
			holds: map[string]string{"a": HoldOptedOut, "b": HoldQuarantined, "c": HoldBreakerOpen}},
		{desc: "a node whose condition has not held yet counts for the breaker", policy: policy(t, "gpu", maxUnhealthy("1")),
			nodes: []*corev1.Node{node("a", xid(ago(time.Minute))), node("b", xid(held))},
			holds: map[string]string{"a": HoldNotHeldYet, "b": HoldBreakerOpen}, next: now.Add(4 * time.Minute)},
		{desc: "a missing template: PolicyNotReady, nothing created", policy: gpu, templates: []string{"reset-gpu"},
			nodes: []*corev1.Node{node("a", xid(held))},
			holds: map[string]string{"a": HoldNotReady},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, []string{"reboot"}, out.MissingTemplates)
			}},
		{desc: "a quarantine step needs no template", policy: policy(t, "gpu", withQuarantineStep), templates: []string{"reset-gpu"},
			nodes: []*corev1.Node{node("a", xid(held))}, create: map[string]int{"a": 0},
			check: func(t *testing.T, out PolicyPlan) { require.Empty(t, out.MissingTemplates) }},
		{desc: "turning dryRun off acts on a fault a dry run already recorded", policy: gpu,
			nodes:  []*corev1.Node{node("a", xid(held))},
			ops:    []*v1alpha1.NodeOperation{op("s0", "a", of("gpu", ep, 0), dryRunOp, phase(v1alpha1.PhaseSkipped))},
			create: map[string]int{"a": 0},
			check: func(t *testing.T, out PolicyPlan) {
				require.False(t, out.Create[0].Spec.DryRun)
				require.NotEqual(t, operationName(policy(t, "gpu", dryRun), "a", ep, 0), out.Create[0].Name, "the real operation does not take the dry run's name")
			}},
		{desc: "a dry-run policy creates dry-run operations", policy: policy(t, "gpu", dryRun),
			nodes: []*corev1.Node{node("a", xid(held))}, create: map[string]int{"a": 0},
			check: func(t *testing.T, out PolicyPlan) { require.True(t, out.Create[0].Spec.DryRun) }},

		// Counts and maxUnhealthy.
		{desc: "counts: selected, unhealthy, the policy's unfinished operations, quarantined",
			policy: policy(t, "gpu", selecting("pool", "gpu")),
			nodes: []*corev1.Node{
				node("a", labeled("pool", "gpu")),
				node("b", labeled("pool", "gpu"), xid(held)),
				node("c", labeled("pool", "gpu"), xid(held), quarantinedNode),
				node("d", labeled("pool", "gpu"), quarantinedNode),
				node("e", labeled("pool", "cpu"), xid(held), quarantinedNode),
			},
			ops: []*v1alpha1.NodeOperation{
				op("mine-running", "a", of("gpu", "e0", 0), phase(v1alpha1.PhaseDraining)),
				op("mine-waiting", "e", of("gpu", "e1", 0), phase(v1alpha1.PhaseWaitingForBudget)),
				op("mine-done", "d", of("gpu", "e2", 0), ran(v1alpha1.PhaseSucceeded, ago(time.Hour), ago(time.Hour))),
				op("theirs", "b", of("other", "e3", 0), phase(v1alpha1.PhaseRunning)),
			},
			holds:  map[string]string{"b": HoldInProgress, "c": HoldQuarantined},
			counts: &counts{Selected: 4, Unhealthy: 2, Active: 2, Quarantined: 2}},
		{desc: "maxUnhealthy 25% of 10 nodes is 2 (rounded down): 2 unhealthy stay within it", policy: policy(t, "gpu", maxUnhealthy("25%")),
			nodes: nodesN(10, 2), create: createAll(2), counts: &counts{Selected: 10, Unhealthy: 2},
			check: func(t *testing.T, out PolicyPlan) {
				require.Equal(t, 2, out.Limit)
				require.False(t, out.Breaker.Open)
			}},
		{desc: "maxUnhealthy 25% of 10 nodes is 2: 3 unhealthy open the breaker", policy: policy(t, "gpu", maxUnhealthy("25%")),
			nodes: nodesN(10, 3), holds: map[string]string{"n0": HoldBreakerOpen, "n1": HoldBreakerOpen, "n2": HoldBreakerOpen},
			check: func(t *testing.T, out PolicyPlan) { require.True(t, out.Breaker.Opened) }},
		{desc: "maxUnhealthy 29% of 7 nodes is 2 (2.03 rounded down)", policy: policy(t, "gpu", maxUnhealthy("29%")),
			nodes: nodesN(7, 2), create: createAll(2),
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 2, out.Limit) }},
		{desc: "the default maxUnhealthy 30% of 3 nodes rounds down to 0 but allows 1: one unhealthy node is remediated",
			policy: policy(t, "gpu", func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = nil }),
			nodes:  nodesN(3, 1), create: createAll(1),
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 1, out.Limit) }},
		{desc: "the default maxUnhealthy 30% of 3 nodes: two unhealthy nodes open the breaker",
			policy: policy(t, "gpu", func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = nil }),
			nodes:  nodesN(3, 2), holds: map[string]string{"n0": HoldBreakerOpen, "n1": HoldBreakerOpen},
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 1, out.Limit) }},
		{desc: "maxUnhealthy 0% never acts", policy: policy(t, "gpu", maxUnhealthy("0%")),
			nodes: nodesN(4, 1), holds: map[string]string{"n0": HoldBreakerOpen},
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 0, out.Limit) }},
		{desc: "the default maxUnhealthy 30% of 10 nodes is 3", policy: policy(t, "gpu", func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = nil }),
			nodes: nodesN(10, 3), create: createAll(3),
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 3, out.Limit) }},
		{desc: "a maxUnhealthy that is not a count or a percentage counts as 0: the breaker opens", policy: policy(t, "gpu", maxUnhealthy("many")),
			nodes: nodesN(4, 1), holds: map[string]string{"n0": HoldBreakerOpen},
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 0, out.Limit) }},
		{desc: "maxUnhealthy as a count", policy: policy(t, "gpu", maxUnhealthy("3")),
			nodes: nodesN(4, 3), create: createAll(3),
			check: func(t *testing.T, out PolicyPlan) { require.Equal(t, 3, out.Limit) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			all := append([]*Policy{tc.policy}, tc.others...)
			templates := map[string]bool{}
			if tc.templates == nil {
				for _, p := range all {
					for _, st := range p.Obj.Spec.Steps {
						templates[st.Operation] = st.Operation != ""
					}
				}
			}
			for _, name := range tc.templates {
				templates[name] = true
			}
			nodesBefore, opsBefore := deepCopyNodes(tc.nodes), deepCopyOps(tc.ops)

			out := Evaluate(PolicyInput{Policy: tc.policy, Policies: all, Nodes: tc.nodes, Ops: tc.ops, Templates: templates, Now: now})

			gotCreate := map[string]int{}
			for _, o := range out.Create {
				_, dup := gotCreate[o.Spec.NodeName]
				require.False(t, dup, "two operations for node %s", o.Spec.NodeName)
				idx, err := strconv.Atoi(o.Labels[v1alpha1.LabelStepIndex])
				require.NoError(t, err)
				gotCreate[o.Spec.NodeName] = idx
				require.Equal(t, operationName(tc.policy, o.Spec.NodeName, o.Labels[v1alpha1.LabelEpisode], idx), o.Name)
				require.Equal(t, tc.policy.Name(), o.Spec.Policy)
				require.Equal(t, tc.policy.Name(), o.Labels[v1alpha1.LabelPolicy])
			}
			gotHolds := map[string]string{}
			for _, h := range out.Holds {
				gotHolds[h.Node] = h.Reason
				require.NotEmpty(t, h.Message, "hold of %s", h.Node)
			}
			require.Equal(t, nonNil(tc.create), gotCreate, "created (node -> step index)")
			require.Equal(t, nonNil(tc.holds), gotHolds, "holds (node -> reason)")
			if tc.counts != nil {
				require.Equal(t, *tc.counts, counts{out.Selected, out.Unhealthy, out.Active, out.Quarantined})
			}
			require.Equal(t, tc.next, out.Next, "next")
			if tc.check != nil {
				tc.check(t, out)
			}
			require.Equal(t, nodesBefore, tc.nodes, "Evaluate changed a node")
			require.Equal(t, opsBefore, tc.ops, "Evaluate changed an operation")
		})
	}
}

func nonNil[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

func deepCopyNodes(ns []*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range ns {
		out = append(out, n.DeepCopy())
	}
	return out
}

func deepCopyOps(ops []*v1alpha1.NodeOperation) []*v1alpha1.NodeOperation {
	var out []*v1alpha1.NodeOperation
	for _, o := range ops {
		out = append(out, o.DeepCopy())
	}
	return out
}

// TestEvaluateOperation checks every field of a created operation: the spec
// is the step's, with the defaults applied, and the trigger is the condition
// as read with its effective reason.
func TestEvaluateOperation(t *testing.T) {
	held := ago(10 * time.Minute)
	ep := episodeOf(v1alpha1.ConditionGPUXidError, held)
	trigger := &v1alpha1.TriggerCondition{
		Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonXidRebootRequired,
		Message: xidMessage, LastTransitionTime: metav1.NewTime(held),
	}
	labels := func(idx string) map[string]string {
		return map[string]string{v1alpha1.LabelPolicy: "gpu", v1alpha1.LabelNode: "gpu-1", v1alpha1.LabelEpisode: ep, v1alpha1.LabelStepIndex: idx}
	}
	for _, tc := range []struct {
		desc       string
		policy     *Policy
		ops        []*v1alpha1.NodeOperation
		want       v1alpha1.NodeOperationSpec
		wantIdx    string
		wantReason []string // substrings of spec.reason
	}{
		{
			desc: "a drained step: cordon implied, drain defaulted, durations and urgent copied, dryRun from the policy",
			policy: policy(t, "gpu", dryRun, steps(v1alpha1.RemediationStep{
				Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot", Drain: &v1alpha1.DrainSpec{Mode: v1alpha1.DrainDeleteAfterTimeout, Rules: []v1alpha1.DrainRule{{Namespaces: []string{"batch"}, Mode: v1alpha1.DrainSkip}}}, Timeout: dur(20 * time.Minute), Urgent: true},
				HealthyFor: dur(3 * time.Minute), RecoveryTimeout: dur(15 * time.Minute),
			})),
			want: v1alpha1.NodeOperationSpec{
				NodeName: "gpu-1", StepAction: v1alpha1.StepAction{Operation: "reboot", Cordon: true, Drain: &v1alpha1.DrainSpec{Timeout: dur(10 * time.Minute), Mode: v1alpha1.DrainDeleteAfterTimeout, Rules: []v1alpha1.DrainRule{{Namespaces: []string{"batch"}, Mode: v1alpha1.DrainSkip}}}, Timeout: dur(20 * time.Minute), Urgent: true}, Policy: "gpu", Step: "reboot",
				HealthyFor: dur(3 * time.Minute), RecoveryTimeout: dur(15 * time.Minute),
				DryRun: true, Trigger: trigger,
			},
			wantIdx:    "0",
			wantReason: []string{"GPUXidError=True (XidRebootRequired) since 2026-03-04T11:50:00Z", "step 1 of 1 (reboot) of policy gpu"},
		},
		{
			desc:   "a plain step: no cordon, no drain, the template's timeout, default healthyFor and recoveryTimeout",
			policy: policy(t, "gpu", steps(v1alpha1.RemediationStep{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}})),
			want: v1alpha1.NodeOperationSpec{
				NodeName: "gpu-1", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}, Policy: "gpu", Step: "reset",
				HealthyFor: dur(2 * time.Minute), RecoveryTimeout: dur(10 * time.Minute), Trigger: trigger,
			},
			wantIdx:    "0",
			wantReason: []string{"step 1 of 1 (reset) of policy gpu"},
		},
		{
			desc:   "cordon without drain",
			policy: policy(t, "gpu", steps(v1alpha1.RemediationStep{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Cordon: true}, HealthyFor: dur(0)})),
			want: v1alpha1.NodeOperationSpec{
				NodeName: "gpu-1", StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Cordon: true}, Policy: "gpu", Step: "reset",
				HealthyFor: dur(0), RecoveryTimeout: dur(10 * time.Minute), Trigger: trigger,
			},
			wantIdx: "0",
		},
		{
			desc:   "the second step after the first failed",
			policy: policy(t, "gpu"),
			ops:    []*v1alpha1.NodeOperation{op("s0", "gpu-1", of("gpu", ep, 0), ran(v1alpha1.PhaseFailed, ago(9*time.Minute), ago(8*time.Minute)))},
			want: v1alpha1.NodeOperationSpec{
				NodeName: "gpu-1", StepAction: v1alpha1.StepAction{Operation: "reboot", Cordon: true, Drain: &v1alpha1.DrainSpec{Timeout: dur(10 * time.Minute), Mode: v1alpha1.DrainEvict}}, Policy: "gpu", Step: "reboot",
				HealthyFor: dur(2 * time.Minute), RecoveryTimeout: dur(10 * time.Minute), Trigger: trigger,
			},
			wantIdx:    "1",
			wantReason: []string{"step 2 of 2 (reboot) of policy gpu"},
		},
		{
			desc:   "the implicit quarantine: urgent, no step, no operation",
			policy: policy(t, "gpu"),
			ops: []*v1alpha1.NodeOperation{
				op("s0", "gpu-1", of("gpu", ep, 0), ran(v1alpha1.PhaseFailed, ago(9*time.Minute), ago(8*time.Minute))),
				op("s1", "gpu-1", of("gpu", ep, 1), ran(v1alpha1.PhaseFailed, ago(8*time.Minute), ago(7*time.Minute))),
			},
			want: v1alpha1.NodeOperationSpec{
				NodeName: "gpu-1", Policy: "gpu", StepAction: v1alpha1.StepAction{Quarantine: true, Urgent: true}, Trigger: trigger,
			},
			wantIdx:    "2",
			wantReason: []string{"LadderExhausted: every step of policy gpu failed on GPUXidError=True (XidRebootRequired)"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			out := Evaluate(PolicyInput{
				Policy: tc.policy, Policies: []*Policy{tc.policy}, Now: now,
				Nodes:     []*corev1.Node{node("gpu-1", xid(held))},
				Ops:       tc.ops,
				Templates: map[string]bool{"reboot": true, "reset-gpu": true},
			})
			require.Len(t, out.Create, 1)
			got := out.Create[0]
			require.Equal(t, operationName(tc.policy, "gpu-1", ep, mustAtoi(t, tc.wantIdx)), got.Name)
			require.Equal(t, labels(tc.wantIdx), got.Labels)
			for _, s := range tc.wantReason {
				require.Contains(t, got.Spec.Reason, s)
			}
			tc.want.Reason = got.Spec.Reason
			require.Equal(t, tc.want, got.Spec)
			if st := tc.policy.Obj.Spec.Steps; got.Spec.Drain != nil {
				require.NotSame(t, st[len(st)-1].Drain, got.Spec.Drain, "the drain spec must be a copy")
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// TestEvaluateLongNodeName: a node name that does not fit in a label value
// is shortened with a hash in the node label, and the operation name stays
// valid.
func TestEvaluateLongNodeName(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	require.Len(t, long, 253)
	p := policy(t, "gpu")
	out := Evaluate(PolicyInput{Policy: p, Policies: []*Policy{p}, Nodes: []*corev1.Node{node(long, xid(ago(time.Hour)))},
		Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
	require.Len(t, out.Create, 1)
	o := out.Create[0]
	require.Empty(t, validation.IsDNS1123Subdomain(o.Name))
	require.Equal(t, long, o.Spec.NodeName)
	for k, v := range o.Labels {
		require.Empty(t, validation.IsValidLabelValue(v), "label %s=%s", k, v)
	}
	require.Equal(t, LabelValue(long), o.Labels[v1alpha1.LabelNode])
	require.NotEqual(t, long, o.Labels[v1alpha1.LabelNode])
}

// TestEvaluateFindsItselfAmongPolicies: the caller may compile the policy it
// evaluates and the list of all policies separately; the policy must still
// recognise itself as the winner.
func TestEvaluateFindsItselfAmongPolicies(t *testing.T) {
	self, listed := policy(t, "gpu"), policy(t, "gpu")
	out := Evaluate(PolicyInput{Policy: self, Policies: []*Policy{listed, policy(t, "lower", priority(-5))},
		Nodes: []*corev1.Node{node("a", xid(ago(time.Hour)))}, Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
	require.Empty(t, out.Holds)
	require.Len(t, out.Create, 1)
}
