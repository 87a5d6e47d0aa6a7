package janitor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestReclaimLifecycle runs every owner kind and the notice → grace →
// recheck → act path at once, each pod in its own namespace:
//   - an idle Kubeflow notebook: DM to its owner's email, stopped with
//     kubeflow-resource-stopped after the grace period, result in the thread;
//   - a bare pod that gets busy during the grace period: "cancelled", kept;
//   - a Deployment pod that is snoozed: confirmed in the thread, kept past
//     the deadline;
//   - a Deployment pod (through its ReplicaSet) and a StatefulSet pod:
//     scaled to 0, the old count in an annotation;
//   - a pod of an unknown controller: a Warning Event, no notice;
//   - a Job stuck pending: the notice quotes the scheduler, the Job is
//     deleted with background propagation;
//   - a MIG instance idle by GR_ENGINE_ACTIVE (a ratio) is reclaimed, a
//     busy one is not;
//   - a pod expired by janitor/ttl on its namespace; a bad janitor/ttl
//     value gets a Warning that names it.
func TestReclaimLifecycle(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.installNotebookCRD()
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.slack.AddUser("U0BOB00002", "bob@example.com")
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.MaxPending = &metav1.Duration{Duration: 5 * time.Second}
		s.Description = "test cluster policy"
	})
	for _, ns := range []string{"notebook", "busy", "snooze", "deploy", "sts", "other", "pending", "expiry", "mig"} {
		w.namespace(ns, "alice@example.com")
	}

	// Kubeflow notebook: Notebook → StatefulSet → pod, idle.
	nb := &unstructured.Unstructured{}
	nb.SetGroupVersionKind(notebookGVK)
	nb.SetNamespace("notebook")
	nb.SetName("alice-nb")
	require.NoError(t, w.env.Client.Create(ctx, nb))
	nbSS := w.statefulSet("notebook", "alice-nb", 1, ownerRef("kubeflow.org/v1", "Notebook", "alice-nb", nb.GetUID()))
	nbPod := w.gpuPod("notebook", "alice-nb-0", 1, ownerRef("apps/v1", "StatefulSet", nbSS.Name, nbSS.UID))
	w.util(nbPod, 1, 1)

	// Bare pod, idle, then busy during the grace period. Owner by pod annotation: a Slack user ID.
	busy := w.gpuPod("busy", "shell", 2)
	w.util(busy, 2, 0)
	patchPod(t, w, busy, `{"metadata":{"annotations":{"kubemedic.io/owner":"U0BOB00002"}}}`)

	// Deployment pod, idle, snoozed by its owner.
	dep, err := w.env.CreatePod(ctx, localcluster.PodSpec{Namespace: "snooze", OwnerName: "serve", Owner: localcluster.OwnerDeployment, NodeName: w.node, GPUs: 1})
	require.NoError(t, err)
	w.waitRunning(dep)
	w.util(dep, 1, 2)

	// Deployment pod, idle, not snoozed: scaled to 0.
	dep2, err := w.env.CreatePod(ctx, localcluster.PodSpec{Namespace: "deploy", OwnerName: "web", Owner: localcluster.OwnerDeployment, NodeName: w.node, GPUs: 1})
	require.NoError(t, err)
	w.waitRunning(dep2)
	w.util(dep2, 1, 0)

	// StatefulSet pod, idle.
	ss := w.statefulSet("sts", "trainer", 3)
	ssPod := w.gpuPod("sts", "trainer-0", 1, ownerRef("apps/v1", "StatefulSet", "trainer", ss.UID))
	w.util(ssPod, 1, 0)

	// Pod of a controller the janitor does not know.
	other := w.gpuPod("other", "ray-worker", 1, ownerRef("ray.io/v1", "RayCluster", "ray", "11111111-2222-3333-4444-555555555555"))
	w.util(other, 1, 0)

	// Job pod stuck pending (no scheduler runs: the test writes what it would).
	job, err := w.env.CreatePod(ctx, localcluster.PodSpec{Namespace: "pending", OwnerName: "big-train", Owner: localcluster.OwnerJob, GPUs: 8})
	require.NoError(t, err)
	schedMsg := "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	job.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: schedMsg, LastTransitionTime: metav1.Now()}}
	require.NoError(t, w.env.Client.Status().Update(ctx, job))

	// Namespace TTL: expired already; a bad TTL on another pod.
	patchNS(t, w, "expiry", `{"metadata":{"annotations":{"janitor/ttl":"1s"}}}`)
	expired := w.gpuPod("expiry", "old", 1)
	w.util(expired, 1, 90)
	badTTL := w.gpuPod("busy", "bad-ttl", 1)
	w.util(badTTL, 1, 90)
	patchPod(t, w, badTTL, `{"metadata":{"annotations":{"janitor/ttl":"3 days"}}}`)

	// A MIG instance: GR_ENGINE_ACTIVE 0.01 is 1 %; another at 0.6 is busy.
	migIdle := w.migPod("mig", "mig-idle", 0.01)
	migBusy := w.migPod("mig", "mig-busy", 0.6)

	j := w.janitor().start()

	// Stuck pending and expired come first (no window to wait for).
	pendMsg := w.waitMessage(job, "will be reclaimed", 30*time.Second)
	require.Contains(t, pendMsg.Text, schedMsg, "the notice quotes the scheduler")
	require.Equal(t, w.slack.DMChannel("U0ALICE001"), pendMsg.Channel, "DM to the namespace owner's email")
	require.Contains(t, pendMsg.Text, "kubemedic.io/reclaim-snooze-until=", "the notice says how to keep the pod")
	w.waitMessage(expired, "janitor/ttl=1s on namespace expiry", 30*time.Second)
	require.Eventually(t, func() bool { return len(w.events(badTTL, controller.EventInvalidValue)) > 0 }, 20*time.Second, 200*time.Millisecond)
	require.Contains(t, w.events(badTTL, controller.EventInvalidValue)[0], `"3 days" is not a TTL`)

	// Idle pods get their notices once the window has passed.
	nbNotice := w.waitMessage(nbPod, "will be reclaimed", idleWindow+30*time.Second)
	require.Contains(t, nbNotice.Text, "GPU utilisation at most 1% over the last 20s on 1 GPU")
	require.Contains(t, nbNotice.Text, "stop Kubeflow Notebook alice-nb")
	busyNotice := w.waitMessage(busy, "will be reclaimed", 30*time.Second)
	require.Equal(t, w.slack.DMChannel("U0BOB00002"), busyNotice.Channel, "DM to the user ID on the pod")
	depNotice := w.waitMessage(dep, "will be reclaimed", 30*time.Second)
	ssNotice := w.waitMessage(ssPod, "will be reclaimed", 30*time.Second)
	// A snooze that does not parse keeps nothing, and its owner is told in the thread.
	patchPod(t, w, ssPod, `{"metadata":{"annotations":{"kubemedic.io/reclaim-snooze-until":"next week"}}}`)

	migNotice := w.waitMessage(migIdle, "will be reclaimed", 30*time.Second)
	require.Contains(t, migNotice.Text, "GPU utilisation at most 1% over the last 20s on 1 GPU")

	// During the grace period: the busy pod gets busy, the Deployment pod is snoozed.
	w.util(busy, 2, 80)
	snoozeUntil := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	patchPod(t, w, dep, `{"metadata":{"annotations":{"kubemedic.io/reclaim-snooze-until":"`+snoozeUntil+`"}}}`)
	n := w.waitNoticed(dep)

	// Results.
	cancelled := w.waitMessage(busy, "Cancelled", 40*time.Second)
	require.Contains(t, cancelled.Text, "GPU utilisation reached 80% in the last 20s")
	require.Equal(t, busyNotice.TS, cancelled.ThreadTS, "cancelled is posted in the notice's thread")
	got, err := w.getPod(busy)
	require.NoError(t, err, "the busy pod is kept")
	require.Empty(t, got.Annotations[v1alpha1.AnnotationReclaimNotice], "cancelling clears the notice")

	snoozed := w.waitMessage(dep, "Snooze confirmed", 30*time.Second)
	require.Equal(t, depNotice.TS, snoozed.ThreadTS)

	nbDone := w.waitMessage(nbPod, "Reclaimed", 40*time.Second)
	require.Equal(t, nbNotice.TS, nbDone.ThreadTS, "the owner sees the result in the thread")
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(nb), nb))
	require.NotEmpty(t, nb.GetAnnotations()[controller.AnnotationNotebookStops], "the notebook is stopped the Kubeflow way")

	depDone := w.waitMessage(dep2, "Reclaimed", 40*time.Second)
	require.Contains(t, depDone.Text, "kubectl scale deployment -n deploy web --replicas=")
	var web appsv1.Deployment
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKey{Namespace: "deploy", Name: "web"}, &web))
	require.Equal(t, int32(0), *web.Spec.Replicas, "the Deployment is scaled to 0")
	require.Equal(t, "1", web.Annotations[v1alpha1.AnnotationReclaimedReplicas], "its replicas before are kept")

	bad := w.waitMessage(ssPod, "was not understood", 30*time.Second)
	require.Equal(t, ssNotice.TS, bad.ThreadTS)
	require.Contains(t, bad.Text, `"next week" is not a time`)
	w.waitMessage(ssPod, "Reclaimed", 40*time.Second)
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(ss), ss))
	require.Equal(t, int32(0), *ss.Spec.Replicas)
	require.Equal(t, "3", ss.Annotations[v1alpha1.AnnotationReclaimedReplicas])

	w.waitMessage(job, "Reclaimed", 40*time.Second)
	err = w.env.Client.Get(ctx, client.ObjectKey{Namespace: "pending", Name: "big-train"}, &batchv1.Job{})
	require.True(t, apierrors.IsNotFound(err), "the stuck Job is deleted: %v", err)

	w.waitMessage(expired, "Reclaimed", 40*time.Second)
	// Told after the delete call; the graceful deletion ends soon after.
	require.Eventually(t, func() bool { _, err := w.getPod(expired); return apierrors.IsNotFound(err) }, 10*time.Second, 50*time.Millisecond,
		"the expired bare pod is deleted")

	// The snoozed Deployment is past its deadline and untouched.
	require.Eventually(t, func() bool { return time.Now().After(n.Deadline.Add(3 * time.Second)) }, 30*time.Second, 200*time.Millisecond)
	var d appsv1.Deployment
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKey{Namespace: "snooze", Name: "serve"}, &d))
	require.Equal(t, int32(1), *d.Spec.Replicas, "a snoozed Deployment keeps its replicas")
	for _, m := range w.messagesFor(dep) {
		require.NotContains(t, m.Text, "Reclaimed")
	}

	w.waitMessage(migIdle, "Reclaimed", 40*time.Second)
	require.Empty(t, w.messagesFor(migBusy), "a MIG instance at 60% is busy")

	// The unknown controller: an Event, no message, nothing deleted.
	require.NotEmpty(t, w.events(other, controller.EventUnsupportedOwner))
	require.Empty(t, w.messagesFor(other))
	_, err = w.getPod(other)
	require.NoError(t, err)

	// One notice per pod, whatever the cycles in between.
	for _, p := range []*corev1.Pod{nbPod, busy, dep, dep2, ssPod, job, expired, migIdle} {
		notices := 0
		for _, m := range w.messagesFor(p) {
			if m.ThreadTS == "" {
				notices++
			}
		}
		require.Equal(t, 1, notices, "notices about %s/%s: %v", p.Namespace, p.Name, w.texts(p))
	}
	require.GreaterOrEqual(t, j.metric("kubemedic_janitor_reclaimed_pods_total", nil), 4.0)
	require.GreaterOrEqual(t, j.metric("kubemedic_janitor_reclaimed_gpus_total", map[string]string{"rule": "StuckPending"}), 8.0)
	require.Equal(t, 1.0, j.metric("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "snoozed"}))
}

// TestMissingMetricsNeverReap: a series that stops mid-window, an exporter
// that goes down, and Prometheus itself stopping: nothing is noticed or
// reaped, and the pods are counted as unknown.
func TestMissingMetricsNeverReap(t *testing.T) {
	w := newWorld(t)
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("reclaim", nil)
	w.namespace("team", "alice@example.com")
	stops := w.gpuPod("team", "stops", 1)
	w.util(stops, 1, 0)
	partial := w.gpuPod("team", "partial", 2)
	w.dcgm.Set(w.series(partial, 0), 0) // one of its two GPUs has a series
	j := w.janitor().start()

	// Real samples in real time (Prometheus scrapes every second): the
	// series stops halfway through its first window.
	time.Sleep(idleWindow / 2)
	w.dcgm.Delete(w.series(stops, 0))
	require.Eventually(t, func() bool {
		return j.metric("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "unknown"}) == 2
	}, idleWindow+20*time.Second, 250*time.Millisecond, "both pods are counted as unknown")
	// The series is back, but with a hole in the window: still unknown.
	w.util(stops, 1, 0)
	w.dcgm.SetDown(true)
	j.waitCycles(5) // past the 3 s staleness
	require.Equal(t, 2.0, j.metric("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "unknown"}))
	w.prom.Stop()
	require.Eventually(t, func() bool { return j.metric("kubemedic_janitor_gpu_metrics_readable", nil) == 0 }, 10*time.Second, 200*time.Millisecond)
	require.Greater(t, j.metric("kubemedic_janitor_prometheus_query_errors_total", nil), 0.0)
	j.waitCycles(3)
	require.Empty(t, w.slack.Messages(), "nothing is noticed on missing evidence")
	for _, p := range []*corev1.Pod{stops, partial} {
		got, err := w.getPod(p)
		require.NoError(t, err)
		require.Empty(t, got.Annotations[v1alpha1.AnnotationReclaimNotice])
	}
}

// TestSlackFailuresAndRestart: Slack answers 429, then 500, then OK: one
// notice. The janitor is killed between notice and action and restarted:
// no second notice, the same deadline, and the reclaim happens at it.
func TestSlackFailuresAndRestart(t *testing.T) {
	w := newWorld(t)
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 3 * time.Second}
		s.GracePeriod = &metav1.Duration{Duration: 15 * time.Second}
	})
	w.namespace("team", "alice@example.com")
	w.slack.FailNext(notifytest.MethodPostMessage, notifytest.RateLimited(1), notifytest.ServerError())
	pod := w.gpuPod("team", "long", 1)
	j := w.janitor().start()

	notice := w.waitMessage(pod, "will be reclaimed", 40*time.Second)
	require.Contains(t, notice.Text, "longer than the limit of 3s")
	require.Equal(t, 3, w.slack.Calls(notifytest.MethodPostMessage), "429, 500, then the notice")
	n := w.waitNoticed(pod)
	j.stop()
	j2 := w.janitor().start()
	j2.waitCycles(3)
	require.Len(t, w.messagesFor(pod), 1, "no second notice after the restart")
	require.Equal(t, n.Deadline, w.notice(pod).Deadline, "the deadline is unchanged")

	done := w.waitMessage(pod, "Reclaimed", 40*time.Second)
	require.Equal(t, notice.TS, done.ThreadTS)
	require.False(t, time.Now().Before(n.Deadline), "reclaimed no earlier than the deadline")
	// The janitor tells after its delete call; the pod then goes through
	// its graceful deletion (kwok ends it), so it is gone soon, not at once.
	require.Eventually(t, func() bool { _, err := w.getPod(pod); return apierrors.IsNotFound(err) }, 10*time.Second, 50*time.Millisecond,
		"the pod the janitor reclaimed is gone")
	require.Equal(t, 1.0, j2.metric("kubemedic_janitor_reclaimed_pods_total", map[string]string{"rule": "MaxLifetime", "target": "Pod"}))
	notices := 0
	for _, m := range w.messagesFor(pod) {
		if m.ThreadTS == "" {
			notices++
		}
	}
	require.Equal(t, 1, notices)
	require.True(t, strings.Contains(done.Text, "deleted the pod"), done.Text)
}

// TestNoSlackNoAction: without Slack, a policy that requires a notice
// reclaims nothing; one with requireNotice: false does, at the deadline.
func TestNoSlackNoAction(t *testing.T) {
	w := newWorld(t)
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 2 * time.Second}
		s.GracePeriod = &metav1.Duration{Duration: 3 * time.Second}
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "noticed"}}
	})
	w.clusterPolicy("silent", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 2 * time.Second}
		s.GracePeriod = &metav1.Duration{Duration: 3 * time.Second}
		f := false
		s.RequireNotice = &f
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "silent"}}
	})
	w.namespace("noticed", "alice@example.com")
	w.namespace("silent", "alice@example.com")
	kept := w.gpuPod("noticed", "p", 1)
	gone := w.gpuPod("silent", "p", 1)
	j := w.janitor(func(o *controller.ManagerOptions) { o.Notifier = nil }).start()
	require.Eventually(t, func() bool {
		_, err := w.getPod(gone)
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 200*time.Millisecond, "requireNotice: false reclaims without Slack")
	require.NotEmpty(t, w.events(kept, controller.EventNoticeFailed))
	_, err := w.getPod(kept)
	require.NoError(t, err, "a required notice that cannot be sent blocks the reclaim")
	require.Greater(t, j.metric("kubemedic_janitor_notice_failures_total", map[string]string{"reason": "not_configured"}), 0.0)
}

