package stackhealth

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Defaults of Options, for the NVIDIA GPU Operator.
const (
	DefaultDevicePluginSelector = "app=nvidia-device-plugin-daemonset"
	DefaultDCGMExporterSelector = "app=nvidia-dcgm-exporter"
	DefaultPodNotReadyAfter     = 5 * time.Minute
	// DefaultTerminatingAfter is 10 minutes past the deadline the grace
	// period set: the kubelet kills what outlives its grace period at once,
	// and unmounting volumes or releasing devices takes seconds to a couple
	// of minutes, so a pod still there after 10 minutes is held by
	// something that will not go away alone (a D-state process, a hung NFS
	// or CSI unmount, a dead kubelet), while its GPUs sit idle.
	DefaultTerminatingAfter = 10 * time.Minute
	// DefaultMIGPendingAfter leaves the MIG manager time to drain the GPU
	// clients, repartition and, where needed, reboot the node.
	DefaultMIGPendingAfter = 30 * time.Minute
	DefaultPeriod          = 30 * time.Second
	// DefaultDetectorSelector selects the pods of deploy/npd's DaemonSet,
	// node-problem-detector running kubemedic-detect.
	DefaultDetectorSelector = "app.kubernetes.io/name=kubemedic-npd"
	// DetectorHeartbeatPeriod is how often node-problem-detector rewrites
	// its conditions, with a new lastHeartbeatTime, while none changes:
	// its --k8s-exporter-heartbeat-period, whose default deploy/npd keeps.
	// A change of any condition rewrites them all at once too.
	DetectorHeartbeatPeriod = 5 * time.Minute
	// DetectorCheckInterval is the longest invoke_interval of deploy/npd's
	// monitors (gpu, gpu-memory, gpu-recovery, dstate).
	DetectorCheckInterval = time.Minute
	// DefaultDetectorStaleAfter: a heartbeat is stale when it is older
	// than node-problem-detector's heartbeat period plus three of its
	// check intervals. A healthy NPD is never more than a period behind;
	// the three intervals leave it room for a restart or a retried write.
	DefaultDetectorStaleAfter = DetectorHeartbeatPeriod + 3*DetectorCheckInterval
)

// Options configures the stack health checks.
type Options struct {
	// DevicePluginSelector and DCGMExporterSelector select the pods of the
	// two DaemonSets (labels.Parse syntax); empty is the default.
	DevicePluginSelector, DCGMExporterSelector string
	// DetectorSelector selects node-problem-detector's DaemonSet pods,
	// which run kubemedic's detectors; empty is the default.
	DetectorSelector string
	// SkipDetectors turns the detector check off: no node gets a
	// kubemedic_remediation_node_detectors_missing series. For clusters
	// where the detectors do not run as pods (the demo runs NPD as
	// processes).
	SkipDetectors bool
	// Metrics receive the detector check's verdicts; nil: metrics of
	// their own, registered nowhere.
	Metrics *Metrics
	// Settings are the checks' thresholds; zero durations are the defaults.
	Settings Settings
	// Period is how often each GPU node is checked again; zero is
	// DefaultPeriod. Pods are not watched (not cached, see
	// remediator/controller.CacheOptions), so it also bounds how late a
	// pod change is seen.
	Period time.Duration
	// Clock is the time source; nil is the real clock.
	Clock clock.PassiveClock
	// Conflicts counts the reconciles that conflicted and were requeued
	// quietly (ctrlmgr.QuietConflicts), by controller; nil: not counted.
	Conflicts *prometheus.CounterVec
}

// selectors are the parsed pod selectors of Options.
type selectors struct{ devicePlugin, dcgmExporter, detector labels.Selector }

