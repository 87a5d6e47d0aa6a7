package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestJanitorPlanOnAPIServer: the plan lists a stuck-pending pod with the
// scheduler's message and who would be told, and an idle-rule pod as
// Unknown without Prometheus; it changes nothing.
func TestJanitorPlanOnAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &v1alpha1.ClusterReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reclaim"},
		Spec: v1alpha1.ClusterReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{
			Idle:       &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: metav1.Duration{Duration: time.Hour}},
			MaxPending: &metav1.Duration{Duration: time.Hour}}}}))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team",
		Annotations: map[string]string{"kubemedic.io/owner": "alice@example.com"}}}))
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "big"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x", Resources: gpu}}}}
	require.NoError(t, c.Create(ctx, pending))
	since := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	pending.Status.Phase = corev1.PodPending
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.", LastTransitionTime: metav1.NewTime(since)}}
	require.NoError(t, c.Status().Update(ctx, pending))
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb"},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "c", Image: "x", Resources: gpu}}}}
	require.NoError(t, c.Create(ctx, running))
	running.Status.Phase = corev1.PodRunning
	running.Status.StartTime = &metav1.Time{Time: since}
	require.NoError(t, c.Status().Update(ctx, running))
	var before corev1.PodList
	require.NoError(t, c.List(ctx, &before, client.InNamespace("team")))

	code, out, errOut := simRun("janitor", "plan", "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 0, code)
	require.Contains(t, out, "query:    DCGM_FI_DEV_GPU_UTIL over 1h: failed: no --prometheus-url given")
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "team/") {
			rows[f[0]] = line
		}
	}
	require.Contains(t, rows["team/big"], "StuckPending  candidate")
	require.Contains(t, rows["team/big"], "Notify")
	require.Contains(t, rows["team/big"], "email alice@example.com")
	require.Contains(t, rows["team/big"], "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.")
	require.Contains(t, rows["team/nb"], "Idle          unknown")
	require.Contains(t, rows["team/nb"], "no --prometheus-url given")

	var after corev1.PodList
	require.NoError(t, c.List(ctx, &after, client.InNamespace("team")))
	for i := range before.Items {
		require.Equal(t, before.Items[i].ResourceVersion, after.Items[i].ResourceVersion, "plan changed pod %s", before.Items[i].Name)
	}
}
