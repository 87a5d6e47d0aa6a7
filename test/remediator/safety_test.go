package remediator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Trigger conditions of the safety tests, as the detectors write them
// through node-problem-detector: the rule reason, and the specific reason as
// the first word of the message.
const (
	xidMessage = "XidResetRequired: Xid 48 on 0000:3b:00.0: double-bit ECC error"
	nfsMessage = "MountHung: /mnt/data: stat hung"
)

// safetyPolicy is a policy on every GPU node with one cordon-and-run step of
// opSucceed that verifies after healthyFor.
func safetyPolicy(name, condType string, hold, healthyFor time.Duration, safety v1alpha1.Safety) *v1alpha1.RemediationPolicy {
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: localcluster.LabelGPUCount, Operator: metav1.LabelSelectorOpExists}}},
			Conditions:   []v1alpha1.ConditionMatch{{Type: condType, Status: corev1.ConditionTrue, For: dur(hold)}},
			Steps: []v1alpha1.RemediationStep{{
				Name: "reset", StepAction: v1alpha1.StepAction{Operation: opSucceed, Cordon: true, Timeout: dur(30 * time.Second)},
				HealthyFor: dur(healthyFor), RecoveryTimeout: dur(60 * time.Second),
			}},
			Safety: safety,
		},
	}
}

// runningPhases are the phases in which an operation holds a budget slot.
var runningPhases = map[v1alpha1.NodeOperationPhase]bool{
	v1alpha1.PhaseCordoning: true, v1alpha1.PhaseDraining: true, v1alpha1.PhaseRunning: true, v1alpha1.PhaseVerifying: true,
}

// opWatch watches every NodeOperation from before a test acts and checks the
// safety invariants after every event, in the order the API server wrote
// them: no more than maxRunning operations in a running phase, no more than
// maxPerZone in one zone (when zoneOf is set), no node with two unfinished
// operations, and no two operations (by UID) for one node, policy, episode
// and step. When an operation reaches Verifying for the first time, it clears
// the node's trigger condition so that the operation verifies.
type opWatch struct {
	t          *testing.T
	env        *localcluster.Cluster
	maxRunning int
	maxPerZone int
	zoneOf     map[string]string // node → zone; nil: no zone check

	cancel context.CancelFunc
	wg     sync.WaitGroup
	clears chan *v1alpha1.NodeOperation
	once   sync.Once

	// mu guards everything below.
	mu         sync.Mutex
	ops        map[string]*v1alpha1.NodeOperation // current state by name
	seen       map[string]bool                    // every operation ever seen
	keys       map[string]map[types.UID]bool      // node/policy/episode/step → UIDs
	verifying  map[string]bool                    // operations whose condition was cleared
	waiting    map[string]bool                    // messages seen in WaitingForBudget
	admitted   []time.Time                        // when operations entered a running phase
	peak       int
	peakZone   int
	events     int
	violations []string
}

func watchOps(t *testing.T, env *localcluster.Cluster, maxRunning, maxPerZone int, zoneOf map[string]string) *opWatch {
	t.Helper()
	w := &opWatch{t: t, env: env, maxRunning: maxRunning, maxPerZone: maxPerZone, zoneOf: zoneOf,
		clears: make(chan *v1alpha1.NodeOperation, 256),
		ops:    map[string]*v1alpha1.NodeOperation{}, seen: map[string]bool{}, keys: map[string]map[types.UID]bool{},
		verifying: map[string]bool{}, waiting: map[string]bool{}}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	var list v1alpha1.NodeOperationList
	require.NoError(t, wc.List(ctx, &list))
	for i := range list.Items {
		w.observe(watch.Added, &list.Items[i])
	}
	// Open the first watch here, so that it is in place before the caller
	// goes on.
	wi, err := watchFrom(ctx, wc, list.ResourceVersion)
	require.NoError(t, err)
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		w.run(ctx, wc, wi, list.ResourceVersion)
	}()
	go func() {
		defer w.wg.Done()
		w.clearConditions(ctx)
	}()
	t.Cleanup(w.stop)
	return w
}

