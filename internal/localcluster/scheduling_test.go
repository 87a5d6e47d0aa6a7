package localcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// workloadPods lists the pods of workload name in ns.
func workloadPods(t require.TestingT, env *localcluster.Cluster, ns, name string) []corev1.Pod {
	var list corev1.PodList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{localcluster.LabelAppName: name}))
	return list.Items
}

// unschedulable returns the scheduler's message on a pending pod, "" when it
// has none.
func unschedulable(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// TestSchedulingStack: with the real kube-scheduler and
// kube-controller-manager, a Deployment's pods are created by its
// controllers and placed by the scheduler, by extended resource and by DRA
// claim; a cordoned node gets nothing; a pod that fits nowhere stays
// Pending with the scheduler's own reason; a deleted Deployment takes its
// pods along (garbage collector).
func TestSchedulingStack(t *testing.T) {
	env := harness.Start(t, localcluster.Options{CRDDir: "-", Kwok: true, DRA: true, Scheduler: true, ControllerManager: true})
	ctx := t.Context()
	require.NotZero(t, env.SchedulerPID())
	require.NotZero(t, env.ControllerManagerPID())
	nodes, err := env.CreateGPUNodes(ctx, 3, localcluster.NodeSpec{ResourceSlices: true})
	require.NoError(t, err)
	require.NoError(t, env.CreateGPUDeviceClass(ctx))
	var slices resourcev1.ResourceSliceList
	require.NoError(t, env.Client.List(ctx, &slices))
	require.Len(t, slices.Items, 3, "one ResourceSlice per node")
	require.Equal(t, localcluster.NVIDIADRADriver, slices.Items[0].Spec.Driver)
	require.Len(t, slices.Items[0].Spec.Devices, 8)

	// CreatePod's pretend controllers would fight the real ones.
	_, err = env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Owner: localcluster.OwnerDeployment, OwnerName: "fake"})
	require.ErrorContains(t, err, "use CreateWorkload")

	// Cordon the last node: nothing may land there.
	cordoned := nodes[2].Name
	require.NoError(t, env.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cordoned}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`))))

	// Two whole nodes' worth of GPUs by extended resource: one pod per node.
	_, err = env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: "team-a", Name: "train", Replicas: 2, GPUs: 8})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := workloadPods(c, env, "team-a", "train")
		require.Len(c, pods, 2, "the replicaset controller made the pods")
		on := map[string]bool{}
		for _, p := range pods {
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "%s on %q: %+v", p.Name, p.Spec.NodeName, p.Status.Conditions)
			require.NotEqual(c, cordoned, p.Spec.NodeName)
			on[p.Spec.NodeName] = true
		}
		require.Len(c, on, 2, "8 GPUs each: one pod per node")
	}, 30*time.Second, 100*time.Millisecond)

	// One more GPU fits nowhere: the scheduler says why.
	_, err = env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: "team-a", Name: "waiting", GPUs: 1})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := workloadPods(c, env, "team-a", "waiting")
		require.Len(c, pods, 1)
		msg := unschedulable(pods[0])
		require.Contains(c, msg, "0/3 nodes are available")
		require.Contains(c, msg, "2 Insufficient nvidia.com/gpu")
		require.Contains(c, msg, "1 node(s) were unschedulable")
	}, 30*time.Second, 100*time.Millisecond)

	// A DRA claim of one GPU on a node whose GPUs the device plugin's pods
	// hold: the two ways are counted apart, so the claim is allocated.
	_, err = env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: "team-b", Name: "claim", GPUClaims: 1})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := workloadPods(c, env, "team-b", "claim")
		require.Len(c, pods, 1)
		require.Equal(c, corev1.PodRunning, pods[0].Status.Phase, unschedulable(pods[0]))
		require.NotEqual(c, cordoned, pods[0].Spec.NodeName)
		var claims resourcev1.ResourceClaimList
		require.NoError(c, env.Client.List(context.Background(), &claims, client.InNamespace("team-b")))
		require.Len(c, claims.Items, 1, "the resourceclaim controller made the claim")
		alloc := claims.Items[0].Status.Allocation
		require.NotNil(c, alloc, "the scheduler allocated it")
		require.Len(c, alloc.Devices.Results, 1)
		require.Equal(c, localcluster.NVIDIADRADriver, alloc.Devices.Results[0].Driver)
		require.Equal(c, pods[0].Spec.NodeName, alloc.Devices.Results[0].Pool)
	}, 30*time.Second, 100*time.Millisecond)

	// The garbage collector deletes a deleted Deployment's pods.
	require.NoError(t, env.Clientset.AppsV1().Deployments("team-a").Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Empty(c, workloadPods(c, env, "team-a", "train"))
	}, 30*time.Second, 100*time.Millisecond)
	// The waiting pod now fits on a freed node.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := workloadPods(c, env, "team-a", "waiting")
		require.Len(c, pods, 1)
		require.Equal(c, corev1.PodRunning, pods[0].Status.Phase, unschedulable(pods[0]))
	}, 60*time.Second, 100*time.Millisecond)

	// Nothing evicts behind a test's back: a NoExecute taint that a pod
	// does not tolerate would make the taint-eviction-controller delete it
	// at once, and that controller does not run.
	node := nodes[0].Name
	bare := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "no-tolerance"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, bare))
	require.NoError(t, env.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"taints":[{"key":"example.com/evict-me","effect":"NoExecute"}]}}`))))
	require.Never(t, func() bool {
		var p corev1.Pod
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bare), &p)
		return err != nil || p.DeletionTimestamp != nil
	}, 5*time.Second, 100*time.Millisecond, "no controller evicts the pod from its NoExecute-tainted node")
}