func (o *Options) complete() (sel selectors, err error) {
	if o.DevicePluginSelector == "" {
		o.DevicePluginSelector = DefaultDevicePluginSelector
	}
	if o.DCGMExporterSelector == "" {
		o.DCGMExporterSelector = DefaultDCGMExporterSelector
	}
	if o.DetectorSelector == "" {
		o.DetectorSelector = DefaultDetectorSelector
	}
	if sel.devicePlugin, err = labels.Parse(o.DevicePluginSelector); err != nil {
		return sel, fmt.Errorf("device plugin pod selector %q: %w", o.DevicePluginSelector, err)
	}
	if sel.dcgmExporter, err = labels.Parse(o.DCGMExporterSelector); err != nil {
		return sel, fmt.Errorf("dcgm-exporter pod selector %q: %w", o.DCGMExporterSelector, err)
	}
	if sel.detector, err = labels.Parse(o.DetectorSelector); err != nil {
		return sel, fmt.Errorf("detector pod selector %q: %w", o.DetectorSelector, err)
	}
	if sel.devicePlugin.Empty() || sel.dcgmExporter.Empty() || sel.detector.Empty() {
		return sel, fmt.Errorf("stack pod selectors must select something: %q, %q, %q", o.DevicePluginSelector, o.DCGMExporterSelector, o.DetectorSelector)
	}
	s := &o.Settings
	if s.PodNotReadyAfter == 0 {
		s.PodNotReadyAfter = DefaultPodNotReadyAfter
	}
	if s.TerminatingAfter == 0 {
		s.TerminatingAfter = DefaultTerminatingAfter
	}
	if s.MIGPendingAfter == 0 {
		s.MIGPendingAfter = DefaultMIGPendingAfter
	}
	if s.DetectorStaleAfter == 0 {
		s.DetectorStaleAfter = DefaultDetectorStaleAfter
	}
	if s.ExpectedGPUs < 0 || s.PodNotReadyAfter < 0 || s.TerminatingAfter < 0 || s.MIGPendingAfter < 0 || s.DetectorStaleAfter < 0 || o.Period < 0 {
		return sel, fmt.Errorf("stack health: negative count or duration")
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	return sel, nil
}

// controllerName names the stack health controller.
const controllerName = "stackhealth"

// Setup registers the stack health reconciler with mgr. A selector that
// does not parse is an error here, at start.
func Setup(mgr ctrl.Manager, o Options) error {
	r, err := NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), o)
	if err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&corev1.Node{}, builder.WithPredicates(nodeChanged())).
		Complete(ctrlmgr.QuietConflicts(controllerName, r, o.Conflicts)); err != nil {
		return fmt.Errorf("set up the stack health controller: %w", err)
	}
	return nil
}

// NewReconciler returns the reconciler: c reads nodes (from the cache) and
// patches their status; reader lists pods from the API server.
func NewReconciler(c client.Client, reader client.Reader, o Options) (*Reconciler, error) {
	sel, err := o.complete()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		Client: c, Reader: reader, Clock: o.Clock, Settings: o.Settings, Period: o.Period, Metrics: o.Metrics,
		devicePlugin: sel.devicePlugin, dcgmExporter: sel.dcgmExporter,
		since: map[sinceKey]time.Time{}, notDeployed: map[string]time.Time{},
	}
	if !o.SkipDetectors {
		r.detector = sel.detector
	}
	return r, nil
}

// Reconciler sets the stack health conditions of one GPU node per pass.
type Reconciler struct {
	Client   client.Client
	Reader   client.Reader
	Clock    clock.PassiveClock
	Settings Settings
	Period   time.Duration
	// Metrics receive the detector check's verdicts.
	Metrics *Metrics

	devicePlugin, dcgmExporter labels.Selector
	// detector selects the detector pods; nil when the check is off.
	detector labels.Selector

	// mu guards since: when a state without a timestamp of its own (a
	// stack pod missing, a MIG configuration pending) was first seen, by
	// node and what. It is memory only: after a restart the timers start
	// again, which delays a fault and never invents one.
	mu    sync.Mutex
	since map[sinceKey]time.Time
	// notDeployed is when a selector last matched no pod in the cluster,
	// by selector; also guarded by mu. See deployed.
	notDeployed map[string]time.Time
}

var _ reconcile.Reconciler = &Reconciler{}

type sinceKey struct{ node, what string }

// Reconcile checks one node and writes the conditions that changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var node corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &node); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name, nil)
			r.Metrics.setDetectors(req.Name, "")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	}
	if !IsGPUNode(&node) {
		r.forget(node.Name, nil)
		r.Metrics.setDetectors(node.Name, "")
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", klog.KObj(&node)))
	conds, err := r.check(ctx, &node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.write(ctx, &node, conds); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.Period}, nil
}

