package remediator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// The drain tests run the real kube-scheduler and kube-controller-manager:
// the ReplicaSet controller recreates what a drain evicts, the scheduler
// places it, and the disruption controller computes the budgets that the
// eviction API reads.

// drWorkload is the Deployment of every drain test, in its own namespace.
const drWorkload = "serve"

// drEvictedByAPI is the reason of the DisruptionTarget condition the API
// server's eviction subresource puts on the pods it evicts
// (pkg/registry/core/pod/storage/eviction.go); a pod deleted outright has
// none.
const drEvictedByAPI = "EvictionByEvictionAPI"

// drPoolLabel puts the nodes of one story of a test in a pool, to which the
// story's workload is held by node selector.
const drPoolLabel = "example.com/pool"

// drScheduling runs the real kube-scheduler and kube-controller-manager
// beside the API server.
func drScheduling(o *localcluster.Options) { o.Scheduler, o.ControllerManager = true, true }

// drCordon cordons or uncordons the node as an SRE would with kubectl: no
// kubemedic annotation.
func drCordon(t *testing.T, env *localcluster.Cluster, node string, cordon bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, cordon)
	require.NoError(t, env.Client.Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		client.RawPatch(types.MergePatchType, []byte(patch))), "cordon=%t node %s", cordon, node)
}

// drPods lists the pods of the workload in ns.
func drPods(t require.TestingT, env *localcluster.Cluster, ns string) []corev1.Pod {
	var list corev1.PodList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{localcluster.LabelAppName: drWorkload}))
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// drReady reports whether the pod is Running and Ready and not going.
func drReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// drEvicted reports whether the eviction API evicted the pod.
func drEvicted(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == drEvictedByAPI {
			return true
		}
	}
	return false
}

// drPending returns the scheduler's message on a pod it could not place, ""
// when there is none.
func drPending(p corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// drDescribe is a failure message listing the pods of the workload in ns.
func drDescribe(env *localcluster.Cluster, ns string) string {
	var list corev1.PodList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "\n  %s node=%q phase=%s ready=%t deleting=%t pending=%q", p.Name, p.Spec.NodeName, p.Status.Phase,
			drReady(&p), p.DeletionTimestamp != nil, drPending(p))
	}
	return b.String()
}

// drHistory is what a drPodLog saw of one pod, from its first event to its
// last.
type drHistory struct {
	Name  string
	UID   types.UID
	Owner string // kind/name of its controller
	// Seen is when the first event of the pod arrived; the log starts
	// before the workload, so that is when the pod was created.
	Seen time.Time
	// Nodes are the nodes it was bound to at any event, in order.
	Nodes []string
	// Ready is the first event that had it Running and Ready; zero if none.
	Ready time.Time
	// Stopping is the first event that had it going (deletionTimestamp).
	Stopping time.Time
	// Evicted is set when an event had the eviction API's DisruptionTarget.
	Evicted bool
	// Gone is the Deleted event.
	Gone time.Time
}

// drPodLog records every watch event of the pods in some namespaces, from
// before the test's workloads exist to its end, so that a test can assert
// where pods were at every moment, not only where they are at the end.
type drPodLog struct {
	mu     sync.Mutex
	pods   map[types.UID]*drHistory
	byNS   map[string][]types.UID
	closed bool // the watch ended before the test
}

// drWatchPods starts recording the pods of the namespaces. The watch ends
// with the test; histories fails if it ended before.
func drWatchPods(t *testing.T, env *localcluster.Cluster, namespaces ...string) *drPodLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.Clientset.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	l := &drPodLog{pods: map[types.UID]*drHistory{}, byNS: map[string][]types.UID{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !slices.Contains(namespaces, pod.Namespace) {
				continue
			}
			l.record(ev.Type, pod, time.Now())
		}
		l.mu.Lock()
		l.closed = ctx.Err() == nil
		l.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l
}

