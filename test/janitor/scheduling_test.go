package janitor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// newSchedulingWorld is newWorld with the real kube-scheduler and
// kube-controller-manager: pods are made by their workloads' controllers
// and placed by the scheduler, on n kwok nodes of gpus GPUs each. The
// world's node (the dcgm series' hostname) is the first one.
func newSchedulingWorld(t *testing.T, n, gpus int) (*world, []string) {
	t.Helper()
	env := harness.Start(t, localcluster.Options{Kwok: true, Scheduler: true, ControllerManager: true})
	ctx := t.Context()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: janitorNS}}))
	nodes, err := env.CreateGPUNodes(ctx, n, localcluster.NodeSpec{NamePrefix: "gpu", GPUs: gpus})
	require.NoError(t, err)
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	require.NoError(t, env.WaitNodesReady(ctx, names...))
	dcgm := harness.StartDCGMExporter(t)
	prom := harness.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: dcgm-exporter
    static_configs:
      - targets: [%q]
`, scrapeInterval, scrapeInterval, dcgm.URL))
	return &world{t: t, env: env, dcgm: dcgm, prom: prom, slack: notifytest.New(t), node: names[0]}, names
}

// workload creates a Deployment or Job for the real controllers.
func (w *world) workload(spec localcluster.WorkloadSpec) client.Object {
	w.t.Helper()
	obj, err := w.env.CreateWorkload(w.t.Context(), spec)
	require.NoError(w.t, err, "create workload %s/%s", spec.Namespace, spec.Name)
	return obj
}

// listWorkloadPods lists the pods of workload name in ns (by the
// app.kubernetes.io/name label CreateWorkload gives them).
func (w *world) listWorkloadPods(c require.TestingT, ns, name string) []corev1.Pod {
	var list corev1.PodList
	require.NoError(c, w.env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{localcluster.LabelAppName: name}), "list pods of %s/%s", ns, name)
	return list.Items
}

// runningWorkloadPod waits until workload name in ns has exactly one pod,
// bound by the scheduler and Running, and returns it.
func (w *world) runningWorkloadPod(ns, name string) *corev1.Pod {
	w.t.Helper()
	var pod corev1.Pod
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		pods := w.listWorkloadPods(c, ns, name)
		require.Len(c, pods, 1, "the controller made one pod for %s/%s", ns, name)
		pod = pods[0]
		require.NotEmpty(c, pod.Spec.NodeName, "the scheduler bound %s/%s: %q", ns, pod.Name, schedulerMessage(&pod))
		require.Equal(c, corev1.PodRunning, pod.Status.Phase, "kwok runs %s/%s", ns, pod.Name)
		require.NotNil(c, pod.Status.StartTime)
	}, 60*time.Second, 100*time.Millisecond, "%s/%s never ran", ns, name)
	return &pod
}

// unschedulableWorkloadPod waits until workload name in ns has exactly one
// pod, Pending, on which the scheduler wrote why it fits nowhere, and
// returns it.
func (w *world) unschedulableWorkloadPod(ns, name string) *corev1.Pod {
	w.t.Helper()
	var pod corev1.Pod
	require.EventuallyWithT(w.t, func(c *assert.CollectT) {
		pods := w.listWorkloadPods(c, ns, name)
		require.Len(c, pods, 1, "the controller made one pod for %s/%s", ns, name)
		pod = pods[0]
		require.Empty(c, pod.Spec.NodeName, "%s/%s must not fit anywhere", ns, pod.Name)
		require.Equal(c, corev1.PodPending, pod.Status.Phase)
		require.Contains(c, schedulerMessage(&pod), "Insufficient nvidia.com/gpu", "the scheduler's reason on %s/%s", ns, pod.Name)
	}, 60*time.Second, 100*time.Millisecond, "%s/%s never got the scheduler's Insufficient nvidia.com/gpu", ns, name)
	return &pod
}

// schedulerMessage is the message of the pod's PodScheduled=False
// condition with reason Unschedulable, "" when it has none.
func schedulerMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// scheduledAt is the lastTransitionTime of the pod's PodScheduled=True
// condition (second precision), zero when it has none.
func scheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// firstSeen records when the test first sees, on the watch, an object for
// which cond holds: the test's own clock, to the millisecond, where the
// API's timestamps have seconds. The returned function gives that time
// (zero before) and the object.
func firstSeen(t *testing.T, wi watch.Interface, cond func(runtime.Object) bool) func() (time.Time, runtime.Object) {
	t.Helper()
	var (
		mu   sync.Mutex
		at   time.Time
		seen runtime.Object
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			now := time.Now()
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if cond(ev.Object) {
				mu.Lock()
				if at.IsZero() {
					at, seen = now, ev.Object
				}
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { wi.Stop(); <-done })
	return func() (time.Time, runtime.Object) {
		mu.Lock()
		defer mu.Unlock()
		return at, seen
	}
}

// TestReclaimFreesTheGPUForAWaitingPod proves the janitor's purpose end to
// end with the real scheduler and controllers: on a full 2-GPU node, an
// idle notebook Deployment holds the last free GPU while a researcher's Job
// waits with the scheduler's "Insufficient nvidia.com/gpu". The janitor
// tells the notebook's owner, scales the Deployment to 0 after the grace
// period; the real ReplicaSet controller deletes the pod, kwok finalizes
// it, and the real scheduler binds the waiting pod to the freed GPU. A busy
// trainer on the same node is left alone. It logs the time from the scale
// to the binding.
func TestReclaimFreesTheGPUForAWaitingPod(t *testing.T) {
	w, nodes := newSchedulingWorld(t, 1, 2)
	ctx := t.Context()
	node := nodes[0]
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.slack.AddUser("U0BOB00002", "bob@example.com")
	w.slack.AddUser("U0CAROL003", "carol@example.com")
	w.clusterPolicy("reclaim", nil) // idle 20 s below 5 %, grace 8 s, no maxPending
	w.namespace("alice", "alice@example.com")
	w.namespace("bob", "bob@example.com")
	w.namespace("carol", "carol@example.com")

	// The node fills up: carol's trainer (busy) and alice's notebook (idle),
	// one GPU each, placed one after the other so that the notebook holds
	// the last GPU before bob asks for one.
	w.workload(localcluster.WorkloadSpec{Namespace: "carol", Name: "trainer", GPUs: 1})
	trainer := w.runningWorkloadPod("carol", "trainer")
	w.workload(localcluster.WorkloadSpec{Namespace: "alice", Name: "notebook", GPUs: 1})
	notebook := w.runningWorkloadPod("alice", "notebook")
	require.Equal(t, node, trainer.Spec.NodeName)
	require.Equal(t, node, notebook.Spec.NodeName)
	// The series carry the pods' real names, known only now.
	w.util(trainer, 1, 90)
	w.util(notebook, 1, 0)

	// Bob's Job waits: the scheduler says why.
	w.workload(localcluster.WorkloadSpec{Namespace: "bob", Name: "finetune", Kind: localcluster.OwnerJob, GPUs: 1})
	waiting := w.unschedulableWorkloadPod("bob", "finetune")
	waitingMsg := schedulerMessage(waiting)
	t.Logf("the scheduler on the waiting pod: %q", waitingMsg)
	require.Contains(t, waitingMsg, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")

	// The test's own clock on the two moments it measures: the scale to 0
	// (from the Deployment's watch) and the waiting pod's binding (its
	// spec.nodeName, from the pod's watch).
	depWatch, err := w.env.Clientset.AppsV1().Deployments("alice").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "notebook").String()})
	require.NoError(t, err)
	scaledSeen := firstSeen(t, depWatch, func(o runtime.Object) bool {
		d := o.(*appsv1.Deployment)
		return d.Spec.Replicas != nil && *d.Spec.Replicas == 0
	})
	podWatch, err := w.env.Clientset.CoreV1().Pods("bob").Watch(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{localcluster.LabelAppName: "finetune"}).String()})
	require.NoError(t, err)
	boundSeen := firstSeen(t, podWatch, func(o runtime.Object) bool { return o.(*corev1.Pod).Spec.NodeName != "" })

	j := w.janitor().start()

	// The notice: to alice, saying what was seen, what will be done, when,
	// and how to keep the notebook.
	notice := w.waitMessage(notebook, "will be reclaimed", idleWindow+40*time.Second)
	require.Equal(t, w.slack.DMChannel("U0ALICE001"), notice.Channel, "DM to the namespace owner's email")
	require.Contains(t, notice.Text, "GPU utilisation at most 0% over the last 20s on 1 GPU")
	require.Contains(t, notice.Text, "scale Deployment notebook to 0 replicas")
	require.Contains(t, notice.Text, "kubectl annotate pod -n alice "+notebook.Name+" --overwrite kubemedic.io/reclaim-snooze-until=")
	n := w.waitNoticed(notebook)
	require.Equal(t, decide.RuleIdle, n.Rule)
	// During the grace period nothing moves: the notebook keeps its GPU,
	// bob keeps waiting.
	_, err = w.getPod(notebook)
	require.NoError(t, err, "the notebook runs until its deadline")
	got, err := w.getPod(waiting)
	require.NoError(t, err)
	require.Empty(t, got.Spec.NodeName, "bob waits while the notebook holds the GPU")

	// The reclaim: scaled to 0 at the deadline, told in the thread.
	done := w.waitMessage(notebook, "Reclaimed", grace+40*time.Second)
	require.Equal(t, notice.TS, done.ThreadTS, "the result is in the notice's thread")
	require.Contains(t, done.Text, "scaled Deployment notebook from 1 to 0 replicas")
	require.Contains(t, done.Text, "kubectl scale deployment -n alice notebook --replicas=")
	var dep appsv1.Deployment
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKey{Namespace: "alice", Name: "notebook"}, &dep))
	require.Equal(t, int32(0), *dep.Spec.Replicas, "the notebook Deployment is scaled to 0")
	require.Equal(t, "1", dep.Annotations[v1alpha1.AnnotationReclaimedReplicas], "its replicas before are kept")
	require.Contains(t, dep.Annotations[v1alpha1.AnnotationReclaimedBy], "rule Idle")
	scaledAt, _ := scaledSeen()
	require.False(t, scaledAt.IsZero(), "the Deployment's watch saw replicas 0")
	require.False(t, scaledAt.Before(n.Deadline), "scaled at %s, not before the deadline %s", scaledAt, n.Deadline)

	// The real ReplicaSet controller deletes the notebook's pod and kwok
	// finalizes it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := w.getPod(notebook)
		require.True(c, apierrors.IsNotFound(err), "the notebook's pod is gone: %v", err)
		require.Empty(c, w.listWorkloadPods(c, "alice", "notebook"), "no new notebook pod")
	}, 30*time.Second, 100*time.Millisecond)

	// The real scheduler binds bob's pod to the freed GPU, and kwok runs
	// it (kwok's default stages complete a Job's pod at once: Running or
	// Succeeded, it started on the node).
	var bound *corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p, err := w.getPod(waiting)
		require.NoError(c, err, "the pod that waited is the one bound")
		bound = p
		require.Equal(c, node, p.Spec.NodeName, "the scheduler bound %s: %q", p.Name, schedulerMessage(p))
		require.NotNil(c, p.Status.StartTime, "kwok started %s", p.Name)
		require.Contains(c, []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded}, p.Status.Phase)
	}, 60*time.Second, 100*time.Millisecond, "bob's waiting pod never got the freed GPU")
	require.Len(t, w.listWorkloadPods(t, "bob", "finetune"), 1, "the Job made no other pod")
	boundAt, _ := boundSeen()
	require.False(t, boundAt.IsZero(), "the pod's watch saw the binding")
	require.False(t, boundAt.Before(scaledAt), "bound at %s, before the scale at %s", boundAt, scaledAt)
	t.Logf("reclaim to binding: %s", boundAt.Sub(scaledAt).Round(time.Millisecond))
	t.Logf("reclaim to binding by the API's timestamps (seconds): janitor %q, PodScheduled at %s",
		dep.Annotations[v1alpha1.AnnotationReclaimedBy], scheduledAt(bound).UTC().Format(time.RFC3339))
	var job batchv1.Job
	require.NoError(t, w.env.Client.Get(ctx, client.ObjectKey{Namespace: "bob", Name: "finetune"}, &job))
	require.Nil(t, job.DeletionTimestamp, "the waiting Job is nobody's target")

	// Carol's busy trainer keeps its GPU, and nobody else was written to.
	got, err = w.getPod(trainer)
	require.NoError(t, err, "the busy trainer is kept")
	require.Nil(t, got.DeletionTimestamp)
	require.Empty(t, got.Annotations[v1alpha1.AnnotationReclaimNotice])
	for _, m := range w.slack.Messages() {
		require.True(t, strings.Contains(m.Text, "alice/"+notebook.Name), "only alice's notebook is messaged about; got %q", m.Text)
	}
	require.Equal(t, 1.0, j.metric("kubemedic_janitor_reclaimed_pods_total", map[string]string{"rule": "Idle", "target": "Deployment"}))
}

// TestStuckPendingQuotesTheScheduler proves the stuck-Pending rule reads
// what the real kube-scheduler writes: two 4-GPU nodes each have one GPU
// free (a 3-GPU Deployment replica on each), so a Job asking for 2 GPUs
// fits nowhere although 2 are free in all. The scheduler writes why on the
// pod; once it has been unschedulable longer than maxPending the owner
// gets a Slack message that says what was seen (pending for how long,
// against which limit, and the scheduler's reason), what will be done
// (delete the Job), when, and how to keep it. At the deadline the Job is
// deleted and the garbage collector takes its pod.
func TestStuckPendingQuotesTheScheduler(t *testing.T) {
	w, _ := newSchedulingWorld(t, 2, 4)
	ctx := t.Context()
	const maxPending = 5 * time.Second
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("reclaim", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil // the running replicas have no series: nothing about them
		s.MaxPending = &metav1.Duration{Duration: maxPending}
	})
	w.namespace("serving", "")
	w.namespace("alice", "alice@example.com")

	// 3 GPUs of each node: one replica per node, since two do not fit on one.
	w.workload(localcluster.WorkloadSpec{Namespace: "serving", Name: "llm", Replicas: 2, GPUs: 3})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := w.listWorkloadPods(c, "serving", "llm")
		require.Len(c, pods, 2)
		on := map[string]bool{}
		for _, p := range pods {
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "%s: %q", p.Name, schedulerMessage(&p))
			on[p.Spec.NodeName] = true
		}
		require.Len(c, on, 2, "one replica per node")
	}, 60*time.Second, 100*time.Millisecond)

	w.workload(localcluster.WorkloadSpec{Namespace: "alice", Name: "big-train", Kind: localcluster.OwnerJob, GPUs: 2})
	pending := w.unschedulableWorkloadPod("alice", "big-train")
	schedMsg := schedulerMessage(pending)
	t.Logf("the scheduler on the pending pod: %q", schedMsg)
	require.Contains(t, schedMsg, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")

	j := w.janitor().start()
	notice := w.waitMessage(pending, "will be reclaimed", maxPending+30*time.Second)
	t.Logf("the notice: %s", notice.Text)
	require.Equal(t, w.slack.DMChannel("U0ALICE001"), notice.Channel, "DM to the namespace owner's email")
	// What was seen: the rule, how long against which limit, and the
	// scheduler's own reason, whatever it said last.
	got, err := w.getPod(pending)
	require.NoError(t, err)
	require.Contains(t, notice.Text, "Rule StuckPending: pending and unschedulable for ")
	require.Contains(t, notice.Text, "longer than the limit of 5s")
	require.Contains(t, notice.Text, "None of the 2 nodes can run it now: 2 have too few free GPUs (nvidia.com/gpu)",
		"the notice says the scheduler's reason in words")
	require.Contains(t, notice.Text, fmt.Sprintf("The scheduler said: %q", schedulerMessage(got)), "the notice quotes the scheduler")
	// What will be done, and when.
	require.Contains(t, notice.Text, "will be reclaimed at ")
	require.Contains(t, notice.Text, "delete Job big-train and its pods")
	n := w.waitNoticed(pending)
	require.Equal(t, decide.RuleStuckPending, n.Rule)
	require.Contains(t, notice.Text, n.Deadline.UTC().Format(time.RFC3339), "the notice names the deadline")
	// How to stop it.
	require.Contains(t, notice.Text, "To keep it: kubectl annotate pod -n alice "+pending.Name+" --overwrite kubemedic.io/reclaim-snooze-until=")
	// The blocks say the same under their headings, the node as unscheduled.
	blocks := string(notice.Blocks)
	for _, s := range []string{"Seen", "Will be done", "When", "no node (unscheduled)", "too few free GPUs", "Insufficient nvidia.com/gpu", "*Keep it*"} {
		require.Contains(t, blocks, s, "the notice's blocks")
	}

	// At the deadline the Job is deleted; the garbage collector takes its pod.
	done := w.waitMessage(pending, "Reclaimed", grace+40*time.Second)
	require.Equal(t, notice.TS, done.ThreadTS)
	require.Contains(t, done.Text, "deleted Job big-train and its pods")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: "alice", Name: "big-train"}, &batchv1.Job{})
		require.True(c, apierrors.IsNotFound(err), "the Job is deleted: %v", err)
		require.Empty(c, w.listWorkloadPods(c, "alice", "big-train"), "its pod is gone")
	}, 30*time.Second, 100*time.Millisecond)
	require.Len(t, w.listWorkloadPods(t, "serving", "llm"), 2, "the running replicas are kept")
	require.Equal(t, 2.0, j.metric("kubemedic_janitor_reclaimed_gpus_total", map[string]string{"rule": "StuckPending"}))
}