func watchFrom(ctx context.Context, wc client.WithWatch, rv string) (watch.Interface, error) {
	return wc.Watch(ctx, &v1alpha1.NodeOperationList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
}

// run consumes the watch, resuming from the last resource version when the
// API server closes it.
func (w *opWatch) run(ctx context.Context, wc client.WithWatch, wi watch.Interface, rv string) {
	for {
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Error:
				if ctx.Err() != nil {
					wi.Stop()
					return
				}
				w.fail("watch error, events may be lost: %v", apierrors.FromObject(ev.Object))
				wi.Stop()
				return
			case watch.Bookmark:
				if m, err := apimeta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
			default:
				op, ok := ev.Object.(*v1alpha1.NodeOperation)
				if !ok {
					w.fail("watch sent a %T", ev.Object)
					continue
				}
				rv = op.ResourceVersion
				w.observe(ev.Type, op)
			}
		}
		wi.Stop()
		if ctx.Err() != nil {
			return
		}
		var err error
		if wi, err = watchFrom(ctx, wc, rv); err != nil {
			if ctx.Err() == nil {
				w.fail("resume watch at %s: %v", rv, err)
			}
			return
		}
	}
}

// observe applies one event and checks the invariants on the state after it.
func (w *opWatch) observe(typ watch.EventType, op *v1alpha1.NodeOperation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if prev := w.ops[op.Name]; typ != watch.Deleted && runningPhases[op.Status.Phase] && (prev == nil || !runningPhases[prev.Status.Phase]) {
		w.admitted = append(w.admitted, time.Now())
	}
	if typ == watch.Deleted {
		delete(w.ops, op.Name)
	} else {
		w.ops[op.Name] = op
		w.seen[op.Name] = true
	}
	if l := op.Labels; l[v1alpha1.LabelPolicy] != "" {
		key := strings.Join([]string{op.Spec.NodeName, l[v1alpha1.LabelPolicy], l[v1alpha1.LabelEpisode], l[v1alpha1.LabelStepIndex]}, "/")
		if w.keys[key] == nil {
			w.keys[key] = map[types.UID]bool{}
		}
		w.keys[key][op.UID] = true
		if len(w.keys[key]) > 1 {
			w.violate("two operations for node/policy/episode/step %s (now %s)", key, op.Name)
		}
	}
	if op.Status.Phase == v1alpha1.PhaseWaitingForBudget {
		w.waiting[op.Status.Message] = true
	}
	if typ != watch.Deleted && op.Status.Phase == v1alpha1.PhaseVerifying && !w.verifying[op.Name] {
		w.verifying[op.Name] = true
		w.clears <- op
	}

	var running []string
	perZone := map[string][]string{}
	unfinished := map[string][]string{}
	for _, o := range w.ops {
		if !o.Status.Phase.Finished() {
			unfinished[o.Spec.NodeName] = append(unfinished[o.Spec.NodeName], o.Name)
		}
		if !runningPhases[o.Status.Phase] {
			continue
		}
		desc := fmt.Sprintf("%s(%s)", o.Name, o.Status.Phase)
		running = append(running, desc)
		if w.zoneOf != nil {
			z := w.zoneOf[o.Spec.NodeName]
			perZone[z] = append(perZone[z], desc)
		}
	}
	w.peak = max(w.peak, len(running))
	if len(running) > w.maxRunning {
		sort.Strings(running)
		w.violate("after %s %s: %d operations running, limit %d: %v", typ, op.Name, len(running), w.maxRunning, running)
	}
	for z, in := range perZone {
		w.peakZone = max(w.peakZone, len(in))
		if w.maxPerZone > 0 && len(in) > w.maxPerZone {
			sort.Strings(in)
			w.violate("after %s %s: %d operations running in zone %s, limit %d: %v", typ, op.Name, len(in), z, w.maxPerZone, in)
		}
	}
	for node, names := range unfinished {
		if len(names) > 1 {
			sort.Strings(names)
			w.violate("after %s %s: node %s has %d unfinished operations: %v", typ, op.Name, node, len(names), names)
		}
	}
}