func (l *drPodLog) record(typ watch.EventType, pod *corev1.Pod, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.pods[pod.UID]
	if h == nil {
		h = &drHistory{Name: pod.Name, UID: pod.UID, Seen: at}
		if ref := metav1.GetControllerOf(pod); ref != nil {
			h.Owner = ref.Kind + "/" + ref.Name
		}
		l.pods[pod.UID] = h
		l.byNS[pod.Namespace] = append(l.byNS[pod.Namespace], pod.UID)
	}
	if n := pod.Spec.NodeName; n != "" && (len(h.Nodes) == 0 || h.Nodes[len(h.Nodes)-1] != n) {
		h.Nodes = append(h.Nodes, n)
	}
	if h.Ready.IsZero() && drReady(pod) {
		h.Ready = at
	}
	if h.Stopping.IsZero() && pod.DeletionTimestamp != nil {
		h.Stopping = at
	}
	h.Evicted = h.Evicted || drEvicted(pod)
	if typ == watch.Deleted {
		h.Gone = at
	}
}

// histories returns copies of the histories of the pods in ns, in the
// order they appeared. It fails when the watch ended before the test.
func (l *drPodLog) histories(t require.TestingT, ns string) []drHistory {
	l.mu.Lock()
	defer l.mu.Unlock()
	require.False(t, l.closed, "the pod watch ended early: events may be missing")
	out := make([]drHistory, 0, len(l.byNS[ns]))
	for _, uid := range l.byNS[ns] {
		h := *l.pods[uid]
		h.Nodes = slices.Clone(h.Nodes)
		out = append(out, h)
	}
	return out
}

// drHistoryOf returns the history of the pod named name.
func drHistoryOf(t require.TestingT, hs []drHistory, name string) drHistory {
	for _, h := range hs {
		if h.Name == name {
			return h
		}
	}
	require.Failf(t, "no history", "the pod watch saw no pod %s", name)
	return drHistory{}
}

// drLost is the fault of the drain tests: the node lost a GPU (allocatable
// 7 of 8 and GPULost True), which the policies below drain for.
func drLost(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setGPUs(t, env, node, 7)
	setCondition(t, env, node, v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason,
		"GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0")
}

// drHeal clears drLost's fault, so that the operation's verification passes.
func drHeal(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setGPUs(t, env, node, 8)
	setCondition(t, env, node, v1alpha1.ConditionGPULost, corev1.ConditionFalse, "GPUsPresent", "8 of 8 GPUs")
}

// drOp waits for the one operation on the node and returns it.
func drOp(t *testing.T, env *localcluster.Cluster, node string) v1alpha1.NodeOperation {
	t.Helper()
	var op v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.NotEmpty(c, ops, "no operation on node %s yet", node)
		op = ops[0]
	}, 30*time.Second, 100*time.Millisecond)
	return op
}

// drWaitPhase waits for the operation to reach the phase, and asserts its
// Drained condition is True: the drain is done and the operation went on.
func drWaitPhase(t *testing.T, env *localcluster.Cluster, name string, phase v1alpha1.NodeOperationPhase) *v1alpha1.NodeOperation {
	t.Helper()
	var op *v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		op = getOp(t, env, name)
		require.Equal(c, phase, op.Status.Phase, describeOps(env))
	}, 60*time.Second, 100*time.Millisecond)
	drained := findCond(op.Status.Conditions, v1alpha1.OperationDrained)
	require.NotNil(t, drained, "operation %s has no Drained condition", name)
	require.Equal(t, metav1.ConditionTrue, drained.Status, "operation %s: %s: %s", name, drained.Reason, drained.Message)
	return op
}