func patchPod(t *testing.T, w *world, pod *corev1.Pod, patch string) {
	t.Helper()
	require.NoError(t, w.env.Client.Patch(context.Background(), pod.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))))
}

func patchNS(t *testing.T, w *world, ns, patch string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	require.NoError(t, w.env.Client.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))))
}

// TestDryRunAndPolicyChecks: a dry-run policy without notify writes nothing
// to the pod and sends nothing, only "would" Events, once; with notify the
// notice goes out marked as a dry run and the thread says what a live
// policy would have done, and nothing is deleted. A namespaced policy
// looser than the cluster policy is not enforced and gets a Warning.
func TestDryRunAndPolicyChecks(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	life := func(name, ns string, notify bool) {
		w.clusterPolicy(name, func(s *v1alpha1.ClusterReclaimPolicySpec) {
			s.Idle = nil
			s.MaxLifetime = &metav1.Duration{Duration: 2 * time.Second}
			s.GracePeriod = &metav1.Duration{Duration: 3 * time.Second}
			s.DryRun = &v1alpha1.ReclaimDryRun{Enabled: true, Notify: notify}
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		})
	}
	life("quiet", "quiet", false)
	life("loud", "loud", true)
	w.namespace("quiet", "alice@example.com")
	w.namespace("loud", "alice@example.com")
	loose := &v1alpha1.ReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: "quiet"},
		Spec: v1alpha1.ReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{MaxLifetime: &metav1.Duration{Duration: time.Hour}}}}
	require.NoError(t, w.env.Client.Create(ctx, loose))
	quiet := w.gpuPod("quiet", "p", 1)
	loud := w.gpuPod("loud", "p", 1)
	j := w.janitor().start()

	done := w.waitMessage(loud, "Dry run: the grace period", 30*time.Second)
	require.Contains(t, done.Text, "A live policy would now delete pod p")
	notice := w.messagesFor(loud)[0]
	require.Contains(t, notice.Text, "dry run: nothing will be changed")
	require.Equal(t, notice.TS, done.ThreadTS)
	require.True(t, w.notice(loud).DryRun)
	require.NotEmpty(t, w.events(loud, controller.EventWouldReclaim))

	require.Eventually(t, func() bool { return len(w.events(quiet, controller.EventWouldNotify)) > 0 }, 20*time.Second, 200*time.Millisecond)
	j.waitCycles(5)
	require.Len(t, w.events(quiet, controller.EventWouldNotify), 1, "an unchanged dry-run decision is evented once")
	got, err := w.getPod(quiet)
	require.NoError(t, err)
	require.Empty(t, got.Annotations[v1alpha1.AnnotationReclaimNotice], "dry run without notify writes nothing to the pod")
	require.Empty(t, w.messagesFor(quiet))
	for _, p := range []*corev1.Pod{quiet, loud} {
		_, err := w.getPod(p)
		require.NoError(t, err, "dry run deletes nothing")
	}
	require.Zero(t, j.metric("kubemedic_janitor_reclaimed_pods_total", nil))

	ignored := w.events(loose, controller.EventPolicyIgnored)
	require.Len(t, ignored, 1)
	require.Contains(t, ignored[0], "spec.maxLifetime")
}

