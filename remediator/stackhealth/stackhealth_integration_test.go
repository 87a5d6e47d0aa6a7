package stackhealth_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
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

// TestDetectorsMissingOnAPIServer runs the remediator's manager against a
// real API server and the real node-problem-detector, with deploy/npd's
// GPU monitor (its check replaced by /bin/true, every second) and a
// heartbeat period of one second, and reads
// kubemedic_remediation_node_detectors_missing from the manager's
// registry: a GPU node has no detector pod, then a pod but no conditions,
// then reports while NPD runs (its heartbeats stay fresh well past the
// threshold, with no condition changing), then has stale heartbeats once
// NPD stops, and no pod again when the pod goes. A node without GPUs never
// has a series. NPD runs as a process, so a Ready pod with the
// DaemonSet's label stands for its pod.
func TestDetectorsMissingOnAPIServer(t *testing.T) {
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

	const staleAfter = 4 * time.Second
	reg := prometheus.NewRegistry()
	mgr, err := controller.NewManager(ctx, env.Config, controller.ManagerOptions{
		Options: controller.Options{
			Namespace: "kubemedic-system", Retention: time.Hour, Registry: reg,
			StackHealth: &stackhealth.Options{Period: 300 * time.Millisecond, Settings: stackhealth.Settings{DetectorStaleAfter: staleAfter}},
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

	series := func() (map[string]float64, error) {
		mfs, err := reg.Gather()
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "kubemedic_remediation_node_detectors_missing" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				out[l["node"]+"/"+l["reason"]] = m.GetGauge().GetValue()
			}
		}
		return out, nil
	}
	expect := func(desc string, want map[string]float64) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := series()
			require.NoError(c, err)
			assert.Equal(c, want, got, desc)
		}, 30*time.Second, 100*time.Millisecond)
	}

	expect("no detector pod", map[string]float64{node + "/" + stackhealth.DetectorsNoPod: 1})
	npdPod := createReadyPod(ctx, t, env, "kubemedic-npd-abcde", node, map[string]string{"app.kubernetes.io/name": "kubemedic-npd"})
	expect("a pod, no conditions", map[string]float64{node + "/" + stackhealth.DetectorsNoConditions: 1})

	npd := startNPD(t, env, node)
	expect("NPD reports", map[string]float64{})
	// NPD's heartbeats alone keep the node reporting: three thresholds
	// with nothing changing.
	deadline := time.Now().Add(3 * staleAfter)
	for time.Now().Before(deadline) {
		require.NoError(t, npd.Exited())
		got, err := series()
		require.NoError(t, err)
		require.Empty(t, got, "NPD runs and refreshes its heartbeats")
		time.Sleep(200 * time.Millisecond) // polling a real process
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	gpuLost := localcluster.FindNodeCondition(n, v1alpha1.ConditionGPULost)
	require.NotNil(t, gpuLost)
	require.Less(t, time.Since(gpuLost.LastHeartbeatTime.Time), staleAfter)
	require.Greater(t, gpuLost.LastHeartbeatTime.Sub(gpuLost.LastTransitionTime.Time), 2*staleAfter, "the heartbeat moved, the transition did not")

	require.NoError(t, npd.Stop())
	expect("NPD stopped", map[string]float64{node + "/" + stackhealth.DetectorsStaleHeartbeat: 1})

	require.NoError(t, cs.CoreV1().Pods(npdPod.Namespace).Delete(ctx, npdPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	expect("pod gone", map[string]float64{node + "/" + stackhealth.DetectorsNoPod: 1})
}

// startNPD runs node-problem-detector for node with deploy/npd/gpu.json,
// its check replaced by /bin/true every second, writing a heartbeat every
// second.
func startNPD(t *testing.T, env *localcluster.Cluster, node string) *localcluster.Process {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "../../deploy/npd/gpu.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	cfg["pluginConfig"].(map[string]any)["invoke_interval"] = "1s"
	for _, r := range cfg["rules"].([]any) {
		r.(map[string]any)["path"] = "/bin/true"
		r.(map[string]any)["args"] = []string{}
	}
	b, err = json.Marshal(cfg)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "gpu.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	npd, err := env.StartProcess(localcluster.ProcessSpec{
		Name: "node-problem-detector",
		Path: filepath.Join(env.BinDir, "node-problem-detector"),
		Args: []string{
			"--config.custom-plugin-monitor=" + p,
			"--apiserver-override=" + env.Config.Host + "?inClusterConfig=false&auth=" + env.Kubeconfig,
			"--hostname-override=" + node,
			"--port=0", "--prometheus-port=0",
			"--k8s-exporter-heartbeat-period=1s",
			"--logtostderr", "--v=2",
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = npd.Stop()
		if t.Failed() {
			t.Logf("node-problem-detector log:%s", npd.LogTail(40))
		}
	})
	return npd
}
