package plan

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Tests outside of a repair (a ValidationPolicy): the join gate and the
// background tests. Each node's record is a NodeValidation; a pass
// decides, for every node a policy tests, what to write, which test pod to
// start or delete, and which taint and condition to change. The rules of
// a test's verdict are the gate's (JudgeTestPod); no answer is retried
// once, then counts as a failure. A background test that is preempted,
// deleted or finds the node busy is no result: it is tried again later.

// JoinTaintWindow is how new a node must be for join.taintNewNodes to
// taint it: a node that joined minutes ago, not one that serves already
// and was selected later, or whose record was deleted.
const JoinTaintWindow = 10 * time.Minute

// OrphanAge is how old a test pod that no record names must be before a
// pass deletes it: a pod just created may belong to a record the cache
// does not show yet.
const OrphanAge = time.Minute

// JoinWaitPoll is how often a join test looks again for the GPUs of a
// node that has none allocatable yet (its device plugin is starting).
const JoinWaitPoll = 15 * time.Second

// ValidationPassInput is what one ValidationPolicy's pass decides on.
type ValidationPassInput struct {
	Now    time.Time
	Policy *v1alpha1.ValidationPolicy
	// Template is the policy's test template; nil when it does not exist.
	Template *v1alpha1.NodeOperationTemplate
	// Namespace is where test pods run.
	Namespace string
	// Nodes are the nodes the policy tests: selected by it and by no
	// policy before it by name.
	Nodes []*corev1.Node
	// Records are the NodeValidations, by node name.
	Records map[string]*v1alpha1.NodeValidation
	// Pods are the test pods the records name (NodeTestPods), by pod
	// name: the cached ones, and a fresh read of those the cache lacks.
	Pods map[string]*corev1.Pod
	// NoBackground, when set, is why no background test may start (the
	// priority class would let a test delay real pods).
	NoBackground string
	// PolicyPods are the cached test pods labelled with the policy: those
	// no record names are deleted (Orphans).
	PolicyPods []*corev1.Pod
}

// TestPod is a test pod to create.
type TestPod struct {
	Name    string
	Mode    v1alpha1.ValidationMode
	Attempt int32
}

// NodeValidationAction is what a pass does for one node, in this order:
// write the record (Record; Create when it does not exist yet), change the
// node (AddTaint, RemoveTaint, Condition), create Pod, delete DeletePods,
// emit Events on the node. The record goes first: a test pod exists only
// once its record names it, so a crash never leaves a test unaccounted
// for, and a result is acted on before its pod, the evidence, is deleted.
type NodeValidationAction struct {
	Node *corev1.Node
	// Record is the record to write; nil: unchanged.
	Record *v1alpha1.NodeValidation
	Create bool
	// AddTaint puts kubemedic.io/unvalidated:NoSchedule on the node;
	// RemoveTaint takes it off after a pass.
	AddTaint, RemoveTaint bool
	// Condition is GPUValidationFailed to write, after a result.
	Condition *NodeValidation
	Pod       *TestPod
	// DeletePods are test pods whose test ended.
	DeletePods []*corev1.Pod
	Events     []Event
	// Result is the test's end, for the metrics: Passed, Failed, or ""
	// (no result: preempted, put off).
	Result v1alpha1.ValidationResult
	// Took is how long an ended test ran.
	Took time.Duration
}

// ValidationPass is a pass's decisions.
type ValidationPass struct {
	Actions []NodeValidationAction
	// Status is the policy's status.
	Status v1alpha1.ValidationPolicyStatus
	// RequeueAfter is when to look again with nothing changing; zero: on
	// change only.
	RequeueAfter time.Duration
	// Orphans are test pods of the policy that no record names: their
	// record moved on after a delete that failed, or the node left the
	// policy. They are deleted, so none holds GPUs outside the budget.
	Orphans []*corev1.Pod
}

