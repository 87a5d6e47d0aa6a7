package remediator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Acceptance test 6 of the remediator: maintenance windows, node cooldown,
// the attempt cap and its quarantine, the opt-out label, paused and dry-run
// policies, and a manual operation held by a policy's budget. Each test runs
// its own API server and kwok, on the real clock with short durations.

// The trigger the tests set and clear.
const (
	limLostMsg    = "GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0"
	limHealthyMsg = "8 of 8 GPUs"
)

// limWait bounds every wait for the remediator in these tests.
const limWait = 30 * time.Second

// limPolicy is a GPULost policy on the named nodes with one cordon-and-run
// step of the given operation, a short healthyFor, no node cooldown, and a
// breaker that never trips (maxUnhealthy 100%: the default 30% of a two-node
// cluster is zero). maxConcurrent is 100% unless a test lowers it.
func limPolicy(name, operation string, nodes ...string) *v1alpha1.RemediationPolicy {
	all := intstr.FromString("100%")
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: nodes}}},
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionTrue, For: dur(time.Second)}},
			Steps: []v1alpha1.RemediationStep{{
				Name: "reset", StepAction: v1alpha1.StepAction{Operation: operation, Cordon: true, Timeout: dur(30 * time.Second)},
				HealthyFor: dur(time.Second), RecoveryTimeout: dur(60 * time.Second),
			}},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &all, NodeCooldown: dur(0)},
		},
	}
}

func limLose(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setCondition(t, env, node, v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason, limLostMsg)
}

func limRecover(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setCondition(t, env, node, v1alpha1.ConditionGPULost, corev1.ConditionFalse, "GPUsPresent", limHealthyMsg)
}

func limOp(c require.TestingT, env *localcluster.Cluster, name string) *v1alpha1.NodeOperation {
	op := &v1alpha1.NodeOperation{}
	require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, op))
	return op
}

func limPolicyObj(c require.TestingT, env *localcluster.Cluster, name string) *v1alpha1.RemediationPolicy {
	p := &v1alpha1.RemediationPolicy{}
	require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p))
	return p
}

// limNewOp waits for an operation on the node whose name is not in known,
// and returns it.
func limNewOp(t *testing.T, env *localcluster.Cluster, node string, known ...string) v1alpha1.NodeOperation {
	t.Helper()
	var found v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var fresh []v1alpha1.NodeOperation
	next:
		for _, op := range opsOnNode(c, env, node) {
			for _, k := range known {
				if op.Name == k {
					continue next
				}
			}
			fresh = append(fresh, op)
		}
		require.Len(c, fresh, 1, "a new operation on %s besides %v:%s", node, known, describeOps(env))
		found = fresh[0]
	}, limWait, 200*time.Millisecond)
	return found
}

// limWaitPhase waits for the operation to reach the phase and returns it.
func limWaitPhase(t *testing.T, env *localcluster.Cluster, name string, phase v1alpha1.NodeOperationPhase) *v1alpha1.NodeOperation {
	t.Helper()
	var op *v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		op = limOp(c, env, name)
		require.Equal(c, phase, op.Status.Phase, describeOps(env))
	}, limWait, 200*time.Millisecond)
	return op
}

// limRemediate runs one fault episode on the node to success: the condition
// turns True, the policy's operation runs its pod, the condition clears and
// the operation is verified. It returns the operation.
func limRemediate(t *testing.T, env *localcluster.Cluster, node string, known ...string) *v1alpha1.NodeOperation {
	t.Helper()
	limLose(t, env, node)
	op := limNewOp(t, env, node, known...)
	limWaitPhase(t, env, op.Name, v1alpha1.PhaseVerifying)
	limRecover(t, env, node)
	done := limWaitPhase(t, env, op.Name, v1alpha1.PhaseSucceeded)
	require.False(t, getNode(t, env, node).Spec.Unschedulable, "uncordoned after verification")
	return done
}

