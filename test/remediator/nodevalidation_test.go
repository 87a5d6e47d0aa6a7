package remediator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// nvPool labels the nodes the test's ValidationPolicy selects.
const nvPool = "example.com/validated-pool"

// shippedPriorityClass creates the PriorityClass kubemedic ships for
// background tests, from deploy/.
func shippedPriorityClass(t *testing.T, env *localcluster.Cluster) *schedulingv1.PriorityClass {
	t.Helper()
	b, err := os.ReadFile("../../deploy/remediator/validation.yaml")
	require.NoError(t, err)
	pc := &schedulingv1.PriorityClass{}
	require.NoError(t, yaml.UnmarshalStrict(b, pc))
	require.NoError(t, env.Client.Create(context.Background(), pc))
	return pc
}

// nodeValidation is the node's record, once it satisfies check.
func nodeValidation(t *testing.T, env *localcluster.Cluster, node string, check func(c *assert.CollectT, nv *v1alpha1.NodeValidation)) *v1alpha1.NodeValidation {
	t.Helper()
	nv := &v1alpha1.NodeValidation{}
	if !assert.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Name: node}, nv))
		check(c, nv)
	}, 45*time.Second, 50*time.Millisecond) {
		t.Fatalf("NodeValidation %s: %+v; events:%s", node, nv.Status, nodeEvents(env, node))
	}
	return nv
}

// hasNodeEvent waits for an Event of reason about the node: the recorder
// writes them after the pass.
func hasNodeEvent(t *testing.T, env *localcluster.Cluster, node, reason string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Contains(c, eventReasons(c, env, "Node", node), reason)
	}, 10*time.Second, 50*time.Millisecond)
}

// nodeEvents is a failure message listing the Events about a node.
func nodeEvents(env *localcluster.Cluster, node string) string {
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node {
			fmt.Fprintf(&b, "\n  %s %s: %s", e.CreationTimestamp.Format("15:04:05.000"), e.Reason, e.Note)
		}
	}
	return b.String()
}

// runningTestPod waits for the node's record to name a test pod that is
// Running on the node (bound by the remediator or by the scheduler, run
// by kwok), and returns it.
func runningTestPod(t *testing.T, env *localcluster.Cluster, node string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		nv := &v1alpha1.NodeValidation{}
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Name: node}, nv))
		require.NotNil(c, nv.Status.Current)
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: opNamespace, Name: nv.Status.Current.PodName}, &pod))
		require.Equal(c, node, pod.Spec.NodeName)
		require.Equal(c, corev1.PodRunning, pod.Status.Phase)
	}, 45*time.Second, 50*time.Millisecond, "a test pod Running on %s", node)
	return &pod
}

func taintUnvalidated(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	n := getNode(t, env, node)
	orig := n.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule})
	require.NoError(t, env.Client.Patch(context.Background(), n, client.MergeFrom(orig)))
}

// bigPod is a real workload pod at the default priority that wants every
// GPU of node.
func bigPod(ns, name, node string) *corev1.Pod {
	eight := resource.MustParse("8")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{Name: "train", Image: "registry.example/train:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": eight}, Limits: corev1.ResourceList{"nvidia.com/gpu": eight}}}},
		},
	}
}

// boundAfter creates pod and returns how long the real scheduler took to
// bind it.
func boundAfter(t *testing.T, env *localcluster.Cluster, pod *corev1.Pod) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, env.Client.Create(ctx, pod))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var p corev1.Pod
		require.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p))
		require.NotEmpty(c, p.Spec.NodeName, "pod %s bound", pod.Name)
	}, 60*time.Second, 5*time.Millisecond)
	return time.Since(start)
}

