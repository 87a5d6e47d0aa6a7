package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
)

// The timeline follows the workload pods the way the scheduler moves them:
// a pod a drain evicted and where its controller's replacement was
// scheduled; a pod the scheduler could not place, with its reason, and
// where it went once something freed a place (the janitor stopping an
// idle workload on that node, kubemedic removing a GPU's DeviceTaintRule).

// Reschedule is a pod a drain evicted and the pod its controller made
// instead, where the scheduler placed it.
type Reschedule struct {
	Namespace string
	// Evicted left From at EvictedAt (when the API server began deleting
	// it, or when the timeline found it gone).
	Evicted, From string
	EvictedAt     time.Time
	// Pod was scheduled on To at ScheduledAt (when the timeline saw it).
	Pod, To     string
	ScheduledAt time.Time
}

// Wait is a pod the scheduler could not place at first, and where it
// went.
type Wait struct {
	Namespace, Pod string
	// Reason is the scheduler's message, Since when it was first seen.
	Reason string
	Since  time.Time
	// Node and ScheduledAt: where and when it was placed at last.
	Node        string
	ScheduledAt time.Time
	// GPU: the pod asks for GPUs, by the device plugin or a ResourceClaim.
	GPU bool
	// After says what freed its place on Node during the wait, e.g. "the
	// janitor stopped deployment research-interactive/notebook-3-1" or
	// "kubemedic removed DeviceTaintRule R (GPU …)"; empty when nothing the
	// timeline saw.
	After string
	// Devices are the DRA devices its ResourceClaims were allocated, as
	// driver/pool/device.
	Devices []string
}

// Preemption is a background GPU test a real pod preempted: the test pod
// the timeline saw running on Node, when the scheduler marked it for
// preemption (or the timeline found it gone), and the pod bound to Node
// after it.
type Preemption struct {
	Namespace, Test, Node string
	StartedAt             time.Time
	// PreemptedAt is when the timeline saw the pod's DisruptionTarget
	// condition, or found it gone; Reason is the condition's reason
	// (PreemptionByScheduler), empty when it was gone.
	PreemptedAt time.Time
	Reason      string
	// Pod (namespace/name) was bound to Node at BoundAt, after the test
	// was preempted; empty when the timeline saw none.
	Pod     string
	BoundAt time.Time
}

// testState is what the timeline remembers of a background test pod.
type testState struct {
	ns, name, node string
	started        time.Time
	// ended: the pod Succeeded or Failed (a result, not a preemption).
	ended     bool
	preempted *Preemption
}

// podState is what the timeline remembers of a pod.
type podState struct {
	ns, name, node string
	// ctrl is its controller's UID: a ReplicaSet's or a Job's.
	ctrl    types.UID
	created time.Time
	gpu     bool
	// pendingSince and pendingMsg: when and why the scheduler first could
	// not place it.
	pendingSince time.Time
	pendingMsg   string
	gone         bool
}

// eviction is a pod a drain evicted whose replacement is not placed yet.
type eviction struct {
	pod, node string
	at        time.Time
	// created is the evicted pod's creation: its replacement is newer.
	created time.Time
}

// freed is something that freed GPUs on a node: a reclaim, a rule removed.
type freed struct {
	node, what string
	at         time.Time
}

// Reschedules are the evicted pods whose replacement the timeline saw
// placed, in order. Read it after Run has returned.
func (t *Timeline) Reschedules() []Reschedule { return append([]Reschedule(nil), t.reschedules...) }

// Waits are the pods the scheduler could not place at first and placed
// later, in order. Read it after Run has returned.
func (t *Timeline) Waits() []Wait { return append([]Wait(nil), t.waits...) }

// Preemptions are the background tests the timeline saw start and then
// preempted, in order. Read it after Run has returned.
func (t *Timeline) Preemptions() []Preemption {
	out := make([]Preemption, len(t.preemptions))
	for i, p := range t.preemptions {
		out[i] = *p
	}
	return out
}

// pollTest follows a background test pod: it started on its node's free
// GPUs, it was preempted (the API server's DisruptionTarget condition), or
// it ended. A preemption frees the node's GPUs for the pod that caused it
// (boundAfterPreemption).
func (t *Timeline) pollTest(p *corev1.Pod, now time.Time) {
	st := t.tests[p.UID]
	if st == nil {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return // waiting for the GPUs: most do, and are put off; not the story
		}
		st = &testState{ns: p.Namespace, name: p.Name, node: p.Spec.NodeName, started: now}
		t.tests[p.UID] = st
		t.line("testing", "pod/"+p.Namespace+"/"+p.Name, fmt.Sprintf("background GPU test of %s started: the scheduler placed it on the node's free GPUs at priority class %s; any real pod preempts it",
			st.node, p.Spec.PriorityClassName))
	}
	if st.ended || st.preempted != nil {
		return
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		st.ended = true
		return
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			t.testPreempted(st, now, c.Reason, fmt.Sprintf("%s: %s", c.Reason, c.Message))
			return
		}
	}
}

