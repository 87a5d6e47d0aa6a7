package remediator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

// gpuDriver is the fake DRA driver whose ResourceSlices list the GPUs.
const gpuDriver = "gpu.example.com"

func gpuUUID(node, i int) string { return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", node, i) }

// resetPolicy resets the GPU an Xid names, cordoning (or, where DRA is
// served, excluding the GPU alone), with a per-GPU attempt cap.
func resetPolicy(maxPerGPU int32) *v1alpha1.RemediationPolicy {
	all := intstr.FromString("100%")
	two := intstr.FromInt32(2)
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-reset"},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonXidResetRequired, For: dur(time.Second)}},
			Steps: []v1alpha1.RemediationStep{
				{Name: "reset-gpu", StepAction: v1alpha1.StepAction{Operation: opSucceed, Cordon: true, Timeout: dur(20 * time.Second)},
					HealthyFor: dur(time.Second), RecoveryTimeout: dur(30 * time.Second)},
			},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &two,
				AttemptCap: &v1alpha1.AttemptCap{MaxAttempts: 10, Window: dur(24 * time.Hour), MaxFailuresPerGPU: &maxPerGPU}},
		},
	}
}

func xidOn(uuid string) string {
	return "XidResetRequired: Xid 48 on 0000:3b:00.0 (" + uuid + "): double-bit ECC error; reset required"
}

func ruleExists(t require.TestingT, env *localcluster.Cluster, node, uuid string) bool {
	r := &resourcev1beta2.DeviceTaintRule{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Name: devicetaint.RuleName(node, uuid)}, r)
	require.NoError(t, ignoreNotFound(err))
	return err == nil
}

func history(t require.TestingT, env *localcluster.Cluster, node string) gpuwire.History {
	h, err := gpuwire.Parse(getNode(t, env, node).Annotations[gpuwire.Annotation])
	require.NoError(t, err)
	return h
}

// waitGPUExcluded waits for node's one operation to exclude GPU uuid by
// DeviceTaintRule, and returns it.
func waitGPUExcluded(t *testing.T, env *localcluster.Cluster, node, uuid string) v1alpha1.NodeOperation {
	t.Helper()
	var op v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1, describeOps(env))
		op = ops[0]
		require.NotNil(c, op.Status.Exclusion, describeOps(env))
		require.Equal(c, v1alpha1.ExclusionDeviceTaintRule, op.Status.Exclusion.Method, op.Status.Exclusion.Message)
		require.True(c, ruleExists(c, env, node, uuid), "the DeviceTaintRule for %s", uuid)
	}, 30*time.Second, 200*time.Millisecond)
	return op
}

// waitGPURepaired clears node's Xid and waits for operation op to be
// verified and GPU uuid's rule removed.
func waitGPURepaired(t *testing.T, env *localcluster.Cluster, node, uuid, op string) {
	t.Helper()
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "no actionable Xid since the last reset or boot")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op)
		require.Equal(c, v1alpha1.PhaseSucceeded, o.Status.Phase, describeOps(env))
		require.False(c, ruleExists(c, env, node, uuid), "the rule is removed after the verified repair")
	}, 40*time.Second, 200*time.Millisecond)
}