// TestDrainedPodsRescheduleElsewhere proves what the Slack message after a
// drain tells a pod's owner: "its controller will recreate it on another
// node". Four GPU nodes; an SRE has cordoned one (the spare) before a
// Deployment of four 4-GPU pods is created, so the scheduler spreads them
// over the other three and the spare stays empty. A GPU lost on the node
// with most pods makes the remediator cordon and drain it (Evict). A watch
// from before the Deployment records every pod at every event: the evicted
// pods went through the eviction API, the ReplicaSet controller made their
// replacements, and the scheduler placed each on one of the two healthy
// nodes; no pod ever landed on the drained node or on the spare, although
// both had more free GPUs than any other node. The operation runs on,
// succeeds once the GPU is back, and lifts its own cordon, never the SRE's.
func TestDrainedPodsRescheduleElsewhere(t *testing.T) {
	env := startCluster(t, drScheduling)
	ctx := t.Context()
	const ns = "team-resched"
	nodes := gpuNodes(t, env, "resched", 4)
	spare := nodes[3]
	drCordon(t, env, spare, true)
	pods := drWatchPods(t, env, ns)

	_, err := env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: ns, Name: drWorkload, Replicas: 4, GPUs: 4})
	require.NoError(t, err)
	before := map[string][]string{} // node -> pods
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := drPods(c, env, ns)
		require.Len(c, list, 4, "the ReplicaSet controller makes four pods%s", drDescribe(env, ns))
		clear(before)
		for _, p := range list {
			require.True(c, drReady(&p), "pod %s not Running and Ready%s", p.Name, drDescribe(env, ns))
			require.NotEqual(c, spare, p.Spec.NodeName, "pod %s on the cordoned spare", p.Name)
			before[p.Spec.NodeName] = append(before[p.Spec.NodeName], p.Name)
		}
	}, 60*time.Second, 100*time.Millisecond)
	// The drained node is the one with most pods (4 pods on 3 nodes: two).
	var node string
	var healthy []string
	for _, n := range nodes[:3] {
		if node == "" || len(before[n]) > len(before[node]) {
			node = n
		}
	}
	for _, n := range nodes[:3] {
		if n != node {
			healthy = append(healthy, n)
		}
	}
	evicted := before[node]
	t.Logf("Placed by the scheduler: %v; draining %s (%v), spare %s cordoned by hand", before, node, evicted, spare)

	createPolicy(t, env, gpuLostPolicy("resched", opSucceed, time.Minute))
	rem := newRemediator(t, env)
	rem.start()
	fault := time.Now()
	drLost(t, env, node)
	op := drOp(t, env, node)

	// The drain is done, the operation pod ran, and the replacements run
	// on the healthy nodes while the drained node is still cordoned.
	drWaitPhase(t, env, op.Name, v1alpha1.PhaseVerifying)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := drPods(c, env, ns)
		require.Len(c, list, 4, drDescribe(env, ns))
		for _, p := range list {
			require.NotContains(c, evicted, p.Name, "evicted pod %s is still there", p.Name)
			require.True(c, drReady(&p), "pod %s not Running and Ready%s", p.Name, drDescribe(env, ns))
			require.Contains(c, healthy, p.Spec.NodeName, "pod %s on %s", p.Name, p.Spec.NodeName)
		}
	}, 30*time.Second, 100*time.Millisecond)
	n := getNode(t, env, node)
	require.True(t, n.Spec.Unschedulable, "node %s is cordoned while its pods run elsewhere", node)
	require.Equal(t, op.Name, n.Annotations[v1alpha1.AnnotationCordonedBy])

	drHeal(t, env, node)
	drWaitPhase(t, env, op.Name, v1alpha1.PhaseSucceeded)
	require.False(t, getNode(t, env, node).Spec.Unschedulable, "node %s uncordoned after verification", node)
	s := getNode(t, env, spare)
	require.True(t, s.Spec.Unschedulable, "kubemedic never lifts the SRE's cordon of %s", spare)
	require.NotContains(t, s.Annotations, v1alpha1.AnnotationCordonedBy)

	// The whole record, from before the Deployment to now.
	var stopped []drHistory
	var made []drHistory
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		stopped, made = nil, nil
		hs := pods.histories(c, ns)
		require.Len(c, hs, 4+len(evicted), "four pods and one replacement for each evicted pod")
		for _, h := range hs {
			switch {
			case slices.Contains(evicted, h.Name):
				require.Equal(c, []string{node}, h.Nodes, "evicted pod %s ran only on %s", h.Name, node)
				require.True(c, h.Evicted, "pod %s was stopped through the eviction API", h.Name)
				require.False(c, h.Gone.IsZero(), "pod %s is gone", h.Name)
				stopped = append(stopped, h)
			case h.Seen.Before(fault):
				require.Len(c, h.Nodes, 1, "pod %s moved: %v", h.Name, h.Nodes)
				require.Contains(c, healthy, h.Nodes[0], "pod %s", h.Name)
				require.True(c, h.Stopping.IsZero(), "pod %s on a healthy node was stopped", h.Name)
			default:
				require.True(c, strings.HasPrefix(h.Owner, "ReplicaSet/"+drWorkload+"-"), "replacement %s made by %q", h.Name, h.Owner)
				require.Len(c, h.Nodes, 1, "replacement %s bound to %v", h.Name, h.Nodes)
				require.Contains(c, healthy, h.Nodes[0], "replacement %s never lands on the drained node or the spare", h.Name)
				require.False(c, h.Ready.IsZero(), "replacement %s was Running and Ready", h.Name)
				made = append(made, h)
			}
		}
		require.Len(c, made, len(evicted))
	}, 10*time.Second, 100*time.Millisecond)
	slices.SortFunc(stopped, func(a, b drHistory) int { return a.Stopping.Compare(b.Stopping) })
	slices.SortFunc(made, func(a, b drHistory) int { return a.Seen.Compare(b.Seen) })
	for i, h := range stopped {
		r := made[i]
		t.Logf("Pod %s on %s evicted %s after the fault; replacement %s made %s later, Running and Ready on %s %s after the eviction",
			h.Name, node, h.Stopping.Sub(fault).Round(time.Millisecond), r.Name, r.Seen.Sub(h.Stopping).Round(time.Millisecond),
			r.Nodes[0], r.Ready.Sub(h.Stopping).Round(time.Millisecond))
	}
}

