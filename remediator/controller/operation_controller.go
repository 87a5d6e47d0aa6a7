package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Timings of the operation reconciler that no policy sets.
const (
	// drainPoll is how often a drain is looked at again: a disruption
	// budget that starts allowing evictions changes no object we watch.
	drainPoll = 5 * time.Second
	// waitingResync looks at a waiting operation again even when nothing
	// it watches changed, as a safety net.
	waitingResync = time.Minute
	// defaultRecoveryTimeout applies when spec.recoveryTimeout is unset.
	defaultRecoveryTimeout = 10 * time.Minute
	// rebootPodGrace: under NodeRebooted, an operation pod that failed is
	// given this long for the new boot ID to show before the step fails.
	rebootPodGrace = 2 * time.Minute
)

// OperationReconciler drives NodeOperations through their lifecycle.
type OperationReconciler struct {
	Client client.Client
	// Reader reads the API server without the cache, where a stale read
	// would be unsafe (the admission ledger, nodes before a cordon), and
	// for what the cache does not hold (the pods of a node being drained).
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Metrics  *Metrics
	// Evictor evicts and deletes pods for the drain; its client does not
	// wait out a disruption budget's Retry-After inside one call.
	Evictor *drain.Evictor
	// Namespace is where operation pods run.
	Namespace string
	// Retention is how long finished operations are kept; it is stretched to
	// the longest attempt-cap window and node cooldown of any policy, which
	// are counted from finished operations.
	Retention time.Duration

	ledger *ledger
	// owners tells the owners of the pods a drain stops; nil: nobody is told.
	owners *ownerNotifier
}

var _ reconcile.Reconciler = &OperationReconciler{}

// event is an Event to emit on the operation and its node once the status
// that records the transition is written.
type opEvent struct {
	typ, reason, action, note string
}

// opPass is the state of one reconcile of one operation.
type opPass struct {
	op     *v1alpha1.NodeOperation
	node   *corev1.Node // nil when the node does not exist
	now    time.Time
	events []opEvent
	// afterWrite are metric updates to make once the status that records
	// the transition is written: a pass retried after a conflict must not
	// count twice.
	afterWrite []func()
	result     ctrl.Result
}

func (p *opPass) emit(typ, reason, action, format string, args ...any) {
	p.events = append(p.events, opEvent{typ, reason, action, fmt.Sprintf(format, args...)})
}

func (p *opPass) requeue(d time.Duration) {
	if d < time.Second {
		d = time.Second
	}
	if p.result.RequeueAfter == 0 || d < p.result.RequeueAfter {
		p.result.RequeueAfter = d
	}
}

func (p *opPass) requeueAt(t time.Time) {
	if !t.IsZero() {
		p.requeue(t.Sub(p.now))
	}
}

// Reconcile moves one operation as far through its lifecycle as it can go
// now, writes its status once, then emits the Events of its transitions.
func (r *OperationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	op := &v1alpha1.NodeOperation{}
	if err := r.Client.Get(ctx, req.NamespacedName, op); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get operation %s: %w", req.Name, err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodeOperation", klog.KObj(op), "node", op.Spec.NodeName))
	orig := op.DeepCopy()
	pass := &opPass{op: op, now: r.Clock.Now()}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: op.Spec.NodeName}, node); err == nil {
		pass.node = node
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", op.Spec.NodeName, err)
	}

	err := r.reconcile(ctx, pass)
	if !equality.Semantic.DeepEqual(orig.Status, op.Status) {
		if perr := r.Client.Status().Patch(ctx, op, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsNotFound(perr) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patch status of operation %s: %w", op.Name, perr)
		}
	}
	for _, e := range pass.events {
		r.Recorder.Eventf(op, pass.node, e.typ, e.reason, e.action, "%s", e.note)
		if pass.node != nil {
			r.Recorder.Eventf(pass.node, op, e.typ, e.reason, e.action, "%s: %s", op.Name, e.note)
		}
	}
	for _, f := range pass.afterWrite {
		f()
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return pass.result, nil
}

// reconcile runs the phase handlers until one of them waits.
func (r *OperationReconciler) reconcile(ctx context.Context, p *opPass) error {
	for range 8 {
		before := p.op.Status.Phase
		var err error
		switch before {
		case "", v1alpha1.PhasePending:
			err = r.pending(ctx, p)
		case v1alpha1.PhaseWaitingForBudget:
			err = r.admit(ctx, p)
		case v1alpha1.PhaseCordoning:
			err = r.cordoning(ctx, p)
		case v1alpha1.PhaseDraining:
			err = r.draining(ctx, p)
		case v1alpha1.PhaseRunning:
			err = r.running(ctx, p)
		case v1alpha1.PhaseVerifying:
			err = r.verifying(ctx, p)
		default:
			return r.finished(ctx, p)
		}
		if err != nil || p.op.Status.Phase == before {
			return err
		}
	}
	return nil
}

