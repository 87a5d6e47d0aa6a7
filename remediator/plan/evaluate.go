package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Why a target node got no new operation. Simulate prints them; the policy
// status counts them.
const (
	HoldNotHeldYet   = "NotHeldYet"
	HoldOtherPolicy  = "OtherPolicy"
	HoldBreakerOpen  = v1alpha1.ReasonBreakerOpen
	HoldPaused       = v1alpha1.ReasonPaused
	HoldOptedOut     = v1alpha1.ReasonOptedOut
	HoldInProgress   = "InProgress"
	HoldQuarantined  = v1alpha1.ReasonQuarantined
	HoldNotReady     = "PolicyNotReady"
	HoldEpisodeEnded = "EpisodeEnded"
)

// PolicyInput is everything Evaluate decides from, as read from the API
// server. Objects are shared with the caller's cache and must not be changed.
type PolicyInput struct {
	Policy *Policy
	// Policies are every valid policy, Policy included, for overlaps.
	Policies []*Policy
	Nodes    []*corev1.Node
	// Ops are every NodeOperation, of all policies and manual ones.
	Ops []*v1alpha1.NodeOperation
	// Templates are the names of the NodeOperationTemplates that exist.
	Templates map[string]bool
	Now       time.Time
}

// PolicyPlan is what Evaluate decided.
type PolicyPlan struct {
	// Counts for the policy status.
	Selected, Unhealthy, Active, Quarantined int
	// Limit is maxUnhealthy as a node count.
	Limit int
	// Breaker is the circuit breaker after this evaluation.
	Breaker Breaker
	// MissingTemplates are step operations without a template: the policy
	// is not Ready and creates nothing.
	MissingTemplates []string
	// WindowError is why the maintenance windows cannot be read: the policy
	// is not Ready, and only its urgent steps start (Admit).
	WindowError error
	// Create are the operations to create, at most one per node.
	Create []*v1alpha1.NodeOperation
	// Holds say why target nodes got nothing new.
	Holds []Hold
	// Next is when the plan can change with no object changing; zero: never.
	Next time.Time
}

// Hold is a node the policy targets, or would, and why nothing was created.
type Hold struct {
	Node    string
	Reason  string
	Message string
}

// Evaluate decides what the policy does at now: the counts, the breaker, and
// the operation to create for each target node (the first step of a new
// episode, or the next step after a failed one).
//
// A node is a target when the policy selects it, one of its conditions has
// held for its `for`, the node is neither quarantined nor opted out, the
// policy wins the node among the policies whose condition has held (highest
// priority, then name), and the node has no unfinished operation at all.
func Evaluate(in PolicyInput) PolicyPlan {
	p := in.Policy
	spec := &p.Obj.Spec
	out := PolicyPlan{WindowError: p.windowErr}
	for _, st := range spec.Steps {
		if st.Operation != "" && !in.Templates[st.Operation] {
			out.MissingTemplates = append(out.MissingTemplates, st.Operation)
		}
	}
	byNode := opsByNode(in.Ops)
	for _, op := range in.Ops {
		if op.Spec.Policy == p.Name() && !op.Status.Phase.Finished() {
			out.Active++
		}
	}

	type target struct {
		node  *corev1.Node
		match Match
	}
	var targets []target
	for _, n := range in.Nodes {
		if !p.Selects(n) {
			continue
		}
		out.Selected++
		quarantined := Quarantined(n)
		if quarantined {
			out.Quarantined++
		}
		m, ok := p.Unhealthy(n, in.Now)
		if !ok {
			continue
		}
		out.Unhealthy++
		switch {
		case quarantined:
			out.hold(n.Name, HoldQuarantined, "the node is quarantined; a human removes the taint "+v1alpha1.TaintQuarantined)
		case OptedOut(n):
			out.hold(n.Name, HoldOptedOut, fmt.Sprintf("the node has the label %s=%s", v1alpha1.LabelRemediation, v1alpha1.RemediationDisabled))
		case !m.Held(in.Now):
			out.hold(n.Name, HoldNotHeldYet, fmt.Sprintf("%s=%s (%s) becomes a target at %s", m.Condition.Type, m.Condition.Status, m.Reason, m.HeldAt.UTC().Format(time.RFC3339)))
			out.next(m.HeldAt)
		default:
			targets = append(targets, target{n, m})
		}
	}

	out.Limit = unhealthyLimit(spec.Safety.MaxUnhealthy, out.Selected)
	out.Breaker = EvaluateBreaker(p.Obj, out.Unhealthy, out.Limit, in.Now)
	out.next(out.Breaker.Next)

	for _, t := range targets {
		n, m := t.node, t.match
		if w := Winner(in.Policies, n, in.Now); w != nil && w.Name() != p.Name() {
			out.hold(n.Name, HoldOtherPolicy, fmt.Sprintf("policy %s (priority %d) takes precedence", w.Name(), w.Obj.Spec.Priority))
			continue
		}
		if busy := unfinished(byNode[n.Name]); busy != nil {
			out.hold(n.Name, HoldInProgress, fmt.Sprintf("operation %s is %s", busy.Name, phaseOf(busy)))
			continue
		}
		idx, episode, why := nextStep(p, n.Name, m, byNode[n.Name])
		if idx < 0 {
			out.hold(n.Name, HoldEpisodeEnded, why)
			continue
		}
		switch {
		case len(out.MissingTemplates) > 0:
			out.hold(n.Name, HoldNotReady, fmt.Sprintf("templates %v do not exist", out.MissingTemplates))
		case spec.Paused:
			out.hold(n.Name, HoldPaused, "the policy is paused")
		case out.Breaker.Open:
			out.hold(n.Name, HoldBreakerOpen, "circuit breaker open: "+out.Breaker.Message)
		default:
			out.Create = append(out.Create, NewOperation(p, n, m, episode, idx))
		}
	}
	return out
}

