package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/drain/evict"
	"github.com/kubemedic/kubemedic/remediator/evidence"
	"github.com/kubemedic/kubemedic/remediator/rung"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

// Options configures the remediator's controllers.
type Options struct {
	// Namespace is where operation pods and the admission ledger live.
	Namespace string
	// Retention is how long finished operations are kept.
	Retention time.Duration
	// Clock is the time source; nil is the real clock.
	Clock clock.PassiveClock
	// Name is the controller and event source name.
	Name string
	// Registry receives the metrics; nil is controller-runtime's registry,
	// which the manager serves on /metrics.
	Registry prometheus.Registerer
	// Notifier tells the owners of the pods a drain stopped, on Slack; nil
	// or notify.Disabled turns these messages off.
	Notifier notify.Notifier
	// DefaultChannel is where those messages go for pods whose owner cannot
	// be found (see notify.ResolveOwner); "" sends them nowhere.
	DefaultChannel string
	// StackHealth, when not nil, runs the GPU stack health checks
	// (remediator/stackhealth) with these options.
	StackHealth *stackhealth.Options
	// Diagnostics says where capture pods put their bundles; nil or no
	// endpoint: bundles stay in the nodes' spools.
	Diagnostics *evidence.Options
}

// OperationWorkers is how many NodeOperations are reconciled at once.
const OperationWorkers = 4

