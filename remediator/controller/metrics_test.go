package controller_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/controller"
	"github.com/kubemedic/kubemedic/test/metricstest"
)

func metricsNode(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

var (
	quarantineTaint = corev1.Taint{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule}
	otherTaint      = corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
)

// nodeQuarantinedSeries returns the node label of every
// kubemedic_remediation_node_quarantined series, with its value.
func nodeQuarantinedSeries(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kubemedic_remediation_node_quarantined" {
			continue
		}
		for _, m := range mf.GetMetric() {
			require.Len(t, m.GetLabel(), 1)
			require.Equal(t, "node", m.GetLabel()[0].GetName())
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestQuarantinedNodeMetrics(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	for _, tc := range []struct {
		desc  string
		nodes []client.Object
		want  map[string]float64
	}{
		{desc: "no nodes: no series, the fleet count is 0", want: map[string]float64{}},
		{desc: "healthy and otherwise tainted nodes have no series", nodes: []client.Object{
			metricsNode("gpu-1"), metricsNode("gpu-2", otherTaint),
		}, want: map[string]float64{}},
		{desc: "one series per quarantined node", nodes: []client.Object{
			metricsNode("gpu-1"), metricsNode("gpu-7", quarantineTaint), metricsNode("gpu-9", otherTaint, quarantineTaint),
		}, want: map[string]float64{"gpu-7": 1, "gpu-9": 1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.nodes...).Build()
			reg := prometheus.NewRegistry()
			require.NoError(t, controller.NewMetrics(c).Register(reg))
			require.Equal(t, tc.want, nodeQuarantinedSeries(t, reg))
			require.Equal(t, float64(len(tc.want)), metricstest.Value(t, reg, "kubemedic_remediation_quarantined_nodes", nil),
				"the fleet-wide count agrees with the per-node series")
		})
	}
}
