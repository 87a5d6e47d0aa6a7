package plan

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// PassInput is what one pass of the policy reconciler decides from, as read
// from the API server. Objects are shared with the caller and not changed.
type PassInput struct {
	// Evaluate are the policies the pass evaluates, each with its status as
	// stored (the breaker's state lives there). The policy reconciler passes
	// the policy of its request; simulate the policies of its files.
	Evaluate []*v1alpha1.RemediationPolicy
	// Policies are every valid policy, compiled. A policy of Evaluate
	// replaces the one of its name here (or, when invalid, removes it).
	Policies []*Policy
	Nodes    []*corev1.Node
	// Ops are every NodeOperation, of all policies and manual ones.
	Ops []*v1alpha1.NodeOperation
	// Templates are the names of the NodeOperationTemplates that exist.
	Templates map[string]bool
	Now       time.Time
	// Admit also decides the admission of every operation to create, in
	// ledger order (see Pass). The policy reconciler leaves it off: the
	// operation reconciler admits its operations for real.
	Admit bool
}

// PassResult is what one pass decided.
type PassResult struct {
	// Policies are the decisions for PassInput.Evaluate, in its order.
	Policies []PolicyPass
}

// PolicyPass is what a pass decided for one policy.
type PolicyPass struct {
	// Policy is the compiled policy with Status as stored; nil when Invalid.
	Policy *Policy
	// Invalid is why the policy does not compile; it then acts on nothing,
	// and Plan is empty.
	Invalid error
	// Plan is plan.Evaluate's decision.
	Plan PolicyPlan
	// Status is the policy's status after the pass. The reconciler writes
	// it before it creates anything: admission reads the breaker from it.
	Status v1alpha1.RemediationPolicyStatus
	// BreakerClosed: the stored status had the breaker open and this pass
	// closes it (Plan.Breaker.Opened says it opened).
	BreakerClosed bool
	// Creates are Plan.Create in ledger order, each with its admission; set
	// only when PassInput.Admit.
	Creates []Creation
}

// Creation is an operation a pass creates and the admission it gets.
type Creation struct {
	Op        *v1alpha1.NodeOperation
	Admission Admission
}

// Pass is one pass of the policy reconciler over in.Evaluate: plan.Evaluate
// for each policy, the status to write (counts, Ready, Paused, the breaker),
// and, with in.Admit, the admission of each operation it would create.
//
// Admission decides as if the statuses were written first (the reconciler
// writes the breaker before it creates anything) and the operations were
// admitted one at a time in node-name order, each seeing the earlier ones as
// created and those started as reserved, as the admission ledger counts
// them. The operation reconciler admits in whatever order its queue holds,
// so which of several operations competing for one budget starts may differ
// from what Pass says.
//
// The policy reconciler and `kubemedic policy simulate` both call Pass, so
// that what simulate shows is what the controller does.
func Pass(in PassInput) PassResult {
	out := PassResult{Policies: make([]PolicyPass, len(in.Evaluate))}
	compiled := make(map[string]*Policy, len(in.Evaluate))
	invalid := map[string]bool{}
	for i, obj := range in.Evaluate {
		p, err := Compile(obj)
		if err != nil {
			out.Policies[i] = PolicyPass{Invalid: err, Status: invalidStatus(obj, err, in.Now)}
			invalid[obj.Name] = true
			continue
		}
		out.Policies[i].Policy = p
		compiled[obj.Name] = p
	}
	all := replacing(in.Policies, compiled, invalid)

	for i, obj := range in.Evaluate {
		pp := &out.Policies[i]
		if pp.Invalid != nil {
			continue
		}
		pp.Plan = Evaluate(PolicyInput{Policy: pp.Policy, Policies: all, Nodes: in.Nodes, Ops: in.Ops, Templates: in.Templates, Now: in.Now})
		pp.Status = policyStatus(obj, &pp.Plan, in.Now)
		wasOpen, _ := BreakerOpen(obj)
		pp.BreakerClosed = wasOpen && !pp.Plan.Breaker.Open
	}
	if in.Admit {
		admitInLedgerOrder(out.Policies, all, in)
	}
	return out
}

