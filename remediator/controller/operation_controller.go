package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
	"github.com/kubemedic/kubemedic/remediator/evidence"
	"github.com/kubemedic/kubemedic/remediator/operationpod"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/rung"
)

// OperationReconciler drives NodeOperations through their lifecycle. It
// reads what the operation's phase needs, asks plan.Advance for the next
// step, makes that step's one effect, and writes the status once per pass.
type OperationReconciler struct {
	Client client.Client
	// Reader reads the API server without the cache, where a stale read
	// would be unsafe (the admission ledger, nodes before a cordon), and
	// for what the cache does not hold (the pods of a node being drained).
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Metrics  *Metrics
	// Nodes lists the cached nodes without copying them (CachedNodes);
	// nil: a List through Client.
	Nodes NodeLister
	// Drainer evicts and deletes pods for the drain (an *evict.Evictor,
	// whose client does not wait out a disruption budget's Retry-After
	// inside one call).
	Drainer drain.Runner
	// Namespace is where operation pods run.
	Namespace string
	// Retention is how long finished operations are kept; plan.Retention
	// stretches it to the longest attempt-cap window and node cooldown of
	// any policy, which are counted from finished operations.
	Retention time.Duration

	// Machines asks Cluster API, Metal3 and BMCs for machine operations.
	Machines *rung.Provider
	// DRA: the API server serves DeviceTaintRule, so a GPU-scoped
	// operation excludes the GPU alone instead of cordoning the node.
	DRA bool
	// Evidence captures the node's diagnostics before a repair and keeps
	// them; nil: no store, bundles stay in the nodes' spools.
	Evidence *evidence.Keeper

	ledger *ledger
	// owners tells the owners of the pods a drain stops; nil: nobody is told.
	owners *ownerNotifier
}

var _ reconcile.Reconciler = &OperationReconciler{}

// maxSteps bounds the lifecycle steps of one pass: the longest run that
// needs no waiting (Pending → WaitingForBudget → Cordoning → Capturing →
// Draining → Running → Verifying → Validating → finished) is shorter.
const maxSteps = 10

// Reconcile moves one operation as far through its lifecycle as it can go
// now, writes its status once, then emits the Events of its transitions
// (those of an effect a retry never makes again are emitted when it is made).
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
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: op.Spec.NodeName}, node); apierrors.IsNotFound(err) {
		node = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", op.Spec.NodeName, err)
	}

	out, err := r.advance(ctx, op, node)
	if !out.deleted && err == nil {
		out.requeue = shortest(out.requeue, r.evidence().CheckSpooled(ctx, op))
	}
	if !out.deleted && !equality.Semantic.DeepEqual(orig.Status, op.Status) {
		if perr := r.Client.Status().Patch(ctx, op, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsNotFound(perr) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patch status of operation %s: %w", op.Name, perr)
		}
		defer awaitOwnWrite(ctx, r.Client, op, orig.ResourceVersion)
	}
	r.emit(op, node, out.events)
	for _, f := range out.afterWrite {
		f()
	}
	if !out.deleted {
		out.requeue = shortest(out.requeue, r.owners.owe(op, r.Clock.Now()))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: out.requeue}, nil
}

// emit records the Events on the operation and, when it exists, its node.
func (r *OperationReconciler) emit(op *v1alpha1.NodeOperation, node *corev1.Node, events []plan.Event) {
	for _, e := range events {
		r.Recorder.Eventf(op, related(node), e.Type, e.Reason, e.Action, "%s", e.Note)
		if node != nil {
			r.Recorder.Eventf(node, op, e.Type, e.Reason, e.Action, "%s: %s", op.Name, e.Note)
		}
	}
}

// related is node as an Event's related object: none when node is nil. A
// nil *corev1.Node in the interface panics the recorder (an operation on a
// node that does not exist, test/scale/remediator's floor).
func related(node *corev1.Node) runtime.Object {
	if node == nil {
		return nil
	}
	return node
}

// advanced is what the steps of one pass leave to do once the status is
// written.
type advanced struct {
	events []plan.Event
	// afterWrite are metric updates: a pass retried after a conflict must
	// not count twice.
	afterWrite []func()
	requeue    time.Duration
	// deleted: the operation is gone; there is no status to write.
	deleted bool
}