// limOpPods lists the operation pods on the node.
func limOpPods(c require.TestingT, env *localcluster.Cluster, node string) []string {
	var pods corev1.PodList
	require.NoError(c, env.Client.List(context.Background(), &pods, client.InNamespace(opNamespace),
		client.MatchingLabels{v1alpha1.LabelNode: node}))
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

// limRequireUntouched asserts the node is not cordoned, tainted or
// annotated by kubemedic, and runs no operation pod.
func limRequireUntouched(c require.TestingT, env *localcluster.Cluster, node string) {
	n := getNode(c, env, node)
	require.False(c, n.Spec.Unschedulable, "node %s cordoned", node)
	require.NotContains(c, n.Annotations, v1alpha1.AnnotationCordonedBy)
	require.False(c, hasTaint(n, v1alpha1.TaintQuarantined), "node %s quarantined", node)
	require.Empty(c, limOpPods(c, env, node), "operation pods on %s", node)
}

// limCordonWatch watches the node from now on and records every version of
// it that was cordoned, annotated cordoned-by or quarantined, so that a test
// can assert the node was never touched, not just that it is untouched at
// the end. The returned function gives the records and fails the test if
// the watch ended early.
func limCordonWatch(t *testing.T, env *localcluster.Cluster, node string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		seen   []string
		closed bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if n.Spec.Unschedulable || n.Annotations[v1alpha1.AnnotationCordonedBy] != "" || hasTaint(n, v1alpha1.TaintQuarantined) {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%s rv %s: unschedulable=%t cordoned-by=%q taints=%v",
					ev.Type, n.ResourceVersion, n.Spec.Unschedulable, n.Annotations[v1alpha1.AnnotationCordonedBy], n.Spec.Taints))
				mu.Unlock()
			}
		}
		mu.Lock()
		closed = ctx.Err() == nil
		mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		require.False(t, closed, "the watch of node %s ended early", node)
		return append([]string(nil), seen...)
	}
}

// TestLimitsMaintenanceWindow: a policy whose only maintenance window is
// closed holds its operation in WaitingForBudget, naming the window and when
// it next opens, and touches nothing; an urgent step of a policy with the
// same window runs.
func TestLimitsMaintenanceWindow(t *testing.T) {
	env := startCluster(t)
	nodes := gpuNodes(t, env, "window", 2)
	held, urgent := nodes[0], nodes[1]

	// A one-hour window two days from now (UTC): closed now, and still
	// closed should the test run across midnight.
	day := time.Now().UTC().AddDate(0, 0, 2)
	opens := time.Date(day.Year(), day.Month(), day.Day(), 1, 0, 0, 0, time.UTC)
	window := v1alpha1.MaintenanceWindow{Days: []v1alpha1.Weekday{v1alpha1.Weekday(day.Weekday().String()[:3])},
		Start: "01:00", End: "02:00", TimeZone: "UTC"}

	windowed := limPolicy("windowed", opSucceed, held)
	windowed.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{window}
	createPolicy(t, env, windowed)
	urgentPol := limPolicy("windowed-urgent", opSucceed, urgent)
	urgentPol.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{window}
	urgentPol.Spec.Steps[0].Urgent = true
	createPolicy(t, env, urgentPol)

	rem := newRemediator(t, env)
	rem.start()
	touched := limCordonWatch(t, env, held)

	limLose(t, env, held)
	limLose(t, env, urgent)

	op := limNewOp(t, env, held)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := limOp(c, env, op.Name)
		require.Equal(c, v1alpha1.PhaseWaitingForBudget, o.Status.Phase, describeOps(env))
		require.Contains(c, o.Status.Message, v1alpha1.ReasonOutsideWindow)
		require.Contains(c, o.Status.Message, opens.Format(time.RFC3339), "the message names the next opening")
		require.Contains(c, eventReasons(c, env, "NodeOperation", op.Name), v1alpha1.ReasonOutsideWindow)
	}, limWait, 200*time.Millisecond)
	admitted := findCond(limOp(t, env, op.Name).Status.Conditions, "Admitted")
	require.NotNil(t, admitted)
	require.Equal(t, metav1.ConditionFalse, admitted.Status)
	require.Equal(t, v1alpha1.ReasonOutsideWindow, admitted.Reason)

	// The urgent step runs through the closed window.
	uop := limNewOp(t, env, urgent)
	require.True(t, uop.Spec.Urgent)
	limWaitPhase(t, env, uop.Name, v1alpha1.PhaseVerifying)
	require.Equal(t, []string{plan.OperationPodName(&uop)}, limOpPods(t, env, urgent))
	limRecover(t, env, urgent)
	limWaitPhase(t, env, uop.Name, v1alpha1.PhaseSucceeded)

	// The held operation is still waiting, and its node was never touched.
	o := limOp(t, env, op.Name)
	require.Equal(t, v1alpha1.PhaseWaitingForBudget, o.Status.Phase)
	require.Nil(t, o.Status.StartTime)
	limRequireUntouched(t, env, held)
	require.Empty(t, touched())
	require.False(t, podExists(t, env, opNamespace, plan.OperationPodName(&op)), "no operation pod for the held operation")
}

