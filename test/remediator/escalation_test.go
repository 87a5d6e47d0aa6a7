package remediator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// xidPolicy is the reset -> reboot ladder of the Xid example, with short
// timings: the reset fails (its pod exits 1), the reboot is recognised by
// the boot ID.
func xidPolicy(rebootTimeout time.Duration) *v1alpha1.RemediationPolicy {
	two := intstr.FromInt32(2)
	all := intstr.FromString("100%")
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-xid"},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonXidResetRequired, For: dur(time.Second)}},
			Steps: []v1alpha1.RemediationStep{
				{Name: "reset-gpu", StepAction: v1alpha1.StepAction{Operation: opFail, Cordon: true, Timeout: dur(20 * time.Second)},
					HealthyFor: dur(time.Second), RecoveryTimeout: dur(20 * time.Second)},
				{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: opHang, Cordon: true, Timeout: dur(rebootTimeout)},
					HealthyFor: dur(time.Second), RecoveryTimeout: dur(20 * time.Second)},
			},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(time.Hour)},
		},
	}
}

// TestEscalation: the reset fails, the reboot runs at once (the node
// cooldown does not hold an escalation) and is verified by the boot ID
// changing. On a second node the reboot never happens, times out, and the
// exhausted ladder quarantines the node.
func TestEscalation(t *testing.T) {
	env := startCluster(t)
	nodes := gpuNodes(t, env, "xid", 2)
	rebooted, dead := nodes[0], nodes[1]
	createPolicy(t, env, xidPolicy(6*time.Second))
	rem := newRemediator(t, env)
	rem.start()

	for _, n := range nodes {
		setCondition(t, env, n, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
			"XidResetRequired: Xid 119 on 0000:3b:00.0: GSP RPC timeout; reset required")
	}

	// The reset pod fails; the reboot step follows in the same episode.
	var reboot v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, rebooted)
		require.Len(c, ops, 2, describeOps(env))
		require.Equal(c, "reset-gpu", ops[0].Spec.Step)
		require.Equal(c, v1alpha1.PhaseFailed, ops[0].Status.Phase)
		require.Contains(c, ops[0].Status.Message, "exited 1")
		require.Equal(c, ops[0].Labels[v1alpha1.LabelEpisode], ops[1].Labels[v1alpha1.LabelEpisode])
		reboot = ops[1]
		require.Equal(c, "reboot", reboot.Spec.Step)
		require.Equal(c, v1alpha1.PhaseRunning, reboot.Status.Phase)
		require.Equal(c, "boot-1", reboot.Status.BootID)
	}, 40*time.Second, 200*time.Millisecond)
	n := getNode(t, env, rebooted)
	require.True(t, n.Spec.Unschedulable)
	require.Equal(t, reboot.Name, n.Annotations[v1alpha1.AnnotationCordonedBy], "the escalation takes over the cordon")

	// The node comes back with a new boot ID and the Xid gone.
	setBootID(t, env, rebooted, "boot-2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, reboot.Name)
		require.Equal(c, v1alpha1.PhaseVerifying, o.Status.Phase, describeOps(env))
		c2 := findCond(o.Status.Conditions, v1alpha1.OperationSucceeded)
		require.NotNil(c, c2)
		require.Equal(c, "NodeRebooted", c2.Reason)
	}, 20*time.Second, 200*time.Millisecond)
	setCondition(t, env, rebooted, v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "no actionable Xid since the last reset or boot")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, reboot.Name)
		require.Equal(c, v1alpha1.PhaseSucceeded, o.Status.Phase, describeOps(env))
		require.False(c, getNode(c, env, rebooted).Spec.Unschedulable, "uncordoned")
	}, 20*time.Second, 200*time.Millisecond)
	require.Len(t, opsOnNode(t, env, rebooted), 2, "nothing more once verified")

	// The dead node: the reboot never shows, the step times out, and the
	// ladder ends in quarantine.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, dead)
		require.Len(c, ops, 3, describeOps(env))
		require.Equal(c, v1alpha1.PhaseFailed, ops[1].Status.Phase)
		require.Contains(c, ops[1].Status.Message, v1alpha1.ReasonOperationTimeout)
		require.True(c, ops[2].Spec.Quarantine)
		require.Contains(c, ops[2].Spec.Reason, v1alpha1.ReasonLadderExhausted)
		require.Equal(c, v1alpha1.PhaseSucceeded, ops[2].Status.Phase)
	}, 60*time.Second, 200*time.Millisecond)
	n = getNode(t, env, dead)
	require.True(t, n.Spec.Unschedulable)
	require.True(t, hasTaint(n, v1alpha1.TaintQuarantined))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Contains(c, eventReasons(c, env, "Node", dead), v1alpha1.ReasonQuarantined)
		require.Equal(c, float64(1), rem.metric("kubemedic_remediation_quarantined_nodes", nil))
		require.Equal(c, float64(1), rem.metric("kubemedic_remediation_operations", map[string]string{"policy": "gpu-xid", "step": "quarantine", "phase": "Succeeded"}))
	}, 10*time.Second, 200*time.Millisecond)
	// Quarantined nodes get nothing new, even with the condition still True.
	require.Never(t, func() bool { return len(opsOnNode(t, env, dead)) != 3 }, 2*time.Second, 200*time.Millisecond)
}