// violate records a broken invariant; mu must be held.
func (w *opWatch) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// fail records a watch failure: events may have been missed.
func (w *opWatch) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violate(format, args...)
}

// clearConditions sets the trigger condition of each operation that reached
// Verifying to False, as the detector would once the operation fixed the node.
func (w *opWatch) clearConditions(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-w.clears:
			if op.Spec.Trigger == nil {
				continue
			}
			err := w.env.ClearNodeCondition(ctx, op.Spec.NodeName, op.Spec.Trigger.Type, v1alpha1.DetectReason, "OK")
			if err != nil && ctx.Err() == nil {
				w.t.Errorf("clear condition of node %s: %v", op.Spec.NodeName, err)
			}
		}
	}
}

// stop ends the watch and waits for its goroutines.
func (w *opWatch) stop() {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
}

// check stops the watch and fails the test on every broken invariant.
func (w *opWatch) check() {
	w.t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(w.t, w.violations, "safety invariants broken (of %d events)", w.events)
	w.t.Logf("watched %d operation events; at most %d running at once, at most %d in one zone", w.events, w.peak, w.peakZone)
}

func (w *opWatch) seenCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// admittedSince counts the operations that started at or after t.
func (w *opWatch) admittedSince(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.admitted {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// waitingFor reports whether fewer than n operations exist or one of them
// has yet to start.
func (w *opWatch) waitingFor(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ops) < n {
		return true
	}
	for _, o := range w.ops {
		if !o.Status.Phase.Finished() && !runningPhases[o.Status.Phase] {
			return true
		}
	}
	return false
}

func (w *opWatch) waitingMessages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.waiting))
	for m := range w.waiting {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// nodeZones maps each node to its zone label.
func nodeZones(t *testing.T, env *localcluster.Cluster, nodes []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n] = getNode(t, env, n).Labels[corev1.LabelTopologyZone]
	}
	return out
}

// setConditions sets a condition on the nodes at once, one goroutine each.
func setConditions(t *testing.T, env *localcluster.Cluster, nodes []string, typ string, status corev1.ConditionStatus, msg string) {
	t.Helper()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			errs[i] = env.SetNodeCondition(context.Background(), n, corev1.NodeCondition{
				Type: corev1.NodeConditionType(typ), Status: status, Reason: v1alpha1.DetectReason, Message: msg})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// requireAllSucceeded waits until every node has exactly one operation and
// it has succeeded.
func requireAllSucceeded(t *testing.T, env *localcluster.Cluster, nodes []string, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, n := range nodes {
			ops := opsOnNode(c, env, n)
			require.Len(c, ops, 1, "node %s: %s", n, describeOps(env))
			require.Equal(c, v1alpha1.PhaseSucceeded, ops[0].Status.Phase, "node %s: %s", n, describeOps(env))
		}
	}, timeout, 250*time.Millisecond)
}

func getPolicy(t require.TestingT, env *localcluster.Cluster, name string) *v1alpha1.RemediationPolicy {
	p := &v1alpha1.RemediationPolicy{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p))
	return p
}

// breakerCond is the policy's BreakerOpen condition; it fails when missing.
func breakerCond(t require.TestingT, p *v1alpha1.RemediationPolicy) metav1.Condition {
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen)
	require.NotNil(t, c, "policy %s has no %s condition", p.Name, v1alpha1.PolicyBreakerOpen)
	return *c
}

// hasEvent reports whether an events.k8s.io Event of the type and reason
// regards the object.
func hasEvent(t require.TestingT, env *localcluster.Cluster, kind, name, typ, reason string) bool {
	var list eventsv1.EventList
	require.NoError(t, env.Client.List(context.Background(), &list))
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Type == typ && e.Reason == reason {
			return true
		}
	}
	return false
}