// NodeTestPods are the names of the test pods a record may still have:
// the current attempt's, or, while a retry waits for it to go, the
// previous attempt's.
func NodeTestPods(r *v1alpha1.NodeValidation) []string {
	cur := r.Status.Current
	switch {
	case cur == nil:
		return nil
	case cur.PodName != "":
		return []string{cur.PodName}
	case cur.StartTime != nil && cur.Attempt > 1:
		return []string{NodeTestPodName(r.Name, cur.StartTime.Time, cur.Attempt-1)}
	}
	return nil
}

// NodeTestPodName is a test pod's name: the node's, the run's start and
// the attempt, a DNS label.
func NodeTestPodName(node string, start time.Time, attempt int32) string {
	return PodName(node, fmt.Sprintf("-validate-%d-%d", start.Unix(), attempt))
}

// HasTaint reports whether the node has the taint key with effect
// NoSchedule.
func HasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// PlanValidations is one ValidationPolicy's pass over its nodes.
func PlanValidations(in ValidationPassInput) ValidationPass {
	p := &validationPass{in: in}
	if in.Policy.Spec.Background != nil {
		p.budget = int(in.Policy.Spec.Background.MaxConcurrent)
		for _, n := range in.Nodes {
			if r := p.record(n); r.Status.Current != nil && r.Status.Mode == v1alpha1.ValidationBackground {
				p.budget--
			}
		}
	}
	var due []*corev1.Node
	for _, n := range in.Nodes {
		p.status.Matched++
		if HasTaint(n, v1alpha1.TaintUnvalidated) {
			p.status.Unvalidated++
		}
		if p.node(n) {
			due = append(due, n)
		}
	}
	// The budget goes to the nodes due longest ago, never-tested first: a
	// test put off or preempted is due again only after retryAfter, so
	// busy nodes take turns instead of the first by name winning always.
	sort.SliceStable(due, func(i, j int) bool {
		a, b := dueSince(p.record(due[i])), dueSince(p.record(due[j]))
		if !a.Equal(b) {
			return a.Before(b)
		}
		return due[i].Name < due[j].Name
	})
	for _, n := range due {
		if p.budget <= 0 || in.Policy.Spec.Suspend || in.Template == nil || in.NoBackground != "" {
			p.status.Due++
			continue
		}
		p.budget--
		p.startBackground(n)
	}
	written := map[string]*v1alpha1.NodeValidation{}
	for _, a := range p.actions {
		if a.Record != nil {
			written[a.Node.Name] = a.Record
		}
	}
	for _, n := range in.Nodes {
		if r := written[n.Name]; r != nil {
			p.count(r)
		} else {
			p.count(p.record(n))
		}
	}
	p.status.ObservedGeneration = in.Policy.Generation
	return ValidationPass{Actions: p.actions, Status: p.status, RequeueAfter: p.requeue, Orphans: p.orphans()}
}

// orphans are the policy's test pods that no record names, old enough
// that the cache has the record that would.
func (p *validationPass) orphans() []*corev1.Pod {
	named := map[string]bool{}
	for _, r := range p.in.Records {
		for _, name := range NodeTestPods(r) {
			named[name] = true
		}
	}
	for _, a := range p.actions {
		if a.Record != nil {
			for _, name := range NodeTestPods(a.Record) {
				named[name] = true
			}
		}
		for _, d := range a.DeletePods {
			named[d.Name] = true
		}
	}
	var out []*corev1.Pod
	for _, pod := range p.in.PolicyPods {
		if named[pod.Name] || pod.DeletionTimestamp != nil || p.in.Now.Sub(pod.CreationTimestamp.Time) < OrphanAge {
			continue
		}
		out = append(out, pod)
	}
	return out
}

type validationPass struct {
	in      ValidationPassInput
	actions []NodeValidationAction
	status  v1alpha1.ValidationPolicyStatus
	budget  int
	requeue time.Duration
}

// record is the node's record as it stands: a new, empty one when it has
// none or one about another Node object of the same name (a replaced
// node starts over).
func (p *validationPass) record(n *corev1.Node) *v1alpha1.NodeValidation {
	if r := p.in.Records[n.Name]; r != nil && r.Spec.NodeUID == string(n.UID) {
		return r
	}
	return &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
}