// testEnded reports whether the remediator ended the test: the node's
// record has its result (the pod ended and was deleted between two polls),
// or a new attempt replaced it after no answer.
func (t *Timeline) testEnded(ctx context.Context, st *testState) bool {
	var nv v1alpha1.NodeValidation
	if err := t.Kube.Get(ctx, client.ObjectKey{Name: st.node}, &nv); err != nil {
		return false
	}
	if l := nv.Status.Last; l != nil && l.PodName == st.name {
		return true
	}
	c := nv.Status.Current
	return c != nil && c.PodName != st.name
}

// testPreempted records a background test that was preempted, or gone
// before it ended.
func (t *Timeline) testPreempted(st *testState, now time.Time, reason, why string) {
	st.preempted = &Preemption{Namespace: st.ns, Test: st.name, Node: st.node, StartedAt: st.started, PreemptedAt: now, Reason: reason}
	t.preemptions = append(t.preemptions, st.preempted)
	t.line("preempted", "pod/"+st.ns+"/"+st.name, fmt.Sprintf("background GPU test on %s stopped after %s, no result: %s", st.node, now.Sub(st.started).Round(time.Second), why))
	t.freed = append(t.freed, freed{node: st.node, what: "the scheduler preempted background test " + st.name, at: now})
}

// boundAfterPreemption is the preemption of a background test on node
// that a pod placed there now follows: the latest one that no pod
// followed yet, from at most preemptionWindow ago.
func (t *Timeline) boundAfterPreemption(node string, now time.Time) *Preemption {
	for i := len(t.preemptions) - 1; i >= 0; i-- {
		if p := t.preemptions[i]; p.Node == node && p.Pod == "" && now.Sub(p.PreemptedAt) <= preemptionWindow {
			return p
		}
	}
	return nil
}

// preemptionWindow is how long after a preemption a pod bound to the node
// is taken for the one that caused it: the victim's grace period (5 s)
// and a few polls.
const preemptionWindow = 15 * time.Second

// pollRules prints kubemedic's DeviceTaintRules as they come and go, and
// records a removal as GPUs freed on the rule's node. An API server that
// does not serve them has none.
func (t *Timeline) pollRules(ctx context.Context) error {
	var rules resourcev1beta2.DeviceTaintRuleList
	if err := t.Kube.List(ctx, &rules, client.MatchingLabels{devicetaint.LabelManagedBy: devicetaint.ManagedBy}); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("list devicetaintrules: %w", err)
	}
	now := time.Now()
	seen := map[string]bool{}
	for _, r := range rules.Items {
		seen[r.Name] = true
		if _, known := t.rules[r.Name]; known {
			continue
		}
		gpu := ruleGPU(&r)
		t.rules[r.Name] = gpu
		node := r.Annotations[devicetaint.AnnotationNode]
		tt := r.Spec.Taint
		t.line("excluded", "devicetaintrule/"+r.Name, fmt.Sprintf("%s on %s: tainted %s=%s:%s, no new claim gets it; the node stays schedulable", gpu, node, tt.Key, tt.Value, tt.Effect))
	}
	for name, gpu := range t.rules {
		if seen[name] {
			continue
		}
		delete(t.rules, name)
		node := nodeOfRule(gpu)
		t.line("released", "devicetaintrule/"+name, gpu+": removed, claims may get it again")
		t.freed = append(t.freed, freed{node: node, what: "kubemedic removed DeviceTaintRule " + name, at: now})
	}
	return nil
}

// ruleGPU names a rule's GPU: "GPU <uuid> (driver/pool/device)".
func ruleGPU(r *resourcev1beta2.DeviceTaintRule) string {
	dev := "?"
	if s := r.Spec.DeviceSelector; s != nil {
		dev = ptr.Deref(s.Driver, "") + "/" + ptr.Deref(s.Pool, "") + "/" + ptr.Deref(s.Device, "")
	}
	return fmt.Sprintf("GPU %s (%s)", r.Labels[devicetaint.LabelGPUUUID], dev)
}

// nodeOfRule is the pool of a ruleGPU string, which NVIDIA's driver names
// after the node.
func nodeOfRule(gpu string) string {
	_, dev, _ := strings.Cut(gpu, "(")
	parts := strings.Split(strings.TrimSuffix(dev, ")"), "/")
	if len(parts) == 3 {
		return parts[1]
	}
	return ""
}

