package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestFailedEffectRecordsNothing: when the cluster refuses a step's effect
// (here the cordon's node patch), the pass records the steps before it and
// not that one: the operation stays Cordoning, with no Cordoned condition
// and no Cordoned Event, and the reconcile returns the error. The next pass,
// with the API server answering, cordons and goes on, telling it once, and
// the admission ledger is written once across both passes.
func TestFailedEffectRecordsNothing(t *testing.T) {
	const ns = "kubemedic-effects"
	env := apiServer(t, localcluster.Options{}, ns)
	ctx := context.Background()
	c := env.Client
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}}
	require.NoError(t, c.Create(ctx, node))
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "kubemedic/ops:1", SuccessCriterion: v1alpha1.SuccessPodSucceeded}}))
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-0", StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Cordon: true}}}
	require.NoError(t, c.Create(ctx, op))

	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	refused := errors.New("the API server is away")
	failing := interceptor.NewClient(ww, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isNode := obj.(*corev1.Node); isNode {
				return refused
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	recorder := events.NewFakeRecorder(100)
	reconciler := func(cl client.Client) *OperationReconciler { return testReconciler(cl, cl, ns, recorder) }
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: op.Name}}
	get := func() *v1alpha1.NodeOperation {
		got := &v1alpha1.NodeOperation{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
		return got
	}
	reasons := func() []string { return recorded(recorder) }

	_, err = reconciler(failing).Reconcile(ctx, req)
	require.ErrorIs(t, err, refused)
	got := get()
	require.Equal(t, v1alpha1.PhaseCordoning, got.Status.Phase, "the steps before the refused one are recorded")
	require.True(t, apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.OperationAdmitted))
	require.Nil(t, apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.OperationCordoned), "the refused step is not")
	n := &corev1.Node{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), n))
	require.False(t, n.Spec.Unschedulable)
	first := reasons()
	require.NotEmpty(t, first)
	for _, e := range first {
		require.NotContains(t, e, " "+v1alpha1.EventCordoned+" ", "no Cordoned Event for a cordon that did not happen")
	}
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: LedgerName}, cm))
	reservedAt := cm.ResourceVersion

	_, err = reconciler(c).Reconcile(ctx, req)
	require.NoError(t, err)
	got = get()
	require.Equal(t, v1alpha1.PhaseRunning, got.Status.Phase)
	require.True(t, apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.OperationCordoned))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), n))
	require.True(t, n.Spec.Unschedulable)
	require.Equal(t, op.Name, n.Annotations[v1alpha1.AnnotationCordonedBy])
	require.Equal(t, 2, told(reasons(), v1alpha1.EventCordoned), "Cordoned told once, on the operation and on the node")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: LedgerName}, cm))
	require.Equal(t, reservedAt, cm.ResourceVersion, "the ledger is written once: the second pass finds the operation reserved")
}

// recorded returns the Events the fake recorder holds, taking them out.
func recorded(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// told counts the events with the reason.
func told(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// TestPodCreatedToldOnceAfterALostStatusWrite: the pass that creates the
// operation pod loses its status write, so it emits no Event; the retry
// finds the pod, records it without creating another, and tells it. Once:
// a later pass tells nothing more.
func TestPodCreatedToldOnceAfterALostStatusWrite(t *testing.T) {
	const ns = "kubemedic-podcreated"
	env := apiServer(t, localcluster.Options{}, ns)
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}}))
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "kubemedic/ops:1", SuccessCriterion: v1alpha1.SuccessPodSucceeded}}))
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-0", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}}}
	require.NoError(t, c.Create(ctx, op))

	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	loseWrite, lost := losesOnce(func(o *v1alpha1.NodeOperation) bool { return o.Status.PodName != "" })
	losing := interceptor.NewClient(ww, interceptor.Funcs{SubResourcePatch: loseWrite})
	recorder := events.NewFakeRecorder(100)
	r := testReconciler(losing, c, ns, recorder)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: op.Name}}
	pods := func() int {
		var list corev1.PodList
		require.NoError(t, c.List(ctx, &list, client.InNamespace(ns)))
		return len(list.Items)
	}

	_, err = r.Reconcile(ctx, req)
	require.ErrorIs(t, err, lost)
	require.Equal(t, 1, pods())
	require.Zero(t, told(recorded(recorder), v1alpha1.EventPodCreated), "nothing is told for a pass whose write was lost")
	stale := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), stale))
	require.Empty(t, stale.Status.PodName)

	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	got := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
	require.Equal(t, op.Name, got.Status.PodName, "the pod is recorded")
	require.Equal(t, 2, told(recorded(recorder), v1alpha1.EventPodCreated), "PodCreated told on the operation and on the node")

	_, err = r.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Zero(t, told(recorded(recorder), v1alpha1.EventPodCreated), "and told once")

	// A pass that reads the operation from a cache still holding it as
	// it was before the retry (no pod recorded) decides to tell again,
	// but its write conflicts, so it tells nothing.
	lagging := interceptor.NewClient(ww, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if o, isOp := obj.(*v1alpha1.NodeOperation); isOp {
				stale.DeepCopyInto(o)
				return nil
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	_, err = testReconciler(lagging, c, ns, recorder).Reconcile(ctx, req)
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Zero(t, told(recorded(recorder), v1alpha1.EventPodCreated), "a stale pass tells nothing")
}

// losesOnce is a SubResourcePatch that loses the first status write of an
// operation for which when holds, returning lost.
func losesOnce(when func(*v1alpha1.NodeOperation) bool) (patch func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error, lost error) {
	lost = errors.New("the status write was lost")
	lose := true
	return func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		if o, isOp := obj.(*v1alpha1.NodeOperation); isOp && lose && when(o) {
			lose = false
			return lost
		}
		return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
	}, lost
}

// apiServer starts an API server with opts and the namespaces; skipped in
// -short mode.
func apiServer(tb testing.TB, opts localcluster.Options, namespaces ...string) *localcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: starts kube-apiserver and etcd; skipped in -short mode")
	}
	env := harness.Start(tb, opts)
	for _, ns := range namespaces {
		require.NoError(tb, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	return env
}

// testReconciler is an operation reconciler writing through cl and reading
// the API server through reader, with operation pods and the ledger in ns.
func testReconciler(cl client.Client, reader client.Reader, ns string, recorder events.EventRecorder) *OperationReconciler {
	return &OperationReconciler{Client: cl, Reader: reader, Recorder: recorder, Clock: clocktesting.NewFakePassiveClock(time.Now()),
		Metrics: NewMetrics(cl), Namespace: ns, ledger: &ledger{client: cl, reader: reader, namespace: ns}}
}
