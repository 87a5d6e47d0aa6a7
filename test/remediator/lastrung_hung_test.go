package remediator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
)

// TestLastRungHungBMCHoldsNoOtherNode: a BMC that never answers holds one
// operation worker for the Redfish call's whole timeout; another node's
// operation is asked meanwhile, before that call has returned.
func TestLastRungHungBMCHoldsNoOtherNode(t *testing.T) {
	env := lrCluster(t, false)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "hang", 2)
	hung, other := nodes[0], nodes[1]
	bmcHung := redfishtest.New(t, redfishtest.Options{})
	bmcOK := redfishtest.New(t, redfishtest.Options{})
	bmcHung.HangNext(1000)
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: "bmc-credentials"},
		Data: map[string][]byte{"username": []byte(redfishtest.DefaultUsername), "password": []byte(redfishtest.DefaultPassword)}}))
	lrLabelNode(t, env, hung, lrBMCLabels(t, bmcHung.URL))
	lrLabelNode(t, env, other, lrBMCLabels(t, bmcOK.URL))
	lrTemplate(t, env, "bmc-reset", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessNodeRebooted, Timeout: dur(time.Minute),
		Redfish: &v1alpha1.RedfishAction{Address: `https://{{ index .Labels "` + lrBMCHost + `" }}:{{ index .Labels "` + lrBMCPort + `" }}`, CredentialsSecret: "bmc-credentials", InsecureSkipVerify: true}})
	createPolicy(t, env, lrPolicy("bmc", "bmc-reset", intstr.FromString("100%"), hung, other))
	rem := newRemediator(t, env)
	rem.start()
	lrFault(t, env, hung)
	require.Eventually(t, func() bool { return getNode(t, env, hung).Spec.Unschedulable }, lrWait, 100*time.Millisecond)
	start := time.Now()
	lrFault(t, env, other)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Len(c, bmcOK.Resets(), 1)
	}, redfish.DefaultTimeout-10*time.Second, 200*time.Millisecond, "asked while the hung BMC's call is still open")
	require.Empty(t, bmcHung.Resets())
	t.Logf("the other BMC was asked %s after its fault", time.Since(start))
}
