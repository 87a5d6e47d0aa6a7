package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain/evict"
)

// TestOwnerNoticesNothingLost: the messages to the owners of the pods a
// drain stops, on a real API server and the Slack stand-in, through the
// drain's evictions, a full queue, crashes and a lost Slack answer. Each
// pod's owner is told at least once, and at most once more than that for
// each crash between Slack's answer and the record, or each lost answer.
func TestOwnerNoticesNothingLost(t *testing.T) {
	const ns = "kubemedic-notices"
	env := apiServer(t, localcluster.Options{}, ns)
	require.NoError(t, env.Client.Create(context.Background(), &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "drain-only"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessNone}}))

	t.Run("a full queue: a later pass sends every message", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "queue", 3)
		s := f.sender("remediator-a", 1, f.c)
		require.True(t, s.enqueue("another-operation"), "the queue holds one operation: full")
		f.r.owners = f.owners(s)
		f.drain()
		require.Equal(t, noticeRequeue, f.r.owners.owe(f.get(), f.clock.Now()), "the queue is full: the operation is looked at again soon")

		stop := runSender(t, s)
		defer stop()
		require.Eventually(t, func() bool { return len(s.queue) == 0 }, 5*time.Second, 10*time.Millisecond)
		require.Never(t, func() bool { return len(f.slack.Messages()) > 0 }, time.Second, 50*time.Millisecond,
			"the operation was not queued")
		require.Equal(t, []string{"p0=Owed", "p1=Owed", "p2=Owed"}, states(f.notices()), "owed, not lost")

		f.reconcile() // the later pass
		f.waitStates(t, "p0=Sent", "p1=Sent", "p2=Sent")
		require.Equal(t, map[string]int{"p0": 1, "p1": 1, "p2": 1}, f.told())
		f.laterPassesSendNothing(t)
	})

	t.Run("a crash between Slack's answer and the record: the next leader sends it once more, never zero", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "crash", 2)
		// Remediator a posts p0, then crashes before recording it.
		ctxA, crash := context.WithCancel(context.Background())
		defer crash()
		crashing := interceptor.NewClient(f.ww, interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if o, isOp := obj.(*v1alpha1.NodeOperation); isOp && hasState(o.Status.OwnerNotices, v1alpha1.OwnerNoticeSent) {
					crash()
					return errors.New("crashed before the record")
				}
				return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		})
		a := f.sender("remediator-a", 16, crashing)
		f.r.owners = f.owners(a)
		f.drain()
		done := make(chan error, 1)
		go func() { done <- a.Start(ctxA) }()
		require.NoError(t, <-done)
		require.Equal(t, map[string]int{"p0": 1}, f.told())
		notices := f.notices()
		require.Equal(t, []string{"p0=Claimed", "p1=Owed"}, states(notices), "the message sent is not recorded")
		require.Equal(t, "remediator-a", notices[0].Claimer)

		// Remediator b takes over at once: it sends what nobody holds, and
		// leaves a's claim until it expires.
		b := f.sender("remediator-b", 16, f.c)
		f.r.owners = f.owners(b)
		stop := runSender(t, b)
		defer stop()
		f.reconcile()
		f.waitStates(t, "p0=Claimed", "p1=Sent")
		require.Equal(t, map[string]int{"p0": 1, "p1": 1}, f.told())
		require.Equal(t, noticeClaimTimeout, f.r.owners.owe(f.get(), f.clock.Now()), "looked at again when a's claim expires")

		f.clock.Step(noticeClaimTimeout)
		f.reconcile()
		f.waitStates(t, "p0=Sent", "p1=Sent")
		require.Equal(t, map[string]int{"p0": 2, "p1": 1}, f.told(), "once more, never zero")
		require.Equal(t, "remediator-b", f.notices()[0].Claimer)
		f.laterPassesSendNothing(t)
	})

	t.Run("a crash between the eviction and its record: the next pass finds the pods going and tells each once", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "evicted", 2)
		s := f.sender("remediator-a", 16, f.c)
		stop := runSender(t, s)
		defer stop()
		lose, lost := losesOnce(func(o *v1alpha1.NodeOperation) bool { return hasState(o.Status.OwnerNotices, v1alpha1.OwnerNoticeOwed) })
		losing := testReconciler(interceptor.NewClient(f.ww, interceptor.Funcs{SubResourcePatch: lose}), f.c, ns, events.NewFakeRecorder(100))
		losing.Clock, losing.Drainer, losing.owners = f.clock, f.r.Drainer, f.owners(s)
		req := ctrl.Request{NamespacedName: types.NamespacedName{Name: f.op}}
		var err error
		for range 5 {
			if _, err = losing.Reconcile(context.Background(), req); err != nil {
				break
			}
		}
		require.ErrorIs(t, err, lost, "the pass that stopped the pods lost its status write")
		for _, p := range f.pods {
			got := &corev1.Pod{}
			require.NoError(t, f.c.Get(context.Background(), client.ObjectKeyFromObject(p), got))
			require.NotNil(t, got.DeletionTimestamp, "%s was evicted", p.Name)
		}
		require.Equal(t, []string{"p0=Pending", "p1=Pending"}, states(f.notices()), "written before the eviction")
		require.Empty(t, f.slack.Messages())

		f.r.owners = f.owners(s)
		f.reconcile()
		f.waitStates(t, "p0=Sent", "p1=Sent")
		require.Equal(t, map[string]int{"p0": 1, "p1": 1}, f.told())
		f.laterPassesSendNothing(t)
	})

	t.Run("a lost Slack answer: the message is repeated once at worst, and recorded", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "lost", 1)
		f.slack.FailNext(notifytest.MethodPostMessage, notifytest.LostAnswer())
		s := f.sender("remediator-a", 16, f.c)
		f.r.owners = f.owners(s)
		stop := runSender(t, s)
		defer stop()
		f.drain()
		f.waitStates(t, "p0=Sent")
		require.Equal(t, map[string]int{"p0": 2}, f.told(), "posted, its answer lost, posted again: Slack has no idempotency key")
		f.laterPassesSendNothing(t)
	})

	t.Run("the GPU test's result: one reply in each told owner's thread, repeated at worst after a lost answer", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "gate", 2, func(op *v1alpha1.NodeOperation) {
			op.Spec.Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		})
		f.r.Retention = time.Hour // kept, as a finished operation is
		s := f.sender("remediator-a", 16, f.c)
		f.r.owners = f.owners(s)
		stop := runSender(t, s)
		defer stop()
		f.drain()
		f.waitStates(t, "p0=Sent", "p1=Sent")
		require.Empty(t, f.replies(), "nothing to say before the test ends")
		require.Zero(t, f.r.owners.owe(f.get(), f.clock.Now()), "nothing owed while the test runs")

		// The test fails GPU 3; Slack's answer to the first reply is lost.
		f.slack.FailNext(notifytest.MethodPostMessage, notifytest.LostAnswer())
		f.endGate()
		f.reconcile()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Equal(c, []string{"p0=Sent", "p1=Sent"}, replyStates(f.notices()))
		}, 30*time.Second, 50*time.Millisecond)
		require.Equal(t, map[string]int{"p0": 2, "p1": 1}, f.replies(), "posted, its answer lost, posted again; the other once")
		require.Equal(t, map[string]int{"p0": 1, "p1": 1}, f.told(), "the messages about the drain are not repeated")
		roots := map[string]notifytest.Posted{}
		for _, m := range f.slack.Messages() {
			if m.ThreadTS == "" {
				roots[m.TS] = m
			}
		}
		for _, m := range f.slack.Messages() {
			if m.ThreadTS == "" {
				continue
			}
			root, ok := roots[m.ThreadTS]
			require.True(t, ok, "a reply in the thread of a message about the drain: %+v", m)
			require.Equal(t, root.Channel, m.Channel)
			require.Contains(t, m.Text, "node gpu-gate failed its GPU test, dcgm (template validate-dcgm-diag), after the repair and stays cordoned. Failed: dcgm failed on GPU GPU-3 (memory)")
			require.Contains(t, string(m.Blocks), "`GPU-3`")
		}
		f.laterPassesSendNothing(t)
	})

	t.Run("Slack refuses a message for good: recorded Failed, not sent again", func(t *testing.T) {
		f := newDrainFixture(t, env, ns, "refused", 2)
		f.slack.FailNext(notifytest.MethodPostMessage, notifytest.SlackError("msg_too_long"))
		s := f.sender("remediator-a", 16, f.c)
		f.r.owners = f.owners(s)
		stop := runSender(t, s)
		defer stop()
		f.drain()
		f.waitStates(t, "p0=Failed", "p1=Sent")
		require.Contains(t, f.notices()[0].Message, "msg_too_long")
		require.Equal(t, map[string]int{"p1": 1}, f.told())
		require.Equal(t, 1, count(s.results, notificationFailed))
		f.laterPassesSendNothing(t)
	})
}