// replacing is all with the policies of evaluated in place of those of their
// name, and without those of the names in invalid, sorted by name.
func replacing(all []*Policy, evaluated map[string]*Policy, invalid map[string]bool) []*Policy {
	out := make([]*Policy, 0, len(all)+len(evaluated))
	for _, p := range all {
		if evaluated[p.Name()] == nil && !invalid[p.Name()] {
			out = append(out, p)
		}
	}
	for _, p := range evaluated {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// invalidStatus is the status of a policy that does not compile: Ready
// False, the rest as stored.
func invalidStatus(obj *v1alpha1.RemediationPolicy, err error, now time.Time) v1alpha1.RemediationPolicyStatus {
	st := *obj.Status.DeepCopy()
	st.ObservedGeneration = obj.Generation
	setPaused(&st, obj, now)
	SetCondition(&st.Conditions, v1alpha1.PolicyReady, metav1.ConditionFalse, v1alpha1.ReasonInvalid, err.Error(), obj.Generation, now)
	return st
}

// policyStatus is the stored status of obj updated with the plan: counts,
// Ready, Paused and the breaker.
func policyStatus(obj *v1alpha1.RemediationPolicy, pl *PolicyPlan, now time.Time) v1alpha1.RemediationPolicyStatus {
	st := *obj.Status.DeepCopy()
	gen := obj.Generation
	st.ObservedGeneration = gen
	setPaused(&st, obj, now)
	st.MatchedNodes, st.UnhealthyNodes = int32(pl.Selected), int32(pl.Unhealthy)
	st.ActiveOperations, st.QuarantinedNodes = int32(pl.Active), int32(pl.Quarantined)
	switch {
	case len(pl.MissingTemplates) > 0:
		SetCondition(&st.Conditions, v1alpha1.PolicyReady, metav1.ConditionFalse, v1alpha1.ReasonTemplateNotFound,
			fmt.Sprintf("NodeOperationTemplates %v do not exist; the policy starts nothing", pl.MissingTemplates), gen, now)
	case pl.WindowError != nil:
		SetCondition(&st.Conditions, v1alpha1.PolicyReady, metav1.ConditionFalse, v1alpha1.ReasonInvalid,
			fmt.Sprintf("%v; no maintenance window opens until it is fixed, so only urgent steps start", pl.WindowError), gen, now)
	default:
		SetCondition(&st.Conditions, v1alpha1.PolicyReady, metav1.ConditionTrue, v1alpha1.ReasonEvaluated,
			fmt.Sprintf("%d nodes selected, %d unhealthy, %d operations active", pl.Selected, pl.Unhealthy, pl.Active), gen, now)
	}

	b := pl.Breaker
	status := metav1.ConditionFalse
	if b.Open {
		status = metav1.ConditionTrue
	}
	SetCondition(&st.Conditions, v1alpha1.PolicyBreakerOpen, status, b.Reason, b.Message, gen, now)
	st.LastBreakerReset = b.ResetValue
	st.BreakerBelowLimitSince = nil
	if b.BelowLimitSince != nil {
		t := metav1.NewTime(*b.BelowLimitSince)
		st.BreakerBelowLimitSince = &t
	}
	return st
}

func setPaused(st *v1alpha1.RemediationPolicyStatus, obj *v1alpha1.RemediationPolicy, now time.Time) {
	if obj.Spec.Paused {
		SetCondition(&st.Conditions, v1alpha1.PolicyPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused, "spec.paused is set: no new operations start; running ones finish", obj.Generation, now)
	} else {
		SetCondition(&st.Conditions, v1alpha1.PolicyPaused, metav1.ConditionFalse, v1alpha1.ReasonActive, "the policy starts operations", obj.Generation, now)
	}
}

// admitInLedgerOrder sets Creates on every valid policy of pps: the
// operations of all of them, admitted one at a time in node-name order.
func admitInLedgerOrder(pps []PolicyPass, all []*Policy, in PassInput) {
	// Admission reads each policy's breaker from its status, which the
	// reconciler has written by the time anything is created.
	written := make(map[string]*Policy, len(pps))
	for i := range pps {
		if p := pps[i].Policy; p != nil {
			c := *p
			c.Obj = p.Obj.DeepCopy()
			c.Obj.Status = *pps[i].Status.DeepCopy()
			written[p.Name()] = &c
		}
	}
	admitting := make([]*Policy, len(all))
	for i, p := range all {
		admitting[i] = p
		if w := written[p.Name()]; w != nil {
			admitting[i] = w
		}
	}

	type pending struct {
		policy int
		op     *v1alpha1.NodeOperation
	}
	var creates []pending
	for i := range pps {
		for _, op := range pps[i].Plan.Create {
			creates = append(creates, pending{i, op})
		}
	}
	sort.SliceStable(creates, func(i, j int) bool {
		a, b := creates[i].op, creates[j].op
		if a.Spec.NodeName != b.Spec.NodeName {
			return a.Spec.NodeName < b.Spec.NodeName
		}
		return a.Name < b.Name
	})
	nodeByName := make(map[string]*corev1.Node, len(in.Nodes))
	for _, n := range in.Nodes {
		nodeByName[n.Name] = n
	}
	ops := append(make([]*v1alpha1.NodeOperation, 0, len(in.Ops)+len(creates)), in.Ops...)
	reserved := map[string]bool{}
	for _, c := range creates {
		op := c.op.DeepCopy()
		op.Status.Phase = v1alpha1.PhaseWaitingForBudget
		ops = append(ops, op)
		a := Admit(AdmitInput{Op: op, Node: nodeByName[op.Spec.NodeName], Policies: admitting,
			Nodes: in.Nodes, Ops: ops, Reserved: reserved, Now: in.Now})
		switch {
		case op.Spec.DryRun || a.Verdict == Skip:
			// A dry run records its verdict and ends Skipped: it takes no slot.
			op.Status.Phase = v1alpha1.PhaseSkipped
		case a.Verdict == Start:
			reserved[op.Name] = true
		}
		pps[c.policy].Creates = append(pps[c.policy].Creates, Creation{Op: c.op, Admission: a})
	}
}