func (p *validationPass) count(r *v1alpha1.NodeValidation) {
	if r.Status.Current != nil {
		p.status.Validating++
	}
	if l := r.Status.Last; l != nil {
		switch l.Result {
		case v1alpha1.ValidationPassed:
			p.status.Passed++
		case v1alpha1.ValidationFailed:
			p.status.Failed++
		}
	}
}

func (p *validationPass) requeueAt(t time.Time) {
	d := t.Sub(p.in.Now)
	if d < time.Second {
		d = time.Second
	}
	if p.requeue == 0 || d < p.requeue {
		p.requeue = d
	}
}

// change starts the node's action with a copy of its record to edit.
func (p *validationPass) change(n *corev1.Node) *NodeValidationAction {
	cur := p.record(n)
	r := cur.DeepCopy()
	create := p.in.Records[n.Name] == nil
	if r.Spec.NodeUID != string(n.UID) {
		// A new record, or one about a node replaced under the same name:
		// it starts over (the old object is updated in place).
		if old := p.in.Records[n.Name]; old != nil {
			r.ObjectMeta = *old.ObjectMeta.DeepCopy()
		}
		r.Status = v1alpha1.NodeValidationStatus{}
	}
	r.Spec = v1alpha1.NodeValidationSpec{NodeName: n.Name, NodeUID: string(n.UID), Policy: p.in.Policy.Name}
	// Owned by its Node: the garbage collector deletes the record of a
	// node that is gone.
	r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	p.actions = append(p.actions, NodeValidationAction{Node: n, Record: r, Create: create})
	return &p.actions[len(p.actions)-1]
}

func (a *NodeValidationAction) emit(typ, reason, note string) {
	a.Events = append(a.Events, Event{Type: typ, Reason: reason, Action: "Validate", Note: Truncate(note, maxMessage)})
}

// node decides for one node; it reports whether the node waits for a
// background test (which the budget starts, oldest first).
func (p *validationPass) node(n *corev1.Node) bool {
	r := p.record(n)
	if r.Status.Current != nil {
		p.running(n, r)
		return false
	}
	spec := &p.in.Policy.Spec
	if HasTaint(n, v1alpha1.TaintUnvalidated) {
		p.join(n, r)
		return false
	}
	if r.Spec.NodeUID == "" && spec.Join != nil && spec.Join.TaintNewNodes && !spec.Suspend && p.in.Template != nil &&
		n.CreationTimestamp.After(p.in.Policy.CreationTimestamp.Time) && p.in.Now.Sub(n.CreationTimestamp.Time) < JoinTaintWindow {
		a := p.change(n)
		a.AddTaint = true
		a.Record.Status.Message = Truncate(fmt.Sprintf("node %s joined after ValidationPolicy %s without the taint %s: tainted, so that it serves only after %s passes; pods already bound to it stay. To stop tainting new nodes, set join.taintNewNodes: false; removing the taint releases the node (it is not put on again)",
			n.Name, p.in.Policy.Name, v1alpha1.TaintUnvalidated, spec.Validate.Operation), maxMessage)
		a.emit(corev1.EventTypeNormal, v1alpha1.EventUnvalidatedTainted, a.Record.Status.Message)
		return false
	}
	b := spec.Background
	if b == nil || !p.eligible(n) {
		return false
	}
	if next := r.Status.NextTime; next != nil && p.in.Now.Before(next.Time) {
		p.requeueAt(next.Time)
		return false
	}
	return true
}

// eligible says whether a node may get a background test now: it serves
// (not cordoned, quarantined or failing a test), is Ready, and has GPUs.
func (p *validationPass) eligible(n *corev1.Node) bool {
	if n.Spec.Unschedulable || HasTaint(n, v1alpha1.TaintQuarantined) || len(ValidationResources(n)) == 0 {
		return false
	}
	ready := false
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady:
			ready = c.Status == corev1.ConditionTrue
		case string(c.Type) == v1alpha1.ConditionGPUValidationFailed && c.Status == corev1.ConditionTrue:
			return false
		}
	}
	return ready
}

