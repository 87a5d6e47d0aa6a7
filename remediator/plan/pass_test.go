package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// verdict is an admission as the tests write it: "Start", or the verdict and
// the reason ("Wait MaxConcurrent").
func verdict(a Admission) string {
	if a.Verdict == Start {
		return "Start"
	}
	return a.Verdict.String() + " " + a.Reason
}

// condition is a condition of a policy status as the tests write it:
// "True Evaluated".
func condition(st v1alpha1.RemediationPolicyStatus, typ string) string {
	c := apimeta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

func TestPass(t *testing.T) {
	held := ago(10 * time.Minute) // past the default for: 5m
	obj := func(name string, opts ...policyOpt) *v1alpha1.RemediationPolicy {
		return policy(t, name, opts...).Obj
	}
	annotated := func(k, v string) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) { p.Annotations = map[string]string{k: v} }
	}
	belowLimitSince := func(at time.Time) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) { p.Status.BreakerBelowLimitSince = &metav1.Time{Time: at} }
	}
	breakerCooldown := func(d time.Duration) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.BreakerCooldown = dur(d) }
	}
	trippedEarlier := breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerTripped, "4 unhealthy nodes, limit 1: starting nothing new")
	abc := func(opts ...nodeOpt) []*corev1.Node {
		return []*corev1.Node{node("c", append(opts, xid(held))...), node("b", append(opts, xid(held))...), node("a", append(opts, xid(held))...)}
	}

	for _, tc := range []struct {
		desc      string
		evaluate  []*v1alpha1.RemediationPolicy
		others    []*Policy // the other valid policies in the cluster
		nodes     []*corev1.Node
		ops       []*v1alpha1.NodeOperation
		templates []string // nil: every template the steps name exists
		// order are the nodes of the operations created, in ledger order,
		// with their admission.
		order  []string
		admits []string
		holds  map[string]string // node -> hold reason, of the first policy
		// conds are the Ready, Paused and BreakerOpen conditions of the
		// first policy's new status.
		conds [3]string
		check func(t *testing.T, pp PolicyPass)
	}{
		{
			desc:     "operations are admitted in node-name order, whatever the order of the nodes",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxConcurrent("2"))},
			nodes:    abc(),
			order:    []string{"a", "b", "c"}, admits: []string{"Start", "Start", "Wait MaxConcurrent"},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
			check: func(t *testing.T, pp PolicyPass) {
				require.Len(t, pp.Plan.Create, 3)
				require.Equal(t, int32(3), pp.Status.MatchedNodes)
				require.Equal(t, int32(3), pp.Status.UnhealthyNodes)
				require.Contains(t, pp.Creates[2].Admission.Message, "2 of 2 operations running")
			},
		},
		{
			desc:     "a running operation takes a slot before the new ones",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxConcurrent("2"))},
			nodes:    append(abc(), node("d", xid(held))),
			ops:      []*v1alpha1.NodeOperation{op("by-hand", "d", running(v1alpha1.PhaseRunning, ago(time.Minute)))},
			order:    []string{"a", "b", "c"}, admits: []string{"Start", "Wait MaxConcurrent", "Wait MaxConcurrent"},
			holds: map[string]string{"d": HoldInProgress},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
		},
		{
			desc:     "a dry-run operation ends Skipped and takes no slot",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxConcurrent("1"), dryRun)},
			nodes:    abc(),
			order:    []string{"a", "b", "c"}, admits: []string{"Start", "Start", "Start"},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
			check: func(t *testing.T, pp PolicyPass) {
				for _, c := range pp.Creates {
					require.True(t, c.Op.Spec.DryRun)
				}
			},
		},
		{
			desc:     "an operation past the attempt cap is skipped and its node quarantined",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", capAttempts(2, 24*time.Hour))},
			nodes:    []*corev1.Node{node("a", xid(held)), node("b", xid(held))},
			ops: []*v1alpha1.NodeOperation{
				op("first", "a", ran(v1alpha1.PhaseSucceeded, ago(5*time.Hour), ago(4*time.Hour))),
				op("second", "a", ran(v1alpha1.PhaseSucceeded, ago(3*time.Hour), ago(2*time.Hour))),
			},
			order: []string{"a", "b"}, admits: []string{"Skip AttemptCapReached", "Start"},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
			check: func(t *testing.T, pp PolicyPass) {
				require.True(t, pp.Creates[0].Admission.Quarantine)
			},
		},
		{
			desc:     "the breaker opens: nothing is created",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxUnhealthy("1"))},
			nodes:    abc(),
			holds:    map[string]string{"a": HoldBreakerOpen, "b": HoldBreakerOpen, "c": HoldBreakerOpen},
			conds:    [3]string{"True Evaluated", "False Active", "True " + v1alpha1.ReasonBreakerTripped},
			check: func(t *testing.T, pp PolicyPass) {
				require.True(t, pp.Plan.Breaker.Opened)
				require.False(t, pp.BreakerClosed)
				require.Empty(t, pp.Creates)
			},
		},
		{
			desc: "a reset breaker: admission reads the status the pass writes, not the open one stored",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxUnhealthy("1"), maxConcurrent("100%"),
				annotated(v1alpha1.AnnotationResetBreaker, "ticket-42"), trippedEarlier)},
			nodes: abc(),
			order: []string{"a", "b", "c"}, admits: []string{"Start", "Start", "Start"},
			conds: [3]string{"True Evaluated", "False Active", "False " + v1alpha1.ReasonBreakerManualReset},
			check: func(t *testing.T, pp PolicyPass) {
				require.Equal(t, "ticket-42", pp.Status.LastBreakerReset)
				require.True(t, pp.BreakerClosed)
			},
		},
		{
			desc:     "an open breaker back within the limit cools down and records since when",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxUnhealthy("3"), breakerCooldown(15*time.Minute), trippedEarlier)},
			nodes:    abc(),
			holds:    map[string]string{"a": HoldBreakerOpen, "b": HoldBreakerOpen, "c": HoldBreakerOpen},
			conds:    [3]string{"True Evaluated", "False Active", "True " + v1alpha1.ReasonBreakerCoolingDown},
			check: func(t *testing.T, pp PolicyPass) {
				require.Equal(t, &metav1.Time{Time: now}, pp.Status.BreakerBelowLimitSince)
				require.Equal(t, now.Add(15*time.Minute), pp.Plan.Next)
				require.False(t, pp.BreakerClosed)
			},
		},
		{
			desc: "an open breaker closes after its cooldown, and its operations start in the same pass",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", maxUnhealthy("3"), breakerCooldown(15*time.Minute),
				trippedEarlier, belowLimitSince(ago(20*time.Minute)))},
			nodes: []*corev1.Node{node("a", xid(held))},
			order: []string{"a"}, admits: []string{"Start"},
			conds: [3]string{"True Evaluated", "False Active", "False " + v1alpha1.ReasonBreakerWithinLimit},
			check: func(t *testing.T, pp PolicyPass) {
				require.True(t, pp.BreakerClosed)
				require.Nil(t, pp.Status.BreakerBelowLimitSince)
			},
		},
		{
			desc:      "a missing template: not Ready, nothing created",
			evaluate:  []*v1alpha1.RemediationPolicy{obj("gpu")},
			nodes:     []*corev1.Node{node("a", xid(held))},
			templates: []string{"reset-gpu"},
			holds:     map[string]string{"a": HoldNotReady},
			conds:     [3]string{"False " + v1alpha1.ReasonTemplateNotFound, "False Active", "False WithinLimit"},
			check: func(t *testing.T, pp PolicyPass) {
				require.Contains(t, apimeta.FindStatusCondition(pp.Status.Conditions, v1alpha1.PolicyReady).Message, "[reboot] do not exist")
			},
		},
		{
			desc:     "paused: nothing created",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", paused)},
			nodes:    []*corev1.Node{node("a", xid(held))},
			holds:    map[string]string{"a": HoldPaused},
			conds:    [3]string{"True Evaluated", "True Paused", "False WithinLimit"},
		},
		{
			desc: "an invalid policy: not Ready, its counts and breaker as stored",
			evaluate: []*v1alpha1.RemediationPolicy{func() *v1alpha1.RemediationPolicy {
				p := obj("gpu", trippedEarlier)
				p.Spec.Steps = nil
				p.Status.MatchedNodes = 7
				return p
			}()},
			nodes: []*corev1.Node{node("a", xid(held))},
			conds: [3]string{"False Invalid", "False Active", "True " + v1alpha1.ReasonBreakerTripped},
			check: func(t *testing.T, pp PolicyPass) {
				require.ErrorContains(t, pp.Invalid, "spec.steps: at least one step is required")
				require.Equal(t, int32(7), pp.Status.MatchedNodes)
				require.Nil(t, pp.Policy)
			},
		},
		{
			desc:     "the evaluated policy replaces the cluster's policy of its name",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", priority(0))},
			// With the cluster's gpu at priority 100, gpu would win the node.
			others: []*Policy{policy(t, "gpu", priority(100)), policy(t, "other", priority(50))},
			nodes:  []*corev1.Node{node("a", xid(held))},
			holds:  map[string]string{"a": HoldOtherPolicy},
			conds:  [3]string{"True Evaluated", "False Active", "False WithinLimit"},
		},
		{
			desc: "an invalid evaluated policy removes the cluster's policy of its name",
			evaluate: []*v1alpha1.RemediationPolicy{obj("gpu", priority(0)), func() *v1alpha1.RemediationPolicy {
				p := obj("other")
				p.Spec.Steps = nil
				return p
			}()},
			// The cluster's valid version of other would win the node.
			others: []*Policy{policy(t, "other", priority(50))},
			nodes:  []*corev1.Node{node("a", xid(held))},
			order:  []string{"a"}, admits: []string{"Start"},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
			check: func(t *testing.T, pp PolicyPass) {
				require.NoError(t, pp.Invalid)
			},
		},
		{
			desc: "two policies: the ledger counts one's operations against the other's budget",
			evaluate: []*v1alpha1.RemediationPolicy{
				obj("pool-a", selecting("pool", "a"), priority(10)),
				obj("everything", maxConcurrent("1")),
			},
			nodes: []*corev1.Node{node("x2", xid(held)), node("a1", labeled("pool", "a"), xid(held)), node("x1", xid(held))},
			// a1 is pool-a's, and takes the only slot of everything, which
			// selects a1 too.
			order: []string{"a1", "x1", "x2"}, admits: []string{"Start", "Wait MaxConcurrent", "Wait MaxConcurrent"},
			conds: [3]string{"True Evaluated", "False Active", "False WithinLimit"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			templates := map[string]bool{"reset-gpu": true, "reboot": true}
			if tc.templates != nil {
				templates = map[string]bool{}
				for _, n := range tc.templates {
					templates[n] = true
				}
			}
			out := Pass(PassInput{Evaluate: tc.evaluate, Policies: tc.others, Nodes: tc.nodes, Ops: tc.ops,
				Templates: templates, Now: now, Admit: true})
			require.Len(t, out.Policies, len(tc.evaluate))

			// Across policies, the ledger order shows in the verdicts (see
			// "two policies"); within one, in the order of Creates.
			got := map[string]string{}
			for _, pp := range out.Policies {
				for i, c := range pp.Creates {
					got[c.Op.Spec.NodeName] = verdict(c.Admission)
					if i > 0 {
						require.Less(t, pp.Creates[i-1].Op.Spec.NodeName, c.Op.Spec.NodeName, "ledger order")
					}
				}
			}
			want := map[string]string{}
			for i, n := range tc.order {
				want[n] = tc.admits[i]
			}
			require.Equal(t, want, got)

			pp := out.Policies[0]
			holds := map[string]string{}
			for _, h := range pp.Plan.Holds {
				holds[h.Node] = h.Reason
			}
			require.Equal(t, nonNil(tc.holds), holds)
			require.Equal(t, tc.conds, [3]string{condition(pp.Status, v1alpha1.PolicyReady), condition(pp.Status, v1alpha1.PolicyPaused), condition(pp.Status, v1alpha1.PolicyBreakerOpen)})
			require.Equal(t, tc.evaluate[0].Generation, pp.Status.ObservedGeneration)
			if tc.check != nil {
				tc.check(t, pp)
			}
		})
	}
}

