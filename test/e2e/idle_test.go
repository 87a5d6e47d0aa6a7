package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestIdleStory: on the demo's world, the idle story's owner answers the
// janitor from Slack alone. "Keep 4 h" on one notebook's notice is
// confirmed in its thread and recorded on the pod (snooze-until about 4 h
// ahead, and who pressed on the notice), so that notebook keeps running;
// the other is stopped, then "Restore" on the janitor's reply scales its
// Deployment back to the recorded count. Both presses are requests signed
// as Slack signs them, sent to the janitor's own endpoint.
func TestIdleStory(t *testing.T) {
	w := startWorld(t)
	ctx := context.Background()
	require.True(t, w.Info(w.Cluster.Kubeconfig).SlackButtons, "the stand-in presses the janitor's buttons")
	begin := time.Now()
	s := runScenario(t, w, "idle")
	require.Len(t, s.Notebooks, 2)
	const carol = "U0CAROL03"

	podOf := func(deployment string) *corev1.Pod {
		t.Helper()
		ns, name, _ := strings.Cut(deployment, "/")
		var pods corev1.PodList
		require.NoError(t, w.Cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{localcluster.LabelAppName: name}))
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil {
				return &pods.Items[i]
			}
		}
		t.Fatalf("no pod of %s", deployment)
		return nil
	}
	deployment := func(key string) *appsv1.Deployment {
		t.Helper()
		ns, name, _ := strings.Cut(key, "/")
		var d appsv1.Deployment
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d))
		return &d
	}

	// Kept: recorded on the pod by the press, the Deployment untouched.
	kept := podOf(s.Notebooks[1])
	until, err := time.Parse(time.RFC3339, kept.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil])
	require.NoError(t, err, "the press recorded %s", v1alpha1.AnnotationReclaimSnoozeUntil)
	require.WithinRange(t, until, begin.Add(4*time.Hour-time.Second), time.Now().Add(4*time.Hour+time.Second), "kept for 4 h from the press")
	n, err := decide.ParseNotice(kept.Annotations[v1alpha1.AnnotationReclaimNotice])
	require.NoError(t, err)
	require.NotNil(t, n)
	require.Equal(t, carol, n.SnoozedBy, "the notice records who pressed")
	require.Equal(t, int32(1), *deployment(s.Notebooks[1]).Spec.Replicas)

	// Restored: back to the recorded count, the record removed.
	idle := deployment(s.Notebooks[0])
	require.Equal(t, int32(1), *idle.Spec.Replicas, "Restore scaled it back")
	require.NotContains(t, idle.Annotations, v1alpha1.AnnotationReclaimedReplicas)
	require.NotContains(t, idle.Annotations, v1alpha1.AnnotationReclaimedBy)

	// Confirmed in Slack, each in its notice's thread, to the owner.
	var keptMsg, restoredMsg, reclaimedMsg bool
	_, idleName, _ := strings.Cut(s.Notebooks[0], "/")
	for _, m := range w.Slack.Messages() {
		require.NotContains(t, m.Text, "That did not work", "no press failed")
		switch {
		case strings.HasPrefix(m.Text, "Kept: <@"+carol+"> pressed \"Keep 4 h\". "+kept.Namespace+"/"+kept.Name):
			require.NotEmpty(t, m.ThreadTS, "in the notice's thread")
			keptMsg = true
		case strings.HasPrefix(m.Text, "Reclaimed ") && strings.Contains(m.Text, idleName):
			_, ok := m.Button("Restore")
			require.True(t, ok, "the reclaim reply carries Restore: %s", m.Text)
			reclaimedMsg = true
		case strings.HasPrefix(m.Text, "Restored ") && strings.Contains(m.Text, "<@"+carol+"> pressed Restore"):
			require.Contains(t, m.Text, "scaled Deployment "+idleName+" back to 1 replicas")
			require.NotEmpty(t, m.ThreadTS, "in the notice's thread")
			restoredMsg = true
		}
	}
	require.True(t, keptMsg, "Keep 4 h confirmed in Slack")
	require.True(t, reclaimedMsg, "the reclaim reply was posted")
	require.True(t, restoredMsg, "Restore confirmed in Slack")
}