// TestBudgets: ten nodes in two zones turn unhealthy at once under a policy
// with maxConcurrent 2 and one operation per zone. A watch on every
// NodeOperation checks after every event that no more than two run and never
// two in one zone; the others wait in WaitingForBudget naming the limit, and
// all ten end Succeeded.
func TestBudgets(t *testing.T) {
	env := startCluster(t)
	nodes := gpuNodes(t, env, "budget", 10, "zone-a", "zone-b")
	zoneOf := nodeZones(t, env, nodes)
	require.ElementsMatch(t, []string{"zone-a", "zone-b"}, uniq(zoneOf))

	const name = "budgets"
	two, one, all := intstr.FromInt32(2), intstr.FromInt32(1), intstr.FromString("100%")
	createPolicy(t, env, safetyPolicy(name, v1alpha1.ConditionGPUXidError, time.Second, time.Second, v1alpha1.Safety{
		MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(0),
		FailureDomain: &v1alpha1.FailureDomain{TopologyKey: corev1.LabelTopologyZone, MaxConcurrent: one},
	}))
	w := watchOps(t, env, 2, 1, zoneOf)
	rem := newRemediator(t, env)
	rem.start()

	setConditions(t, env, nodes, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, xidMessage)
	requireAllSucceeded(t, env, nodes, 75*time.Second)

	w.check()
	require.Equal(t, 2, w.peak, "two operations, one per zone, ran at once at some point")
	require.Equal(t, 1, w.peakZone)
	require.Equal(t, len(nodes), w.seenCount(), "one operation per node")

	var named int
	for _, msg := range w.waitingMessages() {
		switch {
		case strings.HasPrefix(msg, v1alpha1.ReasonMaxConcurrent+": "), strings.HasPrefix(msg, v1alpha1.ReasonFailureDomain+": "):
			named++
		case msg == "checking the safety limits":
		default:
			t.Errorf("an operation waited for an unexpected reason: %q", msg)
		}
	}
	require.Positive(t, named, "waiting operations name MaxConcurrent or FailureDomainBudget: %v", w.waitingMessages())
	require.Greater(t, rem.metric("kubemedic_remediation_blocked_total", map[string]string{"policy": name}), float64(0))
	for _, n := range nodes {
		require.False(t, getNode(t, env, n).Spec.Unschedulable, "node %s uncordoned after verification", n)
	}
}