// check reads the node's pods and runs the checks.
func (r *Reconciler) check(ctx context.Context, node *corev1.Node) ([]corev1.NodeCondition, error) {
	now := r.Clock.Now()
	// The pods of one node, from the API server's watch cache (resource
	// version 0) with its spec.nodeName index: the remediator's cache
	// holds only its own namespace's pods.
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, &client.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name),
		Raw:           &metav1.ListOptions{ResourceVersion: "0"},
	}); err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node.Name, err)
	}

	conds := []corev1.NodeCondition{CheckAllocatable(node, r.Settings, now)}

	comps := make([]Component, 0, 2)
	for _, c := range []struct {
		name            string
		sel             labels.Selector
		missing, notRdy string
	}{
		{"device-plugin", r.devicePlugin, v1alpha1.ReasonDevicePluginMissing, v1alpha1.ReasonDevicePluginNotReady},
		{"dcgm-exporter", r.dcgmExporter, v1alpha1.ReasonDCGMExporterMissing, v1alpha1.ReasonDCGMExporterNotReady},
	} {
		comp := Component{Name: c.name, MissingReason: c.missing, NotReadyReason: c.notRdy, Deployed: true}
		for _, p := range pods.Items {
			if c.sel.Matches(labels.Set(p.Labels)) {
				comp.Pods = append(comp.Pods, p)
			}
		}
		live := slices.ContainsFunc(comp.Pods, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil })
		key := sinceKey{node.Name, "missing " + c.name}
		if live {
			r.clearSince(key)
		} else {
			deployed, err := r.deployed(ctx, c.sel)
			if err != nil {
				return nil, err
			}
			comp.Deployed = deployed
			if deployed {
				comp.MissingSince = r.firstSeen(key, now)
			} else {
				r.clearSince(key)
			}
		}
		comps = append(comps, comp)
	}
	conds = append(conds, CheckStackPods(comps, r.Settings, now), CheckTerminating(pods.Items, r.Settings, now))
	r.reportDetectors(ctx, node, pods.Items, now)

	// The MIG manager's labels say pending but not since when: the timer
	// is this process's first sight of the node pending on this desired
	// configuration.
	config, _ := MIGDesired(node)
	migKey := sinceKey{node.Name, "mig " + config}
	var pendingSince time.Time
	if st := node.Labels[LabelMIGConfigState]; st == "pending" || st == "rebooting" {
		pendingSince = r.firstSeen(migKey, now)
	}
	r.forget(node.Name, func(k sinceKey) bool { return strings.HasPrefix(k.what, "mig ") && k != migKey })
	if pendingSince.IsZero() {
		r.clearSince(migKey)
	}
	if c, ok := CheckMIG(node, pendingSince, r.Settings, now); ok {
		conds = append(conds, c)
	} else if old := findCondition(node, v1alpha1.ConditionMIGConfigFailed); old != nil {
		// The node used MIG and no longer does: the old verdict must not
		// hold, and there is nothing to say it is healthy.
		conds = append(conds, condition(v1alpha1.ConditionMIGConfigFailed, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
			"no %s or %s label: the node does not use MIG", LabelMIGConfig, LabelMIGConfigState))
	}
	return conds, nil
}

// reportDetectors runs the detector check on node and its pods and sets
// the node's kubemedic_remediation_node_detectors_missing series, logging
// when its verdict changes. The verdict is no condition: node-problem-
// detector owns the detectors' conditions, and the check only says that
// they are missing or stale.
func (r *Reconciler) reportDetectors(ctx context.Context, node *corev1.Node, pods []corev1.Pod, now time.Time) {
	if r.detector == nil {
		return
	}
	var mine []corev1.Pod
	for _, p := range pods {
		if r.detector.Matches(labels.Set(p.Labels)) {
			mine = append(mine, p)
		}
	}
	reason, msg := CheckDetectors(node, mine, r.Settings, now)
	old, changed := r.Metrics.setDetectors(node.Name, reason)
	switch {
	case !changed:
	case reason != "":
		log.FromContext(ctx).Info("Detectors not reporting on GPU node", "reason", reason, "message", msg, "selector", r.detector.String())
	default:
		log.FromContext(ctx).Info("Detectors reporting again on GPU node", "was", old, "message", msg)
	}
}

