package cli

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// Status is what `kubemedic status` shows, and its -o json|yaml output. The
// field names are stable: scripts read them. Lists are never null, and
// times are RFC 3339 in UTC.
type Status struct {
	// Time is the time the status describes (--now, or the time of reading).
	Time metav1.Time `json:"time"`
	// Server is the API server's address.
	Server string `json:"server"`
	// Attention lists why the exit status is 1: each open breaker and each
	// quarantined node, in words. Empty when the exit status is 0.
	Attention []string `json:"attention"`
	// NodeConditions are the detector conditions (GPULost, GPUXidError, ...)
	// and the remediator's (GPUStackPodNotReady, GPUValidationFailed, ...)
	// that are True or Unknown, by node, then condition type.
	NodeConditions []NodeConditionStatus `json:"nodeConditions"`
	// ActiveOperations are the NodeOperations not yet Succeeded, Failed or
	// Skipped, one group per phase in lifecycle order; empty groups are left out.
	ActiveOperations []PhaseGroup `json:"activeOperations"`
	// Policies are the RemediationPolicies, by name.
	Policies []PolicyStatus `json:"policies"`
	// QuarantinedNodes are the nodes with the kubemedic.io/quarantined
	// taint, by name, each with its NodeOperations.
	QuarantinedNodes []QuarantinedNode `json:"quarantinedNodes"`
	// ReclaimNotices are the pods with the janitor's
	// kubemedic.io/reclaim-notice annotation, by namespace and name.
	ReclaimNotices []ReclaimNotice `json:"reclaimNotices"`
	// Validation is the active GPU tests outside of a repair
	// (ValidationPolicies): each policy, and each node's last result,
	// test running now and when it is due.
	Validation Validation `json:"validation"`
}

// NodeConditionStatus is one detector condition of a node that is not OK.
type NodeConditionStatus struct {
	Node      string                 `json:"node"`
	Condition string                 `json:"condition"`
	Status    corev1.ConditionStatus `json:"status"`
	// Reason is the effective reason (v1alpha1.EffectiveReason): for a
	// condition node-problem-detector wrote, the first word of the message.
	Reason  string      `json:"reason"`
	Since   metav1.Time `json:"since"`
	Message string      `json:"message,omitempty"`
}

// PhaseGroup is the active operations in one phase.
type PhaseGroup struct {
	Phase      v1alpha1.NodeOperationPhase `json:"phase"`
	Operations []OperationStatus           `json:"operations"`
}

// OperationStatus is one NodeOperation.
type OperationStatus struct {
	Name string `json:"name"`
	Node string `json:"node"`
	// Policy is empty for an operation a human created.
	Policy string `json:"policy,omitempty"`
	// Step is the ladder step, "quarantine" for a quarantine, or the
	// operation's template for a manual operation.
	Step    string                      `json:"step"`
	Phase   v1alpha1.NodeOperationPhase `json:"phase"`
	Created metav1.Time                 `json:"created"`
	// Finished is the completion time of a finished operation.
	Finished *metav1.Time `json:"finished,omitempty"`
	Message  string       `json:"message,omitempty"`
	DryRun   bool         `json:"dryRun,omitempty"`
	// Diagnostics says that the operation's capture kept a bundle, and
	// where ("Captured gpu-a/op.tar.gz"), or how it went without one;
	// empty when the step captures nothing (kubemedic diag get fetches it).
	Diagnostics string `json:"diagnostics,omitempty"`
	// ExcludedGPU says that the operation took one GPU out of scheduling
	// instead of cordoning the node: "GPU-… by DeviceTaintRule name".
	ExcludedGPU string `json:"excludedGPU,omitempty"`
}

// PolicyStatus is one RemediationPolicy as its status last recorded it.
type PolicyStatus struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	DryRun bool   `json:"dryRun"`
	// NotReady is the Ready condition's reason and message when it is not
	// True (an invalid policy, a missing template); empty otherwise.
	NotReady string `json:"notReady,omitempty"`
	// Budget is maxConcurrent against status.activeOperations.
	Budget Budget `json:"budget"`
	// MatchedNodes, UnhealthyNodes and QuarantinedNodes are the status counts.
	MatchedNodes     int32         `json:"matchedNodes"`
	UnhealthyNodes   int32         `json:"unhealthyNodes"`
	QuarantinedNodes int32         `json:"quarantinedNodes"`
	Breaker          BreakerStatus `json:"breaker"`
	Window           WindowStatus  `json:"window"`
}