// dueSince is when a node became due: its nextTime, else when it was
// last tested; zero for a node never tested.
func dueSince(r *v1alpha1.NodeValidation) time.Time {
	if n := r.Status.NextTime; n != nil {
		return n.Time
	}
	if l := r.Status.Last; l != nil && l.CompletionTime != nil {
		return l.CompletionTime.Time
	}
	return time.Time{}
}

// join decides for a node with the taint kubemedic.io/unvalidated and no
// test running.
func (p *validationPass) join(n *corev1.Node, r *v1alpha1.NodeValidation) {
	v := &p.in.Policy.Spec.Validate
	if l := r.Status.Last; l != nil && l.Result == v1alpha1.ValidationFailed && l.CompletionTime != nil {
		// A node that failed keeps the taint until a test passes: a
		// RemediationPolicy's step acting on GPUValidationFailed, whose
		// own test clears the condition.
		if c := validationCond(n); c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.ReasonValidated && c.LastTransitionTime.After(l.CompletionTime.Time) {
			a := p.change(n)
			a.RemoveTaint = true
			now := metav1.NewTime(p.in.Now)
			a.Record.Status.Last = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed, CompletionTime: &now,
				Message: Truncate("passed a repair's test: "+c.Message, maxMessage)}
			a.Record.Status.Message = Truncate(fmt.Sprintf("node %s passed a repair's GPU test at %s after it failed its join test; the taint %s is removed", n.Name, c.LastTransitionTime.UTC().Format(time.RFC3339), v1alpha1.TaintUnvalidated), maxMessage)
			a.Result = v1alpha1.ValidationPassed
			a.emit(corev1.EventTypeNormal, v1alpha1.ReasonValidationPassed, a.Record.Status.Message)
		}
		return
	}
	if p.in.Policy.Spec.Suspend || p.in.Template == nil {
		return
	}
	if len(ValidationResources(n)) == 0 {
		// A node that just joined: its device plugin may not have
		// registered the GPUs yet. After the test's timeout it is no
		// answer, which is no pass.
		timeout := policies.ValidateTimeout(v, p.in.Template)
		if until := n.CreationTimestamp.Add(timeout); p.in.Now.Before(until) {
			p.requeueAt(p.in.Now.Add(JoinWaitPoll))
			return
		}
		a := p.change(n)
		a.Record.Status.Mode = v1alpha1.ValidationJoin
		p.fail(a, &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: v.Operation},
			v1alpha1.ReasonNoValidationAnswer, fmt.Sprintf("node %s has no %s* resource allocatable %s after it registered, so no test pod can get its GPUs", n.Name, ResourceNVIDIAPrefix, timeout), p.in.Now)
		return
	}
	a := p.change(n)
	p.start(a, v1alpha1.ValidationJoin, 1, "")
}