// TestValidationPolicyJoinAndBackground runs a ValidationPolicy with the
// real kube-scheduler and kube-controller-manager:
//   - join: a node registered with the taint kubemedic.io/unvalidated is
//     tested by a bound pod with every GPU and released on a pass; another
//     fails DCGM (the real kubemedic-validate on DCGM's real output), keeps
//     the taint and gets GPUValidationFailed=True with the test as reason;
//   - background: an idle node's test goes through the scheduler at the
//     shipped negative PriorityClass; a real pod that wants the node's GPUs
//     preempts it and is bound; the preempted test is no result, and is
//     tried again after retryAfter, once the GPUs are free, and passes.
//
// It measures how long the real pod waits for the preemption against the
// same pod on an idle node.
func TestValidationPolicyJoinAndBackground(t *testing.T) {
	env := startCluster(t, drScheduling)
	ctx := context.Background()
	pc := shippedPriorityClass(t, env)
	require.Less(t, pc.Value, int32(0), "below every pod without a class")
	require.NotNil(t, pc.PreemptionPolicy)
	require.Equal(t, corev1.PreemptNever, *pc.PreemptionPolicy)
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: opValidate},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-validate:test", Command: []string{"/ko-app/kubemedic-validate"},
			Args: []string{"dcgm"}}}))
	nodes, err := env.CreateGPUNodes(ctx, 4, localcluster.NodeSpec{NamePrefix: "nv", Labels: map[string]string{nvPool: "yes"}})
	require.NoError(t, err)
	joinOK, joinBad, busy := nodes[0].Name, nodes[1].Name, nodes[2].Name
	// A node outside the policy: the same pod on it shows the wait for an
	// idle node.
	idle, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{NamePrefix: "idle"})
	require.NoError(t, err)
	var names []string
	for _, n := range append(nodes, idle...) {
		names = append(names, n.Name)
	}
	require.NoError(t, env.WaitNodesReady(ctx, names...))
	// The fourth pool node waits out the test holding a real pod's GPUs
	// elsewhere: it is tainted too, and never played, so its join test
	// only holds its own GPUs.
	for _, n := range []string{joinOK, joinBad, nodes[3].Name} {
		taintUnvalidated(t, env, n)
	}

	rem := newRemediator(t, env)
	rem.start()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: v1alpha1.ValidationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{nvPool: "yes"}},
			Validate:     v1alpha1.ValidateSpec{Operation: opValidate, Timeout: dur(5 * time.Minute)},
			Join:         &v1alpha1.JoinSpec{},
			Background: &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: 168 * time.Hour}, MaxConcurrent: 1,
				WaitFor: dur(time.Minute), RetryAfter: dur(3 * time.Second)},
		}}))

	// Join: bound to the node past its taint, with every GPU.
	okPod := runningTestPod(t, env, joinOK)
	gpus := resource.MustParse("8")
	require.True(t, gpus.Equal(okPod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]), "every GPU: %v", okPod.Spec.Containers[0].Resources)
	require.Empty(t, okPod.Spec.PriorityClassName, "a join test is bound, not scheduled")
	require.True(t, plan.HasTaint(getNode(t, env, joinOK), v1alpha1.TaintUnvalidated), "the taint stays while the test runs")
	require.Equal(t, validation.VerdictPass, playTest(t, env, okPod, `cat `+dcgmPass).Verdict)
	nodeValidation(t, env, joinOK, func(c *assert.CollectT, nv *v1alpha1.NodeValidation) {
		require.NotNil(c, nv.Status.Last)
		require.Equal(c, v1alpha1.ValidationPassed, nv.Status.Last.Result)
		require.Equal(c, v1alpha1.ValidationJoin, nv.Status.Mode)
		require.Equal(c, "dcgm", nv.Status.Last.Test)
		require.Nil(c, nv.Status.Current)
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.False(c, plan.HasTaint(getNode(c, env, joinOK), v1alpha1.TaintUnvalidated), "released after the pass")
	}, 10*time.Second, 20*time.Millisecond)
	hasNodeEvent(t, env, joinOK, v1alpha1.ReasonValidationPassed)

	// Join, failing: GPU 3 fails DCGM's memory test.
	badPod := runningTestPod(t, env, joinBad)
	r := playTest(t, env, badPod, `sed '/"gpu_ids" : 3,/{n;s/PASS/FAIL/}' `+dcgmPass+`; exit 226`)
	require.Equal(t, validation.VerdictFail, r.Verdict)
	nodeValidation(t, env, joinBad, func(c *assert.CollectT, nv *v1alpha1.NodeValidation) {
		require.NotNil(c, nv.Status.Last)
		require.Equal(c, v1alpha1.ValidationFailed, nv.Status.Last.Result)
		require.Equal(c, []string{localcluster.GPUUUID(joinBad, 3)}, plan.FailingGPUs(nv.Status.Last))
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := getNode(c, env, joinBad)
		cond := localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUValidationFailed)
		require.NotNil(c, cond)
		require.Equal(c, corev1.ConditionTrue, cond.Status)
		require.Equal(c, v1alpha1.ReasonDCGMDiagFailed, cond.Reason)
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, plan.HasTaint(getNode(t, env, joinBad), v1alpha1.TaintUnvalidated), "a failed node keeps the taint")

	// Background: the budget is one node. joinOK passed its join test
	// just now, so it is not due; the idle pool node is.
	bgPod := runningTestPod(t, env, busy)
	require.Equal(t, pc.Name, bgPod.Spec.PriorityClassName)
	require.NotNil(t, bgPod.Spec.Priority)
	require.Equal(t, pc.Value, *bgPod.Spec.Priority)
	require.Equal(t, corev1.PreemptNever, *bgPod.Spec.PreemptionPolicy, "the test never preempts anything")
	require.False(t, getNode(t, env, busy).Spec.Unschedulable, "a background test never cordons")
	nv := nodeValidation(t, env, busy, func(c *assert.CollectT, nv *v1alpha1.NodeValidation) {
		require.Equal(c, v1alpha1.ValidationBackground, nv.Status.Mode)
	})
	require.Contains(t, nv.Status.Message, "any real pod preempts it")

	// A real pod that wants the node's GPUs preempts the test; the same
	// pod on an idle node is bound at once.
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-nv"}}))
	onIdle := boundAfter(t, env, bigPod("team-nv", "train-idle", idle[0].Name))
	onTest := boundAfter(t, env, bigPod("team-nv", "train", busy))
	t.Logf("a real pod asking for 8 GPUs was bound in %s on an idle node and in %s on a node running a background test (preemption, grace %ds)",
		onIdle.Round(time.Millisecond), onTest.Round(time.Millisecond), v1alpha1.BackgroundGracePeriod)
	require.Less(t, onTest, time.Duration(v1alpha1.BackgroundGracePeriod)*time.Second+15*time.Second, "the preemption's wait is bounded by the test's grace")
	nv = nodeValidation(t, env, busy, func(c *assert.CollectT, nv *v1alpha1.NodeValidation) {
		require.Equal(c, int32(1), nv.Status.Preemptions)
	})
	require.Nil(t, nv.Status.Last, "a preempted test is no result")
	hasNodeEvent(t, env, busy, v1alpha1.EventValidationPreempted)
	require.Nil(t, localcluster.FindNodeCondition(getNode(t, env, busy), v1alpha1.ConditionGPUValidationFailed), "no condition from no result")

	// Tried again after retryAfter: while the real pod holds the GPUs, the
	// test waits unscheduled; once it is gone, the test runs and passes.
	var waiting corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		nv := &v1alpha1.NodeValidation{}
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Name: busy}, nv))
		require.NotNil(c, nv.Status.Current)
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: nv.Status.Current.PodName}, &waiting))
	}, 30*time.Second, 50*time.Millisecond)
	require.Never(t, func() bool {
		var p corev1.Pod
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&waiting), &p) == nil && p.Spec.NodeName != ""
	}, 2*time.Second, 100*time.Millisecond, "the retry waits for the GPUs the real pod holds")
	var train corev1.Pod
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: "team-nv", Name: "train"}, &train))
	require.Nil(t, train.DeletionTimestamp, "the real pod is never preempted by a test")
	require.NoError(t, env.Client.Delete(ctx, &train, client.GracePeriodSeconds(0)))
	again := runningTestPod(t, env, busy)
	require.Equal(t, validation.VerdictPass, playTest(t, env, again, `cat `+dcgmPass).Verdict)
	nodeValidation(t, env, busy, func(c *assert.CollectT, nv *v1alpha1.NodeValidation) {
		require.NotNil(c, nv.Status.Last)
		require.Equal(c, v1alpha1.ValidationPassed, nv.Status.Last.Result)
		require.NotNil(c, nv.Status.NextTime)
		require.WithinDuration(c, time.Now().Add(168*time.Hour), nv.Status.NextTime.Time, time.Minute)
	})

	var pol v1alpha1.ValidationPolicy
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Name: "pool"}, &pol))
		require.Equal(c, int32(4), pol.Status.Matched)
		require.Equal(c, int32(2), pol.Status.Passed)
		require.Equal(c, int32(1), pol.Status.Failed)
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1.0, rem.metric("kubemedic_validation_tests_total", map[string]string{"policy": "pool", "mode": "Background", "result": "Preempted"}))
	require.Equal(t, 1.0, rem.metric("kubemedic_validation_tests_total", map[string]string{"policy": "pool", "mode": "Join", "result": "Failed"}))

	// A policy whose priority class could delay real pods starts no
	// background test, and says why.
	require.NoError(t, env.Client.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "too-high"}, Value: 1000}))
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zz-unsafe"},
		Spec: v1alpha1.ValidationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/none": "none"}},
			Validate:     v1alpha1.ValidateSpec{Operation: opValidate},
			Background:   &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: time.Hour}, MaxConcurrent: 1, PriorityClassName: "too-high"},
		}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var p v1alpha1.ValidationPolicy
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Name: "zz-unsafe"}, &p))
		cond := apimeta.FindStatusCondition(p.Status.Conditions, "Ready")
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionFalse, cond.Status)
		require.Equal(c, "UnsafePriorityClass", cond.Reason)
		require.Contains(c, cond.Message, "has value 1000 and preemptionPolicy PreemptLowerPriority")
	}, 10*time.Second, 50*time.Millisecond)

	// A node that is gone takes its record with it (the garbage
	// collector, through the record's owner reference to its Node).
	require.NoError(t, env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: joinOK}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: joinOK}, &v1alpha1.NodeValidation{})
		require.True(c, apierrors.IsNotFound(err), "NodeValidation %s gone with its node: %v", joinOK, err)
	}, 30*time.Second, 100*time.Millisecond)
}
