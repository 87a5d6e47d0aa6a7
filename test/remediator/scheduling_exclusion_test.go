package remediator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
)

// exclNamespace holds the workloads of the exclusion tests.
const exclNamespace = "team-a"

// exclScheduling runs the real kube-scheduler and kube-controller-manager
// beside the API server, which serves DeviceTaintRule when dra is set.
func exclScheduling(dra bool) func(*localcluster.Options) {
	return func(o *localcluster.Options) { o.DRA, o.Scheduler, o.ControllerManager = dra, true, true }
}

// exclNodes creates n Ready kwok GPU nodes of spec with a boot ID and
// returns their names.
func exclNodes(t *testing.T, env *localcluster.Cluster, n int, spec localcluster.NodeSpec) []string {
	t.Helper()
	nodes, err := env.CreateGPUNodes(t.Context(), n, spec)
	require.NoError(t, err)
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Name
		setBootID(t, env, nd.Name, "boot-1")
	}
	return names
}

// exclPolicy is resetPolicy with time to spare: the scheduling checks run
// while the reset waits for the Xid to clear, so the recovery timeout must
// outlast them, or the operation fails before the test repairs the GPU.
func exclPolicy() *v1alpha1.RemediationPolicy {
	p := resetPolicy(5)
	p.Spec.Steps[0].RecoveryTimeout = dur(3 * time.Minute)
	return p
}

// exclPods lists the pods of workload name.
func exclPods(t require.TestingT, env *localcluster.Cluster, name string) []corev1.Pod {
	var list corev1.PodList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(exclNamespace),
		client.MatchingLabels{localcluster.LabelAppName: name}))
	return list.Items
}

// exclPending returns the scheduler's message on a pod it could not place,
// "" when there is none.
func exclPending(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// exclDevices returns the devices allocated to the ResourceClaim that the
// resourceclaim controller made for pod p (nil while it has none or it is
// not allocated), and fails when one is not a GPU of node.
func exclDevices(t require.TestingT, env *localcluster.Cluster, p corev1.Pod, node string) []string {
	var name string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == "gpus" && s.ResourceClaimName != nil {
			name = *s.ResourceClaimName
		}
	}
	if name == "" {
		return nil
	}
	var claim resourcev1.ResourceClaim
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: name}, &claim))
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		require.Equal(t, localcluster.NVIDIADRADriver, r.Driver, "claim %s", name)
		require.Equal(t, node, r.Pool, "claim %s of pod %s has a GPU of another node", name, p.Name)
		out = append(out, r.Device)
	}
	return out
}

// gpuDevices returns the device names gpu-0 to gpu-7, less the skipped ones.
func gpuDevices(skip ...int) []string {
	var out []string
	for i := range 8 {
		if !slices.Contains(skip, i) {
			out = append(out, fmt.Sprintf("gpu-%d", i))
		}
	}
	return out
}

// TestSchedulerHonoursGPUExclusion proves the exclusion promise against the
// real kube-scheduler: once a GPU-scoped Xid has made the remediator taint
// one GPU by DeviceTaintRule, the scheduler allocates the node's seven other
// GPUs to one-GPU claims and never the faulty one, the eighth claimant waits
// with the scheduler's own reason, and the node stays schedulable. Another
// node's GPUs are all allocated. After the verified repair the waiting pod
// gets the repaired GPU.
func TestSchedulerHonoursGPUExclusion(t *testing.T) {
	env := startCluster(t, exclScheduling(true))
	ctx := t.Context()
	nodes := exclNodes(t, env, 2, localcluster.NodeSpec{NamePrefix: "excl", ResourceSlices: true})
	require.NoError(t, env.CreateGPUDeviceClass(ctx))
	node, other := nodes[0], nodes[1]
	bad := localcluster.GPUUUID(node, 5)
	createPolicy(t, env, exclPolicy())
	rem := newRemediator(t, env)
	rem.start()

	// The exclusion comes first: a pod scheduled before it could hold the
	// faulty GPU already.
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidOn(bad))
	op := waitGPUExcluded(t, env, node, bad)
	require.Equal(t, localcluster.NVIDIADRADriver+"/"+node+"/gpu-5", op.Status.Exclusion.Device)
	require.False(t, getNode(t, env, node).Spec.Unschedulable, "the GPU is excluded, not the node")

	// Eight one-GPU claimants on each node.
	for name, on := range map[string]string{"faulty": node, "healthy": other} {
		_, err := env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: exclNamespace, Name: name, Replicas: 8,
			GPUClaims: 1, NodeSelector: map[string]string{corev1.LabelHostname: on}})
		require.NoError(t, err)
	}
	var waiting corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var devices []string
		var pending []corev1.Pod
		for _, p := range exclPods(c, env, "faulty") {
			if p.Spec.NodeName == "" {
				pending = append(pending, p)
				continue
			}
			require.Equal(c, node, p.Spec.NodeName)
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
			devices = append(devices, exclDevices(c, env, p, node)...)
		}
		require.Len(c, pending, 1, "one of eight claimants finds no GPU")
		waiting = pending[0]
		msg := exclPending(waiting)
		require.Contains(c, msg, "0/2 nodes are available: 1 cannot allocate all claims", "pod %s", waiting.Name)
		require.Contains(c, msg, "1 node(s) didn't match Pod's node affinity/selector", "pod %s", waiting.Name)
		require.Empty(c, exclDevices(c, env, waiting, node), "the waiting pod's claim is not allocated")
		slices.Sort(devices)
		require.Equal(c, gpuDevices(5), devices, "the seven healthy GPUs, each once, and never gpu-5")
	}, 60*time.Second, 200*time.Millisecond)
	t.Logf("The scheduler on pod %s: %s", waiting.Name, exclPending(waiting))

	// The other node is untouched: all eight of its GPUs are allocated, and
	// the only rule is the faulty GPU's.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var devices []string
		for _, p := range exclPods(c, env, "healthy") {
			require.Equal(c, other, p.Spec.NodeName, "pod %s: %s", p.Name, exclPending(p))
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
			devices = append(devices, exclDevices(c, env, p, other)...)
		}
		slices.Sort(devices)
		require.Equal(c, gpuDevices(), devices)
	}, 60*time.Second, 200*time.Millisecond)
	var rules resourcev1beta2.DeviceTaintRuleList
	require.NoError(t, env.Client.List(ctx, &rules))
	require.Len(t, rules.Items, 1)
	require.Equal(t, devicetaint.RuleName(node, bad), rules.Items[0].Name)
	require.False(t, getNode(t, env, other).Spec.Unschedulable)

	// Still waiting, until the verified repair lifts the rule.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&waiting), &waiting))
	require.Empty(t, waiting.Spec.NodeName, "the eighth pod waits while the GPU is excluded")
	waitGPURepaired(t, env, node, bad, op.Name)
	repaired := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var p corev1.Pod
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKeyFromObject(&waiting), &p))
		require.Equal(c, node, p.Spec.NodeName, "the scheduler: %s", exclPending(p))
		require.Equal(c, corev1.PodRunning, p.Status.Phase)
		require.Equal(c, []string{"gpu-5"}, exclDevices(c, env, p, node), "the waiting pod gets the repaired GPU")
	}, 60*time.Second, 200*time.Millisecond)
	t.Logf("Pod %s ran on the repaired GPU %s after the rule was removed", waiting.Name, time.Since(repaired).Round(time.Millisecond))
}