func (o *PolicyPlan) hold(node, reason, msg string) {
	o.Holds = append(o.Holds, Hold{Node: node, Reason: reason, Message: msg})
}

func (o *PolicyPlan) next(t time.Time) {
	if !t.IsZero() && (o.Next.IsZero() || t.Before(o.Next)) {
		o.Next = t
	}
}

// nextStep returns the ladder index to run next and the episode it belongs
// to, or -1 and why nothing is to run: the last operation of the episode
// succeeded, was skipped, or was the quarantine.
//
// Usually the episode is the condition's. But a condition can be posted anew
// while a step runs: after a reboot, node-problem-detector restarts and sets
// a fault that survived the reboot True again with a new transition time. A
// policy operation on the node that failed at or after that time belongs to
// the same incident, so the ladder continues in its episode instead of
// starting over at step 0.
func nextStep(p *Policy, node string, m Match, ops []*v1alpha1.NodeOperation) (int, string, string) {
	episode := m.Episode()
	last, lastIdx := lastOfEpisode(p, episode, ops)
	if last == nil {
		var recent *v1alpha1.NodeOperation
		for _, op := range ops {
			if op.Spec.Policy != p.Name() || op.Status.CompletionTime == nil {
				continue
			}
			if recent == nil || op.Status.CompletionTime.After(recent.Status.CompletionTime.Time) {
				recent = op
			}
		}
		if recent == nil || recent.Status.Phase != v1alpha1.PhaseFailed ||
			recent.Status.CompletionTime.Before(&m.Condition.LastTransitionTime) || recent.Labels[v1alpha1.LabelEpisode] == "" {
			return 0, episode, ""
		}
		last, lastIdx = lastOfEpisode(p, recent.Labels[v1alpha1.LabelEpisode], ops)
		if last == nil {
			return 0, episode, ""
		}
		episode = recent.Labels[v1alpha1.LabelEpisode]
	}
	steps := p.Obj.Spec.Steps
	switch {
	case last.Status.Phase != v1alpha1.PhaseFailed:
		return -1, episode, fmt.Sprintf("operation %s of this episode ended %s", last.Name, phaseOf(last))
	case last.Spec.Quarantine || lastIdx >= len(steps):
		return -1, episode, fmt.Sprintf("quarantine %s failed; a human must act", last.Name)
	default:
		return lastIdx + 1, episode, ""
	}
}

// lastOfEpisode is the policy's operation with the highest step index in the
// episode, and that index.
func lastOfEpisode(p *Policy, episode string, ops []*v1alpha1.NodeOperation) (*v1alpha1.NodeOperation, int) {
	var last *v1alpha1.NodeOperation
	lastIdx := -1
	for _, op := range ops {
		// A dry run's record is not a step of a real ladder, and the
		// reverse: turning dryRun off acts on a fault that is already there.
		if op.Spec.Policy != p.Name() || op.Labels[v1alpha1.LabelEpisode] != episode || op.Spec.DryRun != p.Obj.Spec.DryRun {
			continue
		}
		idx, err := strconv.Atoi(op.Labels[v1alpha1.LabelStepIndex])
		if err != nil {
			continue
		}
		if idx > lastIdx {
			last, lastIdx = op, idx
		}
	}
	return last, lastIdx
}

