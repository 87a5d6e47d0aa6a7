package evidence

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// FlushPodName is the flush pod of a node: one at a time per node. A DNS
// label (plan.PodName), though node names may have dots.
func FlushPodName(node string) string { return plan.PodName("kubemedic-flush-"+node, "") }

// flushPodLabel marks flush pods (app.kubernetes.io/name).
const flushPodLabel = "kubemedic-diagnostics-flush"

// DefaultFlushTemplate is the template whose image, mounts and privileges
// a flush pod takes, with the arguments "flush --root=/host".
const DefaultFlushTemplate = "collect-gpu-diagnostics"

// FlushReconciler uploads a node's diagnostics spool when the node carries
// v1alpha1.AnnotationDiagnosticsFlush (kubemedic diag flush): it runs one
// flush pod from the capture template, says on the Node how it went, and
// removes the annotation. It touches nothing else on the node.
type FlushReconciler struct {
	Client    client.Client
	Reader    client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Namespace string
	// Options are the store's settings the flush pod gets; nil: none, and
	// the flush pod fails saying so.
	Options *Options
	// Template names the NodeOperationTemplate flush pods are made from;
	// default DefaultFlushTemplate.
	Template string
}

var _ reconcile.Reconciler = &FlushReconciler{}

// Reconcile runs the node's flush, one step per pass.
func (r *FlushReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var n corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &n); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	key := client.ObjectKey{Namespace: r.Namespace, Name: FlushPodName(n.Name)}
	asked, ok := n.Annotations[v1alpha1.AnnotationDiagnosticsFlush]
	if !ok {
		// A finished flush pod whose deletion failed after its request was
		// answered.
		var left corev1.Pod
		if err := r.Client.Get(ctx, key, &left); err == nil && (left.Status.Phase == corev1.PodSucceeded || left.Status.Phase == corev1.PodFailed) {
			return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &left))
		}
		return reconcile.Result{}, nil
	}
	var pod corev1.Pod
	err := r.Reader.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) {
		return r.start(ctx, &n)
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get flush pod %s: %w", key, err)
	}
	timeout := policies.DefaultTemplateTimeout
	var tpl v1alpha1.NodeOperationTemplate
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.template()}, &tpl); err == nil && tpl.Spec.Timeout != nil {
		timeout = tpl.Spec.Timeout.Duration
	}
	var note, reason, typ string
	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		typ, reason, note = corev1.EventTypeNormal, v1alpha1.EventDiagnosticsFlushed, "spool flushed: "+terminationMessage(&pod)
	case pod.Status.Phase == corev1.PodFailed:
		typ, reason, note = corev1.EventTypeWarning, v1alpha1.EventDiagnosticsFlushFailed, "flush failed, the bundles stay in the spool: "+plan.PodFailure(&pod)
	case r.Clock.Since(pod.CreationTimestamp.Time) > timeout:
		typ, reason, note = corev1.EventTypeWarning, v1alpha1.EventDiagnosticsFlushFailed, fmt.Sprintf("flush pod %s/%s still %s after %s; deleted, the bundles stay in the spool", pod.Namespace, pod.Name, pod.Status.Phase, timeout)
	default:
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	// The annotation first: a pod deleted while the request stays would
	// make the next pass flush again. Only the request this pod answered
	// is removed; a newer one runs again. A node that changed meanwhile
	// (kwok's heartbeat, a kubelet's) is read again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Node
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(&n), &cur); err != nil {
			return err
		}
		if cur.Annotations[v1alpha1.AnnotationDiagnosticsFlush] != asked {
			return nil
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(cur.Annotations, v1alpha1.AnnotationDiagnosticsFlush)
		return r.Client.Patch(ctx, &cur, patch)
	}); err != nil {
		return reconcile.Result{}, fmt.Errorf("remove %s from node %s: %w", v1alpha1.AnnotationDiagnosticsFlush, n.Name, err)
	}
	r.Recorder.Eventf(&n, nil, typ, reason, "Flush", "%s", plan.Truncate(note, 1024))
	if err := r.Client.Delete(ctx, &pod); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("delete flush pod %s: %w", key, err)
	}
	log.FromContext(ctx).Info("Diagnostics spool flush ended", "node", n.Name, "result", reason, "note", note)
	return reconcile.Result{}, nil
}

func (r *FlushReconciler) template() string {
	if r.Template == "" {
		return DefaultFlushTemplate
	}
	return r.Template
}

// start creates the flush pod: the capture template's pod with the
// arguments "flush --root=/host" and the store's settings.
func (r *FlushReconciler) start(ctx context.Context, n *corev1.Node) (reconcile.Result, error) {
	var tpl v1alpha1.NodeOperationTemplate
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.template()}, &tpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.Recorder.Eventf(n, nil, corev1.EventTypeWarning, v1alpha1.EventDiagnosticsFlushFailed, "Flush",
				"no NodeOperationTemplate %s to flush the spool with; the request stays until it exists", r.template())
			return reconcile.Result{RequeueAfter: time.Minute}, nil
		}
		return reconcile.Result{}, err
	}
	name := FlushPodName(n.Name)
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOperationSpec{NodeName: n.Name}}
	pod := buildCapturePod(op, &tpl, r.Namespace, r.Options)
	pod.Name = name
	pod.OwnerReferences = nil
	pod.Labels["app.kubernetes.io/name"] = flushPodLabel
	c := &pod.Spec.Containers[0]
	c.Args = []string{"flush", "--root=/host"}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(policies.DefaultTemplateTimeout.Seconds()))
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, fmt.Errorf("create flush pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	log.FromContext(ctx).Info("Flushing the node's diagnostics spool", "node", n.Name, "pod", name)
	return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
}

// terminationMessage is what the pod's container said last.
func terminationMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && strings.TrimSpace(t.Message) != "" {
			return strings.TrimSpace(t.Message)
		}
	}
	return "(no message)"
}

// setupFlush runs the FlushReconciler on nodes that ask for a flush, and
// on their flush pods' changes.
func setupFlush(mgr ctrl.Manager, fr *FlushReconciler, conflicts *prometheus.CounterVec) error {
	asked := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[v1alpha1.AnnotationDiagnosticsFlush]
		return ok
	})
	ofPod := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Namespace != fr.Namespace || p.Labels["app.kubernetes.io/name"] != flushPodLabel || p.Spec.NodeName == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}}}
	})
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("diagnosticsflush").
		For(&corev1.Node{}, builder.WithPredicates(asked)).
		Watches(&corev1.Pod{}, ofPod).
		Complete(ctrlmgr.QuietConflicts("diagnosticsflush", fr, conflicts)); err != nil {
		return fmt.Errorf("set up the diagnostics flush controller: %w", err)
	}
	return nil
}