// Setup registers the indexes, metrics, both reconcilers and the
// diagnostics keeper's Runnables with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Name == "" {
		opts.Name = "kubemedic-remediator"
	}
	if opts.Namespace == "" {
		return fmt.Errorf("controller setup: a namespace for operation pods is required")
	}
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	m := NewMetrics(mgr.GetClient())
	reg := opts.Registry
	if reg == nil {
		reg = metrics.Registry
	}
	if err := m.Register(reg); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	recorder := mgr.GetEventRecorder(opts.Name)
	c := mgr.GetClient()

	nodes := CachedNodes(mgr.GetCache())
	m.objects.nodes = nodes
	pr := &PolicyReconciler{Client: c, Recorder: recorder, Clock: opts.Clock, Metrics: m, Nodes: nodes}
	allPolicies := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return policyRequests(ctx, c)
	})
	opPolicy := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		op := o.(*v1alpha1.NodeOperation)
		if op.Spec.Policy == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: op.Spec.Policy}}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("remediationpolicy").
		For(&v1alpha1.RemediationPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Node{}, allPolicies, builder.WithPredicates(nodeChanged())).
		Watches(&v1alpha1.NodeOperation{}, opPolicy, builder.WithPredicates(phaseChanged())).
		Watches(&v1alpha1.NodeOperationTemplate{}, allPolicies).
		Complete(ctrlmgr.QuietConflicts("remediationpolicy", pr, m.conflicts)); err != nil {
		return fmt.Errorf("set up the policy controller: %w", err)
	}

	evictor, err := evict.NewEvictor(mgr.GetConfig(), mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("set up the evictor: %w", err)
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("set up the log reader: %w", err)
	}
	logs := evidence.ClientsetLogs{Clientset: cs}
	owners, err := setupOwnerNotifier(ctx, mgr, opts, m)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("set up discovery: %w", err)
	}
	dra, err := devicetaint.Served(dc)
	if err != nil {
		return fmt.Errorf("ask whether the API server serves DeviceTaintRule: %w", err)
	}
	log.FromContext(ctx).Info("GPU exclusion", "deviceTaintRule", dra,
		"path", map[bool]string{true: "a GPU-scoped operation taints the GPU alone (DeviceTaintRule)", false: "a GPU-scoped operation cordons the node (no DeviceTaintRule served)"}[dra])
	if dra {
		keeper := &ruleKeeper{Client: c, Reader: mgr.GetAPIReader(), Recorder: recorder, Metrics: m, Clock: opts.Clock}
		if err := mgr.Add(keeper); err != nil {
			return fmt.Errorf("set up the DeviceTaintRule check: %w", err)
		}
	}
	keeper := &evidence.Keeper{Client: c, Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: opts.Clock,
		Namespace: opts.Namespace, Options: opts.Diagnostics, Logs: logs, DRA: dra, Conflicts: m.conflicts}
	or := &OperationReconciler{
		Machines: &rung.Provider{Client: c, Reader: mgr.GetAPIReader(), Namespace: opts.Namespace, Clock: opts.Clock},
		DRA:      dra,
		Drainer:  evictor,
		Client:   c, Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: opts.Clock, Metrics: m, Nodes: nodes,
		Namespace: opts.Namespace, Retention: opts.Retention, Evidence: keeper,
		ledger: &ledger{client: c, reader: mgr.GetAPIReader(), namespace: opts.Namespace},
		owners: owners,
	}
	waiting := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return waitingRequests(ctx, c)
	})
	onNode := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return nodeOpRequests(ctx, c, o.GetName())
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("nodeoperation").
		// Several workers: one operation waiting on a slow outside call (a
		// BMC that takes its 30 s to answer, an eviction) must not hold
		// every other node's operation. Two workers never take the same
		// operation, and admissions stay serialised by the ledger.
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: OperationWorkers}).
		For(&v1alpha1.NodeOperation{}).
		Owns(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == opts.Namespace
		}))).
		Watches(&v1alpha1.NodeOperation{}, waiting, builder.WithPredicates(phaseChanged())).
		Watches(&v1alpha1.RemediationPolicy{}, waiting).
		Watches(&corev1.Node{}, onNode, builder.WithPredicates(nodeChanged())).
		Complete(ctrlmgr.QuietConflicts("nodeoperation", or, m.conflicts)); err != nil {
		return fmt.Errorf("set up the operation controller: %w", err)
	}
	vr := &ValidationPolicyReconciler{Client: c, Reader: mgr.GetAPIReader(), Recorder: recorder, Clock: opts.Clock, Metrics: m, Nodes: nodes, Namespace: opts.Namespace}
	allValidation := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return validationPolicyRequests(ctx, c)
	})
	// A test pod's policy is its record's: the label holds the policy's
	// name only when it fits a label value.
	testPodPolicy := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if _, ok := o.GetLabels()[v1alpha1.LabelValidationPolicy]; !ok || o.GetNamespace() != opts.Namespace {
			return nil
		}
		owner := metav1.GetControllerOf(o)
		if owner == nil || owner.Kind != "NodeValidation" {
			return nil
		}
		rec := &v1alpha1.NodeValidation{}
		if err := c.Get(ctx, client.ObjectKey{Name: owner.Name}, rec); err != nil {
			return validationPolicyRequests(ctx, c)
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: rec.Spec.Policy}}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("validationpolicy").
		For(&v1alpha1.ValidationPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, allValidation, builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Pod{}, testPodPolicy).
		Watches(&v1alpha1.NodeOperationTemplate{}, allValidation).
		Complete(ctrlmgr.QuietConflicts("validationpolicy", vr, m.conflicts)); err != nil {
		return fmt.Errorf("set up the validation policy controller: %w", err)
	}
	if opts.StackHealth != nil {
		sh := *opts.StackHealth
		if sh.Clock == nil {
			sh.Clock = opts.Clock
		}
		if sh.Metrics == nil {
			sh.Metrics = m.stack
		}
		if sh.Conflicts == nil {
			sh.Conflicts = m.conflicts
		}
		if err := stackhealth.Setup(mgr, sh); err != nil {
			return err
		}
	}
	if err := keeper.SetupWithManager(mgr); err != nil {
		return err
	}
	log.FromContext(ctx).Info("Controllers set up", "namespace", opts.Namespace, "retention", opts.Retention)
	return nil
}