// setPhase records a transition.
func (p *opPass) setPhase(phase v1alpha1.NodeOperationPhase, msg string) {
	p.op.Status.Phase = phase
	p.op.Status.Message = truncate(msg, 1024)
	if phase.Finished() && p.op.Status.CompletionTime == nil {
		t := metav1.NewTime(p.now)
		p.op.Status.CompletionTime = &t
	}
}

// finish ends the operation.
func (p *opPass) finish(phase v1alpha1.NodeOperationPhase, reason, msg string) {
	p.setPhase(phase, reason+": "+msg)
	typ := corev1.EventTypeNormal
	if phase != v1alpha1.PhaseSucceeded {
		typ = corev1.EventTypeWarning
	}
	p.emit(typ, reason, string(phase), "%s", msg)
}

func (p *opPass) cond(typ string, status metav1.ConditionStatus, reason, msg string) {
	setCond(&p.op.Status.Conditions, typ, status, reason, msg, p.op.Generation, p.now)
}

func (p *opPass) condSince(typ string) time.Time {
	if c := apimeta.FindStatusCondition(p.op.Status.Conditions, typ); c != nil {
		return c.LastTransitionTime.Time
	}
	return p.now
}

// pending checks what the operation needs before it can wait for a budget:
// its template and parameters.
func (r *OperationReconciler) pending(ctx context.Context, p *opPass) error {
	op := p.op
	if !op.Spec.Quarantine {
		tpl, err := r.template(ctx, op.Spec.Operation)
		if err != nil {
			return err
		}
		if tpl == nil {
			p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonTemplateNotFound, fmt.Sprintf("NodeOperationTemplate %s does not exist", op.Spec.Operation))
			return nil
		}
		params, err := parameters(tpl, op)
		if err != nil {
			p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonParameterMissing, err.Error())
			return nil
		}
		op.Status.Parameters = params
	}
	p.setPhase(v1alpha1.PhaseWaitingForBudget, "checking the safety limits")
	return nil
}

// admit passes the operation through the safety limits, serialised by the
// admission ledger.
func (r *OperationReconciler) admit(ctx context.Context, p *opPass) error {
	op := p.op
	all, err := compiledPolicies(ctx, r.Client)
	if err != nil {
		return err
	}
	nodes, ops, err := listNodesAndOps(ctx, r.Client)
	if err != nil {
		return err
	}
	cm, reserved, err := r.ledger.load(ctx)
	if err != nil {
		return err
	}
	// A reserved name counts as running even when this cache has not seen
	// its operation yet: another leader may have created and admitted it
	// just now. Read those from the API server.
	if ops, err = r.withReserved(ctx, ops, reserved); err != nil {
		return err
	}
	var a plan.Admission
	if reserved[op.Name] {
		// Admitted before a crash or a failed status write.
		a = plan.Admission{Verdict: plan.Start, Message: "admitted earlier (admission ledger)"}
	} else {
		a = plan.Admit(plan.AdmitInput{Op: op, Node: p.node, Policies: all, Nodes: nodes, Ops: ops, Reserved: reserved, Now: p.now})
	}
	policy := op.Spec.Policy
	if op.Spec.DryRun {
		r.dryRun(p, a)
		return nil
	}
	switch a.Verdict {
	case plan.Skip:
		p.afterWrite = append(p.afterWrite, func() { r.Metrics.blocked.WithLabelValues(policy, a.Reason).Inc() })
		if a.Quarantine {
			if err := r.quarantine(ctx, op.Spec.NodeName, op.Name); err != nil {
				return err
			}
			p.cond(v1alpha1.ReasonQuarantined, metav1.ConditionTrue, a.Reason, "node cordoned and tainted "+v1alpha1.TaintQuarantined)
		}
		p.finish(v1alpha1.PhaseSkipped, a.Reason, a.Message)
		return nil
	case plan.Wait:
		prev := apimeta.FindStatusCondition(op.Status.Conditions, "Admitted")
		if prev == nil || prev.Reason != a.Reason {
			p.afterWrite = append(p.afterWrite, func() { r.Metrics.blocked.WithLabelValues(policy, a.Reason).Inc() })
			p.emit(corev1.EventTypeNormal, a.Reason, "Wait", "waiting: %s", a.Message)
		}
		p.cond("Admitted", metav1.ConditionFalse, a.Reason, a.Message)
		p.op.Status.Message = truncate(a.Reason+": "+a.Message, 1024)
		p.requeue(waitingResync)
		p.requeueAt(a.Next)
		return nil
	}

	byName := make(map[string]*v1alpha1.NodeOperation, len(ops))
	for _, o := range ops {
		byName[o.Name] = o
	}
	if !reserved[op.Name] {
		if err := r.ledger.reserve(ctx, cm, reserved, op.Name, byName); err != nil {
			if apierrors.IsConflict(err) {
				// Another admission won the race; decide again on fresh state.
				p.requeue(time.Second)
				return nil
			}
			return err
		}
	}
	p.cond("Admitted", metav1.ConditionTrue, "LimitsPassed", a.Message)
	start := metav1.NewTime(p.now)
	op.Status.StartTime = &start
	if p.node != nil {
		op.Status.BootID = p.node.Status.NodeInfo.BootID
	}
	log.FromContext(ctx).Info("Starting operation", "operation", op.Spec.Operation, "quarantine", op.Spec.Quarantine)
	p.emit(corev1.EventTypeNormal, "Started", "Start", "every safety limit passed; starting %s", describe(op))
	if op.Spec.Quarantine || op.Spec.Cordon || op.Spec.Drain != nil {
		p.setPhase(v1alpha1.PhaseCordoning, "cordoning the node")
	} else {
		p.setPhase(v1alpha1.PhaseRunning, "starting the operation")
	}
	return nil
}