func validationCond(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if string(n.Status.Conditions[i].Type) == v1alpha1.ConditionGPUValidationFailed {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func (p *validationPass) startBackground(n *corev1.Node) {
	a := p.change(n)
	p.start(a, v1alpha1.ValidationBackground, 1, "")
}

// start records attempt n of a test and asks for its pod.
func (p *validationPass) start(a *NodeValidationAction, mode v1alpha1.ValidationMode, attempt int32, noAnswer string) {
	v := &p.in.Policy.Spec.Validate
	now := metav1.NewTime(p.in.Now)
	st := &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: v.Operation, Attempt: attempt,
		PodName: NodeTestPodName(a.Node.Name, p.in.Now, attempt), StartTime: &now, NoAnswer: noAnswer}
	a.Record.Status.Mode, a.Record.Status.Current = mode, st
	a.Pod = &TestPod{Name: st.PodName, Mode: mode, Attempt: attempt}
	var msg string
	switch mode {
	case v1alpha1.ValidationJoin:
		deadline := p.in.Now.Add(policies.ValidateTimeout(v, p.in.Template))
		msg = fmt.Sprintf("testing node %s's GPUs with pod %s/%s (%s, attempt %d of %d) before it serves, until %s at the latest; it keeps the taint %s until the test passes",
			a.Node.Name, p.in.Namespace, st.PodName, v.Operation, attempt, validationAttempts, deadline.UTC().Format(time.RFC3339), v1alpha1.TaintUnvalidated)
		p.requeueAt(deadline)
	default:
		b := p.in.Policy.Spec.Background
		msg = fmt.Sprintf("testing idle node %s's GPUs in the background with pod %s/%s (%s) at priority class %s: it starts only when the GPUs are free, any real pod preempts it, and it waits at most %s",
			a.Node.Name, p.in.Namespace, st.PodName, v.Operation, b.PriorityClassName, policies.BackgroundWaitFor(b))
		p.requeueAt(p.in.Now.Add(policies.BackgroundWaitFor(b)))
	}
	if attempt > 1 {
		msg = "after no answer, " + msg
	}
	a.Record.Status.Message = Truncate(msg, maxMessage)
	a.emit(corev1.EventTypeNormal, v1alpha1.EventValidationStarted, msg)
}

// running decides for a node whose test runs.
func (p *validationPass) running(n *corev1.Node, r *v1alpha1.NodeValidation) {
	cur := r.Status.Current
	v := &p.in.Policy.Spec.Validate
	background := r.Status.Mode == v1alpha1.ValidationBackground
	var pod *corev1.Pod
	if names := NodeTestPods(r); len(names) > 0 {
		pod = p.in.Pods[names[0]]
	}
	switch {
	case background && p.in.Policy.Spec.Background == nil:
		p.putOff(n, pod, fmt.Sprintf("ValidationPolicy %s no longer tests in the background: node %s's test is stopped, no result", p.in.Policy.Name, n.Name), false)
		return
	case background && !p.eligible(n):
		// A repair (a cordon), a quarantine or another test's failure
		// came first: the node is theirs, and a pass from this test must
		// not overwrite their verdict.
		p.putOff(n, pod, fmt.Sprintf("node %s no longer serves (cordoned, quarantined, not Ready, without GPUs or failing a test): its background test is stopped, no result", n.Name), false)
		return
	case cur.PodName == "":
		p.retryWhenGone(n, r)
		return
	case pod != nil && ended(pod) && !(background && Preempted(pod)):
		p.judgeEnded(n, pod)
		return
	case background && (pod == nil || pod.DeletionTimestamp != nil || Preempted(pod)):
		what := "was deleted before it ended (drained, or deleted by hand)"
		if pod != nil && Preempted(pod) {
			what = "was preempted by a pod of higher priority"
		} else if pod == nil {
			what = "is gone before it ended (preempted, drained or deleted)"
		}
		p.putOff(n, pod, fmt.Sprintf("the background test pod %s/%s %s: no result", p.in.Namespace, cur.PodName, what), true)
		return
	case pod == nil:
		p.noAnswer(n, nil, fmt.Sprintf("pod %s/%s does not exist", p.in.Namespace, cur.PodName))
		return
	}
	start := cur.StartTime.Time
	if background {
		if pod.Spec.NodeName == "" {
			wait := policies.BackgroundWaitFor(p.in.Policy.Spec.Background)
			if until := start.Add(wait); !p.in.Now.Before(until) {
				p.putOff(n, pod, fmt.Sprintf("node %s's GPUs were not free for %s, so the background test did not start: no result", n.Name, wait), false)
			} else {
				p.requeueAt(until)
			}
			return
		}
		// The timeout counts from the pod's start on the node, not from
		// its wait for the GPUs.
		if pod.Status.StartTime != nil {
			start = pod.Status.StartTime.Time
		} else {
			start = p.in.Now
		}
	}
	timeout := policies.ValidateTimeout(v, p.in.Template)
	if deadline := start.Add(timeout); p.in.Now.Before(deadline) {
		p.requeueAt(deadline)
		return
	}
	p.noAnswer(n, pod, fmt.Sprintf("no report after %s; pod %s/%s was %s%s", timeout, pod.Namespace, pod.Name, pod.Status.Phase, podWaiting(pod)))
}

func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// retryWhenGone starts the retry after no answer once the previous
// attempt's pod is gone: it may hold the GPUs the retry asks for.
func (p *validationPass) retryWhenGone(n *corev1.Node, r *v1alpha1.NodeValidation) {
	cur := r.Status.Current
	for _, name := range NodeTestPods(r) {
		if old := p.in.Pods[name]; old != nil {
			if old.DeletionTimestamp == nil {
				a := p.change(n)
				a.Record = nil
				a.DeletePods = append(a.DeletePods, old)
			}
			p.requeueAt(p.in.Now.Add(ValidationRetryPoll))
			return
		}
	}
	a := p.change(n)
	p.start(a, r.Status.Mode, cur.Attempt, cur.NoAnswer)
}

// Preempted reports whether the scheduler (or an eviction) marked the pod
// for disruption: the DisruptionTarget condition, e.g. reason
// PreemptionByScheduler.
func Preempted(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// judgeEnded judges a test pod that ended.
func (p *validationPass) judgeEnded(n *corev1.Node, pod *corev1.Pod) {
	j := JudgeTestPod(pod)
	if j.Outcome == TestNoAnswer {
		p.noAnswer(n, pod, j.Message)
		return
	}
	a := p.change(n)
	st := a.Record.Status.Current
	if j.Report != nil {
		RecordReport(st, *j.Report)
	}
	at := j.At
	if at.IsZero() {
		at = p.in.Now
	}
	if j.Outcome == TestFailed {
		a.DeletePods = append(a.DeletePods, pod)
		p.fail(a, st, j.Reason, j.Message, at)
		return
	}
	done := metav1.NewTime(at)
	st.Result, st.CompletionTime, st.Message = v1alpha1.ValidationPassed, &done, Truncate(j.Message, maxMessage)
	a.Record.Status.Last, a.Record.Status.Current = st, nil
	a.Result, a.Took = v1alpha1.ValidationPassed, at.Sub(st.StartTime.Time)
	a.Condition = &NodeValidation{Reason: v1alpha1.ReasonValidated, Message: st.Message, At: p.in.Now}
	a.DeletePods = append(a.DeletePods, pod)
	msg := fmt.Sprintf("node %s passed %s: %s", n.Name, st.Template, st.Message)
	if a.Record.Status.Mode == v1alpha1.ValidationJoin && HasTaint(n, v1alpha1.TaintUnvalidated) {
		a.RemoveTaint = true
		msg += "; the taint " + v1alpha1.TaintUnvalidated + " is removed, the node serves"
	}
	p.next(a)
	a.Record.Status.Message = Truncate(msg, maxMessage)
	a.emit(corev1.EventTypeNormal, v1alpha1.ReasonValidationPassed, msg)
}

// next sets when the node's next background test is due.
func (p *validationPass) next(a *NodeValidationAction) {
	a.Record.Status.NextTime = nil
	if b := p.in.Policy.Spec.Background; b != nil {
		t := metav1.NewTime(p.in.Now.Add(b.Every.Duration))
		a.Record.Status.NextTime = &t
	}
}

// fail records a failed test: GPUValidationFailed=True with the test's
// reason, which RemediationPolicies act on; a join taint stays.
func (p *validationPass) fail(a *NodeValidationAction, st *v1alpha1.ValidationStatus, reason, msg string, at time.Time) {
	done := metav1.NewTime(at)
	st.Result, st.CompletionTime, st.Message = v1alpha1.ValidationFailed, &done, Truncate(msg, maxMessage)
	a.Record.Status.Last, a.Record.Status.Current = st, nil
	a.Result = v1alpha1.ValidationFailed
	if st.StartTime != nil {
		a.Took = at.Sub(st.StartTime.Time)
	}
	// The condition is timed now, not at the test's end: a policy takes a
	// condition older than its last operation for an old incident.
	a.Condition = &NodeValidation{Failed: true, Reason: reason, Message: st.Message, At: p.in.Now}
	p.next(a)
	note := fmt.Sprintf("node %s failed %s: %s; %s=True (%s)", a.Node.Name, st.Template, msg, v1alpha1.ConditionGPUValidationFailed, reason)
	if HasTaint(a.Node, v1alpha1.TaintUnvalidated) {
		note += fmt.Sprintf("; it keeps the taint %s until a test passes: a RemediationPolicy's step with validate acting on %s, or `kubectl delete nodevalidation %s` to test it again",
			v1alpha1.TaintUnvalidated, v1alpha1.ConditionGPUValidationFailed, a.Node.Name)
	}
	a.Record.Status.Message = Truncate(note, maxMessage)
	a.emit(corev1.EventTypeWarning, v1alpha1.ReasonValidationFailed, note)
}

// noAnswer retries a test once, then counts it as a failure.
func (p *validationPass) noAnswer(n *corev1.Node, pod *corev1.Pod, msg string) {
	a := p.change(n)
	st := a.Record.Status.Current
	if pod != nil {
		a.DeletePods = append(a.DeletePods, pod)
	}
	if st.Attempt < validationAttempts {
		a.emit(corev1.EventTypeWarning, v1alpha1.ReasonValidationNoAnswer, "no answer from the GPU test, which is no pass; trying once more: "+msg)
		if pod != nil && !ended(pod) {
			// It may hold the GPUs: the retry starts once it is gone.
			st.Attempt, st.PodName, st.NoAnswer = st.Attempt+1, "", Truncate(msg, 512)
			a.Record.Status.Message = Truncate(fmt.Sprintf("no answer from the GPU test: %s; trying once more once pod %s/%s is gone", msg, pod.Namespace, pod.Name), maxMessage)
			p.requeueAt(p.in.Now.Add(ValidationRetryPoll))
			return
		}
		p.start(a, a.Record.Status.Mode, st.Attempt+1, Truncate(msg, 512))
		return
	}
	first := ""
	if st.NoAnswer != "" {
		first = "; the first attempt: " + st.NoAnswer
	}
	p.fail(a, st, v1alpha1.ReasonNoValidationAnswer, fmt.Sprintf("no answer from the GPU test twice, which counts as a failure: %s%s", msg, first), p.in.Now)
}

// putOff ends a background test with no result and tries again after
// retryAfter.
func (p *validationPass) putOff(n *corev1.Node, pod *corev1.Pod, msg string, preempted bool) {
	a := p.change(n)
	a.Record.Status.Current = nil
	if pod != nil && pod.DeletionTimestamp == nil {
		a.DeletePods = append(a.DeletePods, pod)
	}
	b := p.in.Policy.Spec.Background
	if b == nil {
		a.Record.Status.NextTime = nil
		a.Record.Status.Message = Truncate(msg, maxMessage)
		a.emit(corev1.EventTypeNormal, v1alpha1.EventValidationPutOff, msg)
		return
	}
	retry := policies.BackgroundRetryAfter(b)
	t := metav1.NewTime(p.in.Now.Add(retry))
	a.Record.Status.NextTime = &t
	reason := v1alpha1.EventValidationPutOff
	if preempted {
		a.Record.Status.Preemptions++
		reason = v1alpha1.EventValidationPreempted
	}
	msg = fmt.Sprintf("%s; tried again after %s (%s)", msg, retry, t.UTC().Format(time.RFC3339))
	a.Record.Status.Message = Truncate(msg, maxMessage)
	a.emit(corev1.EventTypeNormal, reason, msg)
	p.requeueAt(t.Time)
}
