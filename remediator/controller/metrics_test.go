package controller_test

import (
	"testing"
	"time"

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

// nodeRepairSeries returns kubemedic_remediation_node_repair_timestamp_seconds
// as "node/state" → value.
func nodeRepairSeries(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kubemedic_remediation_node_repair_timestamp_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			lbl := map[string]string{}
			for _, l := range m.GetLabel() {
				lbl[l.GetName()] = l.GetValue()
			}
			require.Len(t, lbl, 2)
			out[lbl["node"]+"/"+lbl["state"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestNodeRepairMetrics(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(min int) *metav1.Time { tm := metav1.NewTime(t0.Add(time.Duration(min) * time.Minute)); return &tm }
	sec := func(min int) float64 { return float64(t0.Add(time.Duration(min) * time.Minute).Unix()) }
	op := func(name, node, policy string, phase v1alpha1.NodeOperationPhase, started, ended int) *v1alpha1.NodeOperation {
		o := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: *at(started - 1)},
			Spec:   v1alpha1.NodeOperationSpec{NodeName: node, Policy: policy},
			Status: v1alpha1.NodeOperationStatus{Phase: phase}}
		if started > 0 {
			o.Status.StartTime = at(started)
		}
		if ended > 0 {
			o.Status.CompletionTime = at(ended)
		}
		return o
	}
	quarantine := func(o *v1alpha1.NodeOperation) *v1alpha1.NodeOperation { o.Spec.Quarantine = true; return o }
	for _, tc := range []struct {
		desc string
		ops  []client.Object
		want map[string]float64
	}{
		{desc: "no operations: no series", want: map[string]float64{}},
		{desc: "a repair in progress: active since it started", ops: []client.Object{
			op("a", "gpu-1", "gpu-xid", v1alpha1.PhaseRunning, 5, 0),
		}, want: map[string]float64{"gpu-1/active": sec(5)}},
		{desc: "waiting for a budget is not repairing yet", ops: []client.Object{
			op("a", "gpu-1", "gpu-xid", v1alpha1.PhaseWaitingForBudget, 0, 0),
		}, want: map[string]float64{}},
		{desc: "a succeeded repair: no series", ops: []client.Object{
			op("a", "gpu-1", "gpu-xid", v1alpha1.PhaseSucceeded, 5, 9),
		}, want: map[string]float64{}},
		{desc: "the reset failed, the reboot runs: failed and active", ops: []client.Object{
			op("reset", "gpu-1", "gpu-xid", v1alpha1.PhaseFailed, 5, 9),
			op("reboot", "gpu-1", "gpu-xid", v1alpha1.PhaseVerifying, 10, 0),
		}, want: map[string]float64{"gpu-1/failed": sec(9), "gpu-1/active": sec(10)}},
		{desc: "a later success ends the failure", ops: []client.Object{
			op("reset", "gpu-1", "gpu-xid", v1alpha1.PhaseFailed, 5, 9),
			op("reboot", "gpu-1", "gpu-xid", v1alpha1.PhaseSucceeded, 10, 20),
		}, want: map[string]float64{}},
		{desc: "a quarantine after the failures ends them, and is no repair", ops: []client.Object{
			op("reset", "gpu-1", "gpu-xid", v1alpha1.PhaseFailed, 5, 9),
			op("reboot", "gpu-1", "gpu-xid", v1alpha1.PhaseFailed, 10, 20),
			quarantine(op("quarantine", "gpu-1", "gpu-xid", v1alpha1.PhaseSucceeded, 20, 20)),
		}, want: map[string]float64{}},
		{desc: "a quarantine in progress is no repair", ops: []client.Object{
			op("reboot", "gpu-1", "gpu-xid", v1alpha1.PhaseFailed, 10, 20),
			quarantine(op("quarantine", "gpu-1", "gpu-xid", v1alpha1.PhaseRunning, 21, 0)),
		}, want: map[string]float64{"gpu-1/failed": sec(20)}},
		{desc: "manual operations are planned work, not an incident", ops: []client.Object{
			op("drain", "gpu-1", "", v1alpha1.PhaseRunning, 5, 0),
			op("bios", "gpu-2", "", v1alpha1.PhaseFailed, 5, 9),
		}, want: map[string]float64{}},
		{desc: "one series per node and state", ops: []client.Object{
			op("a", "gpu-1", "gpu-xid", v1alpha1.PhaseRunning, 5, 0),
			op("b", "gpu-1", "nfs", v1alpha1.PhaseDraining, 7, 0),
			op("c", "gpu-2", "gpu-xid", v1alpha1.PhaseFailed, 1, 3),
			op("d", "gpu-3", "gpu-xid", v1alpha1.PhaseSucceeded, 1, 3),
		}, want: map[string]float64{"gpu-1/active": sec(7), "gpu-2/failed": sec(3)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.ops...).Build()
			reg := prometheus.NewRegistry()
			require.NoError(t, controller.NewMetrics(c).Register(reg))
			require.Equal(t, tc.want, nodeRepairSeries(t, reg))
		})
	}
}