// dryRun ends a dry-run operation with what it would have done.
func (r *OperationReconciler) dryRun(p *opPass, a plan.Admission) {
	var would string
	switch {
	case a.Verdict == plan.Skip && a.Quarantine:
		would = "would quarantine the node: " + a.Message
	case a.Verdict == plan.Skip:
		would = "would skip: " + a.Message
	case a.Verdict == plan.Wait:
		would = fmt.Sprintf("would %s, after waiting for %s: %s", describe(p.op), a.Reason, a.Message)
	default:
		would = fmt.Sprintf("would %s now", describe(p.op))
	}
	policy := p.op.Spec.Policy
	p.afterWrite = append(p.afterWrite, func() { r.Metrics.blocked.WithLabelValues(policy, v1alpha1.ReasonDryRun).Inc() })
	p.finish(v1alpha1.PhaseSkipped, v1alpha1.ReasonDryRun, would+"; nothing was changed")
}

// describe says what an operation does, for messages.
func describe(op *v1alpha1.NodeOperation) string {
	if op.Spec.Quarantine {
		return "quarantine (cordon and taint " + v1alpha1.TaintQuarantined + ")"
	}
	s := ""
	switch {
	case op.Spec.Drain != nil:
		mode := v1alpha1.DrainEvict
		if op.Spec.Drain.Mode != "" {
			mode = op.Spec.Drain.Mode
		}
		s = fmt.Sprintf("cordon, drain (%s) and ", mode)
	case op.Spec.Cordon:
		s = "cordon and "
	}
	return s + "run " + op.Spec.Operation
}

// cordoning cordons the node, or quarantines it for a quarantine operation.
func (r *OperationReconciler) cordoning(ctx context.Context, p *opPass) error {
	op := p.op
	if op.Spec.Quarantine {
		if err := r.quarantine(ctx, op.Spec.NodeName, op.Name); err != nil {
			return err
		}
		p.cond(v1alpha1.ReasonQuarantined, metav1.ConditionTrue, v1alpha1.ReasonLadderExhausted, "node cordoned and tainted "+v1alpha1.TaintQuarantined)
		p.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonQuarantined, fmt.Sprintf("node %s cordoned and tainted %s:NoSchedule; a human decides what happens next", op.Spec.NodeName, v1alpha1.TaintQuarantined))
		return nil
	}
	byUs, err := r.cordon(ctx, op.Spec.NodeName, op.Name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonNodeNotFound, "node "+op.Spec.NodeName+" does not exist")
			return nil
		}
		return err
	}
	if byUs {
		p.cond(v1alpha1.OperationCordoned, metav1.ConditionTrue, "CordonedByKubemedic", "kubemedic cordoned the node and uncordons it after verification")
		p.emit(corev1.EventTypeNormal, "Cordoned", "Cordon", "node cordoned")
	} else {
		p.cond(v1alpha1.OperationCordoned, metav1.ConditionTrue, "CordonedByHuman", "the node was already cordoned by someone else; kubemedic leaves it cordoned")
	}
	if op.Spec.Drain != nil {
		p.cond(v1alpha1.OperationDrained, metav1.ConditionFalse, "Draining", "draining")
		p.setPhase(v1alpha1.PhaseDraining, "draining the node")
		return nil
	}
	p.setPhase(v1alpha1.PhaseRunning, "starting the operation")
	return nil
}

