package remediator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// applyExamples creates the shipped example policies and templates of the
// given files, with every policy's condition hold shortened to a second,
// so that a test sees what they do without waiting their real minutes.
// Nothing else is changed: steps, safety limits and dryRun are as shipped.
func applyExamples(t *testing.T, env *localcluster.Cluster, files ...string) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join(root, "policies", "examples", f))
	}
	docs, problems := policies.LoadFiles(paths...)
	require.Empty(t, problems)
	for _, d := range docs {
		obj, ok := d.Object.(client.Object)
		require.True(t, ok, "%s:%d is not an object", d.File, d.Line)
		if p, ok := obj.(*v1alpha1.RemediationPolicy); ok {
			for i := range p.Spec.Conditions {
				p.Spec.Conditions[i].For = dur(time.Second)
			}
		}
		require.NoError(t, env.Client.Create(context.Background(), obj), "%s:%d", d.File, d.Line)
	}
}

// TestStackExamplesAct: the shipped gpu-stack policies act on the four
// GPU stack conditions as the remediator's checks set them: the device
// plugin, MIG and allocatable policies run their first step for real (the
// operation pod is created); pods-stuck-terminating, shipped in dry run,
// records what it would do and touches nothing until an operator turns
// dry run off, and then runs for real.
func TestStackExamplesAct(t *testing.T) {
	env := startCluster(t)
	applyExamples(t, env, "gpu-stack.yaml", "operation-templates.yaml")
	nodes := gpuNodes(t, env, "stack", 4)
	dp, mig, alloc, stuck := nodes[0], nodes[1], nodes[2], nodes[3]
	// The MIG policy selects the nodes the GPU Operator partitions.
	n := getNode(t, env, mig)
	n.Labels["nvidia.com/mig.config"] = "all-1g.10gb"
	require.NoError(t, env.Client.Update(context.Background(), n))
	rem := newRemediator(t, env)
	rem.start()

	// One at a time, so that each policy's own budget admits its step: every
	// running operation counts against every policy that selects its node,
	// and gpu-allocatable allows one per zone.
	real := []struct {
		node, policy, operation string
		set                     func()
	}{
		{alloc, "gpu-allocatable", "restart-device-plugin", func() {
			setCondition(t, env, alloc, v1alpha1.ConditionGPUAllocatableMismatch, corev1.ConditionTrue, v1alpha1.ReasonAllocatableBelowHardware,
				"nvidia.com/gpu: 7 allocatable, the hardware has 8 (kubemedic-detect)")
		}},
		{dp, "gpu-device-plugin", "restart-device-plugin", func() {
			setCondition(t, env, dp, v1alpha1.ConditionGPUStackPodNotReady, corev1.ConditionTrue, v1alpha1.ReasonDevicePluginNotReady,
				"nvidia-device-plugin pod gpu-operator/nvidia-device-plugin-daemonset-x not Ready for 6m")
		}},
		{mig, "gpu-mig-config", "reapply-mig-config", func() {
			setCondition(t, env, mig, v1alpha1.ConditionMIGConfigFailed, corev1.ConditionTrue, v1alpha1.ReasonMIGConfigStateFailed,
				"nvidia.com/mig.config.state=failed (nvidia.com/mig.config=all-1g.10gb)")
		}},
	}
	for _, want := range real {
		want.set()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ops := opsOnNode(c, env, want.node)
			require.Len(c, ops, 1, describeOps(env))
			require.Equal(c, want.policy, ops[0].Spec.Policy)
			require.Equal(c, want.operation, ops[0].Spec.Operation)
			require.False(c, ops[0].Spec.DryRun)
			require.Equal(c, v1alpha1.PhaseRunning, ops[0].Status.Phase, describeOps(env))
			pod := &corev1.Pod{}
			require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: opNamespace, Name: plan.OperationPodName(&ops[0])}, pod), "the operation pod runs")
		}, 40*time.Second, 200*time.Millisecond)
	}
	setCondition(t, env, stuck, v1alpha1.ConditionPodsStuckTerminating, corev1.ConditionTrue, v1alpha1.ReasonPodsStuckTerminating,
		"2 pods Terminating past their grace period + 10m; oldest team-a/train-0 for 2h")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, stuck)
		require.Len(c, ops, 1, describeOps(env))
		require.Equal(c, "pods-stuck-terminating", ops[0].Spec.Policy)
		require.True(c, ops[0].Spec.DryRun)
		require.Equal(c, v1alpha1.PhaseSkipped, ops[0].Status.Phase)
		require.Contains(c, ops[0].Status.Message, "DryRun: would cordon and run restart-containerd")
		require.Contains(c, ops[0].Status.Message, "nothing was changed")
	}, 40*time.Second, 200*time.Millisecond)
	require.False(t, getNode(t, env, stuck).Spec.Unschedulable, "a dry run cordons nothing")
	require.True(t, getNode(t, env, mig).Spec.Unschedulable, "reapply-mig-config cordons")

	// Dry run off: the next episode of the same condition is a real
	// operation, held by the same safety limits as any other: the three
	// operations above fill the policy's maxConcurrent of 1, since every
	// operation counts against every policy that selects its node.
	p := &v1alpha1.RemediationPolicy{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: "pods-stuck-terminating"}, p))
	p.Spec.DryRun = false
	require.NoError(t, env.Client.Update(context.Background(), p))
	setCondition(t, env, stuck, v1alpha1.ConditionPodsStuckTerminating, corev1.ConditionFalse, v1alpha1.ReasonNoPodsStuckTerminating, "none")
	time.Sleep(1100 * time.Millisecond)
	setCondition(t, env, stuck, v1alpha1.ConditionPodsStuckTerminating, corev1.ConditionTrue, v1alpha1.ReasonPodsStuckTerminating,
		"3 pods Terminating past their grace period + 10m; oldest team-a/train-0 for 3h")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var real *v1alpha1.NodeOperation
		for _, o := range opsOnNode(c, env, stuck) {
			if !o.Spec.DryRun {
				real = &o
			}
		}
		require.NotNil(c, real, describeOps(env))
		require.Equal(c, "restart-containerd", real.Spec.Operation)
		require.Equal(c, v1alpha1.PhaseWaitingForBudget, real.Status.Phase, describeOps(env))
		require.Contains(c, real.Status.Message, v1alpha1.ReasonMaxConcurrent+": policy pods-stuck-terminating: 3 of 1 operations running")
	}, 40*time.Second, 200*time.Millisecond)
	require.False(t, getNode(t, env, stuck).Spec.Unschedulable, "held, so nothing touched yet")
}