// advance takes the operation through as many lifecycle steps as it can go
// now, recording each on op.Status: read what the phase needs, ask
// plan.Advance, make the step's effect, record it, and go on while the
// phase changes. A failed effect ends the pass with the steps before it
// recorded.
func (r *OperationReconciler) advance(ctx context.Context, op *v1alpha1.NodeOperation, node *corev1.Node) (advanced, error) {
	var out advanced
	now := r.Clock.Now()
	for range maxSteps {
		st, err := r.observe(ctx, op, node, now)
		if err != nil {
			return out, err
		}
		t := plan.Advance(st.in)
		if plan.HoldForEvents(t.Effect, len(out.events)) {
			// First write and tell the steps before it, so that the Events
			// keep their order.
			out.requeue = shortest(out.requeue, time.Second)
			return out, nil
		}
		retry, err := r.effect(ctx, st, &t)
		if err != nil {
			return out, err
		}
		if t.LinkBundle {
			r.evidence().Link(ctx, t.Status.Diagnostics, now)
		}
		if retry {
			out.requeue = shortest(out.requeue, time.Second)
			return out, nil
		}
		// The effect is made: told now, as the status write that follows
		// may fail, and its retry does not make it again.
		onEffect, later := plan.SplitEvents(t.Events)
		r.emit(op, st.in.Node, onEffect)
		if t.Status.Phase != op.Status.Phase {
			log.FromContext(ctx).Info("Advancing operation", "from", op.Status.Phase, "to", t.Status.Phase, "effect", t.Effect, "message", t.Status.Message)
		}
		before := op.Status.Phase
		if err := r.recordHistory(ctx, before, op, t.Status); err != nil {
			return out, err
		}
		if t.Validation != nil {
			// Before the status: a failed write is retried, and the
			// condition, keyed by type, is written again unchanged.
			if err := r.setValidationCondition(ctx, op.Spec.NodeName, t.Validation); err != nil {
				return out, err
			}
		}
		op.Status = t.Status
		out.events = append(out.events, later...)
		out.afterWrite = append(out.afterWrite, r.metrics(op, t)...)
		out.requeue = shortest(out.requeue, t.RequeueAfter)
		if t.Effect == plan.EffectDeleteOperation {
			out.deleted = true
			return out, nil
		}
		if op.Status.Phase == before {
			return out, nil
		}
	}
	return out, nil
}

// shortest is the sooner of two requeue delays; zero is none.
func shortest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// step is what one lifecycle step reads: Advance's input and what its
// effect needs besides.
type step struct {
	in plan.AdvanceInput
	// The admission ledger as read, for EffectReserve.
	ledgerCM  *corev1.ConfigMap
	reserved  map[string]bool
	opsByName map[string]*v1alpha1.NodeOperation
}