// drainFixture is a manual drain-only NodeOperation on node gpu-<name>,
// with bare pods p0, p1, ... of namespace team-<name>, owned by alice, and
// a reconciler that evicts on the API server, on a fake clock.
type drainFixture struct {
	t     *testing.T
	c     client.Client
	ww    client.WithWatch
	slack *notifytest.Server
	clock *clocktesting.FakeClock
	r     *OperationReconciler
	op    string
	team  string
	pods  []*corev1.Pod
}

func newDrainFixture(t *testing.T, env *localcluster.Cluster, ns, name string, pods int, edit ...func(*v1alpha1.NodeOperation)) *drainFixture {
	t.Helper()
	ctx := context.Background()
	f := &drainFixture{t: t, c: env.Client, slack: notifytest.New(t), clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)),
		op: name, team: "team-" + name}
	f.slack.AddUser("U0ALICE001", "alice@example.com")
	var err error
	f.ww, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	node := "gpu-" + name
	require.NoError(t, f.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
	require.NoError(t, f.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.team,
		Annotations: map[string]string{notify.AnnotationOwner: "alice@example.com"}}}))
	for i := range pods {
		p, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: f.team, Name: fmt.Sprintf("p%d", i), NodeName: node})
		require.NoError(t, err)
		f.pods = append(f.pods, p)
	}
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeOperationSpec{NodeName: node, Reason: "planned work",
			StepAction: v1alpha1.StepAction{Operation: "drain-only", Drain: &v1alpha1.DrainSpec{Timeout: &metav1.Duration{Duration: 10 * time.Minute}}}}}
	for _, e := range edit {
		e(op)
	}
	require.NoError(t, f.c.Create(ctx, op))
	evictor, err := evict.NewEvictor(env.Config, env.Scheme)
	require.NoError(t, err)
	f.r = testReconciler(f.c, f.c, ns, events.NewFakeRecorder(1000))
	f.r.Clock, f.r.Drainer = f.clock, evictor
	return f
}

