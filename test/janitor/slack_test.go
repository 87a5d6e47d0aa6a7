package janitor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// TestSlackButtons: the owner keeps one pod with "Keep 4 h", reclaims a
// StatefulSet's pod and a notebook with "Reclaim now" and gets both back
// with "Restore", all through requests signed as Slack signs them; a
// non-owner, a forged, a stale and a replayed request change nothing.
func TestSlackButtons(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.installNotebookCRD()
	const alice, bob = "U0ALICE001", "U0BOB00002"
	w.slack.AddUser(alice, "alice@example.com")
	w.slack.AddUser(bob, "bob@example.com")
	// A grace period far longer than the test: only a press reclaims.
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.GracePeriod = &metav1.Duration{Duration: time.Hour}
	})
	w.namespace("team", "alice@example.com")

	keepSS := w.statefulSet("team", "keep", 1)
	keepPod := w.gpuPod("team", "keep-0", 1, ownerRef("apps/v1", "StatefulSet", "keep", keepSS.UID))
	w.util(keepPod, 1, 0)
	ss := w.statefulSet("team", "trainer", 3)
	ssPod := w.gpuPod("team", "trainer-0", 1, ownerRef("apps/v1", "StatefulSet", "trainer", ss.UID))
	w.util(ssPod, 1, 0)
	nb := &unstructured.Unstructured{}
	nb.SetGroupVersionKind(notebookGVK)
	nb.SetNamespace("team")
	nb.SetName("alice-nb")
	require.NoError(t, w.env.Client.Create(ctx, nb))
	nbSS := w.statefulSet("team", "alice-nb", 1, ownerRef("kubeflow.org/v1", "Notebook", "alice-nb", nb.GetUID()))
	nbPod := w.gpuPod("team", "alice-nb-0", 1, ownerRef("apps/v1", "StatefulSet", nbSS.Name, nbSS.UID))
	w.util(nbPod, 1, 0)

	j := w.janitor(func(o *controller.ManagerOptions) {
		o.Interactivity = controller.InteractivityOptions{Addr: "127.0.0.1:0", SigningSecret: signingSecret}
	}).start()
	endpoint := "http://" + j.jan.Interactivity().Addr() + "/slack/interactivity"
	interactions := func(action, result string) float64 {
		return j.metric("kubemedic_janitor_slack_interactions_total", map[string]string{"action": action, "result": result})
	}

	keepNotice := w.waitMessage(keepPod, "will be reclaimed", idleWindow+30*time.Second)
	ssNotice := w.waitMessage(ssPod, "will be reclaimed", 30*time.Second)
	nbNotice := w.waitMessage(nbPod, "will be reclaimed", 30*time.Second)
	var labels []string
	for _, b := range keepNotice.Buttons() {
		labels = append(labels, b.Text)
	}
	require.Equal(t, []string{"Keep 4 h", "Keep 24 h", "Reclaim now"}, labels)
	require.Contains(t, keepNotice.Text, "kubectl annotate pod", "the kubectl way is still there")
	require.Contains(t, string(keepNotice.Blocks), "at most 1d after the deadline", "the notice states the cap")

	press := func(user string, msg notifytest.Posted, button string) *notifytest.Interaction {
		t.Helper()
		in, err := w.slack.Press(user, msg, button)
		require.NoError(t, err)
		return in.Signed(signingSecret, time.Now())
	}
	send := func(in *notifytest.Interaction, want int) {
		t.Helper()
		status, body, err := in.Send(endpoint)
		require.NoError(t, err)
		require.Equal(t, want, status, body)
	}
	annotations := func(obj client.Object) map[string]string {
		t.Helper()
		require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		return obj.GetAnnotations()
	}

	// A non-owner presses Keep: refused to them alone, nothing written.
	bobPress := press(bob, keepNotice, "Keep 4 h")
	send(bobPress, http.StatusOK)
	require.Eventually(t, func() bool { return len(w.slack.ResponsesTo(bobPress)) == 1 }, 20*time.Second, 100*time.Millisecond)
	r := w.slack.ResponsesTo(bobPress)[0]
	require.Equal(t, "ephemeral", r.ResponseType)
	require.Contains(t, r.Text, "Only the pod's owner (<@"+alice+">) can keep team/keep-0. Nothing was done.")
	require.NotContains(t, r.Text, "alice@example.com", "the owner's email is not told to whoever presses")
	require.Empty(t, annotations(keepPod)[v1alpha1.AnnotationReclaimSnoozeUntil])
	require.Equal(t, 1.0, interactions("keep", decide.ResultNotOwner))

	// refusedUnchanged sends a request that must be refused with 401, and
	// checks, on the API server right after, that the pod is as it was:
	// a refused request is answered before anything is done with it.
	refusedUnchanged := func(in *notifytest.Interaction) {
		t.Helper()
		before, err := w.getPod(keepPod)
		require.NoError(t, err)
		send(in, http.StatusUnauthorized)
		after, err := w.getPod(keepPod)
		require.NoError(t, err)
		require.Equal(t, before.ResourceVersion, after.ResourceVersion, "the pod was not written")
		require.Equal(t, before.Annotations, after.Annotations)
	}
	// The cycle has recorded the notice: nothing else writes to the pod
	// until a press does.
	require.Eventually(t, func() bool { return w.notice(keepPod).TS == keepNotice.TS }, 20*time.Second, 100*time.Millisecond)

	// Forged and stale requests: 401, nothing done, counted.
	forged, err := w.slack.Press(alice, keepNotice, "Keep 4 h")
	require.NoError(t, err)
	refusedUnchanged(forged.Signed("not-the-signing-secret", time.Now()))
	stale, err := w.slack.Press(alice, keepNotice, "Keep 24 h")
	require.NoError(t, err)
	refusedUnchanged(stale.Signed(signingSecret, time.Now().Add(-6*time.Minute)))
	require.Equal(t, 1.0, interactions("unknown", "forged"))
	require.Equal(t, 1.0, interactions("unknown", "stale"))

	// The owner keeps it for 4 h.
	pressed := time.Now()
	keep := press(alice, keepNotice, "Keep 4 h")
	send(keep, http.StatusOK)
	kept := w.waitMessage(keepPod, "Kept: <@"+alice+"> pressed", 20*time.Second)
	require.Equal(t, keepNotice.TS, kept.ThreadTS, "confirmed in the notice's thread")
	until, err := time.Parse(time.RFC3339, annotations(keepPod)[v1alpha1.AnnotationReclaimSnoozeUntil])
	require.NoError(t, err)
	require.WithinDuration(t, pressed.Add(4*time.Hour), until, 30*time.Second)
	n := w.notice(keepPod)
	require.Equal(t, until.UTC().Format(time.RFC3339), n.SnoozeAcked)
	require.Equal(t, alice, n.SnoozedBy)
	require.NotEmpty(t, w.events(keepPod, controller.EventSnoozed))
	require.Empty(t, w.slack.ResponsesTo(keep), "a done press needs no ephemeral answer")

	// The same request again is a replay: 401, nothing more.
	before := len(w.messagesFor(keepPod))
	refusedUnchanged(keep)
	require.Equal(t, 1.0, interactions("unknown", "replayed"))
	j.waitCycles(2)
	require.Len(t, w.messagesFor(keepPod), before, "the cycle does not confirm the snooze again, and the replay posted nothing")
	require.Equal(t, until.UTC().Format(time.RFC3339), annotations(keepPod)[v1alpha1.AnnotationReclaimSnoozeUntil])

	// Reclaim now: the StatefulSet is scaled to 0 by the cycle, at once.
	send(press(alice, ssNotice, "Reclaim now"), http.StatusOK)
	w.waitMessage(ssPod, "Reclaim now: <@"+alice+"> asked", 20*time.Second)
	reclaimed := w.waitMessage(ssPod, "Reclaimed team/trainer-0", 20*time.Second)
	require.Equal(t, ssNotice.TS, reclaimed.ThreadTS)
	got := &appsv1.StatefulSet{}
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(ss), got))
	require.Equal(t, int32(0), *got.Spec.Replicas)
	require.Equal(t, "3", got.Annotations[v1alpha1.AnnotationReclaimedReplicas])
	require.Contains(t, w.notice(ssPod).ReclaimRequestedBy, alice)

	// A second Reclaim now on the reclaimed pod: told, nothing done.
	again := press(alice, ssNotice, "Reclaim now")
	send(again, http.StatusOK)
	require.Eventually(t, func() bool { return len(w.slack.ResponsesTo(again)) == 1 }, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, w.slack.ResponsesTo(again)[0].Text, "already reclaimed")

	// Bob cannot restore it; Alice can, to the recorded 3 replicas.
	bobRestore := press(bob, reclaimed, "Restore")
	send(bobRestore, http.StatusOK)
	require.Eventually(t, func() bool { return len(w.slack.ResponsesTo(bobRestore)) == 1 }, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, w.slack.ResponsesTo(bobRestore)[0].Text, "Only the pod's owner (<@"+alice+">) can restore StatefulSet team/trainer.")
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(ss), got))
	require.Equal(t, int32(0), *got.Spec.Replicas, "a non-owner's Restore does nothing")

	send(press(alice, reclaimed, "Restore"), http.StatusOK)
	restored := w.waitMessage(ssPod, "Restored team/trainer-0: <@"+alice+"> pressed Restore", 20*time.Second)
	require.Contains(t, restored.Text, "scaled StatefulSet trainer back to 3 replicas")
	require.Equal(t, ssNotice.TS, restored.ThreadTS)
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(ss), got))
	require.Equal(t, int32(3), *got.Spec.Replicas)
	require.NotContains(t, got.Annotations, v1alpha1.AnnotationReclaimedReplicas)

	twice := press(alice, reclaimed, "Restore")
	send(twice, http.StatusOK)
	require.Eventually(t, func() bool { return len(w.slack.ResponsesTo(twice)) == 1 }, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, w.slack.ResponsesTo(twice)[0].Text, "restored already")

	// The notebook: stopped with Reclaim now, started again with Restore.
	send(press(alice, nbNotice, "Reclaim now"), http.StatusOK)
	nbReclaimed := w.waitMessage(nbPod, "Reclaimed team/alice-nb-0", 20*time.Second)
	require.Contains(t, annotations(nb), controller.AnnotationNotebookStops)
	send(press(alice, nbReclaimed, "Restore"), http.StatusOK)
	w.waitMessage(nbPod, "started Kubeflow Notebook alice-nb again", 20*time.Second)
	require.NotContains(t, annotations(nb), controller.AnnotationNotebookStops)

	// A pod recreated under the same name: its old notice's button is refused.
	require.NoError(t, w.env.Client.Delete(ctx, keepPod, client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool { _, err := w.getPod(keepPod); return err != nil }, 20*time.Second, 100*time.Millisecond)
	newKeep := w.gpuPod("team", "keep-0", 1, ownerRef("apps/v1", "StatefulSet", "keep", keepSS.UID))
	stalePress := press(alice, keepNotice, "Keep 24 h")
	send(stalePress, http.StatusOK)
	require.Eventually(t, func() bool { return len(w.slack.ResponsesTo(stalePress)) == 1 }, 20*time.Second, 100*time.Millisecond)
	require.Contains(t, w.slack.ResponsesTo(stalePress)[0].Text, "was recreated")
	require.Empty(t, annotations(newKeep)[v1alpha1.AnnotationReclaimSnoozeUntil])

	require.Equal(t, 1.0, interactions("keep", decide.ResultDone))
	require.Equal(t, 2.0, interactions("reclaim", decide.ResultDone))
	require.Equal(t, 2.0, interactions("restore", decide.ResultDone))
	for _, m := range w.slack.Messages() {
		require.False(t, strings.Contains(m.Text, "That did not work"), m.Text)
	}
}

// TestNoSigningSecretNoButtons: without a signing secret the notice has
// no buttons and says how to act with kubectl.
func TestNoSigningSecretNoButtons(t *testing.T) {
	w := newWorld(t)
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.GracePeriod = &metav1.Duration{Duration: time.Hour}
	})
	w.namespace("team", "alice@example.com")
	pod := w.gpuPod("team", "shell", 1)
	w.util(pod, 1, 0)
	j := w.janitor(func(o *controller.ManagerOptions) {
		o.Interactivity = controller.InteractivityOptions{Addr: "127.0.0.1:0"}
	}).start()
	require.Nil(t, j.jan.Interactivity(), "no endpoint without a secret")
	msg := w.waitMessage(pod, "will be reclaimed", idleWindow+30*time.Second)
	require.Empty(t, msg.Buttons())
	require.Contains(t, msg.Text, "kubectl annotate pod -n team shell --overwrite kubemedic.io/reclaim-snooze-until=")
	require.NotContains(t, msg.Text, "press a button")
}
