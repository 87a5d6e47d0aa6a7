package remediator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// An operation on a node that does not exist (a typo in a manual one, a
// node deleted meanwhile) ends and says why, with its Events: its Events
// once named the missing node as their related object and the recorder
// panicked on every pass, so the operation never moved.
func TestOperationOnAMissingNode(t *testing.T) {
	env := startCluster(t)
	rem := newRemediator(t, env)
	rem.start()
	op := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu-node-typo"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-nod-007", StepAction: v1alpha1.StepAction{Operation: opSucceed},
			Reason: "manual: reset after maintenance"},
	}
	require.NoError(t, env.Client.Create(context.Background(), op))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getOp(t, env, op.Name)
		require.True(c, got.Status.Phase.Finished(), "phase %q: %s", got.Status.Phase, got.Status.Message)
		require.NotEmpty(c, eventReasons(c, env, "NodeOperation", op.Name))
	}, 30*time.Second, 200*time.Millisecond)
	got := getOp(t, env, op.Name)
	t.Logf("%s: %s, %s", got.Name, got.Status.Phase, got.Status.Message)
	require.Contains(t, got.Status.Message, "gpu-nod-007")
}