// sender is a sender to the stand-in that claims as claimer, with a queue
// of size, writing the status through cl.
func (f *drainFixture) sender(claimer string, size int, cl client.Client) *sender {
	n := notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: f.slack.URL()})
	results := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_notifications_total"}, []string{"result"})
	return newSender(n, cl, f.c, f.clock, claimer, size, 20*time.Second, results, testr.New(f.t).WithName(claimer))
}

func (f *drainFixture) owners(s *sender) *ownerNotifier {
	return &ownerNotifier{sender: s, reader: f.c}
}

// reconcile runs one pass, again while its status write conflicts with
// the sender's.
func (f *drainFixture) reconcile() {
	f.t.Helper()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: f.op}}
	for range 20 {
		_, err := f.r.Reconcile(context.Background(), req)
		if apierrors.IsConflict(err) {
			continue
		}
		require.NoError(f.t, err)
		return
	}
	f.t.Fatalf("the status write of operation %s kept conflicting", f.op)
}

// drain runs passes until the drain stopped every pod. The first pass
// that drains writes the notices, Pending, before any pod is stopped.
func (f *drainFixture) drain() {
	f.t.Helper()
	for range 5 {
		if f.reconcile(); len(f.notices()) > 0 {
			break
		}
	}
	want := make([]string, len(f.pods))
	for i, p := range f.pods {
		want[i] = p.Name + "=Pending"
	}
	require.Equal(f.t, want, states(f.notices()), "written before the pods are stopped")
	for _, p := range f.pods {
		got := &corev1.Pod{}
		require.NoError(f.t, f.c.Get(context.Background(), client.ObjectKeyFromObject(p), got))
		require.Nil(f.t, got.DeletionTimestamp, "%s is not stopped before its notice is written", p.Name)
	}
	for range 5 {
		if f.reconcile(); !hasState(f.notices(), v1alpha1.OwnerNoticePending) {
			return
		}
	}
	f.t.Fatalf("the drain did not stop the pods: %v", states(f.notices()))
}