// setupOwnerNotifier adds the Slack sender to mgr and returns what tells pod
// owners about drains; nil, and no sender, when Slack is not configured.
func setupOwnerNotifier(ctx context.Context, mgr ctrl.Manager, opts Options, m *Metrics) (*ownerNotifier, error) {
	if _, off := opts.Notifier.(notify.Disabled); off || opts.Notifier == nil {
		log.FromContext(ctx).Info("No Slack notifier: the owners of pods a drain stops are not told")
		return nil, nil
	}
	host, err := os.Hostname()
	if err != nil {
		host = "kubemedic-remediator"
	}
	s := newSender(opts.Notifier, mgr.GetClient(), mgr.GetAPIReader(), opts.Clock, claimerName(host),
		noticeQueueSize, noticeTimeout, m.notifications, mgr.GetLogger().WithName(senderName))
	s.conflicts = m.conflicts.WithLabelValues(senderName)
	if err := mgr.Add(s); err != nil {
		return nil, fmt.Errorf("add the Slack sender: %w", err)
	}
	return &ownerNotifier{
		sender:         s,
		reader:         mgr.GetAPIReader(),
		defaultChannel: opts.DefaultChannel,
	}, nil
}

func policyRequests(ctx context.Context, c client.Reader) []reconcile.Request {
	var list v1alpha1.RemediationPolicyList
	if err := c.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing policies from the cache failed")
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, p := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}}
	}
	return out
}

// waitingRequests are the operations that wait for admission: any finished
// or started operation, or a policy's status, may let them through.
// validationPolicyRequests enqueues every ValidationPolicy.
func validationPolicyRequests(ctx context.Context, c client.Reader) []reconcile.Request {
	var l v1alpha1.ValidationPolicyList
	if err := c.List(ctx, &l); err != nil {
		log.FromContext(ctx).Error(err, "List ValidationPolicies to enqueue")
		return nil
	}
	out := make([]reconcile.Request, 0, len(l.Items))
	for _, p := range l.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return out
}

func waitingRequests(ctx context.Context, c client.Reader) []reconcile.Request {
	var list v1alpha1.NodeOperationList
	if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "Listing operations from the cache failed")
		return nil
	}
	var out []reconcile.Request
	for _, op := range list.Items {
		switch op.Status.Phase {
		case "", v1alpha1.PhasePending, v1alpha1.PhaseWaitingForBudget:
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: op.Name}})
		}
	}
	return out
}

// nodeOpRequests are the unfinished operations on a node.
func nodeOpRequests(ctx context.Context, c client.Reader, node string) []reconcile.Request {
	var list v1alpha1.NodeOperationList
	if err := c.List(ctx, &list, client.MatchingFields{indexOpNode: node}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "Listing operations of a node from the cache failed", "node", node)
		return nil
	}
	var out []reconcile.Request
	for _, op := range list.Items {
		if !op.Status.Phase.Finished() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: op.Name}})
		}
	}
	return out
}

// phaseChanged passes creations, deletions and phase changes of operations.
func phaseChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*v1alpha1.NodeOperation)
			n, ok2 := e.ObjectNew.(*v1alpha1.NodeOperation)
			return !ok1 || !ok2 || o.Status.Phase != n.Status.Phase
		},
	}
}

// nodeChanged passes node changes that can change a decision: labels,
// taints, cordon, conditions (but not their heartbeats), boot ID, GPU
// resources. Heartbeats of thousands of nodes are dropped here.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				o.Annotations[v1alpha1.AnnotationCordonedBy] != n.Annotations[v1alpha1.AnnotationCordonedBy] ||
				o.Spec.Unschedulable != n.Spec.Unschedulable ||
				!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
				o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID ||
				!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
				!equality.Semantic.DeepEqual(o.Status.Capacity, n.Status.Capacity) ||
				conditionsChanged(o.Status.Conditions, n.Status.Conditions)
		},
	}
}

func conditionsChanged(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return true
	}
	type key struct {
		status          corev1.ConditionStatus
		reason, message string
		since           int64
	}
	m := make(map[corev1.NodeConditionType]key, len(a))
	for _, c := range a {
		m[c.Type] = key{c.Status, c.Reason, c.Message, c.LastTransitionTime.Unix()}
	}
	for _, c := range b {
		k, ok := m[c.Type]
		if !ok || k != (key{c.Status, c.Reason, c.Message, c.LastTransitionTime.Unix()}) {
			return true
		}
	}
	return false
}