// observe reads what the operation's phase needs. node is the cached node
// (nil when it does not exist).
func (r *OperationReconciler) observe(ctx context.Context, op *v1alpha1.NodeOperation, node *corev1.Node, now time.Time) (*step, error) {
	st := &step{in: plan.AdvanceInput{Op: op, Node: node, Namespace: r.Namespace, Now: now}}
	var err error
	switch op.Status.Phase {
	case "", v1alpha1.PhasePending:
		if !op.Spec.Quarantine {
			st.in.Template, err = r.template(ctx, op.Spec.Operation)
		}
	case v1alpha1.PhaseWaitingForBudget:
		if err = r.admission(ctx, st); err == nil {
			st.in.Device, st.in.NoDevice, err = r.device(ctx, op)
		}
	case v1alpha1.PhaseCordoning:
		if !op.Spec.Quarantine {
			if st.in.Template, err = r.template(ctx, op.Spec.Operation); err != nil {
				break
			}
			if st.in.Device, st.in.NoDevice, err = r.device(ctx, op); err != nil {
				break
			}
			// From the API server: a fresh human cordon must never be taken
			// for an operation's.
			n := &corev1.Node{}
			if gerr := r.Reader.Get(ctx, client.ObjectKey{Name: op.Spec.NodeName}, n); apierrors.IsNotFound(gerr) {
				st.in.Node = nil
			} else if gerr != nil {
				err = fmt.Errorf("get node %s: %w", op.Spec.NodeName, gerr)
			} else {
				st.in.Node = n
			}
		}
	case v1alpha1.PhaseCapturing:
		if dg := op.Spec.Diagnostics; dg != nil {
			if st.in.CaptureTemplate, err = r.template(ctx, dg.Operation); err != nil {
				break
			}
			st.in.CapturePod, err = r.capturePod(ctx, op)
		}
	case v1alpha1.PhaseDraining:
		// From the API server: the cache holds only the operation pods.
		var pods corev1.PodList
		if lerr := r.Reader.List(ctx, &pods, client.MatchingFields{indexPodNode: op.Spec.NodeName}); lerr != nil {
			err = fmt.Errorf("list pods on node %s: %w", op.Spec.NodeName, lerr)
			break
		}
		st.in.Pods = pods.Items
		// A pod whose notice waits for its stop and that is going or gone
		// was stopped, by a pass whose record was lost (owed.go).
		op.Status.OwnerNotices = noticesSeenStopped(op.Status.OwnerNotices, pods.Items, now)
	case v1alpha1.PhaseRunning:
		if st.in.Template, err = r.template(ctx, op.Spec.Operation); err != nil {
			break
		}
		if tpl := st.in.Template; tpl != nil && tpl.Spec.MachineKind() != "" {
			// From the API server: the BMC's request marker is on the
			// Node, and a cache that has not seen it yet (a retry right
			// after a failed status write) would power-cycle it twice.
			fresh := &corev1.Node{}
			if gerr := r.Reader.Get(ctx, client.ObjectKey{Name: op.Spec.NodeName}, fresh); apierrors.IsNotFound(gerr) {
				fresh = nil
			} else if gerr != nil {
				err = fmt.Errorf("get node %s: %w", op.Spec.NodeName, gerr)
				break
			}
			st.in.Node = fresh
			st.in.Machine, err = r.Machines.Observe(ctx, tpl, op, fresh)
		} else {
			st.in.Pod, err = r.operationPod(ctx, op)
		}
	case v1alpha1.PhaseVerifying:
	case v1alpha1.PhaseValidating:
		if v := op.Spec.Validate; v != nil {
			if st.in.ValidateTemplate, err = r.template(ctx, v.Operation); err != nil {
				break
			}
			st.in.ValidatePods, err = r.validatePods(ctx, op)
		}
	default:
		var all []*plan.Policy
		if all, err = compiledPolicies(ctx, r.Client); err == nil {
			st.in.Retention = plan.Retention(r.Retention, all)
		}
	}
	return st, err
}

// admission reads the state admission decides from: the policies, nodes and
// operations from the cache, and the admission ledger from the API server.
func (r *OperationReconciler) admission(ctx context.Context, st *step) error {
	op := st.in.Op
	cm, reserved, err := r.ledger.load(ctx)
	if err != nil {
		return err
	}
	st.ledgerCM, st.reserved = cm, reserved
	all, err := compiledPolicies(ctx, r.Client)
	if err != nil {
		return err
	}
	nodes, ops, err := listNodesAndOps(ctx, r.Client, r.Nodes)
	if err != nil {
		return err
	}
	// A reserved name counts as running even when this cache has not seen
	// its operation yet: another leader may have created and admitted it
	// just now. Read those from the API server.
	if ops, err = r.withReserved(ctx, ops, reserved); err != nil {
		return err
	}
	st.opsByName = make(map[string]*v1alpha1.NodeOperation, len(ops))
	for _, o := range ops {
		st.opsByName[o.Name] = o
	}
	if st.in.Reserved = reserved[op.Name]; !st.in.Reserved {
		st.in.Admission = plan.Admit(plan.AdmitInput{Op: op, Node: st.in.Node, Policies: all, Nodes: nodes, Ops: ops, Reserved: reserved, Now: st.in.Now})
	}
	return nil
}

