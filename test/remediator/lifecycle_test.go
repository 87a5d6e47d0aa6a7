package remediator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// gpuLostPolicy acts on GPULost with one drain-and-run step.
func gpuLostPolicy(name, operation string, drainTimeout time.Duration) *v1alpha1.RemediationPolicy {
	two := intstr.FromInt32(2)
	all := intstr.FromString("100%")
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: localcluster.LabelGPUCount, Operator: metav1.LabelSelectorOpExists}}},
			Conditions:   []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionTrue, For: dur(time.Second)}},
			Steps: []v1alpha1.RemediationStep{{
				Name: "reset", StepAction: v1alpha1.StepAction{Operation: operation, Drain: &v1alpha1.DrainSpec{Timeout: dur(drainTimeout), Mode: v1alpha1.DrainEvict}, Timeout: dur(30 * time.Second)},
				HealthyFor: dur(2 * time.Second), RecoveryTimeout: dur(60 * time.Second),
			}},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(0)},
		},
	}
}

func createPDB(t *testing.T, env *localcluster.Cluster, ns, app string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	require.NoError(t, env.Client.Create(context.Background(), pdb))
	setPDBAllowed(t, env, ns, app, 0)
}

// setPDBAllowed sets a PDB's status as the disruption controller would; no
// controller manager runs in the test cluster.
func setPDBAllowed(t *testing.T, env *localcluster.Cluster, ns, name string, allowed int32) {
	t.Helper()
	ctx := context.Background()
	pdb := &policyv1.PodDisruptionBudget{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pdb))
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
		CurrentHealthy: 1 + allowed, DesiredHealthy: 1, ExpectedPods: 1 + allowed}
	require.NoError(t, env.Client.Status().Update(ctx, pdb))
}

func podExists(t require.TestingT, env *localcluster.Cluster, ns, name string) bool {
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	require.NoError(t, ignoreNotFound(err))
	return err == nil
}