// pollReclaims prints the workloads the janitor stopped, and records each
// as GPUs freed on the node of the pod that was idle.
func (t *Timeline) pollReclaims(ctx context.Context) error {
	var deps appsv1.DeploymentList
	if err := t.Kube.List(ctx, &deps); err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	var sets appsv1.StatefulSetList
	if err := t.Kube.List(ctx, &sets); err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	type workload struct{ kind, ns, name, by string }
	var all []workload
	for _, d := range deps.Items {
		all = append(all, workload{"deployment", d.Namespace, d.Name, d.Annotations[v1alpha1.AnnotationReclaimedBy]})
	}
	for _, s := range sets.Items {
		all = append(all, workload{"statefulset", s.Namespace, s.Name, s.Annotations[v1alpha1.AnnotationReclaimedBy]})
	}
	now := time.Now()
	for _, wl := range all {
		key := wl.kind + "/" + wl.ns + "/" + wl.name
		if wl.by == "" {
			delete(t.reclaimed, key)
			continue
		}
		if t.reclaimed[key] {
			continue
		}
		t.reclaimed[key] = true
		// "janitor: pod NAME, rule RULE[, TIME]"
		pod, rest, _ := strings.Cut(strings.TrimPrefix(wl.by, "janitor: pod "), ", rule ")
		rule, _, _ := strings.Cut(rest, ",")
		node := t.lastNode[wl.ns+"/"+pod]
		t.line("reclaimed", key, fmt.Sprintf("scaled to 0 by the janitor: pod %s on %s was idle (rule %s)", pod, node, rule))
		t.freed = append(t.freed, freed{node: node, what: "the janitor stopped " + wl.name, at: now})
	}
	return nil
}

// pollPods follows the workload pods (not the operation pods): evictions
// first, then placements, so that a replacement seen in the same poll as
// its evicted pod is matched with it.
func (t *Timeline) pollPods(ctx context.Context) error {
	var pods corev1.PodList
	if err := t.Kube.List(ctx, &pods); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	now := time.Now()
	var live []*corev1.Pod
	present := map[types.UID]bool{}
	liveTests := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if isBackgroundTest(p) {
			liveTests[p.UID] = true
			t.pollTest(p, now)
			continue
		}
		if p.Labels[v1alpha1.LabelTemplate] != "" || p.Labels[v1alpha1.LabelOperation] != "" {
			continue
		}
		present[p.UID] = true
		if st := t.pods[p.UID]; st != nil && p.DeletionTimestamp != nil && !st.gone {
			t.podGone(p.UID, st, p, deletionBegan(p))
		}
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	for uid, st := range t.tests {
		if liveTests[uid] {
			continue
		}
		if !st.ended && st.preempted == nil && !t.testEnded(ctx, st) {
			t.testPreempted(st, now, "", "the pod is gone before it ended (preempted, drained or deleted)")
		}
		delete(t.tests, uid)
	}
	for uid, st := range t.pods {
		if present[uid] {
			continue
		}
		if !st.gone {
			t.podGone(uid, st, nil, now)
		}
		delete(t.pods, uid)
		delete(t.stopped, uid)
	}
	for _, p := range live {
		st := t.pods[p.UID]
		if st == nil {
			st = &podState{ns: p.Namespace, name: p.Name, created: p.CreationTimestamp.Time, gpu: asksGPU(p)}
			if c := metav1.GetControllerOf(p); c != nil {
				st.ctrl = c.UID
			}
			t.pods[p.UID] = st
		}
		if p.Spec.NodeName == "" {
			if msg := unschedulableMessage(p); msg != "" && st.pendingSince.IsZero() {
				st.pendingSince, st.pendingMsg = now, schedulerReason(msg)
				t.line("pending", "pod/"+p.Namespace+"/"+p.Name, "the scheduler cannot place it: "+st.pendingMsg)
			}
			continue
		}
		if st.node != "" {
			continue
		}
		st.node = p.Spec.NodeName
		t.lastNode[p.Namespace+"/"+p.Name] = st.node
		t.scheduled(ctx, st, p, now)
	}
	return nil
}

// podGone records a pod that is being deleted or is gone: an eviction
// when a drain stopped it (the API server's DisruptionTarget condition, an
// owner notice of a NodeOperation, or its node cordoned).
func (t *Timeline) podGone(uid types.UID, st *podState, p *corev1.Pod, at time.Time) {
	st.gone = true
	if st.node == "" {
		return
	}
	op := t.stopped[uid]
	if op == "" && !evictedByAPI(p) && t.cordoned[st.node] == "" {
		return
	}
	by := "by a drain"
	if op != "" {
		by = "by the drain of nodeoperation/" + op
	}
	t.line("evicted", "pod/"+st.ns+"/"+st.name, fmt.Sprintf("from %s %s", st.node, by))
	if st.ctrl != "" {
		t.evictions[st.ctrl] = append(t.evictions[st.ctrl], eviction{pod: st.name, node: st.node, at: at, created: st.created})
	}
}