func (f *drainFixture) get() *v1alpha1.NodeOperation {
	f.t.Helper()
	op := &v1alpha1.NodeOperation{}
	require.NoError(f.t, f.c.Get(context.Background(), client.ObjectKey{Name: f.op}, op))
	return op
}

func (f *drainFixture) notices() []v1alpha1.OwnerNotice { return f.get().Status.OwnerNotices }

func (f *drainFixture) waitStates(t *testing.T, want ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, want, states(f.notices()))
	}, 30*time.Second, 50*time.Millisecond)
}

var (
	toldPod    = regexp.MustCompile(`^Your pod ([^ ]+)/([^ ]+) on node`)
	repliedPod = regexp.MustCompile(`^Update on your pod ([^ ]+)/([^ ]+): node`)
)

// replies counts the GPU test results Slack holds about each of the
// fixture's pods.
func (f *drainFixture) replies() map[string]int {
	out := map[string]int{}
	for _, m := range f.slack.Messages() {
		if g := repliedPod.FindStringSubmatch(m.Text); g != nil && g[1] == f.team {
			out[g[2]]++
		}
	}
	return out
}

// endGate ends the operation as its GPU test's failure on GPU-3 does
// (plan.Advance decides that; here only the record counts).
func (f *drainFixture) endGate() {
	f.t.Helper()
	op := f.get()
	orig := op.DeepCopy()
	end := metav1.NewTime(f.clock.Now())
	op.Status.Phase, op.Status.CompletionTime = v1alpha1.PhaseFailed, &end
	op.Status.Validation = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, Template: "validate-dcgm-diag", Attempt: 1, Test: "dcgm",
		CompletionTime: &end, Message: "dcgm failed on GPU GPU-3 (memory): memory test failed",
		GPUs: []v1alpha1.ValidationGPU{{UUID: "GPU-0", Verdict: "Pass"}, {UUID: "GPU-3", Verdict: "Fail", Failed: []string{"memory"}}}}
	require.NoError(f.t, f.c.Status().Patch(context.Background(), op, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// replyStates lists "name=ResultReply" for each notice, in order.
func replyStates(notices []v1alpha1.OwnerNotice) []string {
	var out []string
	for _, n := range notices {
		out = append(out, n.Name+"="+string(n.ResultReply))
	}
	return out
}

// told counts the messages Slack holds about each of the fixture's pods.
func (f *drainFixture) told() map[string]int {
	out := map[string]int{}
	for _, m := range f.slack.Messages() {
		if g := toldPod.FindStringSubmatch(m.Text); g != nil && g[1] == f.team {
			out[g[2]]++
		}
	}
	return out
}

// laterPassesSendNothing: passes after every claim could have expired
// send nothing more.
func (f *drainFixture) laterPassesSendNothing(t *testing.T) {
	t.Helper()
	before, all := f.told(), len(f.slack.Messages())
	for range 2 {
		f.clock.Step(noticeClaimTimeout + time.Second)
		f.reconcile()
		require.Zero(t, f.r.owners.owe(f.get(), f.clock.Now()), "nothing owed")
	}
	require.Never(t, func() bool { return len(f.slack.Messages()) > all }, time.Second, 50*time.Millisecond)
	require.Equal(t, before, f.told())
}

func hasState(notices []v1alpha1.OwnerNotice, s v1alpha1.OwnerNoticeState) bool {
	for _, n := range notices {
		if n.State == s {
			return true
		}
	}
	return false
}

// count is the value of c's counter for result, read as /metrics would.
func count(c *prometheus.CounterVec, result string) int {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		panic(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// runSender starts s and returns a function that stops it and waits.
func runSender(t *testing.T, s *sender) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}