func TestPassWithoutAdmit(t *testing.T) {
	held := ago(10 * time.Minute)
	out := Pass(PassInput{Evaluate: []*v1alpha1.RemediationPolicy{policy(t, "gpu").Obj},
		Nodes: []*corev1.Node{node("a", xid(held)), node("b", xid(held))}, Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
	require.Len(t, out.Policies[0].Plan.Create, 2)
	require.Nil(t, out.Policies[0].Creates, "the policy reconciler does not admit")
}

// The reconciler patches the status only when it changed: a pass on an
// unchanged cluster must give back the stored status, transition times and
// all, or every pass would write.
func TestPassKeepsAnUnchangedStatus(t *testing.T) {
	held := ago(10 * time.Minute)
	in := PassInput{Nodes: []*corev1.Node{node("a", xid(held))}, Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: ago(time.Hour)}
	obj := policy(t, "gpu").Obj
	obj.Generation = 3
	in.Evaluate = []*v1alpha1.RemediationPolicy{obj}
	first := Pass(in).Policies[0].Status
	require.Equal(t, int64(3), first.ObservedGeneration)

	obj.Status = first
	in.Now = now
	second := Pass(in).Policies[0].Status
	require.Equal(t, first, second)
	for _, c := range second.Conditions {
		require.Equal(t, ago(time.Hour), c.LastTransitionTime.Time, c.Type)
	}
}

// Pass shares its inputs with the caller's cache: it must change none.
func TestPassChangesNothing(t *testing.T) {
	held := ago(10 * time.Minute)
	objs := []*v1alpha1.RemediationPolicy{policy(t, "gpu", maxConcurrent("1"), breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerTripped, "old")).Obj}
	objs[0].Annotations = map[string]string{v1alpha1.AnnotationResetBreaker: "now"}
	others := []*Policy{policy(t, "gpu", paused), policy(t, "other", priority(-1))}
	nodes := []*corev1.Node{node("b", xid(held)), node("a", xid(held))}
	ops := []*v1alpha1.NodeOperation{op("by-hand", "c", running(v1alpha1.PhaseRunning, ago(time.Minute)))}
	wantObjs, wantNodes, wantOps := objs[0].DeepCopy(), deepCopyNodes(nodes), deepCopyOps(ops)
	wantOthers := []*v1alpha1.RemediationPolicy{others[0].Obj.DeepCopy(), others[1].Obj.DeepCopy()}

	out := Pass(PassInput{Evaluate: objs, Policies: others, Nodes: nodes, Ops: ops, Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now, Admit: true})
	require.Len(t, out.Policies[0].Creates, 2)
	require.Equal(t, v1alpha1.NodeOperationPhase(""), out.Policies[0].Creates[0].Op.Status.Phase, "a created operation is new")
	require.Equal(t, wantObjs, objs[0])
	require.Equal(t, wantNodes, nodes)
	require.Equal(t, wantOps, ops)
	require.Len(t, ops, 1)
	require.Equal(t, wantOthers, []*v1alpha1.RemediationPolicy{others[0].Obj, others[1].Obj})
	require.Equal(t, "b", nodes[0].Name, "the caller's node order")
}

// TestPassBadWindowIsNotReady: a time zone the API server let through makes
// the policy not Ready, saying why, while it still counts and creates (its
// operations then wait, TestBadWindowsFailClosed).
func TestPassBadWindowIsNotReady(t *testing.T) {
	obj := policy(t, "gpu").Obj.DeepCopy()
	obj.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berln"}}
	out := Pass(PassInput{Evaluate: []*v1alpha1.RemediationPolicy{obj}, Nodes: []*corev1.Node{node("a", xid(ago(time.Hour)))},
		Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now, Admit: true}).Policies[0]
	require.NoError(t, out.Invalid)
	ready := apimeta.FindStatusCondition(out.Status.Conditions, v1alpha1.PolicyReady)
	require.NotNil(t, ready)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, v1alpha1.ReasonInvalid, ready.Reason)
	require.Contains(t, ready.Message, `spec.safety.maintenanceWindows[0].timeZone: Invalid value: "Europe/Berln"`)
	require.Contains(t, ready.Message, "only urgent steps start")
	require.Len(t, out.Creates, 1)
	require.Equal(t, Wait, out.Creates[0].Admission.Verdict)
	require.Equal(t, v1alpha1.ReasonOutsideWindow, out.Creates[0].Admission.Reason)
}