// TestCordonKeepsGPUPodsOff proves the exclusion promise where DRA is not
// served, against the real kube-scheduler: the GPU-scoped Xid cordons the
// node, and no new pod lands there. Whole-node GPU pods fill the healthy
// nodes and the one left over waits with the scheduler's reasons (the
// cordon, and too few GPUs elsewhere); a pod pinned to the node waits too.
// After the verified repair the node is uncordoned and both land on it.
func TestCordonKeepsGPUPodsOff(t *testing.T) {
	env := startCluster(t, exclScheduling(false))
	ctx := t.Context()
	nodes := exclNodes(t, env, 3, localcluster.NodeSpec{NamePrefix: "cordon"})
	node := nodes[0]
	createPolicy(t, env, exclPolicy())
	rem := newRemediator(t, env)
	rem.start()

	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidOn(localcluster.GPUUUID(node, 3)))
	var op string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1, describeOps(env))
		require.NotNil(c, ops[0].Status.Exclusion, describeOps(env))
		require.Equal(c, v1alpha1.ExclusionCordon, ops[0].Status.Exclusion.Method)
		require.True(c, getNode(c, env, node).Spec.Unschedulable, "the Xid cordons node %s", node)
		op = ops[0].Name
	}, 30*time.Second, 200*time.Millisecond)

	// One whole-node pod more than there are healthy nodes, and a pod
	// pinned to the cordoned node.
	_, err := env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: exclNamespace, Name: "train", Replicas: 3, GPUs: 8})
	require.NoError(t, err)
	_, err = env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: exclNamespace, Name: "pinned",
		NodeSelector: map[string]string{corev1.LabelHostname: node}})
	require.NoError(t, err)
	var waiting, pinned corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var pending []corev1.Pod
		on := map[string]bool{}
		for _, p := range exclPods(c, env, "train") {
			if p.Spec.NodeName == "" {
				pending = append(pending, p)
				continue
			}
			require.NotEqual(c, node, p.Spec.NodeName, "pod %s landed on the cordoned node", p.Name)
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
			on[p.Spec.NodeName] = true
		}
		require.Len(c, on, 2, "one whole-node pod on each healthy node")
		require.Len(c, pending, 1)
		waiting = pending[0]
		msg := exclPending(waiting)
		require.Contains(c, msg, "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu", "pod %s", waiting.Name)

		pods := exclPods(c, env, "pinned")
		require.Len(c, pods, 1)
		pinned = pods[0]
		require.Empty(c, pinned.Spec.NodeName)
		msg = exclPending(pinned)
		require.Contains(c, msg, "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector", "pod %s", pinned.Name)
	}, 60*time.Second, 200*time.Millisecond)
	t.Logf("The scheduler on pod %s: %s", waiting.Name, exclPending(waiting))
	t.Logf("The scheduler on pinned pod %s: %s", pinned.Name, exclPending(pinned))

	// The repair is verified and the node uncordoned: both land on it.
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "no actionable Xid since the last reset or boot")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, v1alpha1.PhaseSucceeded, getOp(t, env, op).Status.Phase, describeOps(env))
		require.False(c, getNode(c, env, node).Spec.Unschedulable, "uncordoned after the verified repair")
	}, 40*time.Second, 200*time.Millisecond)
	uncordoned := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, key := range []client.ObjectKey{client.ObjectKeyFromObject(&waiting), client.ObjectKeyFromObject(&pinned)} {
			var p corev1.Pod
			require.NoError(c, env.Client.Get(context.Background(), key, &p))
			require.Equal(c, node, p.Spec.NodeName, "pod %s: %s", p.Name, exclPending(p))
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		}
	}, 60*time.Second, 200*time.Millisecond)
	t.Logf("Pods %s and %s ran on the uncordoned node %s after the uncordon", waiting.Name, pinned.Name, time.Since(uncordoned).Round(time.Millisecond))
}