// Budget is the policy's concurrency budget.
type Budget struct {
	// Active is status.activeOperations.
	Active int32 `json:"active"`
	// Limit is maxConcurrent as a count of status.matchedNodes (at least 1).
	Limit int `json:"limit"`
	// MaxConcurrent is spec.safety.maxConcurrent as written (defaulted).
	MaxConcurrent string `json:"maxConcurrent"`
}

// Breaker states.
const (
	BreakerClosed = "Closed"
	BreakerOpen   = "Open"
	// BreakerUnknown: the status has no BreakerOpen condition yet, or it is
	// Unknown (the remediator has not evaluated the policy).
	BreakerUnknown = "Unknown"
)

// BreakerStatus is the policy's BreakerOpen condition.
type BreakerStatus struct {
	State   string       `json:"state"`
	Reason  string       `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
}

// WindowStatus is where the policy stands with its maintenance windows.
type WindowStatus struct {
	// Windows is the number of maintenance windows; 0 means any time.
	Windows int `json:"windows"`
	// Open: non-urgent operations may start now.
	Open bool `json:"open"`
	// Until is when the open window closes; NextOpen is when the next one
	// opens, while none is open.
	Until    *metav1.Time `json:"until,omitempty"`
	NextOpen *metav1.Time `json:"nextOpen,omitempty"`
	// Error is why the windows cannot be read: none opens.
	Error string `json:"error,omitempty"`
}

// QuarantinedNode is a node with the quarantine taint.
type QuarantinedNode struct {
	Node string `json:"node"`
	// Since is the taint's timeAdded, when set.
	Since         *metav1.Time `json:"since,omitempty"`
	Unschedulable bool         `json:"unschedulable"`
	// Attempts are the NodeOperations on the node still kept, oldest first.
	Attempts []OperationStatus `json:"attempts"`
}

// Notice states, from decide.Notice.
const (
	NoticeClaimed   = "Claimed"   // a janitor claimed the pod and is sending
	NoticeNoticed   = "Noticed"   // the owner was told; the deadline runs
	NoticeReclaimed = "Reclaimed" // the janitor acted (or, in dry run, would have)
	NoticeInvalid   = "Invalid"   // the annotation does not parse
)

// ReclaimNotice is one pod with the janitor's notice.
type ReclaimNotice struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Owner is who was told (the notice's recipient), else whom the pod's
	// kubemedic.io/owner names, else empty.
	Owner    string       `json:"owner,omitempty"`
	State    string       `json:"state"`
	Rule     decide.Rule  `json:"rule,omitempty"`
	Evidence string       `json:"evidence,omitempty"`
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// SnoozeUntil is the owner's kubemedic.io/reclaim-snooze-until as asked
	// (the janitor caps it at the policy's maxSnooze past the deadline).
	SnoozeUntil *metav1.Time `json:"snoozeUntil,omitempty"`
	DryRun      bool         `json:"dryRun,omitempty"`
	// Problem is why the notice or the snooze cannot be read.
	Problem string `json:"problem,omitempty"`
}

// statusInput is what status reads from the API server.
type statusInput struct {
	Server   string
	Nodes    []corev1.Node
	Ops      []v1alpha1.NodeOperation
	Policies []v1alpha1.RemediationPolicy
	// Pods are metadata only: the notice lives in an annotation.
	Pods []metav1.PartialObjectMetadata
	// OpsErr is why Ops could not be read where they are extra evidence
	// (status --hardware's bundles).
	OpsErr error
	// ValidationPolicies and NodeValidations are the GPU tests outside of
	// a repair; ValidationErr is why they could not be read.
	ValidationPolicies []v1alpha1.ValidationPolicy
	NodeValidations    []v1alpha1.NodeValidation
	ValidationErr      error
}

// phaseOrder is the lifecycle order of the active phases.
var phaseOrder = []v1alpha1.NodeOperationPhase{v1alpha1.PhasePending, v1alpha1.PhaseWaitingForBudget,
	v1alpha1.PhaseCordoning, v1alpha1.PhaseCapturing, v1alpha1.PhaseDraining, v1alpha1.PhaseRunning, v1alpha1.PhaseVerifying, v1alpha1.PhaseValidating}

// buildStatus describes the fleet at now from the objects read. It is pure
// and does not change in.
func buildStatus(in statusInput, now time.Time) Status {
	st := Status{
		Time: metav1.NewTime(now.UTC().Truncate(time.Second)), Server: in.Server,
		Attention: []string{}, NodeConditions: []NodeConditionStatus{}, ActiveOperations: []PhaseGroup{},
		Policies: []PolicyStatus{}, QuarantinedNodes: []QuarantinedNode{}, ReclaimNotices: []ReclaimNotice{},
		Validation: Validation{Policies: []ValidationPolicyStatus{}, Nodes: []ValidatedNode{}},
	}

	nodes := slices.Clone(in.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	ops := slices.Clone(in.Ops)
	slices.SortStableFunc(ops, func(a, b v1alpha1.NodeOperation) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})

	// The detectors' conditions, and those the remediator sets itself: the
	// GPU stack's health and the GPU test's GPUValidationFailed.
	types := []string{v1alpha1.ConditionGPUValidationFailed}
	for t := range v1alpha1.ConditionReasons {
		types = append(types, t)
	}
	for t := range v1alpha1.StackConditionReasons {
		types = append(types, t)
	}
	sort.Strings(types)
	for i := range nodes {
		n := &nodes[i]
		for _, typ := range types {
			c := findNodeCondition(n, typ)
			if c == nil || (c.Status != corev1.ConditionTrue && c.Status != corev1.ConditionUnknown) {
				continue
			}
			st.NodeConditions = append(st.NodeConditions, NodeConditionStatus{Node: n.Name, Condition: typ, Status: c.Status,
				Reason: v1alpha1.EffectiveReason(typ, c.Reason, c.Message), Since: c.LastTransitionTime, Message: c.Message})
		}
	}

	byPhase := map[v1alpha1.NodeOperationPhase][]OperationStatus{}
	for i := range ops {
		if !ops[i].Status.Phase.Finished() {
			o := operationStatus(&ops[i])
			byPhase[o.Phase] = append(byPhase[o.Phase], o)
		}
	}
	for _, ph := range phaseOrder {
		if len(byPhase[ph]) > 0 {
			st.ActiveOperations = append(st.ActiveOperations, PhaseGroup{Phase: ph, Operations: byPhase[ph]})
		}
		delete(byPhase, ph)
	}
	// Phases this CLI does not know (a newer remediator), by name.
	for _, ph := range slices.Sorted(maps.Keys(byPhase)) {
		st.ActiveOperations = append(st.ActiveOperations, PhaseGroup{Phase: ph, Operations: byPhase[ph]})
	}

	pols := slices.Clone(in.Policies)
	sort.Slice(pols, func(i, j int) bool { return pols[i].Name < pols[j].Name })
	for i := range pols {
		ps := policyStatus(&pols[i], now)
		if ps.Breaker.State == BreakerOpen {
			st.Attention = append(st.Attention, fmt.Sprintf("policy %s: breaker open: %s", ps.Name, ps.Breaker.Message))
		}
		st.Policies = append(st.Policies, ps)
	}

	for i := range nodes {
		n := &nodes[i]
		if !plan.Quarantined(n) {
			continue
		}
		q := QuarantinedNode{Node: n.Name, Unschedulable: n.Spec.Unschedulable, Attempts: []OperationStatus{}}
		for _, t := range n.Spec.Taints {
			if t.Key == v1alpha1.TaintQuarantined && t.TimeAdded != nil {
				q.Since = t.TimeAdded
				break
			}
		}
		for j := range ops {
			if ops[j].Spec.NodeName == n.Name {
				q.Attempts = append(q.Attempts, operationStatus(&ops[j]))
			}
		}
		st.QuarantinedNodes = append(st.QuarantinedNodes, q)
		st.Attention = append(st.Attention, fmt.Sprintf("node %s: quarantined", n.Name))
	}

	for i := range in.Pods {
		if rn, ok := reclaimNotice(&in.Pods[i]); ok {
			st.ReclaimNotices = append(st.ReclaimNotices, rn)
		}
	}
	sort.Slice(st.ReclaimNotices, func(i, j int) bool {
		a, b := st.ReclaimNotices[i], st.ReclaimNotices[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Pod < b.Pod)
	})

	st.Validation = buildValidation(in, nodes, now)
	if st.Validation.Unknown != "" {
		st.Attention = append(st.Attention, "GPU validation unknown: "+st.Validation.Unknown)
	}
	return st
}

func findNodeCondition(n *corev1.Node, typ string) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if string(n.Status.Conditions[i].Type) == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func operationStatus(op *v1alpha1.NodeOperation) OperationStatus {
	o := OperationStatus{Name: op.Name, Node: op.Spec.NodeName, Policy: op.Spec.Policy, Step: op.Spec.Step,
		Phase: op.Status.Phase, Created: op.CreationTimestamp, Message: op.Status.Message, DryRun: op.Spec.DryRun}
	switch {
	case o.Step != "":
	case op.Spec.Quarantine:
		o.Step = "quarantine"
	default:
		o.Step = op.Spec.Operation
	}
	// An operation the remediator has not reconciled yet has no phase: it
	// is at the start of the lifecycle.
	if o.Phase == "" {
		o.Phase = v1alpha1.PhasePending
	}
	if op.Status.Phase.Finished() {
		o.Finished = op.Status.CompletionTime
	}
	if ex := op.Status.Exclusion; ex != nil && ex.Method == v1alpha1.ExclusionDeviceTaintRule {
		gpu := ex.Device
		if g := op.Status.GPU; g != nil && g.UUID != "" {
			gpu = g.UUID
		}
		o.ExcludedGPU = gpu + " by DeviceTaintRule " + ex.DeviceTaintRule
	}
	if d := op.Status.Diagnostics; d != nil {
		o.Diagnostics = string(d.Result)
		if b := d.Bundle; b != nil {
			o.Diagnostics += " " + b.Key
			if !b.Stored {
				o.Diagnostics += " (in the node's spool)"
			}
		}
	}
	return o
}

func policyStatus(p *v1alpha1.RemediationPolicy, now time.Time) PolicyStatus {
	// The defaults the remediator applies (maxConcurrent, time zones).
	obj := p.DeepCopy()
	policies.SetDefaults(obj)
	sf := obj.Spec.Safety
	ps := PolicyStatus{Name: p.Name, Paused: p.Spec.Paused, DryRun: p.Spec.DryRun,
		MatchedNodes: p.Status.MatchedNodes, UnhealthyNodes: p.Status.UnhealthyNodes, QuarantinedNodes: p.Status.QuarantinedNodes}

	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyReady); c != nil && c.Status != metav1.ConditionTrue {
		ps.NotReady = c.Reason + ": " + c.Message
	}

	ps.Budget = Budget{Active: p.Status.ActiveOperations, Limit: 1, MaxConcurrent: sf.MaxConcurrent.String()}
	// As the remediator's admission counts it: rounded down, at least 1.
	if n, err := intstr.GetScaledValueFromIntOrPercent(sf.MaxConcurrent, int(p.Status.MatchedNodes), false); err == nil && n > 1 {
		ps.Budget.Limit = n
	}

	ps.Breaker.State = BreakerUnknown
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen); c != nil {
		switch c.Status {
		case metav1.ConditionTrue:
			ps.Breaker.State = BreakerOpen
		case metav1.ConditionFalse:
			ps.Breaker.State = BreakerClosed
		}
		since := c.LastTransitionTime
		ps.Breaker.Reason, ps.Breaker.Message, ps.Breaker.Since = c.Reason, c.Message, &since
	}

	ps.Window.Windows = len(sf.MaintenanceWindows)
	path := field.NewPath("spec", "safety", "maintenanceWindows")
	var ws []policies.Window
	var errs field.ErrorList
	for i, mw := range sf.MaintenanceWindows {
		w, e := policies.ParseWindow(mw, path.Index(i))
		ws, errs = append(ws, w), append(errs, e...)
	}
	if len(errs) > 0 {
		ps.Window.Error = errs.ToAggregate().Error()
		return ps
	}
	open, next := plan.InWindow(ws, now)
	ps.Window.Open = open
	if !next.IsZero() {
		t := metav1.NewTime(next.UTC())
		if open {
			ps.Window.Until = &t
		} else {
			ps.Window.NextOpen = &t
		}
	}
	return ps
}

// reclaimNotice reads the janitor's notice on a pod; ok is false when the
// pod has none.
func reclaimNotice(pod *metav1.PartialObjectMetadata) (ReclaimNotice, bool) {
	raw, found := pod.Annotations[v1alpha1.AnnotationReclaimNotice]
	if !found {
		return ReclaimNotice{}, false
	}
	rn := ReclaimNotice{Namespace: pod.Namespace, Pod: pod.Name}
	if r, _, ok := notify.ResolveOwner(pod, nil, ""); ok {
		rn.Owner = r.String()
	}
	n, err := decide.ParseNotice(raw)
	switch {
	case err != nil:
		rn.State, rn.Problem = NoticeInvalid, err.Error()
	case n == nil:
		rn.State, rn.Problem = NoticeInvalid, fmt.Sprintf("annotation %s is empty", v1alpha1.AnnotationReclaimNotice)
	default:
		rn.Rule, rn.Evidence, rn.DryRun = n.Rule, n.Evidence, n.DryRun
		if n.Recipient != "" {
			rn.Owner = n.Recipient
		}
		switch {
		case !n.ReclaimedAt.IsZero():
			rn.State = NoticeReclaimed
		case n.Noticed():
			rn.State = NoticeNoticed
		default:
			rn.State = NoticeClaimed
		}
		if n.Noticed() {
			d := metav1.NewTime(n.Deadline.UTC())
			rn.Deadline = &d
		}
	}
	if s, ok := pod.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil]; ok {
		if t, err := decide.ParseTime(s); err != nil {
			rn.Problem = joinProblem(rn.Problem, fmt.Sprintf("annotation %s: %v", v1alpha1.AnnotationReclaimSnoozeUntil, err))
		} else {
			u := metav1.NewTime(t.UTC())
			rn.SnoozeUntil = &u
		}
	}
	return rn, true
}

func joinProblem(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Validation is the active GPU tests outside of a repair: the
// ValidationPolicies, and each node's record (its NodeValidation) as the
// status reads it. Missing evidence is never a pass: a node without a
// result is "never tested", a node with the join taint and no test is
// waiting for it, and records that could not be read make the whole
// section Unknown.
type Validation struct {
	// Unknown is why the ValidationPolicies or NodeValidations could not
	// be read; then nothing below is evidence, and Policies and Nodes are
	// empty.
	Unknown string `json:"unknown,omitempty"`
	// Policies are the ValidationPolicies, by name.
	Policies []ValidationPolicyStatus `json:"policies"`
	// Counts are the nodes of Nodes by state, and those left out.
	Counts ValidationCounts `json:"counts"`
	// Nodes are the nodes a ValidationPolicy selects, and the nodes with
	// the taint kubemedic.io/unvalidated that none selects; most pressing
	// state first (the order of ValidationStates), then by name.
	Nodes []ValidatedNode `json:"nodes"`
}

// ValidationPolicyStatus is one ValidationPolicy as its status last
// recorded it.
type ValidationPolicyStatus struct {
	Name string `json:"name"`
	// Test is the NodeOperationTemplate that tests (spec.validate.operation).
	Test string `json:"test"`
	// Every is spec.background.every, and MaxConcurrent the nodes tested
	// at once in the background; both empty for a policy that tests only
	// nodes with the join taint.
	Every         *metav1.Duration `json:"every,omitempty"`
	MaxConcurrent int32            `json:"maxConcurrent,omitempty"`
	Suspended     bool             `json:"suspended"`
	// The status counts: nodes selected, being tested, by last result,
	// waiting for a background test, and with the join taint.
	Matched     int32 `json:"matched"`
	Validating  int32 `json:"validating"`
	Passed      int32 `json:"passed"`
	Failed      int32 `json:"failed"`
	Due         int32 `json:"due"`
	Unvalidated int32 `json:"unvalidated"`
	// Ready is the Ready condition's status (its template exists);
	// Unknown while the remediator has not evaluated the policy.
	// NotReady is its reason and message when not True.
	Ready    metav1.ConditionStatus `json:"ready"`
	NotReady string                 `json:"notReady,omitempty"`
	// Problem is what else keeps the counts or the tests from being
	// current: a selector that does not parse, a status of an older
	// generation.
	Problem string `json:"problem,omitempty"`
}

// Node states of Validation, most pressing first.
const (
	// ValidationStateFailed: the last test failed (GPUValidationFailed).
	ValidationStateFailed = "Failed"
	// ValidationStateWaitingForJoin: the node carries the taint
	// kubemedic.io/unvalidated, no test runs and none failed.
	ValidationStateWaitingForJoin = "WaitingForJoinTest"
	// ValidationStateUnknown: the record says something this CLI cannot
	// read as a result.
	ValidationStateUnknown = "Unknown"
	// ValidationStateTesting: a test runs now.
	ValidationStateTesting = "Testing"
	// ValidationStateDue: the node waits for a background test: it has no
	// result, or its last is older than the policy's every.
	ValidationStateDue = "Due"
	// ValidationStatePassed: the last test passed and the next is not due.
	ValidationStatePassed = "Passed"
	// ValidationStateNotTested: selected, no result, and nothing due: a
	// policy without a background section tests only nodes with the join
	// taint, and a node without GPUs is not tested in the background.
	ValidationStateNotTested = "NotTested"
)

// ValidationStates is the order of the states in Validation.Nodes.
var ValidationStates = []string{ValidationStateFailed, ValidationStateWaitingForJoin, ValidationStateUnknown,
	ValidationStateTesting, ValidationStateDue, ValidationStatePassed, ValidationStateNotTested}

// ValidationCounts counts the nodes by state.
type ValidationCounts struct {
	Failed         int `json:"failed"`
	WaitingForJoin int `json:"waitingForJoinTest"`
	Unknown        int `json:"unknown"`
	Testing        int `json:"testing"`
	Due            int `json:"due"`
	Passed         int `json:"passed"`
	NotTested      int `json:"notTested"`
	// NotSelected is the nodes no ValidationPolicy selects and without the
	// join taint: not tested, and not in Nodes.
	NotSelected int `json:"notSelected"`
}

// ValidatedNode is one node's GPU tests outside of a repair.
type ValidatedNode struct {
	Node string `json:"node"`
	// Policy is the ValidationPolicy that tests the node, as the
	// remediator picks it (the first by name whose selector matches);
	// empty when none selects it.
	Policy string `json:"policy,omitempty"`
	State  string `json:"state"`
	// Unvalidated: the node carries the taint kubemedic.io/unvalidated, and
	// serves only pods that tolerate it until a test passes.
	Unvalidated bool `json:"unvalidated"`
	// Last is the last test that ended with a result.
	Last *ValidationTestResult `json:"last,omitempty"`
	// Current is the test running now.
	Current *ValidationTestRun `json:"current,omitempty"`
	// DueTime is when the next background test is due: the last result's
	// end plus the policy's every, or the record's nextTime when earlier.
	// Nil with no result, and for a policy without a background section.
	DueTime *metav1.Time `json:"dueTime,omitempty"`
	// Due: the node waits for a background test (never tested, or due).
	Due bool `json:"due"`
	// NextTime is the record's status.nextTime: when the remediator tries
	// the next background test (after one was put off, a retry time).
	NextTime    *metav1.Time `json:"nextTime,omitempty"`
	Preemptions int32        `json:"preemptions,omitempty"`
	// Message is the record's status.message: what happened last.
	Message string `json:"message,omitempty"`
	// Detail is what status adds: why no test starts, or why the record
	// is not the node's.
	Detail string `json:"detail,omitempty"`
}

// ValidationTestResult is a test that ended: Passed or Failed.
type ValidationTestResult struct {
	Result v1alpha1.ValidationResult `json:"result"`
	Time   *metav1.Time              `json:"time,omitempty"`
	// Test is the report's test (dcgm, nccl, nvbandwidth), else the
	// template.
	Test string `json:"test,omitempty"`
	// GPUs is how many GPUs the report judged, FailedGPUs how many failed.
	GPUs       int    `json:"gpus"`
	FailedGPUs int    `json:"failedGPUs"`
	Message    string `json:"message,omitempty"`
}

// ValidationTestRun is the test running now.
type ValidationTestRun struct {
	Mode     v1alpha1.ValidationMode `json:"mode"`
	Template string                  `json:"template,omitempty"`
	// Since is when the attempt's pod was created.
	Since   *metav1.Time `json:"since,omitempty"`
	Attempt int32        `json:"attempt,omitempty"`
	Pod     string       `json:"pod,omitempty"`
}

// validationPicker picks a node's ValidationPolicy as the remediator
// does: the first by name whose selector matches.
type validationPicker struct {
	pols []*v1alpha1.ValidationPolicy
	sels []labels.Selector // nil: the selector does not parse, selects nothing
}

func (p validationPicker) pick(n *corev1.Node) *v1alpha1.ValidationPolicy {
	for i, s := range p.sels {
		if s != nil && s.Matches(labels.Set(n.Labels)) {
			return p.pols[i]
		}
	}
	return nil
}

// buildValidation describes the GPU tests outside of a repair; nodes are
// sorted by name.
func buildValidation(in statusInput, nodes []corev1.Node, now time.Time) Validation {
	v := Validation{Policies: []ValidationPolicyStatus{}, Nodes: []ValidatedNode{}}
	if in.ValidationErr != nil {
		v.Unknown = in.ValidationErr.Error()
		return v
	}
	pols := make([]*v1alpha1.ValidationPolicy, 0, len(in.ValidationPolicies))
	for i := range in.ValidationPolicies {
		pols = append(pols, &in.ValidationPolicies[i])
	}
	sort.Slice(pols, func(i, j int) bool { return pols[i].Name < pols[j].Name })
	picker := validationPicker{pols: pols}
	for _, p := range pols {
		ps := validationPolicyStatus(p)
		sel := labels.Everything()
		if p.Spec.NodeSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
			if err != nil {
				sel = nil
				ps.Problem = joinProblem(ps.Problem, fmt.Sprintf("spec.nodeSelector does not parse, which stops the remediator's tests: %v", err))
			} else {
				sel = s
			}
		}
		picker.sels = append(picker.sels, sel)
		v.Policies = append(v.Policies, ps)
	}
	records := make(map[string]*v1alpha1.NodeValidation, len(in.NodeValidations))
	for i := range in.NodeValidations {
		records[in.NodeValidations[i].Name] = &in.NodeValidations[i]
	}
	for i := range nodes {
		n := &nodes[i]
		vn, ok := validatedNode(n, picker.pick(n), records[n.Name], now)
		if !ok {
			v.Counts.NotSelected++
			continue
		}
		v.Nodes = append(v.Nodes, vn)
		switch vn.State {
		case ValidationStateFailed:
			v.Counts.Failed++
		case ValidationStateWaitingForJoin:
			v.Counts.WaitingForJoin++
		case ValidationStateUnknown:
			v.Counts.Unknown++
		case ValidationStateTesting:
			v.Counts.Testing++
		case ValidationStateDue:
			v.Counts.Due++
		case ValidationStatePassed:
			v.Counts.Passed++
		case ValidationStateNotTested:
			v.Counts.NotTested++
		}
	}
	// Stable: nodes came by name.
	slices.SortStableFunc(v.Nodes, func(a, b ValidatedNode) int {
		return cmp.Compare(slices.Index(ValidationStates, a.State), slices.Index(ValidationStates, b.State))
	})
	return v
}

func validationPolicyStatus(p *v1alpha1.ValidationPolicy) ValidationPolicyStatus {
	s := &p.Status
	ps := ValidationPolicyStatus{Name: p.Name, Test: p.Spec.Validate.Operation, Suspended: p.Spec.Suspend,
		Matched: s.Matched, Validating: s.Validating, Passed: s.Passed, Failed: s.Failed, Due: s.Due, Unvalidated: s.Unvalidated,
		Ready: metav1.ConditionUnknown}
	if b := p.Spec.Background; b != nil {
		every := b.Every
		ps.Every, ps.MaxConcurrent = &every, b.MaxConcurrent
	}
	if c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.PolicyReady); c != nil {
		ps.Ready = c.Status
		if c.Status != metav1.ConditionTrue {
			ps.NotReady = c.Reason + ": " + c.Message
		}
	}
	if s.ObservedGeneration != 0 && s.ObservedGeneration < p.Generation {
		ps.Problem = fmt.Sprintf("the counts are of generation %d; the spec is at %d", s.ObservedGeneration, p.Generation)
	}
	return ps
}

// validatedNode is one node's tests; ok is false for a node no policy
// selects and without the join taint, which is not tested. rec is the
// record of that name, which may be about an earlier node.
func validatedNode(n *corev1.Node, pol *v1alpha1.ValidationPolicy, rec *v1alpha1.NodeValidation, now time.Time) (ValidatedNode, bool) {
	vn := ValidatedNode{Node: n.Name, Unvalidated: plan.HasTaint(n, v1alpha1.TaintUnvalidated)}
	if pol == nil && !vn.Unvalidated {
		return vn, false
	}
	var details []string
	if rec != nil && rec.Spec.NodeUID != string(n.UID) {
		// As the remediator reads it: a node replaced under the same name
		// is a new node, and its record starts over.
		details = append(details, "its NodeValidation is of an earlier node of this name")
		rec = nil
	}
	if rec != nil {
		st := &rec.Status
		vn.Message, vn.Preemptions, vn.NextTime = st.Message, st.Preemptions, st.NextTime
		if l := st.Last; l != nil {
			vn.Last = testResult(l)
		}
		if c := st.Current; c != nil {
			vn.Current = &ValidationTestRun{Mode: st.Mode, Template: c.Template, Since: c.StartTime, Attempt: c.Attempt, Pod: c.PodName}
		}
	}
	if pol == nil {
		// Tainted, and nothing will test it or remove the taint.
		vn.State = ValidationStateWaitingForJoin
		details = append(details, "no ValidationPolicy selects it: no test will remove the taint "+v1alpha1.TaintUnvalidated)
		if vn.Current != nil {
			vn.State = ValidationStateTesting
		}
		vn.Detail = strings.Join(details, "; ")
		return vn, true
	}
	vn.Policy = pol.Name
	// Why the remediator starts no test now, where it waits for one.
	var stopped string
	if pol.Spec.Suspend {
		stopped = "policy " + pol.Name + " is suspended: no test starts"
	} else if c := apimeta.FindStatusCondition(pol.Status.Conditions, v1alpha1.PolicyReady); c != nil && c.Status == metav1.ConditionFalse {
		stopped = "policy " + pol.Name + " is not ready (" + c.Reason + "): no test starts"
	}

	b := pol.Spec.Background
	switch {
	case vn.Current != nil:
		vn.State = ValidationStateTesting
	case vn.Last != nil && vn.Last.Result == v1alpha1.ValidationFailed:
		vn.State = ValidationStateFailed
		if vn.Unvalidated {
			details = append(details, "keeps the taint "+v1alpha1.TaintUnvalidated+" until a test passes")
		}
	case vn.Last != nil && vn.Last.Result != v1alpha1.ValidationPassed:
		vn.State = ValidationStateUnknown
		details = append(details, fmt.Sprintf("the last result %q is neither Passed nor Failed", vn.Last.Result))
	case vn.Unvalidated:
		vn.State = ValidationStateWaitingForJoin
		details = append(details, "waiting for its join test")
		if len(plan.ValidationResources(n)) == 0 {
			details = append(details, "no "+plan.ResourceNVIDIAPrefix+"* allocatable yet")
		}
		if stopped != "" {
			details = append(details, stopped)
		}
	case b == nil:
		vn.State = ValidationStatePassed
		if vn.Last == nil {
			vn.State = ValidationStateNotTested
			details = append(details, "policy "+pol.Name+" has no background section: tested only with the taint "+v1alpha1.TaintUnvalidated)
		}
	default:
		if vn.Last != nil && vn.Last.Time != nil {
			due := metav1.NewTime(vn.Last.Time.Add(b.Every.Duration))
			if vn.NextTime != nil && vn.NextTime.Before(&due) {
				due = *vn.NextTime
			}
			vn.DueTime = &due
		}
		vn.Due = vn.DueTime == nil || !now.Before(vn.DueTime.Time)
		vn.State = ValidationStatePassed
		if vn.Due {
			vn.State = ValidationStateDue
		}
		why := backgroundSkipped(n)
		switch {
		case vn.Last == nil && len(plan.ValidationResources(n)) == 0:
			vn.State, vn.Due = ValidationStateNotTested, false
			details = append(details, "no "+plan.ResourceNVIDIAPrefix+"* allocatable: not tested in the background")
		case vn.Due && why != "":
			details = append(details, "not tested in the background while "+why)
		case vn.Due && stopped != "":
			details = append(details, stopped)
		}
	}
	switch {
	case vn.Preemptions == 1:
		details = append(details, "preempted once")
	case vn.Preemptions > 1:
		details = append(details, fmt.Sprintf("preempted %d times", vn.Preemptions))
	}
	vn.Detail = strings.Join(details, "; ")
	return vn, true
}

// backgroundSkipped says why the remediator gives the node no background
// test (plan's eligibility: it serves, is Ready and has GPUs); "" when it
// may get one.
func backgroundSkipped(n *corev1.Node) string {
	var why []string
	if n.Spec.Unschedulable {
		why = append(why, "cordoned")
	}
	if plan.HasTaint(n, v1alpha1.TaintQuarantined) {
		why = append(why, "quarantined")
	}
	if len(plan.ValidationResources(n)) == 0 {
		why = append(why, "no "+plan.ResourceNVIDIAPrefix+"* allocatable")
	}
	if c := findNodeCondition(n, string(corev1.NodeReady)); c == nil || c.Status != corev1.ConditionTrue {
		why = append(why, "not Ready")
	}
	if c := findNodeCondition(n, v1alpha1.ConditionGPUValidationFailed); c != nil && c.Status == corev1.ConditionTrue {
		why = append(why, v1alpha1.ConditionGPUValidationFailed+"=True")
	}
	return strings.Join(why, ", ")
}

func testResult(l *v1alpha1.ValidationStatus) *ValidationTestResult {
	r := &ValidationTestResult{Result: l.Result, Time: l.CompletionTime, Test: cmp.Or(l.Test, l.Template), GPUs: len(l.GPUs), Message: l.Message}
	for _, g := range l.GPUs {
		if g.Verdict == string(validation.VerdictFail) {
			r.FailedGPUs++
		}
	}
	return r
}