// NewOperation builds the operation for ladder index idx of the episode of m;
// idx == len(steps) is the quarantine at the end of a ladder whose last step
// is an operation.
func NewOperation(p *Policy, n *corev1.Node, m Match, episode string, idx int) *v1alpha1.NodeOperation {
	steps := p.Obj.Spec.Steps
	op := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{
			Name: operationName(p, n.Name, episode, idx),
			Labels: map[string]string{
				v1alpha1.LabelPolicy:    p.Name(),
				v1alpha1.LabelNode:      LabelValue(n.Name),
				v1alpha1.LabelEpisode:   episode,
				v1alpha1.LabelStepIndex: strconv.Itoa(idx),
			},
		},
		Spec: v1alpha1.NodeOperationSpec{
			NodeName: n.Name,
			Policy:   p.Name(),
			DryRun:   p.Obj.Spec.DryRun,
			Trigger: &v1alpha1.TriggerCondition{
				Type:               string(m.Condition.Type),
				Status:             m.Condition.Status,
				Reason:             m.Reason,
				Message:            m.Condition.Message,
				LastTransitionTime: m.Condition.LastTransitionTime,
			},
		},
	}
	cond := fmt.Sprintf("%s=%s (%s) since %s", m.Condition.Type, m.Condition.Status, m.Reason, m.Condition.LastTransitionTime.UTC().Format(time.RFC3339))
	if idx >= len(steps) {
		op.Spec.Quarantine = true
		op.Spec.Urgent = true
		op.Spec.Reason = fmt.Sprintf("%s: every step of policy %s failed on %s; quarantining", v1alpha1.ReasonLadderExhausted, p.Name(), cond)
		return op
	}
	st := steps[idx]
	op.Spec.Step = st.Name
	op.Spec.StepAction = *st.StepAction.DeepCopy()
	op.Spec.Diagnostics = policies.StepDiagnostics(&p.Obj.Spec, &st).DeepCopy()
	op.Spec.Validate = policies.StepValidate(&p.Obj.Spec, &st).DeepCopy()
	op.Spec.Cordon = st.Cordon || st.Drain != nil
	op.Spec.Urgent = st.Urgent || st.Quarantine
	op.Spec.HealthyFor = st.HealthyFor.DeepCopy()
	op.Spec.RecoveryTimeout = st.RecoveryTimeout.DeepCopy()
	op.Spec.Reason = fmt.Sprintf("%s: step %d of %d (%s) of policy %s", cond, idx+1, len(steps), st.Name, p.Name())
	if st.Quarantine {
		op.Spec.Reason = fmt.Sprintf("%s: %s", v1alpha1.ReasonLadderExhausted, op.Spec.Reason)
	}
	return op
}

// opsByNode groups operations by target node.
func opsByNode(ops []*v1alpha1.NodeOperation) map[string][]*v1alpha1.NodeOperation {
	m := make(map[string][]*v1alpha1.NodeOperation)
	for _, op := range ops {
		m[op.Spec.NodeName] = append(m[op.Spec.NodeName], op)
	}
	return m
}

// unfinished returns an operation of the list that has not finished, if any.
func unfinished(ops []*v1alpha1.NodeOperation) *v1alpha1.NodeOperation {
	for _, op := range ops {
		if !op.Status.Phase.Finished() {
			return op
		}
	}
	return nil
}

// phaseOf is the phase for messages; a new operation has none yet.
func phaseOf(op *v1alpha1.NodeOperation) string {
	if op.Status.Phase == "" {
		return string(v1alpha1.PhasePending)
	}
	return string(op.Status.Phase)
}

// unhealthyLimit is maxUnhealthy as a node count. A percentage rounds down
// but, unless it is 0%, allows at least one node: "30%" of a 3-node pool
// would otherwise be 0, and the breaker would open on the first fault and
// never let the policy act. A count is taken as written; 0 means never act.
func unhealthyLimit(v *intstr.IntOrString, selected int) int {
	if v != nil && v.Type == intstr.String && strings.HasSuffix(v.StrVal, "%") {
		if pct, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err == nil && pct > 0 {
			return scaled(v, selected, 1)
		}
	}
	return scaled(v, selected, 0)
}

// operationName is OperationName, distinct for dry runs so that the record
// of a dry run never takes the name of the real operation.
func operationName(p *Policy, node, episode string, idx int) string {
	if p.Obj.Spec.DryRun {
		episode += "/dry-run"
	}
	return OperationName(p.Name(), node, episode, idx)
}
