package stackhealth

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestWriteOnlyChanges checks the write rules: nothing is written when
// status, reason and message stay; a new message keeps lastTransitionTime;
// a new status moves it; the other conditions stay.
func TestWriteOnlyChanges(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
	}}}
	patches := 0
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(node).WithStatusSubresource(node).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			require.Equal(t, types.StrategicMergePatchType, p.Type())
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	r, err := NewReconciler(c, c, Options{Clock: clk})
	require.NoError(t, err)

	get := func() (*corev1.Node, *corev1.NodeCondition) {
		var n corev1.Node
		require.NoError(t, c.Get(ctx, types.NamespacedName{Name: "gpu-0"}, &n))
		return &n, findCondition(&n, v1alpha1.ConditionPodsStuckTerminating)
	}
	cond := func(status corev1.ConditionStatus, msg string) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: v1alpha1.ConditionPodsStuckTerminating, Status: status, Reason: "R", Message: msg}}
	}

	n, _ := get()
	require.NoError(t, r.write(ctx, n, cond(corev1.ConditionFalse, "a")))
	n, got := get()
	require.Equal(t, 1, patches)
	require.True(t, got.LastTransitionTime.Time.Equal(t0))
	require.NotNil(t, findCondition(n, string(corev1.NodeReady)), "other conditions stay")

	clk.Step(time.Minute)
	require.NoError(t, r.write(ctx, n, cond(corev1.ConditionFalse, "a")))
	require.Equal(t, 1, patches, "unchanged: no write")

	require.NoError(t, r.write(ctx, n, cond(corev1.ConditionFalse, "b")))
	n, got = get()
	require.Equal(t, 2, patches)
	require.Equal(t, "b", got.Message)
	require.True(t, got.LastTransitionTime.Time.Equal(t0), "same status keeps lastTransitionTime")

	clk.Step(time.Minute)
	require.NoError(t, r.write(ctx, n, cond(corev1.ConditionTrue, "b")))
	_, got = get()
	require.Equal(t, 3, patches)
	require.True(t, got.LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)), "new status moves lastTransitionTime")
}

func TestOptionsRejectBadSelectors(t *testing.T) {
	_, err := NewReconciler(nil, nil, Options{DevicePluginSelector: "app in (a"})
	require.ErrorContains(t, err, "device plugin pod selector")
	_, err = NewReconciler(nil, nil, Options{DCGMExporterSelector: "=x"})
	require.ErrorContains(t, err, "dcgm-exporter pod selector")
	r, err := NewReconciler(nil, nil, Options{})
	require.NoError(t, err)
	require.Equal(t, DefaultPeriod, r.Period)
	require.Equal(t, DefaultTerminatingAfter, r.Settings.TerminatingAfter)
}

// FuzzCheckAllocatable feeds GPULost messages and count labels: the check
// never panics and a fault always names the numbers.
func FuzzCheckAllocatable(f *testing.F) {
	for _, s := range []string{"8 of 8 GPUs healthy (nvml)", "KubemedicDetect: 7 of 8 GPUs healthy (dcgm)",
		"8 GPUs healthy (dcgm), 4 expected", "GPUCountMismatch: 6 GPUs visible, 8 expected", "0 of 0 GPUs healthy", "99999999999999999999 of 99999999999999999999 GPUs healthy"} {
		f.Add(s, "8")
	}
	f.Fuzz(func(t *testing.T, msg, count string) {
		n := mkNode(gpuLost(corev1.ConditionFalse, msg), label(LabelGPUCount, count))
		c := CheckAllocatable(n, Settings{}, now)
		switch c.Status {
		case corev1.ConditionTrue:
			require.Contains(t, c.Message, "allocatable nvidia.com/gpu 0 < ")
		case corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			t.Fatalf("status %q", c.Status)
		}
	})
}

// detectorSeries gathers kubemedic_remediation_node_detectors_missing as
// "node/reason" → value.
func detectorSeries(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m.Collectors()[0]))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		require.Equal(t, "kubemedic_remediation_node_detectors_missing", mf.GetName())
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range s.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[l["node"]+"/"+l["reason"]] = s.GetGauge().GetValue()
		}
	}
	return out
}

// TestDetectorSeriesFollowTheNode checks the series' life: one per GPU
// node without detectors, replaced when the reason changes, gone when the
// detectors report, when the node loses its GPUs or is deleted, and never
// set with the check off.
func TestDetectorSeriesFollowTheNode(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{LabelGPUCount: "8"}}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(node).WithStatusSubresource(node).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	m := NewMetrics()
	r, err := NewReconciler(c, c, Options{Clock: clk, Metrics: m})
	require.NoError(t, err)
	off, err := NewReconciler(c, c, Options{Clock: clk, Metrics: NewMetrics(), SkipDetectors: true})
	require.NoError(t, err)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "gpu-0"}}
	pass := func(want map[string]float64) {
		t.Helper()
		_, err := r.Reconcile(ctx, req)
		require.NoError(t, err)
		require.Equal(t, want, detectorSeries(t, m))
		_, err = off.Reconcile(ctx, req)
		require.NoError(t, err)
		require.Empty(t, detectorSeries(t, off.Metrics), "check off")
	}
	update := func(mut func(n *corev1.Node)) {
		t.Helper()
		var n corev1.Node
		require.NoError(t, c.Get(ctx, req.NamespacedName, &n))
		mut(&n)
		status := n.Status
		require.NoError(t, c.Update(ctx, &n))
		n.Status = status
		require.NoError(t, c.Status().Update(ctx, &n))
	}

	pass(map[string]float64{"gpu-0/" + DetectorsNoPod: 1})

	// A detector pod of another node does not count; a Ready one of this
	// node does.
	npd := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "kubemedic-npd"}},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	require.NoError(t, c.Create(ctx, npd("kubemedic-npd-other", "gpu-1")))
	pass(map[string]float64{"gpu-0/" + DetectorsNoPod: 1})
	require.NoError(t, c.Create(ctx, npd("kubemedic-npd-abcde", "gpu-0")))
	pass(map[string]float64{"gpu-0/" + DetectorsNoConditions: 1})

	update(func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionFalse,
			Reason: v1alpha1.DetectReason, LastHeartbeatTime: metav1.NewTime(clk.Now()), LastTransitionTime: metav1.NewTime(clk.Now())})
	})
	pass(map[string]float64{})

	clk.Step(DefaultDetectorStaleAfter)
	pass(map[string]float64{})
	clk.Step(time.Second)
	pass(map[string]float64{"gpu-0/" + DetectorsStaleHeartbeat: 1})

	update(func(n *corev1.Node) { delete(n.Labels, LabelGPUCount) })
	pass(map[string]float64{})

	update(func(n *corev1.Node) { n.Labels = map[string]string{LabelGPUCount: "8"} })
	pass(map[string]float64{"gpu-0/" + DetectorsStaleHeartbeat: 1})
	require.NoError(t, c.Delete(ctx, node))
	pass(map[string]float64{})
}