// TestGPULostLifecycle: one node loses a GPU. The operation is created,
// cordons and drains (a PodDisruptionBudget holds the drain until it allows
// the eviction), runs its pod to completion through a kwok stage, verifies
// once the condition clears and the GPUs are back, uncordons and succeeds.
// A second node whose drain stays blocked fails on the drain timeout and is
// quarantined at the end of the ladder.
func TestGPULostLifecycle(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "life", 2)
	healthy, stuck := nodes[0], nodes[1]

	for _, n := range nodes {
		_, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "train", Name: "web-" + n, NodeName: n, GPUs: 1, Labels: map[string]string{"app": "web"}})
		require.NoError(t, err)
		_, err = env.CreatePod(ctx, localcluster.PodSpec{Namespace: "train", Name: "db-" + n, NodeName: n, Labels: map[string]string{"app": "db-" + n}})
		require.NoError(t, err)
		createPDB(t, env, "train", "db-"+n)
	}
	createPolicy(t, env, gpuLostPolicy("gpu-lost", opSucceed, 8*time.Second))
	// The stuck node's policy step has a short drain timeout; give it its own
	// policy with a higher priority so the two paths run side by side.
	stuckPolicy := gpuLostPolicy("gpu-lost-stuck", opSucceed, 3*time.Second)
	stuckPolicy.Spec.Priority = 10
	stuckPolicy.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": stuck}}
	createPolicy(t, env, stuckPolicy)

	rem := newRemediator(t, env)
	rem.start()

	for _, n := range nodes {
		setGPUs(t, env, n, 7)
		setCondition(t, env, n, v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason,
			"GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0")
	}

	// The drain evicts the web pod and waits on the PDB of the db pod.
	var op v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, healthy)
		require.Len(c, ops, 1)
		op = ops[0]
		require.Equal(c, v1alpha1.PhaseDraining, op.Status.Phase, describeOps(env))
		require.Contains(c, op.Status.Message, "disruption budget")
		require.False(c, podExists(c, env, "train", "web-"+healthy), "web pod evicted")
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, "gpu-lost", op.Spec.Policy)
	require.Equal(t, "gpu-lost", op.Labels[v1alpha1.LabelPolicy])
	require.Equal(t, "GPUCountMismatch", op.Spec.Trigger.Reason, "the effective reason from the message")
	n := getNode(t, env, healthy)
	require.True(t, n.Spec.Unschedulable)
	require.Equal(t, op.Name, n.Annotations[v1alpha1.AnnotationCordonedBy])
	require.True(t, podExists(t, env, "train", "db-"+healthy), "the PDB holds the db pod")

	setPDBAllowed(t, env, "train", "db-"+healthy, 1)

	// The operation pod runs and completes; verification waits for the
	// condition to clear and the GPUs to be back.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op.Name)
		require.Equal(c, v1alpha1.PhaseVerifying, o.Status.Phase, describeOps(env))
		require.Contains(c, o.Status.Message, "still True")
	}, 30*time.Second, 200*time.Millisecond)
	require.False(t, podExists(t, env, "train", "db-"+healthy))
	pod := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: plan.OperationPodName(&op)}, pod))
	require.Equal(t, healthy, pod.Spec.NodeName)
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	require.Equal(t, op.Name, pod.OwnerReferences[0].Name)
	require.Contains(t, envOf(pod), "GPU_BUS_ID=0000:3b:00.0")
	require.Contains(t, envOf(pod), "KUBEMEDIC_NODE_NAME="+healthy)
	require.True(t, tolerates(pod, corev1.TaintNodeUnschedulable) && tolerates(pod, v1alpha1.TaintQuarantined))

	setGPUs(t, env, healthy, 8)
	setCondition(t, env, healthy, v1alpha1.ConditionGPULost, corev1.ConditionFalse, "GPUsPresent", "8 of 8 GPUs")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op.Name)
		require.Equal(c, v1alpha1.PhaseSucceeded, o.Status.Phase, describeOps(env))
	}, 30*time.Second, 200*time.Millisecond)
	n = getNode(t, env, healthy)
	require.False(t, n.Spec.Unschedulable, "uncordoned after verification")
	require.NotContains(t, n.Annotations, v1alpha1.AnnotationCordonedBy)
	done := getOp(t, env, op.Name)
	require.NotNil(t, done.Status.StartTime)
	require.NotNil(t, done.Status.CompletionTime)
	for _, typ := range []string{v1alpha1.OperationCordoned, v1alpha1.OperationDrained, v1alpha1.OperationSucceeded, v1alpha1.OperationVerified} {
		c := findCond(done.Status.Conditions, typ)
		require.NotNil(t, c, typ)
		require.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", typ, c.Message)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		want := []string{"Cordoned", "Drained", "OperationCreated", "OperationSucceeded", "PodCreated", "Started", "Verified"}
		require.Subset(c, eventReasons(c, env, "NodeOperation", op.Name), want)
		require.Subset(c, eventReasons(c, env, "Node", healthy), want)
	}, 10*time.Second, 200*time.Millisecond)
	require.Equal(t, float64(1), rem.metric("kubemedic_remediation_time_to_remediate_seconds", map[string]string{"policy": "gpu-lost"}))

	// The stuck node: the drain times out, the step fails, and the ladder
	// ends in quarantine.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, stuck)
		require.Len(c, ops, 2, describeOps(env))
		require.Equal(c, v1alpha1.PhaseFailed, ops[0].Status.Phase)
		require.Contains(c, ops[0].Status.Message, v1alpha1.ReasonDrainFailed)
		require.True(c, ops[1].Spec.Quarantine)
		require.Equal(c, v1alpha1.PhaseSucceeded, ops[1].Status.Phase)
	}, 40*time.Second, 200*time.Millisecond)
	n = getNode(t, env, stuck)
	require.True(t, n.Spec.Unschedulable)
	require.True(t, hasTaint(n, v1alpha1.TaintQuarantined))
	require.True(t, podExists(t, env, "train", "db-"+stuck), "a failed Evict drain deletes nothing")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, float64(1), rem.metric("kubemedic_remediation_quarantined_nodes", nil))
	}, 10*time.Second, 200*time.Millisecond)
}

func envOf(pod *corev1.Pod) []string {
	var out []string
	for _, e := range pod.Spec.Containers[0].Env {
		out = append(out, fmt.Sprintf("%s=%s", e.Name, e.Value))
	}
	return out
}

func tolerates(pod *corev1.Pod, key string) bool {
	for _, tl := range pod.Spec.Tolerations {
		if tl.Key == key || (tl.Key == "" && tl.Operator == corev1.TolerationOpExists) {
			return true
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

func findCond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
