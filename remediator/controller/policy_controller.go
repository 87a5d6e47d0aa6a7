package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// PolicyReconciler evaluates RemediationPolicies and creates NodeOperations.
type PolicyReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Metrics  *Metrics
	// Nodes lists the cached nodes without copying them (CachedNodes);
	// nil: a List through Client.
	Nodes NodeLister
}

var _ reconcile.Reconciler = &PolicyReconciler{}

// Reconcile evaluates one policy.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	pol := &v1alpha1.RemediationPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, pol); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.breakerOpen.DeleteLabelValues(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get policy %s: %w", req.Name, err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("policy", klog.KObj(pol)))
	orig := pol.DeepCopy()
	out, err := r.reconcile(ctx, pol)
	// The wait until the next decision is counted from the pass's end (this
	// runs after the wait for the cache below): counted from its start, it
	// came as late as the pass took (46 ms of list, evaluation and status
	// patch at 10,000 nodes on a loaded API server, test/scale/remediator's
	// trace).
	defer func() {
		if !out.next.IsZero() && err == nil {
			res = ctrl.Result{RequeueAfter: requeueAfter(out.next, out.start, r.Clock.Now())}
		}
	}()
	// The status carries the breaker that gates creation: write it first,
	// with an optimistic lock, and create only when that write succeeded.
	if !equality.Semantic.DeepEqual(orig.Status, pol.Status) {
		if perr := r.Client.Status().Patch(ctx, pol, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsNotFound(perr) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("patch status of policy %s: %w", pol.Name, perr)
		}
		defer awaitOwnWrite(ctx, r.Client, pol, orig.ResourceVersion)
	}
	// Told once the status that records them is written: a pass retried
	// after a conflict does not tell twice.
	for _, e := range out.events {
		r.Recorder.Eventf(pol, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
	creates := out.creates
	// In parallel: one round trip after another, 50 creates (1 % of 5,000
	// nodes) took 1.4 s on a loaded API server (test/scale/remediator).
	var wg sync.WaitGroup
	sem := make(chan struct{}, createParallelism)
	created := make([]client.Object, len(creates))
	for i, c := range creates {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if r.create(ctx, pol, c.op, c.node) {
				created[i] = c.op
			}
		})
	}
	wg.Wait()
	// Told once every create is answered: the Events' own writes (two per
	// operation) competed with the creates still in flight, and spread a
	// burst of 50 creates over 100 ms instead of 50 (test/scale/remediator,
	// beside its floor).
	for i, c := range creates {
		if created[i] != nil {
			r.told(c.op, c.node)
		}
	}
	// The next pass may start at once (a node event of the burst): it
	// must see these operations, or it tries to create them again and
	// meets AlreadyExists (37 of 50 at 2,500 nodes, test/scale/remediator).
	awaitCached(ctx, r.Client, created)
	return ctrl.Result{}, err
}

// createParallelism bounds the concurrent creates of one policy pass. The
// API server answers concurrent creates together (their etcd writes share
// a commit): at 10,000 nodes, 16 creates in flight came back together
// after 75 ms, so 50 creates took three such rounds; 64 in flight take one
// for a burst of that size (test/scale/remediator's trace and floor).
const createParallelism = 64

// creation is an operation to create, with its node for the Events.
type creation struct {
	op   *v1alpha1.NodeOperation
	node *corev1.Node
}

// passOutcome is what a pass leaves to do once the policy's status is
// written: the Events that tell of it and the operations to create.
type passOutcome struct {
	events  []plan.Event
	creates []creation
	// next is when the plan can change with no object changing; zero:
	// never. start is when the pass began.
	next, start time.Time
}

// reconcile sets the status on pol (patched by the caller) and returns what
// to do once that status is written. The decisions are plan.Pass's, the
// same that `kubemedic policy simulate` shows.
func (r *PolicyReconciler) reconcile(ctx context.Context, pol *v1alpha1.RemediationPolicy) (passOutcome, error) {
	var out passOutcome
	logger := log.FromContext(ctx)
	now := r.Clock.Now()
	all, err := compiledPolicies(ctx, r.Client)
	if err != nil {
		return out, err
	}
	nodes, ops, err := listNodesAndOps(ctx, r.Client, r.Nodes)
	if err != nil {
		return out, err
	}
	templates, err := templateNames(ctx, r.Client)
	if err != nil {
		return out, err
	}
	pass := plan.Pass(plan.PassInput{Evaluate: []*v1alpha1.RemediationPolicy{pol}, Policies: all,
		Nodes: nodes, Ops: ops, Templates: templates, Now: now}).Policies[0]
	pol.Status = pass.Status
	if pass.Invalid != nil {
		out.events = append(out.events, plan.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.EventPolicyInvalid, Action: "Evaluate", Note: pass.Invalid.Error()})
		return out, reconcile.TerminalError(pass.Invalid)
	}

	pl := pass.Plan
	b := pl.Breaker
	switch {
	case b.Opened:
		logger.Info("Opening circuit breaker", "unhealthy", pl.Unhealthy, "limit", pl.Limit)
		out.events = append(out.events, plan.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonBreakerOpen, Action: "OpenBreaker", Note: b.Message})
	case pass.BreakerClosed:
		logger.Info("Closing circuit breaker", "reason", b.Reason)
		out.events = append(out.events, plan.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventBreakerClosed, Action: "CloseBreaker", Note: b.Reason + ": " + b.Message})
	}
	if b.Open {
		r.Metrics.breakerOpen.WithLabelValues(pol.Name).Set(1)
	} else {
		r.Metrics.breakerOpen.WithLabelValues(pol.Name).Set(0)
	}

	if len(pl.Create) > 0 {
		nodeByName := make(map[string]*corev1.Node, len(nodes))
		for _, n := range nodes {
			nodeByName[n.Name] = n
		}
		for _, op := range pl.Create {
			out.creates = append(out.creates, creation{op, nodeByName[op.Spec.NodeName]})
		}
	}
	out.next, out.start = pl.Next, now
	return out, nil
}