// TestGPUExclusionWithDRA: where the API server serves DeviceTaintRule, a
// GPU-scoped reset taints the faulty GPU alone and leaves the node
// schedulable; a verified repair removes the rule. The node's GPU history
// gets the fault and the operation. At the per-GPU cap the GPU is excluded
// for good instead of being reset again, and the node is not quarantined.
func TestGPUExclusionWithDRA(t *testing.T) {
	env := startCluster(t, func(o *localcluster.Options) { o.DRA = true })
	ctx := context.Background()
	nodes := gpuNodes(t, env, "dra", 2)
	node, xidNode := nodes[0], nodes[1]
	var uuids, xidUUIDs []string
	for i := range 8 {
		uuids = append(uuids, gpuUUID(0, i))
		xidUUIDs = append(xidUUIDs, gpuUUID(1, i))
	}
	_, err := env.CreateGPUResourceSlice(ctx, node, gpuDriver, uuids)
	require.NoError(t, err)
	_, err = env.CreateGPUResourceSlice(ctx, xidNode, gpuDriver, xidUUIDs)
	require.NoError(t, err)
	bad := uuids[5]
	createPolicy(t, env, resetPolicy(2))
	rem := newRemediator(t, env)
	rem.start()

	// The xid check names the GPU by its bus ID only (the kernel's Xid
	// line has no UUID): the device with that pcieBusID is excluded, and
	// the operation knows the GPU by UUID from then on.
	xidBad := xidUUIDs[4]
	setCondition(t, env, xidNode, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidResetRequired: Xid 48 on "+localcluster.GPUBus(4)+": double-bit ECC error; reset required")
	byBus := waitGPUExcluded(t, env, xidNode, xidBad)
	require.Equal(t, &v1alpha1.GPUTarget{UUID: xidBad, BusID: localcluster.GPUBus(4)}, byBus.Status.GPU)
	require.Equal(t, gpuDriver+"/"+xidNode+"/gpu-4", byBus.Status.Exclusion.Device)
	require.False(t, getNode(t, env, xidNode).Spec.Unschedulable, "the node stays schedulable for its other GPUs")
	waitGPURepaired(t, env, xidNode, xidBad, byBus.Name)
	xidSum := gpuhistory.Summary(history(t, env, xidNode))
	require.Len(t, xidSum, 1, "the fault (by bus) and the operation (by UUID and bus) are one GPU: %+v", xidSum)
	require.Equal(t, xidBad, xidSum[0].GPU.UUID)

	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidOn(bad))
	reset := waitGPUExcluded(t, env, node, bad)
	require.Equal(t, &v1alpha1.GPUTarget{UUID: bad, BusID: "0000:3b:00.0"}, reset.Status.GPU)
	require.Equal(t, gpuDriver+"/"+node+"/gpu-5", reset.Status.Exclusion.Device)
	require.False(t, getNode(t, env, node).Spec.Unschedulable, "the node stays schedulable for its other GPUs")
	var rule resourcev1beta2.DeviceTaintRule
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: devicetaint.RuleName(node, bad)}, &rule))
	require.Equal(t, "gpu-5", *rule.Spec.DeviceSelector.Device)
	require.Equal(t, resourcev1beta2.DeviceTaintEffectNoSchedule, rule.Spec.Taint.Effect)

	// The reset pod succeeds; the Xid clears; the repair is verified and
	// the rule removed.
	waitGPURepaired(t, env, node, bad, reset.Name)
	require.False(t, getNode(t, env, node).Spec.Unschedulable)
	h := history(t, env, node)
	key := gpuwire.GPUKey{UUID: bad}
	require.Equal(t, 1, gpuhistory.FaultsInWindow(h, key, time.Hour, time.Now()), "the fault is recorded once: %+v", h)
	sum := gpuhistory.Summary(h)
	require.Len(t, sum, 1)
	require.Equal(t, bad, sum[0].GPU.UUID)
	require.NotNil(t, sum[0].LastOperation)
	require.Equal(t, gpuwire.Succeeded, sum[0].LastOperation.Operation.Outcome)
	require.Equal(t, reset.Name, sum[0].LastOperation.Operation.Name)

	// The same GPU fails again: its second fault reaches the cap of 2, so
	// it is excluded for good, and the node keeps serving.
	time.Sleep(1100 * time.Millisecond) // a new fault, a second later than the first
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidOn(bad))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 2, describeOps(env))
		o := ops[1]
		require.Equal(c, v1alpha1.PhaseSkipped, o.Status.Phase, describeOps(env))
		require.Contains(c, o.Status.Message, v1alpha1.ReasonGPUAttemptCapReached)
		require.Contains(c, o.Status.Message, "had 2 faults")
		require.True(c, ruleExists(c, env, node, bad))
	}, 30*time.Second, 200*time.Millisecond)
	n := getNode(t, env, node)
	require.False(t, n.Spec.Unschedulable, "the GPU is excluded, not the node")
	require.False(t, hasTaint(n, v1alpha1.TaintQuarantined))
	require.Equal(t, 2, gpuhistory.FaultsInWindow(history(t, env, node), key, time.Hour, time.Now()))
}

// TestGPUExclusionWithoutDRA: without DeviceTaintRule the same fault
// cordons the node, and the operation says which path it took and why.
func TestGPUExclusionWithoutDRA(t *testing.T) {
	env := startCluster(t)
	node := gpuNodes(t, env, "nodra", 1)[0]
	createPolicy(t, env, resetPolicy(5))
	rem := newRemediator(t, env)
	rem.start()

	bad := gpuUUID(1, 3)
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidOn(bad))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1, describeOps(env))
		ex := ops[0].Status.Exclusion
		require.NotNil(c, ex, describeOps(env))
		require.Equal(c, v1alpha1.ExclusionCordon, ex.Method)
		require.Contains(c, ex.Message, "does not serve resource.k8s.io/v1beta2 DeviceTaintRule")
		require.True(c, getNode(c, env, node).Spec.Unschedulable)
	}, 30*time.Second, 200*time.Millisecond)
}