// drStory is one node's story in TestPDBHoldsTheDrain: a pool of nodes, a
// namespace with a two-pod Deployment and its budget, and a policy whose
// drain has mode and timeout.
type drStory struct {
	name    string
	mode    v1alpha1.DrainMode
	timeout time.Duration
	nodes   []string // nodes[0] is drained; the others are cordoned by hand
	ns      string
	op      string
	// Found while the budget held the drain:
	blocked string    // the pod the budget kept
	started time.Time // the drain's start, as the remediator reads it
	held    string    // the operation's message then
}

// drPolicy is gpuLostPolicy for the nodes of pool only, with the drain of
// the story.
func drPolicy(s *drStory) *v1alpha1.RemediationPolicy {
	p := gpuLostPolicy("pdb-"+s.name, opSucceed, s.timeout)
	p.Spec.NodeSelector.MatchLabels = map[string]string{drPoolLabel: s.name}
	p.Spec.Steps[0].Drain.Mode = s.mode
	return p
}

// TestPDBHoldsTheDrain proves that a drain honours PodDisruptionBudgets as
// computed by the real disruption controller, and what its timeout does
// when the budget never allows the eviction. Three stories run side by
// side, each on its own pool of nodes: a Deployment of two 4-GPU pods on
// the node that loses a GPU, a budget of maxUnavailable 1, and no other
// schedulable node in the pool. The drain evicts one pod; its replacement
// stays Pending (the scheduler says why), so the budget refuses the second
// eviction (429) and the operation waits in Draining and says which pod the
// budget keeps and why.
//
//   - room (Evict, 2m): an SRE uncordons the pool's spare node. The
//     replacement runs there and is Ready before the budget lets the
//     second pod go; its replacement runs there too, the drain completes
//     and the operation succeeds.
//   - evict (Evict, 15s): no room ever appears. At the timeout the drain
//     fails (DrainFailed, in status and a Warning Event) and the pod the
//     budget protects still runs: an Evict drain never deletes.
//   - delete (DeleteAfterTimeout, 15s): no room ever appears. At the
//     timeout the drain deletes the pod, bypassing the budget (no eviction
//     condition on it), and the operation goes on; after the verified
//     repair the uncordoned node takes both replacements.
func TestPDBHoldsTheDrain(t *testing.T) {
	env := startCluster(t, drScheduling)
	ctx := t.Context()
	stories := []*drStory{
		{name: "room", mode: v1alpha1.DrainEvict, timeout: 2 * time.Minute},
		{name: "evict", mode: v1alpha1.DrainEvict, timeout: 15 * time.Second},
		{name: "delete", mode: v1alpha1.DrainDeleteAfterTimeout, timeout: 15 * time.Second},
	}
	room, evict, del := stories[0], stories[1], stories[2]
	var namespaces []string
	for i, s := range stories {
		s.ns = "pdb-" + s.name
		namespaces = append(namespaces, s.ns)
		size := 1
		if s == room {
			size = 2
		}
		created, err := env.CreateGPUNodes(ctx, size, localcluster.NodeSpec{NamePrefix: "pdb-" + s.name, Start: 10 * i,
			Labels: map[string]string{drPoolLabel: s.name}})
		require.NoError(t, err)
		for _, nd := range created {
			s.nodes = append(s.nodes, nd.Name)
			setBootID(t, env, nd.Name, "boot-1")
		}
		require.NoError(t, env.WaitNodesReady(ctx, s.nodes...))
		for _, spare := range s.nodes[1:] {
			drCordon(t, env, spare, true)
		}
	}
	pods := drWatchPods(t, env, namespaces...)
	for _, s := range stories {
		_, err := env.CreateWorkload(ctx, localcluster.WorkloadSpec{Namespace: s.ns, Name: drWorkload, Replicas: 2, GPUs: 4,
			NodeSelector: map[string]string{drPoolLabel: s.name}})
		require.NoError(t, err)
		require.NoError(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: drWorkload},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{localcluster.LabelAppName: drWorkload}}},
		}))
	}
	// Both pods run on the node to drain, and the disruption controller
	// allows one disruption.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, s := range stories {
			list := drPods(c, env, s.ns)
			require.Len(c, list, 2, drDescribe(env, s.ns))
			for _, p := range list {
				require.True(c, drReady(&p), "pod %s%s", p.Name, drDescribe(env, s.ns))
				require.Equal(c, s.nodes[0], p.Spec.NodeName)
			}
			pdb := drPDB(c, env, s.ns)
			require.Equal(c, pdb.Generation, pdb.Status.ObservedGeneration, "budget %s/%s not processed yet", s.ns, drWorkload)
			require.Equal(c, int32(1), pdb.Status.DisruptionsAllowed, "budget %s/%s: %+v", s.ns, drWorkload, pdb.Status)
		}
	}, 60*time.Second, 100*time.Millisecond)

	for _, s := range stories {
		createPolicy(t, env, drPolicy(s))
	}
	rem := newRemediator(t, env)
	rem.start()
	for _, s := range stories {
		drLost(t, env, s.nodes[0])
	}
	for _, s := range stories {
		s.op = drOp(t, env, s.nodes[0]).Name
	}

	// Every drain evicted one pod, whose replacement is Pending, and the
	// budget keeps the other: the operations wait in Draining and say so.
	// This must be seen before the 15 s timeouts end.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, s := range stories {
			op := getOp(t, env, s.op)
			require.Equal(c, v1alpha1.PhaseDraining, op.Status.Phase, describeOps(env))
			require.Contains(c, op.Status.Message, "; blocked: "+s.ns+"/"+drWorkload+"-", "operation %s", s.op)
			require.Contains(c, op.Status.Message, "Cannot evict pod as it would violate the pod's disruption budget", "operation %s", s.op)
			drained := findCond(op.Status.Conditions, v1alpha1.OperationDrained)
			require.NotNil(c, drained)
			require.Equal(c, metav1.ConditionFalse, drained.Status)
			require.Equal(c, v1alpha1.ReasonDraining, drained.Reason)

			list := drPods(c, env, s.ns)
			var running, pending []corev1.Pod
			for _, p := range list {
				switch {
				case p.Spec.NodeName == "":
					pending = append(pending, p)
				case p.DeletionTimestamp == nil:
					running = append(running, p)
				}
			}
			require.Len(c, running, 1, "one pod left on the node%s", drDescribe(env, s.ns))
			require.Len(c, pending, 1, "one replacement waiting%s", drDescribe(env, s.ns))
			require.Contains(c, drPending(pending[0]), "node(s) were unschedulable", "the scheduler on %s", pending[0].Name)
			require.Contains(c, op.Status.Message, "blocked: "+s.ns+"/"+running[0].Name+": ")
			pdb := drPDB(c, env, s.ns)
			require.Equal(c, int32(0), pdb.Status.DisruptionsAllowed, "budget %s: %+v", s.ns, pdb.Status)
			s.blocked, s.started, s.held = running[0].Name, drained.LastTransitionTime.Time, op.Status.Message
		}
	}, 30*time.Second, 100*time.Millisecond)
	for _, s := range stories {
		t.Logf("%s: the budget holds the drain: %s", s.name, s.held)
	}

	// room: the SRE uncordons the spare. The replacement runs there, the
	// budget lets the kept pod go, and its replacement runs there too.
	spare := room.nodes[1]
	drCordon(t, env, spare, false)
	uncordoned := time.Now()
	drWaitPhase(t, env, room.op, v1alpha1.PhaseVerifying)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := drPods(c, env, room.ns)
		require.Len(c, list, 2, drDescribe(env, room.ns))
		for _, p := range list {
			require.True(c, drReady(&p), "pod %s%s", p.Name, drDescribe(env, room.ns))
			require.Equal(c, spare, p.Spec.NodeName, "pod %s", p.Name)
		}
	}, 30*time.Second, 100*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		hs := pods.histories(c, room.ns)
		require.Len(c, hs, 4, "two pods and two replacements")
		kept := drHistoryOf(c, hs, room.blocked)
		require.True(c, kept.Evicted, "pod %s was evicted through the API once the budget allowed it", kept.Name)
		var first drHistory
		for _, h := range hs {
			if h.Seen.After(kept.Stopping) || h.Name == kept.Name || !h.Stopping.IsZero() {
				continue
			}
			first = h // the first replacement: made before the kept pod went
		}
		require.NotEmpty(c, first.Name, "a replacement existed before %s went", kept.Name)
		require.Equal(c, []string{spare}, first.Nodes)
		require.False(c, first.Ready.IsZero())
		require.True(c, first.Ready.Before(kept.Stopping), "replacement %s Ready at %s, before the budget let %s go at %s",
			first.Name, first.Ready.Format(time.StampMilli), kept.Name, kept.Stopping.Format(time.StampMilli))
		t.Logf("room: uncordoned; replacement %s Ready on %s %s later; the kept pod %s evicted %s after that",
			first.Name, spare, first.Ready.Sub(uncordoned).Round(time.Millisecond), kept.Name, kept.Stopping.Sub(first.Ready).Round(time.Millisecond))
	}, 10*time.Second, 100*time.Millisecond)

	// evict: the drain fails at its timeout; the kept pod still runs.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		op := getOp(t, env, evict.op)
		require.Equal(c, v1alpha1.PhaseFailed, op.Status.Phase, describeOps(env))
		want := fmt.Sprintf("drain timed out after 15s: 1 pod left: %s/%s", evict.ns, evict.blocked)
		require.Equal(c, v1alpha1.ReasonDrainFailed+": "+want, op.Status.Message)
		drained := findCond(op.Status.Conditions, v1alpha1.OperationDrained)
		require.NotNil(c, drained)
		require.Equal(c, metav1.ConditionFalse, drained.Status)
		require.Equal(c, v1alpha1.ReasonDrainTimeout, drained.Reason)
		require.Equal(c, want, drained.Message)
		require.Contains(c, eventReasons(c, env, "NodeOperation", evict.op), v1alpha1.ReasonDrainFailed)
	}, evict.timeout+30*time.Second, 100*time.Millisecond)
	kept := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: evict.ns, Name: evict.blocked}, kept))
	require.True(t, drReady(kept), "an Evict drain never deletes the pod its budget keeps")
	require.Equal(t, evict.nodes[0], kept.Spec.NodeName)
	require.False(t, drEvicted(kept))
	pdb := drPDB(t, env, evict.ns)
	require.Equal(t, int32(0), pdb.Status.DisruptionsAllowed, "%+v", pdb.Status)
	require.Equal(t, int32(1), pdb.Status.CurrentHealthy, "%+v", pdb.Status)

	// delete: at the timeout the drain deletes the kept pod, bypassing the
	// budget, and the operation goes on.
	drWaitPhase(t, env, del.op, v1alpha1.PhaseVerifying)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		h := drHistoryOf(c, pods.histories(c, del.ns), del.blocked)
		require.False(c, h.Gone.IsZero(), "pod %s deleted", h.Name)
		require.False(c, h.Evicted, "pod %s deleted outright, not evicted", h.Name)
		deadline := del.started.Add(del.timeout)
		require.False(c, h.Stopping.Before(deadline), "pod %s deleted at %s, before the drain timeout at %s",
			h.Name, h.Stopping.Format(time.StampMilli), deadline.Format(time.StampMilli))
		require.Less(c, h.Stopping.Sub(deadline), plan.DrainPoll+2*time.Second, "pod %s deleted long after the timeout", h.Name)
		t.Logf("delete: pod %s deleted %s after the drain started (timeout %s)", h.Name, h.Stopping.Sub(del.started).Round(time.Millisecond), del.timeout)
	}, 10*time.Second, 100*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := drPods(c, env, del.ns)
		require.Len(c, list, 2, drDescribe(env, del.ns))
		for _, p := range list {
			require.Empty(c, p.Spec.NodeName, "both replacements wait while the node is cordoned%s", drDescribe(env, del.ns))
		}
		pdb := drPDB(c, env, del.ns)
		require.Equal(c, int32(0), pdb.Status.CurrentHealthy, "the budget was bypassed: %+v", pdb.Status)
	}, 10*time.Second, 100*time.Millisecond)

	// Both repaired operations succeed; the deleted pods' replacements run
	// on their uncordoned node.
	for _, s := range []*drStory{room, del} {
		drHeal(t, env, s.nodes[0])
	}
	for _, s := range []*drStory{room, del} {
		drWaitPhase(t, env, s.op, v1alpha1.PhaseSucceeded)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := drPods(c, env, del.ns)
		require.Len(c, list, 2, drDescribe(env, del.ns))
		for _, p := range list {
			require.True(c, drReady(&p), "pod %s%s", p.Name, drDescribe(env, del.ns))
			require.Equal(c, del.nodes[0], p.Spec.NodeName)
		}
	}, 30*time.Second, 100*time.Millisecond)
}

// drPDB reads the budget of the workload in ns.
func drPDB(t require.TestingT, env *localcluster.Cluster, ns string) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: drWorkload}, pdb))
	return pdb
}
