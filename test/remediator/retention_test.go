package remediator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestRetention: a manual drain-only operation (planned maintenance) runs
// with no policy in the cluster, succeeds, is kept for the retention period,
// and is then deleted.
func TestRetention(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "keep", 1)
	rem := newRemediator(t, env)
	rem.opts.Retention = 4 * time.Second
	rem.start()

	op := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: "planned-maintenance"},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: nodes[0], StepAction: v1alpha1.StepAction{Operation: opDrain, Cordon: true}, Reason: "planned: firmware update"},
	}
	require.NoError(t, env.Client.Create(ctx, op))

	var done *v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		done = getOp(t, env, op.Name)
		require.Equal(c, v1alpha1.PhaseSucceeded, done.Status.Phase, describeOps(env))
	}, 20*time.Second, 100*time.Millisecond)
	require.False(t, getNode(t, env, nodes[0]).Spec.Unschedulable, "uncordoned after the operation")

	// Kept for the retention period, then deleted.
	finished := done.Status.CompletionTime.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: op.Name}, &v1alpha1.NodeOperation{})
		require.True(c, apierrors.IsNotFound(err), "deleted after retention")
	}, 20*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(finished), 3*time.Second, "not deleted before the retention period (status times have 1 s resolution)")
}

// TestOperationFailsClearly: an operation that names a missing template, or
// whose template requires a parameter the trigger message does not carry,
// fails at once with a reason that says which, and touches nothing.
func TestOperationFailsClearly(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "bad", 2)
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "needs-bus"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessPodSucceeded, Image: "registry.example/kubemedic-test:1",
			Parameters: []v1alpha1.Parameter{{Name: "GPU_BUS_ID", MessageRegex: `([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9])`, Required: true}}}}
	require.NoError(t, env.Client.Create(ctx, tpl))
	rem := newRemediator(t, env)
	rem.start()

	missing := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "no-template"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: nodes[0], StepAction: v1alpha1.StepAction{Operation: "does-not-exist", Cordon: true}}}
	noParam := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "no-parameter"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: nodes[1], StepAction: v1alpha1.StepAction{Operation: tpl.Name, Cordon: true},
			Trigger: &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUXidError, Status: "True", Message: "XidResetRequired: Xid 119 on an unnamed GPU"}}}
	require.NoError(t, env.Client.Create(ctx, missing))
	require.NoError(t, env.Client.Create(ctx, noParam))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a, b := getOp(t, env, missing.Name), getOp(t, env, noParam.Name)
		require.Equal(c, v1alpha1.PhaseFailed, a.Status.Phase, describeOps(env))
		require.Contains(c, a.Status.Message, v1alpha1.ReasonTemplateNotFound)
		require.Equal(c, v1alpha1.PhaseFailed, b.Status.Phase, describeOps(env))
		require.Contains(c, b.Status.Message, v1alpha1.ReasonParameterMissing)
		require.Contains(c, b.Status.Message, "GPU_BUS_ID")
	}, 20*time.Second, 100*time.Millisecond)
	for _, n := range nodes {
		require.False(t, getNode(t, env, n).Spec.Unschedulable, "a failed precondition cordons nothing")
	}
	require.Nil(t, getOp(t, env, noParam.Name).Status.StartTime, "never admitted")
}