// draining evicts the node's pods under the step's drain rules.
func (r *OperationReconciler) draining(ctx context.Context, p *opPass) error {
	op := p.op
	// From the API server: the cache holds only the operation pods.
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.MatchingFields{indexPodNode: op.Spec.NodeName}); err != nil {
		return fmt.Errorf("list pods on node %s: %w", op.Spec.NodeName, err)
	}
	spec := op.Spec.Drain.DeepCopy()
	d, err := drain.Plan(pods.Items, *spec, p.condSince(v1alpha1.OperationDrained), p.now)
	if err != nil {
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonDrainFailed, err.Error())
		return nil
	}
	if d.Failed {
		p.cond(v1alpha1.OperationDrained, metav1.ConditionFalse, "DrainTimeout", d.Message)
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonDrainFailed, d.Message)
		return nil
	}
	if d.Done {
		p.cond(v1alpha1.OperationDrained, metav1.ConditionTrue, "Drained", d.Message)
		p.emit(corev1.EventTypeNormal, "Drained", "Drain", "%s", d.Message)
		p.setPhase(v1alpha1.PhaseRunning, "starting the operation")
		return nil
	}
	stopped, blocked, err := drain.Run(ctx, r.Evictor, d)
	// Told now, not after the status write: the pods are gone whether or
	// not that write succeeds, and a retried pass does not stop them again.
	r.owners.tell(ctx, op, p.node, pods.Items, stopped, p.now)
	msg := d.Message
	if len(blocked) > 0 {
		msg = fmt.Sprintf("%s; blocked: %s", msg, blocked[0])
		if len(blocked) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(blocked)-1)
		}
	}
	p.op.Status.Message = truncate("draining: "+msg, 1024)
	p.requeue(drainPoll)
	p.requeueAt(d.Next)
	if err != nil {
		log.FromContext(ctx).Error(err, "Evicting pods failed; retrying")
	}
	return nil
}

// running starts the operation pod and waits for the success criterion.
func (r *OperationReconciler) running(ctx context.Context, p *opPass) error {
	op := p.op
	tpl, err := r.template(ctx, op.Spec.Operation)
	if err != nil {
		return err
	}
	if tpl == nil {
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonTemplateNotFound, fmt.Sprintf("NodeOperationTemplate %s does not exist", op.Spec.Operation))
		return nil
	}
	criterion := tpl.Spec.SuccessCriterion
	if criterion == "" {
		criterion = v1alpha1.SuccessPodSucceeded
	}
	if criterion == v1alpha1.SuccessNone {
		p.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, "NothingToRun", tpl.Name+" runs no pod")
		p.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
		return nil
	}
	if c := apimeta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationSucceeded); c == nil {
		p.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, "Running", "the operation pod is running")
	}
	timeout := 10 * time.Minute
	if tpl.Spec.Timeout != nil {
		timeout = tpl.Spec.Timeout.Duration
	}
	if op.Spec.Timeout != nil {
		timeout = op.Spec.Timeout.Duration
	}
	deadline := p.condSince(v1alpha1.OperationSucceeded).Add(timeout)

	pod, err := r.operationPod(ctx, p, tpl)
	if err != nil {
		return err
	}
	if criterion == v1alpha1.SuccessNodeRebooted && p.node != nil && op.Status.BootID != "" &&
		p.node.Status.NodeInfo.BootID != "" && p.node.Status.NodeInfo.BootID != op.Status.BootID && plan.NodeReady(p.node) {
		msg := fmt.Sprintf("the node rebooted: boot ID %s, was %s, and it is Ready", p.node.Status.NodeInfo.BootID, op.Status.BootID)
		p.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, "NodeRebooted", msg)
		p.emit(corev1.EventTypeNormal, "OperationSucceeded", "Run", "%s", msg)
		p.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
		return nil
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			if criterion == v1alpha1.SuccessPodSucceeded {
				msg := fmt.Sprintf("pod %s/%s succeeded", pod.Namespace, pod.Name)
				p.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, "PodSucceeded", msg)
				p.emit(corev1.EventTypeNormal, "OperationSucceeded", "Run", "%s", msg)
				p.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
				return nil
			}
		case corev1.PodFailed:
			failedAt := podFinishedAt(pod)
			if criterion == v1alpha1.SuccessPodSucceeded || (!failedAt.IsZero() && p.now.Sub(failedAt) >= rebootPodGrace) {
				msg := fmt.Sprintf("pod %s/%s failed: %s", pod.Namespace, pod.Name, podFailure(pod))
				p.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, "PodFailed", msg)
				p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationFailed, msg)
				return nil
			}
			if !failedAt.IsZero() {
				p.requeueAt(failedAt.Add(rebootPodGrace))
			}
		}
	}
	if !p.now.Before(deadline) {
		msg := fmt.Sprintf("no success after %s (%s)", timeout, criterion)
		if pod != nil {
			if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete timed-out operation pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			msg += fmt.Sprintf("; pod %s/%s was %s and is deleted", pod.Namespace, pod.Name, pod.Status.Phase)
		}
		p.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonOperationTimeout, msg)
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationTimeout, msg)
		return nil
	}
	p.requeueAt(deadline)
	if criterion == v1alpha1.SuccessNodeRebooted {
		p.op.Status.Message = fmt.Sprintf("waiting for the node to reboot (boot ID %s) and be Ready, until %s", op.Status.BootID, deadline.UTC().Format(time.RFC3339))
	} else {
		p.op.Status.Message = fmt.Sprintf("waiting for pod %s/%s to succeed, until %s", r.Namespace, op.Status.PodName, deadline.UTC().Format(time.RFC3339))
	}
	return nil
}

