package stackhealth_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/controller"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
	"github.com/kubemedic/kubemedic/test/harness"
)

const stackNS = "gpu-operator"

// TestStackHealthOnAPIServer runs the remediator's manager, with the stack
// health checks registered, against a real API server: the four conditions
// appear on a GPU node with their fault reasons and clear again, a node
// without GPUs gets none, and a stable node is not written again.
func TestStackHealthOnAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := env.Clientset

	nodes, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{})
	require.NoError(t, err)
	node := nodes[0].Name
	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-node-000"}}
	_, err = cs.CoreV1().Nodes().Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)

	dp := createReadyPod(ctx, t, env, "nvidia-device-plugin-daemonset-abcde", node, map[string]string{"app": "nvidia-device-plugin-daemonset"})
	dcgm := createReadyPod(ctx, t, env, "nvidia-dcgm-exporter-fghij", node, map[string]string{"app": "nvidia-dcgm-exporter"})

	clk := clocktesting.NewFakeClock(time.Now())
	mgr, err := controller.NewManager(ctx, env.Config, controller.ManagerOptions{
		Options: controller.Options{
			Namespace: "kubemedic-system", Retention: time.Hour, Registry: prometheus.NewRegistry(),
			StackHealth: &stackhealth.Options{Period: 300 * time.Millisecond, Clock: clk},
		},
		MetricsAddr: "0", ProbeAddr: "0",
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop")
		}
	})

	type want map[string]string // condition type → "Status/Reason"; "" absent
	expect := func(desc string, w want) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			require.NoError(c, err)
			for typ, sr := range w {
				got := localcluster.FindNodeCondition(n, corev1.NodeConditionType(typ))
				if sr == "" {
					assert.Nil(c, got, "%s: %s", desc, typ)
					continue
				}
				if assert.NotNil(c, got, "%s: %s", desc, typ) {
					assert.Equal(c, sr, string(got.Status)+"/"+got.Reason, "%s: %s: %s", desc, typ, got.Message)
				}
			}
		}, 30*time.Second, 100*time.Millisecond)
	}

	healthy := want{
		v1alpha1.ConditionGPUAllocatableMismatch: "False/" + v1alpha1.ReasonAllocatableMatches,
		v1alpha1.ConditionGPUStackPodNotReady:    "False/" + v1alpha1.ReasonGPUStackPodsReady,
		v1alpha1.ConditionPodsStuckTerminating:   "False/" + v1alpha1.ReasonNoPodsStuckTerminating,
		v1alpha1.ConditionMIGConfigFailed:        "",
	}
	expect("healthy", healthy)

	// A stable node is not written again: the heartbeats stay.
	before, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // several periods of the real manager
	after, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "a stable node was written")

	p, err := cs.CoreV1().Nodes().Get(ctx, plain.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, typ := range []string{v1alpha1.ConditionGPUAllocatableMismatch, v1alpha1.ConditionGPUStackPodNotReady, v1alpha1.ConditionPodsStuckTerminating, v1alpha1.ConditionMIGConfigFailed} {
		require.Nil(t, localcluster.FindNodeCondition(p, corev1.NodeConditionType(typ)), "condition %s on a node without GPUs", typ)
	}
	allocSince := localcluster.FindNodeCondition(after, v1alpha1.ConditionGPUAllocatableMismatch).LastTransitionTime

	// The faults, a minute later.
	clk.Step(time.Minute)
	patchStatus(ctx, t, env, node, map[string]any{"allocatable": map[string]string{"nvidia.com/gpu": "6"}})
	setPodReady(ctx, t, env, dcgm, corev1.ConditionFalse)
	stuck, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "stuck", NodeName: node})
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().Pods(stuck.Namespace).Delete(ctx, stuck.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	patchLabels(ctx, t, env, node, map[string]any{stackhealth.LabelMIGConfig: "all-3g.40gb", stackhealth.LabelMIGConfigState: "failed"})
	expect("faults before the thresholds", want{
		v1alpha1.ConditionGPUAllocatableMismatch: "True/" + v1alpha1.ReasonAllocatableBelowHardware,
		v1alpha1.ConditionGPUStackPodNotReady:    "False/" + v1alpha1.ReasonGPUStackPodsReady,
		v1alpha1.ConditionPodsStuckTerminating:   "False/" + v1alpha1.ReasonNoPodsStuckTerminating,
		v1alpha1.ConditionMIGConfigFailed:        "True/" + v1alpha1.ReasonMIGConfigStateFailed,
	})
	clk.Step(12 * time.Minute)
	expect("faults past the thresholds", want{
		v1alpha1.ConditionGPUAllocatableMismatch: "True/" + v1alpha1.ReasonAllocatableBelowHardware,
		v1alpha1.ConditionGPUStackPodNotReady:    "True/" + v1alpha1.ReasonDCGMExporterNotReady,
		v1alpha1.ConditionPodsStuckTerminating:   "True/" + v1alpha1.ReasonPodsStuckTerminating,
		v1alpha1.ConditionMIGConfigFailed:        "True/" + v1alpha1.ReasonMIGConfigStateFailed,
	})
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUStackPodNotReady).Message, dcgm.Name)
	require.Contains(t, localcluster.FindNodeCondition(n, v1alpha1.ConditionPodsStuckTerminating).Message, "1 pod terminating")
	require.Contains(t, localcluster.FindNodeCondition(n, v1alpha1.ConditionPodsStuckTerminating).Message, "team-a/stuck")
	require.Equal(t, "allocatable nvidia.com/gpu 6 < 8 GPUs (GPU feature discovery's nvidia.com/gpu.count)",
		localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUAllocatableMismatch).Message)
	require.True(t, localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUAllocatableMismatch).LastTransitionTime.After(allocSince.Time),
		"the transition to True is a new lastTransitionTime")

	// MIG pending: a new desired configuration, not applied in time.
	patchLabels(ctx, t, env, node, map[string]any{stackhealth.LabelMIGConfig: "all-1g.10gb", stackhealth.LabelMIGConfigState: "pending"})
	expect("MIG pending", want{v1alpha1.ConditionMIGConfigFailed: "False/" + v1alpha1.ReasonMIGConfigApplied})
	clk.Step(31 * time.Minute)
	expect("MIG pending too long", want{v1alpha1.ConditionMIGConfigFailed: "True/" + v1alpha1.ReasonMIGConfigNotApplied})

	// Cleared.
	patchStatus(ctx, t, env, node, map[string]any{"allocatable": map[string]string{"nvidia.com/gpu": "8"}})
	setPodReady(ctx, t, env, dcgm, corev1.ConditionTrue)
	require.NoError(t, cs.CoreV1().Pods(stuck.Namespace).Delete(ctx, stuck.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	patchLabels(ctx, t, env, node, map[string]any{stackhealth.LabelMIGConfigState: "success"})
	healthy[v1alpha1.ConditionMIGConfigFailed] = "False/" + v1alpha1.ReasonMIGConfigApplied
	expect("cleared", healthy)

	// The device plugin's pod goes away while another node runs one:
	// missing, but only after the threshold.
	other := createReadyPod(ctx, t, env, "nvidia-device-plugin-daemonset-klmno", plain.Name, map[string]string{"app": "nvidia-device-plugin-daemonset"})
	require.NoError(t, cs.CoreV1().Pods(dp.Namespace).Delete(ctx, dp.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	time.Sleep(time.Second) // several periods: the pod is seen missing
	expect("device plugin just gone", want{v1alpha1.ConditionGPUStackPodNotReady: "False/" + v1alpha1.ReasonGPUStackPodsReady})
	clk.Step(6 * time.Minute)
	expect("device plugin missing", want{v1alpha1.ConditionGPUStackPodNotReady: "True/" + v1alpha1.ReasonDevicePluginMissing})

	// No device plugin pod anywhere: the DaemonSet is not deployed, which is
	// missing evidence, not a missing pod.
	require.NoError(t, cs.CoreV1().Pods(other.Namespace).Delete(ctx, other.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	expect("device plugin not deployed", want{v1alpha1.ConditionGPUStackPodNotReady: "Unknown/" + v1alpha1.ReasonStackEvidenceMissing})
}

func createReadyPod(ctx context.Context, t *testing.T, env *localcluster.Cluster, name, node string, labels map[string]string) *corev1.Pod {
	t.Helper()
	p, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: stackNS, Name: name, NodeName: node, Labels: labels})
	require.NoError(t, err)
	return setPodReady(ctx, t, env, p, corev1.ConditionTrue)
}

func setPodReady(ctx context.Context, t *testing.T, env *localcluster.Cluster, p *corev1.Pod, status corev1.ConditionStatus) *corev1.Pod {
	t.Helper()
	cur, err := env.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	cur.Status.Phase = corev1.PodRunning
	cur.Status.StartTime = &now
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: now}}
	out, err := env.Clientset.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	return out
}

func patchStatus(ctx context.Context, t *testing.T, env *localcluster.Cluster, node string, status map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"status": status})
	require.NoError(t, err)
	_, err = env.Clientset.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, b, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
}

func patchLabels(ctx context.Context, t *testing.T, env *localcluster.Cluster, node string, labels map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	require.NoError(t, err)
	_, err = env.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, b, metav1.PatchOptions{})
	require.NoError(t, err)
}