// effect makes the transition's effect. retry is true when the step must be
// decided again on fresh state (another admission won the ledger); the
// transition is then not recorded.
func (r *OperationReconciler) effect(ctx context.Context, st *step, t *plan.Transition) (retry bool, err error) {
	op := st.in.Op
	switch t.Effect {
	case plan.EffectReserve:
		if err := r.ledger.reserve(ctx, st.ledgerCM, st.reserved, op.Name, st.opsByName); err != nil {
			if apierrors.IsConflict(err) {
				return true, nil
			}
			return false, err
		}
	case plan.EffectQuarantine:
		return false, r.quarantine(ctx, op.Spec.NodeName, op.Name)
	case plan.EffectCordon:
		return false, r.cordon(ctx, st.in.Node, op.Name)
	case plan.EffectDrain:
		// The messages owed to the owners of the pods about to be stopped
		// are written first, by this pass's status write; the next pass
		// stops the pods.
		hold, unrecorded := r.owners.prepare(ctx, op, st.in.Pods, t.Drain)
		if hold {
			return true, nil
		}
		stopped, blocked, err := r.Drainer.Run(ctx, t.Drain)
		r.owners.stopped(ctx, &t.Status, stopped, unrecorded, st.in.Now)
		t.Status.Message = plan.DrainProgress(t.Drain, blocked)
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Evicting pods failed; retrying")
		}
	case plan.EffectCreatePod:
		pod := operationpod.Build(op, st.in.Template, r.Namespace)
		if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create operation pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	case plan.EffectCreateCapturePod:
		pod := r.evidence().CapturePod(ctx, op, st.in.CaptureTemplate, t)
		if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create capture pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		// What the API server knows, at the same moment as the node's
		// capture.
		r.evidence().MustGather(ctx, op, t, st.in.Now)
	case plan.EffectDeleteCapturePod:
		pod := st.in.CapturePod
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete timed-out capture pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	case plan.EffectCreateValidationPod:
		if err := r.deleteOtherValidationPods(ctx, st, t); err != nil {
			return false, err
		}
		return false, r.createValidationPod(ctx, op, t, st)
	case plan.EffectDeleteValidationPod:
		return false, r.deleteOtherValidationPods(ctx, st, t)
	case plan.EffectDeletePod:
		pod := st.in.Pod
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete timed-out operation pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	case plan.EffectUncordon:
		if err := r.includeGPU(ctx, op); err != nil {
			return false, err
		}
		return false, r.uncordon(ctx, op.Spec.NodeName, op.Name)
	case plan.EffectExcludeGPU:
		return false, r.excludeGPU(ctx, &v1alpha1.NodeOperation{ObjectMeta: op.ObjectMeta, Spec: op.Spec, Status: t.Status}, st.in.Device)
	case plan.EffectMachineRequest:
		if err := r.Machines.Request(ctx, st.in.Template, op, st.in.Node); err != nil {
			if rung.IsPermanent(err) {
				plan.MachineFailed(t, op, err.Error(), st.in.Now)
				return false, nil
			}
			if rung.Asked(err) {
				// The BMC accepted the reset: told, though not recorded;
				// the next pass finds its intent on the Node and judges
				// from evidence before it asks again.
				onEffect, _ := plan.SplitEvents(t.Events)
				r.emit(op, st.in.Node, onEffect)
			}
			return false, fmt.Errorf("operation %s: ask %s: %w", op.Name, t.Status.MachineRequest.Target, err)
		}
	case plan.EffectDeleteOperation:
		log.FromContext(ctx).Info("Deleting finished operation after retention", "completed", op.Status.CompletionTime.Time, "retention", st.in.Retention)
		if err := r.Client.Delete(ctx, op, client.Preconditions{UID: &op.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete operation %s after retention: %w", op.Name, err)
		}
	}
	return false, nil
}

// metrics are the metric updates of a transition, made once the status
// that records it is written: a pass retried after a conflict must not
// count twice.
func (r *OperationReconciler) metrics(op *v1alpha1.NodeOperation, t plan.Transition) []func() {
	var out []func()
	policy := op.Spec.Policy
	if reason := t.Blocked; reason != "" {
		out = append(out, func() { r.Metrics.blocked.WithLabelValues(policy, reason).Inc() })
	}
	if result := t.Captured; result != "" {
		out = append(out, func() { r.Metrics.captures.WithLabelValues(policy, string(result)).Inc() })
	}
	if v := t.Status.Validation; v != nil && t.Validation != nil {
		result, test := string(v.Result), v.Test
		if test == "" {
			test = "none"
		}
		out = append(out, func() { r.Metrics.validations.WithLabelValues(policy, test, result).Inc() })
		if v.StartTime != nil && v.CompletionTime != nil {
			took := v.CompletionTime.Sub(v.StartTime.Time)
			out = append(out, func() { r.Metrics.validationSeconds.WithLabelValues(policy, result).Observe(took.Seconds()) })
		}
	}
	if took := t.Remediated; took > 0 {
		step := stepLabel(op)
		out = append(out, func() { r.Metrics.timeToRemediate.WithLabelValues(policy, step).Observe(took.Seconds()) })
	}
	return out
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