// TestLimitsNodeCooldown: after an operation on a node ends, a new episode
// on the node waits out the policy's node cooldown.
func TestLimitsNodeCooldown(t *testing.T) {
	env := startCluster(t)
	node := gpuNodes(t, env, "cool", 1)[0]
	pol := limPolicy("cooldown", opSucceed, node)
	pol.Spec.Safety.NodeCooldown = dur(time.Hour)
	createPolicy(t, env, pol)
	rem := newRemediator(t, env)
	rem.start()

	first := limRemediate(t, env, node)

	// A new episode: the condition comes back.
	limLose(t, env, node)
	second := limNewOp(t, env, node, first.Name)
	require.NotEqual(t, first.Labels[v1alpha1.LabelEpisode], second.Labels[v1alpha1.LabelEpisode], "a new episode")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := limOp(c, env, second.Name)
		require.Equal(c, v1alpha1.PhaseWaitingForBudget, o.Status.Phase, describeOps(env))
		require.Contains(c, o.Status.Message, v1alpha1.ReasonNodeCooldown)
		require.Contains(c, o.Status.Message, first.Name, "the message names the operation the cooldown follows")
		require.Contains(c, eventReasons(c, env, "NodeOperation", second.Name), v1alpha1.ReasonNodeCooldown)
	}, limWait, 200*time.Millisecond)
	until := first.Status.CompletionTime.Add(time.Hour).UTC().Format(time.RFC3339)
	require.Contains(t, limOp(t, env, second.Name).Status.Message, until)
	n := getNode(t, env, node)
	require.False(t, n.Spec.Unschedulable)
	require.Equal(t, []string{plan.OperationPodName(first)}, limOpPods(t, env, node), "no pod for the waiting operation")
}

// TestLimitsAttemptCapQuarantine: with an attempt cap of one operation an
// hour, the second episode's operation is skipped and the node quarantined.
func TestLimitsAttemptCapQuarantine(t *testing.T) {
	env := startCluster(t)
	node := gpuNodes(t, env, "cap", 1)[0]
	pol := limPolicy("capped", opSucceed, node)
	pol.Spec.Safety.AttemptCap = &v1alpha1.AttemptCap{MaxAttempts: 1, Window: dur(time.Hour)}
	createPolicy(t, env, pol)
	rem := newRemediator(t, env)
	rem.start()

	first := limRemediate(t, env, node)
	require.Equal(t, float64(0), rem.metric("kubemedic_remediation_quarantined_nodes", nil))

	limLose(t, env, node)
	second := limNewOp(t, env, node, first.Name)
	op := limWaitPhase(t, env, second.Name, v1alpha1.PhaseSkipped)
	require.Contains(t, op.Status.Message, v1alpha1.ReasonAttemptCapReached)
	require.Contains(t, op.Status.Message, first.Name, "the message names the operation that used the cap")
	require.Nil(t, op.Status.StartTime, "a skipped operation never started")
	q := findCond(op.Status.Conditions, v1alpha1.ReasonQuarantined)
	require.NotNil(t, q)
	require.Equal(t, metav1.ConditionTrue, q.Status)

	n := getNode(t, env, node)
	require.True(t, n.Spec.Unschedulable, "quarantine cordons")
	var taint *corev1.Taint
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == v1alpha1.TaintQuarantined {
			taint = &n.Spec.Taints[i]
		}
	}
	require.NotNil(t, taint, "taints: %v", n.Spec.Taints)
	require.Equal(t, corev1.TaintEffectNoSchedule, taint.Effect)
	require.Equal(t, []string{plan.OperationPodName(first)}, limOpPods(t, env, node), "no pod for the skipped operation")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Contains(c, eventReasons(c, env, "NodeOperation", second.Name), v1alpha1.ReasonAttemptCapReached)
		require.Contains(c, eventReasons(c, env, "Node", node), v1alpha1.ReasonAttemptCapReached)
		require.GreaterOrEqual(c, rem.metric("kubemedic_remediation_quarantined_nodes", nil), float64(1))
		require.Equal(c, int32(1), limPolicyObj(c, env, pol.Name).Status.QuarantinedNodes)
	}, limWait, 200*time.Millisecond)
	require.Len(t, opsOnNode(t, env, node), 2, "nothing more on a quarantined node: %s", describeOps(env))
}

