package stackhealth

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestNotDeployedListedOncePerPeriod checks the API cost of a DaemonSet
// that is not deployed: the cluster-wide LIST that finds no pod is made once
// per selector and period, not once per node and pass (at 5,000 nodes that
// was 10,000 LISTs reading every pod in etcd every 30 s), while a "yes" is
// asked again each time.
func TestNotDeployedListedOncePerPeriod(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	var objs []client.Object
	for _, name := range []string{"gpu-0", "gpu-1", "gpu-2"} {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelGPUCount: "8"}}})
	}
	clusterLists := 0
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).WithStatusSubresource(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			var lo client.ListOptions
			lo.ApplyOptions(opts)
			if lo.FieldSelector == nil {
				clusterLists++
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	r, err := NewReconciler(c, c, Options{Clock: clk})
	require.NoError(t, err)
	pass := func() {
		t.Helper()
		for _, o := range objs {
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName()}})
			require.NoError(t, err)
			require.Equal(t, DefaultPeriod, res.RequeueAfter)
		}
	}

	pass()
	require.Equal(t, 2, clusterLists, "one LIST per selector for three nodes")
	clk.Step(DefaultPeriod / 2)
	pass()
	require.Equal(t, 2, clusterLists, "within the period: no LIST")
	clk.Step(DefaultPeriod / 2)
	pass()
	require.Equal(t, 4, clusterLists, "a period later: asked again")

	// The device plugin runs on a node that is not checked: deployed, so
	// the three nodes miss theirs, and each asks again.
	require.NoError(t, c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-device-plugin-daemonset-x", Labels: map[string]string{"app": "nvidia-device-plugin-daemonset"}},
		Spec:       corev1.PodSpec{NodeName: "other"},
	}))
	clk.Step(DefaultPeriod)
	pass()
	require.Equal(t, 4+3+1, clusterLists, "a yes is not kept; the no of dcgm-exporter is")
	require.Len(t, r.notDeployed, 1)
}

// TestOwnWritesQueueNothing checks the node predicate: the reconciler's own
// conditions coming back do not queue the node again (a second LIST of its
// pods for every write); any other condition's change, and labels, do.
func TestOwnWritesQueueNothing(t *testing.T) {
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
	}}}
	with := func(mut func(n *corev1.Node)) *corev1.Node {
		n := old.DeepCopy()
		mut(n)
		return n
	}
	p := nodeChanged()
	for _, tc := range []struct {
		desc string
		new  *corev1.Node
		want bool
	}{
		{"own conditions added", with(func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions,
				corev1.NodeCondition{Type: v1alpha1.ConditionGPUStackPodNotReady, Status: corev1.ConditionFalse},
				corev1.NodeCondition{Type: v1alpha1.ConditionGPUAllocatableMismatch, Status: corev1.ConditionFalse},
				corev1.NodeCondition{Type: v1alpha1.ConditionPodsStuckTerminating, Status: corev1.ConditionFalse},
				corev1.NodeCondition{Type: v1alpha1.ConditionMIGConfigFailed, Status: corev1.ConditionFalse})
		}), false},
		{"heartbeat only", with(func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Now() }), false},
		{"Ready changed", with(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
		{"GPULost added", with(func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionFalse})
		}), true},
		{"label changed", with(func(n *corev1.Node) { n.Labels = map[string]string{LabelMIGConfigState: "pending"} }), true},
	} {
		require.Equal(t, tc.want, p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new}), tc.desc)
	}
}