func uniq(m map[string]string) []string {
	set := map[string]bool{}
	for _, v := range m {
		set[v] = true
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	return out
}

// TestBreaker: six of ten selected nodes (60%, over the default maxUnhealthy
// of 30%) report a hung NFS mount within a second. The breaker opens before
// any condition has held for `for`, so no operation is ever created; the
// policy says so in its status, an Event and a metric. When five recover the
// breaker stays open for its cooldown, then closes and the last node is
// remediated. Tripped again, a manual reset closes it at once, and operations
// start while the count is still over the limit.
func TestBreaker(t *testing.T) {
	env := startCluster(t)
	nodes := gpuNodes(t, env, "breaker", 10)
	const (
		name     = "nfs-breaker"
		hold     = 2 * time.Second
		cooldown = 5 * time.Second
	)
	two := intstr.FromInt32(2)
	// maxUnhealthy is left to its default, 30%: 3 of 10 nodes.
	createPolicy(t, env, safetyPolicy(name, v1alpha1.ConditionNFSMountUnhealthy, hold, time.Second, v1alpha1.Safety{
		MaxConcurrent: &two, NodeCooldown: dur(0), BreakerCooldown: dur(cooldown),
	}))
	w := watchOps(t, env, 2, 0, nil)
	rem := newRemediator(t, env)
	rem.start()
	breakerMetric := func() float64 {
		return rem.metric("kubemedic_remediation_breaker_open", map[string]string{"policy": name})
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := getPolicy(c, env, name)
		require.Equal(c, int32(10), p.Status.MatchedNodes)
		require.Equal(c, metav1.ConditionFalse, breakerCond(c, p).Status)
	}, 20*time.Second, 100*time.Millisecond)

	sick := nodes[:6]
	tripped := time.Now()
	setConditions(t, env, sick, v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionTrue, nfsMessage)
	require.Less(t, time.Since(tripped), time.Second, "the six conditions were set within a second")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := getPolicy(c, env, name)
		bc := breakerCond(c, p)
		require.Equal(c, metav1.ConditionTrue, bc.Status)
		require.Equal(c, "TooManyUnhealthy", bc.Reason)
		require.Contains(c, bc.Message, "6 unhealthy nodes, limit 3")
		require.Equal(c, int32(6), p.Status.UnhealthyNodes)
		require.True(c, hasEvent(c, env, "RemediationPolicy", name, corev1.EventTypeWarning, v1alpha1.ReasonBreakerOpen), "Warning Event BreakerOpen")
		require.Equal(c, float64(1), breakerMetric())
	}, 10*time.Second, 100*time.Millisecond)
	require.Contains(t, eventReasons(t, env, "RemediationPolicy", name), v1alpha1.ReasonBreakerOpen)
	// Well past `for`, still nothing.
	require.Never(t, func() bool { return w.seenCount() > 0 }, time.Until(tripped.Add(hold+4*time.Second)), 100*time.Millisecond,
		"no operation is created while the breaker is open: %s", describeOps(env))
	require.Equal(t, metav1.ConditionTrue, breakerCond(t, getPolicy(t, env, name)).Status)

	// Five recover; the one left is within the limit, and the breaker cools down.
	recovered, last := sick[:5], sick[5]
	cleared := time.Now()
	setConditions(t, env, recovered, v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionFalse, "OK")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := getPolicy(c, env, name)
		bc := breakerCond(c, p)
		require.Equal(c, metav1.ConditionTrue, bc.Status)
		require.Equal(c, "CoolingDown", bc.Reason)
		require.Equal(c, int32(1), p.Status.UnhealthyNodes)
		require.NotNil(c, p.Status.BreakerBelowLimitSince)
	}, 5*time.Second, 100*time.Millisecond)
	require.Equal(t, 0, w.seenCount(), "nothing starts while cooling down")
	require.Equal(t, float64(1), breakerMetric())

	var closed time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		bc := breakerCond(c, getPolicy(c, env, name))
		require.Equal(c, metav1.ConditionFalse, bc.Status, bc.Message)
		require.Equal(c, "WithinLimit", bc.Reason)
		closed = time.Now()
	}, cooldown+10*time.Second, 100*time.Millisecond)
	// Timestamps in the status have whole seconds, so the cooldown may end up
	// to a second early.
	require.GreaterOrEqual(t, closed.Sub(cleared), cooldown-1500*time.Millisecond, "the breaker stayed open for its cooldown")
	require.Equal(t, float64(0), breakerMetric())
	// Events are written by the recorder's own goroutine after the status
	// write, so an observer may see the condition first.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, hasEvent(c, env, "RemediationPolicy", name, corev1.EventTypeNormal, v1alpha1.EventBreakerClosed), "Normal Event BreakerClosed")
	}, 5*time.Second, 100*time.Millisecond)

	// Normal service: the node still unhealthy gets its operation.
	requireAllSucceeded(t, env, []string{last}, 30*time.Second)
	require.Equal(t, 1, w.seenCount(), "only the node still unhealthy was remediated: %s", describeOps(env))

	// Trip it again, and reset it by hand.
	setConditions(t, env, recovered, v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionTrue, nfsMessage)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		bc := breakerCond(c, getPolicy(c, env, name))
		require.Equal(c, metav1.ConditionTrue, bc.Status)
		require.Contains(c, bc.Message, "5 unhealthy nodes, limit 3")
		require.Equal(c, float64(1), breakerMetric())
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 1, w.seenCount())

	p := getPolicy(t, env, name)
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[v1alpha1.AnnotationResetBreaker] = "1"
	reset := time.Now()
	require.NoError(t, env.Client.Patch(context.Background(), p, patch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := getPolicy(c, env, name)
		bc := breakerCond(c, p)
		require.Equal(c, metav1.ConditionFalse, bc.Status, bc.Message)
		require.Equal(c, "ManualReset", bc.Reason)
		require.Equal(c, "1", p.Status.LastBreakerReset)
		require.Equal(c, float64(0), breakerMetric())
	}, 2*time.Second, 50*time.Millisecond, "the manual reset closes the breaker at once")
	t.Logf("breaker closed %s after the reset annotation", time.Since(reset).Round(time.Millisecond))

	// Operations start while five nodes are still unhealthy (the watch
	// clears a node's condition only once its operation is Verifying).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var started []string
		for _, op := range listOps(c, env) {
			if op.Spec.NodeName != last && runningPhases[op.Status.Phase] && op.Status.Phase != v1alpha1.PhaseVerifying {
				started = append(started, op.Name)
			}
		}
		require.NotEmpty(c, started, describeOps(env))
		p := getPolicy(c, env, name)
		require.Greater(c, p.Status.UnhealthyNodes, int32(3), "still over the limit")
		bc := breakerCond(c, p)
		require.Equal(c, metav1.ConditionFalse, bc.Status)
		require.Equal(c, "ManualReset", bc.Reason)
	}, 15*time.Second, 100*time.Millisecond)
	requireAllSucceeded(t, env, recovered, 45*time.Second)
	w.check()
	require.Equal(t, 6, w.seenCount(), describeOps(env))
	require.Equal(t, metav1.ConditionFalse, breakerCond(t, getPolicy(t, env, name)).Status)
}