// scheduled prints where a pod was placed, when the story is in it: it
// replaces an evicted pod, or it waited.
func (t *Timeline) scheduled(ctx context.Context, st *podState, p *corev1.Pod, now time.Time) {
	var parts []string
	var move *Reschedule
	// A replacement is a newer pod of the evicted pod's controller. Not
	// "created after the eviction": the timeline may find the evicted pod
	// gone a poll later than its replacement was made.
	if evs := t.evictions[st.ctrl]; st.ctrl != "" && len(evs) > 0 && st.name != evs[0].pod && !st.created.Before(evs[0].created) {
		ev := evs[0]
		t.evictions[st.ctrl] = evs[1:]
		move = &Reschedule{Namespace: st.ns, Evicted: ev.pod, From: ev.node, EvictedAt: ev.at, Pod: st.name, To: st.node, ScheduledAt: now}
	}
	if pre := t.boundAfterPreemption(st.node, now); pre != nil {
		pre.Pod, pre.BoundAt = st.ns+"/"+st.name, now
		text := fmt.Sprintf("bound to %s, on the GPUs of background test %s, which the scheduler preempted for it", st.node, pre.Test)
		if d := now.Sub(pre.PreemptedAt).Round(100 * time.Millisecond); d > 0 {
			text += fmt.Sprintf(" (seen %s after the preemption)", d)
		}
		parts = append(parts, text)
	}
	if !st.pendingSince.IsZero() {
		wt := Wait{Namespace: st.ns, Pod: st.name, Reason: st.pendingMsg, Since: st.pendingSince, Node: st.node, ScheduledAt: now, GPU: st.gpu}
		for i := len(t.freed) - 1; i >= 0; i-- {
			if f := t.freed[i]; f.node == st.node && !f.at.Before(st.pendingSince.Add(-timelinePoll)) {
				wt.After = f.what
				break
			}
		}
		wt.Devices = t.claimDevices(ctx, p)
		what := ""
		if st.gpu {
			what = " for a GPU"
		}
		text := fmt.Sprintf("waited %s%s; scheduled on %s", now.Sub(st.pendingSince).Round(time.Second), what, st.node)
		if wt.After != "" {
			text += " after " + wt.After
		}
		if len(wt.Devices) > 0 {
			text += "; its claim got " + strings.Join(wt.Devices, ", ")
		}
		parts = append(parts, text)
		t.waits = append(t.waits, wt)
	} else if move != nil {
		parts = append(parts, "on "+st.node)
	}
	if move != nil {
		parts = append(parts, fmt.Sprintf("(replaces %s evicted from %s)", move.Evicted, move.From))
		t.reschedules = append(t.reschedules, *move)
	}
	if len(parts) > 0 {
		t.line("scheduled", "pod/"+st.ns+"/"+st.name, strings.Join(parts, " "))
	}
}

// claimDevices are the devices the pod's ResourceClaims were allocated,
// driver/pool/device.
func (t *Timeline) claimDevices(ctx context.Context, p *corev1.Pod) []string {
	var out []string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName == nil {
			continue
		}
		var c resourcev1.ResourceClaim
		if err := t.Kube.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: *s.ResourceClaimName}, &c); err != nil || c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
		}
	}
	return out
}

// schedulerReason is the scheduler's message without what its post-filter
// plugins add after the first sentence ("0/17 nodes are available: 1
// Insufficient nvidia.com/gpu, 16 node(s) didn't match Pod's node
// affinity/selector. preemption: …").
func schedulerReason(msg string) string {
	msg, _, _ = strings.Cut(strings.TrimSpace(msg), ". ")
	return oneLine(strings.TrimSuffix(msg, "."), 160)
}

// deletionBegan is when the API server began deleting p: its
// deletionTimestamp is the end of its grace period, not the start (an
// evicted pod's replacement is created before it).
func deletionBegan(p *corev1.Pod) time.Time {
	at := p.DeletionTimestamp.Time
	if g := p.DeletionGracePeriodSeconds; g != nil {
		at = at.Add(-time.Duration(*g) * time.Second)
	}
	return at
}

// evictedByAPI reports whether the API server marked the pod as evicted
// through the eviction subresource (a drain's).
func evictedByAPI(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

// asksGPU reports whether the pod asks for GPUs: the device plugin's
// resources (whole GPUs or MIG instances) or a ResourceClaim.
func asksGPU(p *corev1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, c := range p.Spec.Containers {
		for name := range c.Resources.Requests {
			if strings.HasPrefix(string(name), "nvidia.com/") {
				return true
			}
		}
	}
	return false
}