// verifying waits for the node to pass verification, then uncordons it.
func (r *OperationReconciler) verifying(ctx context.Context, p *opPass) error {
	op := p.op
	if p.node == nil {
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonNodeNotFound, "node "+op.Spec.NodeName+" does not exist")
		return nil
	}
	v := plan.Verify(op, p.node, p.now)
	if v.OK {
		p.cond(v1alpha1.OperationVerified, metav1.ConditionTrue, v1alpha1.ReasonVerified, v.Message)
		if err := r.uncordon(ctx, op.Spec.NodeName, op.Name); err != nil {
			return err
		}
		if op.Spec.Trigger != nil {
			took := p.now.Sub(op.Spec.Trigger.LastTransitionTime.Time).Seconds()
			p.afterWrite = append(p.afterWrite, func() {
				r.Metrics.timeToRemediate.WithLabelValues(op.Spec.Policy, stepLabel(op)).Observe(took)
			})
		}
		p.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonVerified, v.Message)
		return nil
	}
	recovery := defaultRecoveryTimeout
	if op.Spec.RecoveryTimeout != nil {
		recovery = op.Spec.RecoveryTimeout.Duration
	}
	deadline := p.condSince(v1alpha1.OperationSucceeded).Add(recovery)
	if !p.now.Before(deadline) {
		msg := fmt.Sprintf("not verified %s after the operation: %s", recovery, v.Message)
		p.cond(v1alpha1.OperationVerified, metav1.ConditionFalse, v1alpha1.ReasonRecoveryTimeout, msg)
		p.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonRecoveryTimeout, msg)
		return nil
	}
	p.cond(v1alpha1.OperationVerified, metav1.ConditionFalse, "Waiting", v.Message)
	p.op.Status.Message = truncate("verifying: "+v.Message, 1024)
	p.requeueAt(deadline)
	p.requeueAt(v.Next)
	p.requeue(30 * time.Second)
	return nil
}

// finished garbage-collects an operation after the retention period.
func (r *OperationReconciler) finished(ctx context.Context, p *opPass) error {
	op := p.op
	if op.Status.CompletionTime == nil {
		t := metav1.NewTime(p.now)
		op.Status.CompletionTime = &t
		return nil
	}
	keep := r.Retention
	all, err := compiledPolicies(ctx, r.Client)
	if err != nil {
		return err
	}
	for _, pol := range all {
		sf := pol.Obj.Spec.Safety
		if sf.AttemptCap != nil && sf.AttemptCap.Window != nil {
			keep = max(keep, sf.AttemptCap.Window.Duration)
		}
		if sf.NodeCooldown != nil {
			keep = max(keep, sf.NodeCooldown.Duration)
		}
	}
	until := op.Status.CompletionTime.Add(keep)
	if p.now.Before(until) {
		p.requeueAt(until)
		return nil
	}
	log.FromContext(ctx).Info("Deleting finished operation after retention", "completed", op.Status.CompletionTime.Time, "retention", keep)
	if err := r.Client.Delete(ctx, op, client.Preconditions{UID: &op.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete operation %s after retention: %w", op.Name, err)
	}
	return nil
}

// template reads a NodeOperationTemplate; nil when it does not exist.
func (r *OperationReconciler) template(ctx context.Context, name string) (*v1alpha1.NodeOperationTemplate, error) {
	tpl := &v1alpha1.NodeOperationTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get template %s: %w", name, err)
	}
	return tpl, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
