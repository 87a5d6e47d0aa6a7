package plan

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// now is the fixed decision time of every test: Wednesday 4 March 2026,
// 12:00 UTC (13:00 in Europe/Berlin, which is on CET then).
var now = time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// xidMessage is how node-problem-detector writes a kubemedic-detect finding:
// a fixed rule reason and the specific reason as the first word of the message.
const xidMessage = "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus"

// --- nodes ---

type nodeOpt func(*corev1.Node)

// node is a Ready GPU node (8 nvidia.com/gpu, all allocatable: the
// evidence a GPU repair is verified by) with the given options applied;
// noGPUs takes the GPUs away.
func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ago(48 * time.Hour))},
		}},
	}
	gpus(8, 8)(n)
	for _, o := range opts {
		o(n)
	}
	return n
}

// labeled adds label key/value pairs.
func labeled(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// cond sets (adds or replaces) a node condition.
func cond(typ string, status corev1.ConditionStatus, reason, msg string, since time.Time) nodeOpt {
	return func(n *corev1.Node) {
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(since)}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == c.Type {
				n.Status.Conditions[i] = c
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
}

// xid is the detectors' GPUXidError condition, True since the given time, as
// NPD writes it (reason KubemedicDetect, specific reason in the message).
func xid(since time.Time) nodeOpt {
	return cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidMessage, since)
}

func quarantinedNode(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule})
}

func optedOut(n *corev1.Node) { n.Labels[v1alpha1.LabelRemediation] = v1alpha1.RemediationDisabled }

func notReady(n *corev1.Node) {
	cond(string(corev1.NodeReady), corev1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy", ago(time.Minute))(n)
}

// noGPUs removes every resource from capacity and allocatable: a node
// that shows no GPUs.
func noGPUs(n *corev1.Node) { n.Status.Capacity, n.Status.Allocatable = nil, nil }

// gpus sets the nvidia.com/gpu capacity and allocatable.
func gpus(capacity, allocatable int64) nodeOpt {
	return func(n *corev1.Node) {
		if n.Status.Capacity == nil {
			n.Status.Capacity, n.Status.Allocatable = corev1.ResourceList{}, corev1.ResourceList{}
		}
		n.Status.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(capacity, resource.DecimalSI)
		n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(allocatable, resource.DecimalSI)
	}
}

// --- policies ---

type policyOpt func(*v1alpha1.RemediationPolicy)

// policy compiles a policy named name that remediates XidRebootRequired with
// a two-step ladder (reset-gpu, then a drained reboot), after the options.
func policy(t *testing.T, name string, opts ...policyOpt) *Policy {
	t.Helper()
	rp := &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidRebootRequired}},
			Steps: []v1alpha1.RemediationStep{
				{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}},
				{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot", Drain: &v1alpha1.DrainSpec{}}},
			},
			// Generous by default so that each case trips only the limit it
			// is about.
			Safety: v1alpha1.Safety{MaxUnhealthy: intOrStr("100%"), MaxConcurrent: intOrStr("100%")},
		},
	}
	for _, o := range opts {
		o(rp)
	}
	p, err := Compile(rp)
	require.NoError(t, err)
	return p
}

// intOrStr is a count when s parses as one, else a string such as "20%".
func intOrStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func selecting(kv ...string) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: m}
	}
}

func matching(cs ...v1alpha1.ConditionMatch) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Conditions = cs }
}

func steps(ss ...v1alpha1.RemediationStep) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Steps = ss }
}

func priority(n int32) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Priority = n }
}

func paused(p *v1alpha1.RemediationPolicy) { p.Spec.Paused = true }

func dryRun(p *v1alpha1.RemediationPolicy) { p.Spec.DryRun = true }

func maxUnhealthy(s string) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxUnhealthy = intOrStr(s) }
}

func maxConcurrent(s string) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaxConcurrent = intOrStr(s) }
}

func failureDomain(key, max string) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) {
		p.Spec.Safety.FailureDomain = &v1alpha1.FailureDomain{TopologyKey: key, MaxConcurrent: *intOrStr(max)}
	}
}

func nodeCooldown(d time.Duration) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.NodeCooldown = &metav1.Duration{Duration: d} }
}

func capAttempts(max int32, window time.Duration) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) {
		p.Spec.Safety.AttemptCap = &v1alpha1.AttemptCap{MaxAttempts: max, Window: &metav1.Duration{Duration: window}}
	}
}

func windows(ws ...v1alpha1.MaintenanceWindow) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.MaintenanceWindows = ws }
}

// breakerStatus stores a BreakerOpen condition in the policy status, as the
// policy reconciler would have.
func breakerStatus(status metav1.ConditionStatus, reason, msg string) policyOpt {
	return func(p *v1alpha1.RemediationPolicy) {
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{
			Type: v1alpha1.PolicyBreakerOpen, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(ago(time.Hour)),
		})
	}
}

// --- operations ---

type opOpt func(*v1alpha1.NodeOperation)

// op is an operation on the node; without options it is a manual one that
// has not started.
func op(name, nodeName string, opts ...opOpt) *v1alpha1.NodeOperation {
	o := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: nodeName, StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}},
	}
	for _, f := range opts {
		f(o)
	}
	return o
}

// of makes the operation step idx of the episode of a policy.
func of(policy, episode string, idx int) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Spec.Policy = policy
		o.Spec.Step = "step-" + strconv.Itoa(idx)
		o.Labels[v1alpha1.LabelPolicy] = policy
		o.Labels[v1alpha1.LabelEpisode] = episode
		o.Labels[v1alpha1.LabelStepIndex] = strconv.Itoa(idx)
	}
}

func phase(p v1alpha1.NodeOperationPhase) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Status.Phase = p }
}

// ran sets the start and completion times and the final phase.
func ran(p v1alpha1.NodeOperationPhase, start, end time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Status.Phase = p
		o.Status.StartTime = &metav1.Time{Time: start}
		o.Status.CompletionTime = &metav1.Time{Time: end}
	}
}

// running sets a phase that holds a budget slot and a start time.
func running(p v1alpha1.NodeOperationPhase, start time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Status.Phase = p
		o.Status.StartTime = &metav1.Time{Time: start}
	}
}

func dryRunOp(o *v1alpha1.NodeOperation) { o.Spec.DryRun = true }

func quarantineOp(o *v1alpha1.NodeOperation) {
	o.Spec.Operation = ""
	o.Spec.Quarantine = true
}

func urgentOp(o *v1alpha1.NodeOperation) { o.Spec.Urgent = true }

// episodeOf is the episode of a condition of the given type that last
// changed at since.
func episodeOf(typ string, since time.Time) string {
	return Match{Condition: corev1.NodeCondition{Type: corev1.NodeConditionType(typ), LastTransitionTime: metav1.NewTime(since)}}.Episode()
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