// deployed says whether any pod in the cluster matches sel. A "no" is
// kept for one Period: where a DaemonSet is not deployed at all, every GPU
// node asks on every pass, and the API server answers a label-selector
// LIST that matches nothing by reading every pod in etcd. A "yes" is not
// kept: it is asked only for a node that misses its own pod, and is cheap
// (the first match ends the list).
func (r *Reconciler) deployed(ctx context.Context, sel labels.Selector) (bool, error) {
	key := sel.String()
	r.mu.Lock()
	at, ok := r.notDeployed[key]
	r.mu.Unlock()
	if ok && r.Clock.Since(at) < r.Period {
		return false, nil
	}
	var list corev1.PodList
	if err := r.Reader.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}, client.Limit(1)); err != nil {
		return false, fmt.Errorf("list pods %s: %w", sel, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(list.Items) > 0 {
		delete(r.notDeployed, key)
		return true, nil
	}
	r.notDeployed[key] = r.Clock.Now()
	return false, nil
}

// write patches the conditions whose status, reason or message changed, in
// one strategic-merge patch of the status subresource that merges them by
// type: the other conditions stay. LastTransitionTime is kept while the
// status does not change.
func (r *Reconciler) write(ctx context.Context, node *corev1.Node, conds []corev1.NodeCondition) error {
	now := metav1.NewTime(r.Clock.Now())
	var changed []corev1.NodeCondition
	for _, c := range conds {
		old := findCondition(node, string(c.Type))
		if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		if old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		changed = append(changed, c)
	}
	if len(changed) == 0 {
		return nil
	}
	for _, c := range changed {
		log.FromContext(ctx).V(1).Info("Setting stack health condition", "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": changed}})
	if err != nil {
		return fmt.Errorf("set stack health conditions on node %s: %w", node.Name, err)
	}
	if err := r.Client.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("set stack health conditions on node %s: %w", node.Name, err)
	}
	return nil
}

func findCondition(node *corev1.Node, t string) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func (r *Reconciler) firstSeen(k sinceKey, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.since[k]; ok {
		return t
	}
	r.since[k] = now
	return now
}

func (r *Reconciler) clearSince(k sinceKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.since, k)
}

// forget drops the timers of node that match (all when match is nil).
func (r *Reconciler) forget(node string, match func(sinceKey) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.since, func(k sinceKey, _ time.Time) bool {
		return k.node == node && (match == nil || match(k))
	})
}

// nodeChanged passes node changes the checks read: labels, GPU resources
// and conditions other than heartbeats. Pod changes come with the periodic
// requeue.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
				!equality.Semantic.DeepEqual(o.Status.Capacity, n.Status.Capacity) ||
				conditionsChanged(o.Status.Conditions, n.Status.Conditions)
		},
	}
}

// ownConditions are the conditions this reconciler writes: a change of
// them alone is its own write coming back (or one that the next periodic
// pass corrects) and queues nothing, so a write costs no second check.
var ownConditions = map[corev1.NodeConditionType]bool{
	v1alpha1.ConditionGPUAllocatableMismatch: true, v1alpha1.ConditionGPUStackPodNotReady: true,
	v1alpha1.ConditionPodsStuckTerminating: true, v1alpha1.ConditionMIGConfigFailed: true,
}

// conditionsChanged says whether a condition other than ownConditions
// appeared, went or changed its status, reason or message.
func conditionsChanged(a, b []corev1.NodeCondition) bool {
	type key struct {
		status          corev1.ConditionStatus
		reason, message string
	}
	index := func(cs []corev1.NodeCondition) map[corev1.NodeConditionType]key {
		m := make(map[corev1.NodeConditionType]key, len(cs))
		for _, c := range cs {
			if !ownConditions[c.Type] {
				m[c.Type] = key{c.Status, c.Reason, c.Message}
			}
		}
		return m
	}
	return !maps.Equal(index(a), index(b))
}