// TestCrashSafety: eight nodes need an operation, two at a time. The
// remediator, with leader election, is stopped at a random moment and started
// again, over and over; for some rounds two remediators run at once without
// leader election (the second-leader case), held in check only by the
// admission ledger. A watch on every NodeOperation checks after every event
// that no more than two run and that no operation is ever duplicated. In the
// end every node's single operation has succeeded.
func TestCrashSafety(t *testing.T) {
	env := startCluster(t)
	nodes := gpuNodes(t, env, "crash", 8)
	const name = "crash"
	two, all := intstr.FromInt32(2), intstr.FromString("100%")
	createPolicy(t, env, safetyPolicy(name, v1alpha1.ConditionGPUXidError, time.Second, 2*time.Second, v1alpha1.Safety{
		MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(0),
	}))
	w := watchOps(t, env, 2, 0, nil)

	leader := newRemediator(t, env)
	leader.opts.LeaderElection = true
	leader.opts.LeaseDuration = 2 * time.Second
	leader.opts.RenewDeadline = 1500 * time.Millisecond
	leader.opts.RetryPeriod = 250 * time.Millisecond
	first, second := newRemediator(t, env), newRemediator(t, env)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	pause := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}

	setConditions(t, env, nodes, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, xidMessage)
	// Ten rounds with one leader, four with two.
	const rounds = 14
	dualStarts := 0
	for i := range rounds {
		if i%4 == 1 {
			// Two leaders: both decide, and only the ledger serialises them.
			// The round lasts until at least one operation started under
			// both, while any is left to start.
			since := time.Now()
			first.start()
			second.start()
			time.Sleep(pause(500*time.Millisecond, 3*time.Second))
			if w.waitingFor(len(nodes)) {
				require.Eventually(t, func() bool { return w.admittedSince(since) > 0 || !w.waitingFor(len(nodes)) },
					15*time.Second, 50*time.Millisecond, "an operation starts under two leaders: %s", describeOps(env))
			}
			dualStarts += w.admittedSince(since)
			second.stop()
			time.Sleep(pause(0, 500*time.Millisecond))
			first.stop()
			continue
		}
		leader.start()
		time.Sleep(pause(200*time.Millisecond, 2*time.Second))
		leader.stop()
	}
	t.Logf("%d operations started while two leaders ran", dualStarts)
	require.Positive(t, dualStarts, "the second-leader rounds admitted operations")
	lease := &coordinationv1.Lease{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: opNamespace, Name: "kubemedic-remediator"}, lease),
		"the leader election lease lives in %s", opNamespace)

	leader.start()
	requireAllSucceeded(t, env, nodes, 60*time.Second)
	w.check()
	require.Equal(t, 2, w.peak, "two operations ran at once at some point")
	require.Equal(t, len(nodes), w.seenCount(), "one operation per node: %s", describeOps(env))
}
