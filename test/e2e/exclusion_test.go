package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestExclusion: on the demo's world, with the real scheduler and
// controllers, a fatal Xid on one GPU of a node whose GPUs DRA allocates
// takes that GPU alone out of scheduling: the remediator's operation
// excludes it by DeviceTaintRule and never cordons the node; while it is
// excluded 7 pods of the node's Deployment keep running on the other GPUs
// and the restarted 8th waits with the scheduler's own reason; after the
// verified reset the rule is gone and the waiting pod holds the repaired
// GPU, so the node serves all 8 again. Nothing is evicted.
func TestExclusion(t *testing.T) {
	w := startWorld(t)
	ctx := context.Background()
	require.NotEmpty(t, w.DRANodes, "the demo has a DRA node")
	s := runScenario(t, w, "exclusion")
	out := s.Exclusion
	require.NotNil(t, out, "the story recorded its outcome")
	node := s.Node
	require.Equal(t, w.DRANodes[0], node)
	bad := localcluster.GPUUUID(node, 0)

	// The operation excluded the GPU, not the node, and succeeded.
	var op v1alpha1.NodeOperation
	require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: out.Operation}, &op))
	require.Equal(t, "gpu-xid-reset-dra", op.Spec.Policy)
	require.Equal(t, v1alpha1.PhaseSucceeded, op.Status.Phase, op.Status.Message)
	require.NotNil(t, op.Status.GPU)
	require.Equal(t, bad, op.Status.GPU.UUID, "the Xid's bus ID was resolved to the GPU's UUID through the ResourceSlice")
	ex := op.Status.Exclusion
	require.NotNil(t, ex)
	require.Equal(t, v1alpha1.ExclusionDeviceTaintRule, ex.Method, ex.Message)
	require.Equal(t, out.Rule, ex.DeviceTaintRule)
	require.Equal(t, localcluster.NVIDIADRADriver+"/"+node+"/gpu-0", ex.Device)
	c := meta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationCordoned)
	require.NotNil(t, c)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, v1alpha1.ReasonGPUExcluded, c.Reason)
	require.Empty(t, op.Status.OwnerNotices, "no pod was stopped by a drain")

	var n corev1.Node
	require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
	require.False(t, n.Spec.Unschedulable, "node %s was never cordoned", node)
	err := w.Cluster.Client.Get(ctx, client.ObjectKey{Name: out.Rule}, &resourcev1beta2.DeviceTaintRule{})
	require.True(t, apierrors.IsNotFound(err), "DeviceTaintRule %s is removed after the verified repair: %v", out.Rule, err)

	// While the GPU was excluded: 7 ran, the restarted pod waited for the
	// scheduler's reason, and what freed its place was the rule's removal.
	require.Equal(t, 7, out.Running)
	require.Contains(t, out.Reason, "cannot allocate all claims")
	require.NotEqual(t, out.Restarted, out.Pending)
	var wait bool
	for _, wt := range s.Timeline.Waits() {
		if wt.Pod != out.Pending {
			continue
		}
		wait = true
		require.True(t, wt.GPU)
		require.Equal(t, node, wt.Node)
		require.Equal(t, "kubemedic removed DeviceTaintRule "+out.Rule, wt.After)
		require.Equal(t, []string{ex.Device}, wt.Devices)
	}
	require.True(t, wait, "the timeline saw %s wait and be placed: %+v", out.Pending, s.Timeline.Waits())
	require.Empty(t, s.Timeline.Reschedules(), "nothing was evicted")

	// Now the node serves all 8 again, one GPU each, and the pod that
	// waited holds the repaired one.
	var pods corev1.PodList
	require.NoError(t, w.Cluster.Client.List(ctx, &pods, client.InNamespace("research"), client.MatchingLabels{localcluster.LabelAppName: "infer-" + node}))
	var claims resourcev1.ResourceClaimList
	require.NoError(t, w.Cluster.Client.List(ctx, &claims, client.InNamespace("research")))
	deviceOf := map[string]string{} // claim -> device
	for _, cl := range claims.Items {
		if a := cl.Status.Allocation; a != nil && len(a.Devices.Results) == 1 {
			deviceOf[cl.Name] = a.Devices.Results[0].Device
		}
	}
	held := map[string]string{} // device -> pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		require.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		require.Equal(t, node, p.Spec.NodeName, "pod %s", p.Name)
		require.Len(t, p.Status.ResourceClaimStatuses, 1, "pod %s", p.Name)
		dev := deviceOf[*p.Status.ResourceClaimStatuses[0].ResourceClaimName]
		require.NotEmpty(t, dev, "pod %s's claim is allocated", p.Name)
		require.NotContains(t, held, dev, "two pods hold %s", dev)
		held[dev] = p.Name
	}
	require.Len(t, held, 8)
	require.Equal(t, out.Pending, held["gpu-0"], "the pod that waited got the repaired GPU")
}