// TestTwoJanitorsOneNotice: two janitors act at once (no leader election,
// as after a split brain): the claim on the pod lets only one send each
// notice, and each pod is reclaimed once.
func TestTwoJanitorsOneNotice(t *testing.T) {
	w := newWorld(t)
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 2 * time.Second}
		s.GracePeriod = &metav1.Duration{Duration: 4 * time.Second}
	})
	w.namespace("team", "alice@example.com")
	var pods []*corev1.Pod
	for i := 0; i < 8; i++ {
		pods = append(pods, w.gpuPod("team", fmt.Sprintf("p%d", i), 1))
	}
	var js []*janitor
	for _, id := range []string{"janitor-a", "janitor-b"} {
		js = append(js, w.janitor(func(o *controller.ManagerOptions) { o.Identity = id }).start())
	}
	for _, p := range pods {
		w.waitMessage(p, "Reclaimed", 40*time.Second)
	}
	js[0].waitCycles(3)
	js[1].waitCycles(1)
	for _, p := range pods {
		notices, results := 0, 0
		for _, m := range w.messagesFor(p) {
			switch {
			case m.ThreadTS == "":
				notices++
			case strings.Contains(m.Text, "Reclaimed"):
				results++
			}
		}
		require.Equal(t, 1, notices, "notices about %s: %v", p.Name, w.texts(p))
		require.GreaterOrEqual(t, results, 1)
	}
}