// TestLimitsOptOut: a node labelled kubemedic.io/remediation=disabled gets no
// operation, but still counts as unhealthy for the policy.
func TestLimitsOptOut(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "optout", 2)
	optedOut, control := nodes[0], nodes[1]
	n := getNode(t, env, optedOut)
	orig := n.DeepCopy()
	n.Labels[v1alpha1.LabelRemediation] = v1alpha1.RemediationDisabled
	require.NoError(t, env.Client.Patch(ctx, n, client.MergeFrom(orig)))

	createPolicy(t, env, limPolicy("optout", opSucceed, nodes...))
	rem := newRemediator(t, env)
	rem.start()
	touched := limCordonWatch(t, env, optedOut)

	limLose(t, env, optedOut)
	limLose(t, env, control)

	// The control node shows that the policy acts on the same condition.
	cop := limNewOp(t, env, control)
	limWaitPhase(t, env, cop.Name, v1alpha1.PhaseVerifying)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := limPolicyObj(c, env, "optout").Status
		require.Equal(c, int32(2), st.MatchedNodes)
		require.Equal(c, int32(2), st.UnhealthyNodes, "the opted-out node counts as unhealthy")
	}, limWait, 200*time.Millisecond)
	require.Never(t, func() bool { return len(opsOnNode(t, env, optedOut)) > 0 }, 3*time.Second, 200*time.Millisecond,
		"an operation on the opted-out node: %s", describeOps(env))
	limRequireUntouched(t, env, optedOut)
	require.Empty(t, touched())
}

// TestLimitsPaused: a paused policy starts nothing while its condition
// holds, says so in its status, and acts once unpaused.
func TestLimitsPaused(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	node := gpuNodes(t, env, "paused", 1)[0]
	pol := limPolicy("paused", opSucceed, node)
	pol.Spec.Paused = true
	createPolicy(t, env, pol)
	rem := newRemediator(t, env)
	rem.start()

	limLose(t, env, node)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := limPolicyObj(c, env, pol.Name)
		require.Equal(c, int32(1), p.Status.UnhealthyNodes)
		cond := findCond(p.Status.Conditions, v1alpha1.PolicyPaused)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status)
	}, limWait, 200*time.Millisecond)
	// The condition has held for its `for` (1s) well within this.
	require.Never(t, func() bool { return len(opsOnNode(t, env, node)) > 0 }, 3*time.Second, 200*time.Millisecond,
		"an operation of a paused policy: %s", describeOps(env))
	limRequireUntouched(t, env, node)

	p := limPolicyObj(t, env, pol.Name)
	orig := p.DeepCopy()
	p.Spec.Paused = false
	require.NoError(t, env.Client.Patch(ctx, p, client.MergeFrom(orig)))

	op := limNewOp(t, env, node)
	require.Equal(t, pol.Name, op.Spec.Policy)
	limWaitPhase(t, env, op.Name, v1alpha1.PhaseVerifying)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := findCond(limPolicyObj(c, env, pol.Name).Status.Conditions, v1alpha1.PolicyPaused)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionFalse, cond.Status)
	}, limWait, 200*time.Millisecond)
}