// requeueAfter is the wait, at now, until next: when the plan of a pass that
// began at start can change with no object changing (a condition's for
// running out, a window opening, a cooldown ending). The pass then runs when
// next comes, not a second later: with a floor of one second, a pass in a
// burst of node events pushed the act on a for that ran out just after it
// a whole second later (p50 383 ms beyond for at 10,000 nodes,
// test/scale/remediator). A next that came while the pass ran is looked at
// at once; one that had come before it began (a change the pass could not
// act on yet) waits a second, never a loop.
func requeueAfter(next, start, now time.Time) time.Duration {
	switch {
	case next.After(now):
		return next.Sub(now)
	case next.After(start):
		return time.Millisecond
	default:
		return time.Second
	}
}

// create creates op; it reports whether it created it (told tells of it).
func (r *PolicyReconciler) create(ctx context.Context, pol *v1alpha1.RemediationPolicy, op *v1alpha1.NodeOperation, node *corev1.Node) bool {
	logger := log.FromContext(ctx).WithValues("nodeOperation", klog.KObj(op), "node", op.Spec.NodeName)
	logger.Info("Creating operation", "step", op.Spec.Step, "reason", op.Spec.Reason)
	err := r.Client.Create(ctx, op)
	switch {
	case apierrors.IsAlreadyExists(err):
		logger.V(2).Info("Operation exists already")
		return false
	case err != nil && ctx.Err() != nil:
		// The shutdown: the next leader's pass creates it.
		logger.V(1).Info("Creating operation ended by the shutdown", "error", err.Error())
		return false
	case err != nil:
		logger.Error(err, "Creating operation failed")
		r.Recorder.Eventf(pol, nil, corev1.EventTypeWarning, v1alpha1.EventCreateFailed, "Create", "create operation %s for node %s: %v", op.Name, op.Spec.NodeName, err)
		return false
	}
	return true
}

// told records the Events of op's creation on op and its node.
func (r *PolicyReconciler) told(op *v1alpha1.NodeOperation, node *corev1.Node) {
	note := fmt.Sprintf("created %s: %s", op.Name, op.Spec.Reason)
	r.Recorder.Eventf(op, related(node), corev1.EventTypeNormal, v1alpha1.EventOperationCreated, "Create", "%s", note)
	if node != nil {
		r.Recorder.Eventf(node, op, corev1.EventTypeNormal, v1alpha1.EventOperationCreated, "Create", "%s", note)
	}
}

// compiledPolicies lists and compiles every policy; invalid ones are left out
// (their own reconcile reports them).
func compiledPolicies(ctx context.Context, c client.Reader) ([]*plan.Policy, error) {
	var list v1alpha1.RemediationPolicyList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	out := make([]*plan.Policy, 0, len(list.Items))
	for i := range list.Items {
		if p, err := plan.Compile(&list.Items[i]); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// listNodesAndOps lists nodes (through nodes when set) and operations from
// the cache without copying; the objects must not be changed.
func listNodesAndOps(ctx context.Context, c client.Reader, nodes NodeLister) ([]*corev1.Node, []*v1alpha1.NodeOperation, error) {
	ns, err := nodesOf(ctx, nodes, c)
	if err != nil {
		return nil, nil, err
	}
	var ol v1alpha1.NodeOperationList
	if err := c.List(ctx, &ol, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list operations: %w", err)
	}
	ops := make([]*v1alpha1.NodeOperation, len(ol.Items))
	for i := range ol.Items {
		ops[i] = &ol.Items[i]
	}
	return ns, ops, nil
}

func templateNames(ctx context.Context, c client.Reader) (map[string]bool, error) {
	var tl v1alpha1.NodeOperationTemplateList
	if err := c.List(ctx, &tl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list operation templates: %w", err)
	}
	out := make(map[string]bool, len(tl.Items))
	for _, t := range tl.Items {
		out[t.Name] = true
	}
	return out, nil
}