// TestLimitsDryRun: a dry-run policy records its operation as Skipped with
// reason DryRun and what it would have done, and never cordons the node or
// runs a pod.
func TestLimitsDryRun(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	node := gpuNodes(t, env, "dry", 1)[0]
	pol := limPolicy("dry", opSucceed, node)
	pol.Spec.DryRun = true
	createPolicy(t, env, pol)
	rem := newRemediator(t, env)
	rem.start()
	touched := limCordonWatch(t, env, node)

	limLose(t, env, node)
	created := limNewOp(t, env, node)
	require.True(t, created.Spec.DryRun)
	op := limWaitPhase(t, env, created.Name, v1alpha1.PhaseSkipped)
	require.Contains(t, op.Status.Message, v1alpha1.ReasonDryRun)
	require.Contains(t, op.Status.Message, "would")
	require.Contains(t, op.Status.Message, op.Spec.Operation, "the message names the operation it would run")
	require.Contains(t, op.Status.Message, "cordon", "the message says it would cordon")
	require.Nil(t, op.Status.StartTime)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Contains(c, eventReasons(c, env, "NodeOperation", op.Name), v1alpha1.ReasonDryRun)
	}, limWait, 200*time.Millisecond)

	// Nothing else follows: the episode ended with the dry run.
	require.Never(t, func() bool { return len(opsOnNode(t, env, node)) > 1 }, 2*time.Second, 200*time.Millisecond, describeOps(env))
	limRequireUntouched(t, env, node)
	require.Empty(t, touched())
	var pods corev1.PodList
	require.NoError(t, env.Client.List(ctx, &pods, client.InNamespace(opNamespace)))
	require.Empty(t, pods.Items, "no operation pod in %s", opNamespace)
}

// TestLimitsManualOperationBudget: a NodeOperation made by hand on a node of
// a paused policy with maxConcurrent 1 waits while the policy's operation
// runs (pausing stops the policy creating, not the budgets), then runs and
// succeeds once that operation has finished.
func TestLimitsManualOperationBudget(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "manual", 2)
	busy, planned := nodes[0], nodes[1]
	pol := limPolicy("budget", opSucceed, nodes...)
	one := intstr.FromInt32(1)
	pol.Spec.Safety.MaxConcurrent = &one
	createPolicy(t, env, pol)
	rem := newRemediator(t, env)
	rem.start()

	// The policy's operation runs and stays in verification while the
	// condition holds.
	limLose(t, env, busy)
	running := limNewOp(t, env, busy)
	limWaitPhase(t, env, running.Name, v1alpha1.PhaseVerifying)

	p := limPolicyObj(t, env, pol.Name)
	orig := p.DeepCopy()
	p.Spec.Paused = true
	require.NoError(t, env.Client.Patch(ctx, p, client.MergeFrom(orig)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := findCond(limPolicyObj(c, env, pol.Name).Status.Conditions, v1alpha1.PolicyPaused)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status)
	}, limWait, 200*time.Millisecond)

	manual := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: "planned-maintenance-" + planned},
		Spec: v1alpha1.NodeOperationSpec{NodeName: planned, StepAction: v1alpha1.StepAction{Operation: opSucceed, Cordon: true},
			Reason: "planned maintenance"},
	}
	require.NoError(t, env.Client.Create(ctx, manual))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := limOp(c, env, manual.Name)
		require.Equal(c, v1alpha1.PhaseWaitingForBudget, o.Status.Phase, describeOps(env))
		require.Contains(c, o.Status.Message, v1alpha1.ReasonMaxConcurrent)
		require.Contains(c, o.Status.Message, running.Name, "the message names the running operation")
	}, limWait, 200*time.Millisecond)
	require.Never(t, func() bool { return limOp(t, env, manual.Name).Status.Phase != v1alpha1.PhaseWaitingForBudget },
		2*time.Second, 200*time.Millisecond, describeOps(env))
	limRequireUntouched(t, env, planned)

	// The policy's operation finishes; the manual one starts and succeeds.
	limRecover(t, env, busy)
	finished := limWaitPhase(t, env, running.Name, v1alpha1.PhaseSucceeded)
	done := limWaitPhase(t, env, manual.Name, v1alpha1.PhaseSucceeded)
	require.NotNil(t, done.Status.StartTime)
	require.False(t, done.Status.StartTime.Before(finished.Status.CompletionTime), "started %s, before the other finished at %s",
		done.Status.StartTime, finished.Status.CompletionTime)
	cordoned := findCond(done.Status.Conditions, v1alpha1.OperationCordoned)
	require.NotNil(t, cordoned, "the manual operation cordoned")
	require.Equal(t, metav1.ConditionTrue, cordoned.Status)
	pod := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: plan.OperationPodName(manual)}, pod))
	require.Equal(t, planned, pod.Spec.NodeName)
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	n := getNode(t, env, planned)
	require.False(t, n.Spec.Unschedulable, "uncordoned after the manual operation")
	require.NotContains(t, n.Annotations, v1alpha1.AnnotationCordonedBy)
	require.Len(t, opsOnNode(t, env, planned), 1, "the paused policy created nothing: %s", describeOps(env))
}
