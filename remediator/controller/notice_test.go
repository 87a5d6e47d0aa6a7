package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

var noticeTime = time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)

const testIssue = "https://github.com/acme/gpu-fleet/issues/42"

// testOp is a policy's drain-and-reset operation triggered by GPULost.
func testOp(mut ...func(*v1alpha1.NodeOperation)) *v1alpha1.NodeOperation {
	op := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-lost.gpu-017.1a2b3c-0"},
		Spec: v1alpha1.NodeOperationSpec{
			NodeName: "gpu-017", StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Drain: &v1alpha1.DrainSpec{Mode: v1alpha1.DrainEvict, Timeout: &metav1.Duration{Duration: 10 * time.Minute}}}, Policy: "gpu-lost", Step: "reset",
			Trigger: &v1alpha1.TriggerCondition{
				Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionTrue, Reason: "GPUCountMismatch",
				Message:            "GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0",
				LastTransitionTime: metav1.NewTime(noticeTime.Add(-3 * time.Minute)),
			},
		},
	}
	for _, m := range mut {
		m(op)
	}
	return op
}

func testPod(ns, name string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: "gpu-017"}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func ownedByReplicaSet(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: "rs-uid", Controller: ptr.To(true)}}
	}
}

// blocksJSON is the message's Block Kit as Slack receives it, without
// JSON's escapes of <, > and &, to read the mrkdwn as it is.
func blocksJSON(t *testing.T, m notify.Message) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(m.Blocks))
	return b.String()
}

var alice = notify.Recipient{Email: "alice@example.com", Source: "namespace annotation kubemedic.io/owner"}

func TestStoppedMessage(t *testing.T) {
	tests := []struct {
		desc        string
		op          *v1alpha1.NodeOperation
		pod         *corev1.Pod
		deleted     bool
		issue       string
		wantText    []string // in the fallback text
		wantBlocks  []string // in the Block Kit JSON
		notInBlocks []string
	}{
		{
			desc:  "a Deployment's pod evicted by a policy, with an issue",
			op:    testOp(),
			pod:   testPod("team-a", "web-7d9f-abcde", ownedByReplicaSet("web-7d9f")),
			issue: testIssue,
			wantText: []string{
				"Your pod team-a/web-7d9f-abcde on node gpu-017 was stopped because the node reported GPULost (GPUCountMismatch), by policy gpu-lost: evicted at 2026-11-21 14:00 UTC, to cordon, drain (Evict) and run reset-gpu.",
				"Its controller, ReplicaSet web-7d9f, will recreate it on another node.",
				"Follow the repair: kubectl get nodeoperation gpu-lost.gpu-017.1a2b3c-0 or " + testIssue,
			},
			wantBlocks: []string{
				`"type":"header"`, `Your pod team-a/web-7d9f-abcde was stopped`,
				"Your pod `team-a/web-7d9f-abcde` on node `gpu-017` was *evicted* because the node reported *GPULost* (GPUCountMismatch), by policy `gpu-lost`.",
				// What was seen: the condition, since when, its message once.
				"`GPULost` is True since <!date^" + fmt.Sprint(noticeTime.Add(-3*time.Minute).Unix()),
				": GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0",
				"Evicted through the Eviction API, which honours its PodDisruptionBudgets",
				"<!date^" + fmt.Sprint(noticeTime.Unix()),
				"cordon, drain (Evict) and run reset-gpu, step `reset`, operation `gpu-lost.gpu-017.1a2b3c-0`",
				"*Issue*\\n<" + testIssue + "|acme/gpu-fleet#42>",
				"*What happens next*: its controller, ReplicaSet `web-7d9f`, will recreate it on another node; nothing to do.",
				"*Follow the repair*: `kubectl get nodeoperation gpu-lost.gpu-017.1a2b3c-0`, or the issue above",
				"recipient from the namespace annotation kubemedic.io/owner",
			},
			notInBlocks: []string{"GPUCountMismatch: GPUCountMismatch"},
		},
		{
			desc:    "a bare pod deleted after the drain timeout, no issue",
			op:      testOp(func(op *v1alpha1.NodeOperation) { op.Spec.Drain.Mode = v1alpha1.DrainDeleteAfterTimeout }),
			pod:     testPod("team-a", "notebook"),
			deleted: true,
			wantText: []string{
				"Your pod team-a/notebook on node gpu-017 was stopped because the node reported GPULost (GPUCountMismatch), by policy gpu-lost: deleted at",
				"A bare pod is not recreated: submit it again.",
			},
			wantBlocks: []string{
				"was *deleted* because",
				"Deleted: it was still there when the drain timeout of 10m0s ran out, and this drain then deletes pods, bypassing their PodDisruptionBudgets",
				"*What to do*: a bare pod is not recreated: submit it again. It will not be scheduled on `gpu-017` until the repair is verified",
			},
			notInBlocks: []string{"*Issue*", "issue above", "will recreate it"},
		},
		{
			desc: "a manual NodeOperation without a trigger",
			op: testOp(func(op *v1alpha1.NodeOperation) {
				op.Name = "firmware-gpu-017"
				op.Spec.Policy, op.Spec.Step, op.Spec.Trigger = "", "", nil
				op.Spec.Reason = "NVSwitch firmware update, ticket OPS-1234"
			}),
			pod: testPod("team-b", "trainer-0", ownedByReplicaSet("trainer")),
			wantText: []string{
				"was stopped because of planned work on the node: NVSwitch firmware update, ticket OPS-1234, by a manual NodeOperation: evicted",
			},
			wantBlocks: []string{
				"by a manual NodeOperation.",
				"NodeOperation created by hand: NVSwitch firmware update, ticket OPS-1234",
				"operation `firmware-gpu-017`",
			},
			notInBlocks: []string{"step `", "policy `"},
		},
		{
			desc: "user text cannot form links or mentions",
			op: testOp(func(op *v1alpha1.NodeOperation) {
				op.Spec.Trigger.Reason = ""
				op.Spec.Trigger.Message = "fault <!channel> & <https://evil.example|click>"
			}),
			pod: testPod("team-a", "web"),
			wantBlocks: []string{
				"`GPULost` is True since",
				"fault &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;",
				"because the node reported *GPULost*, by",
			},
			notInBlocks: []string{"<!channel>", "<https://evil"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := stoppedMessage(tc.op, tc.pod, tc.deleted, tc.issue, alice, noticeTime)
			for _, w := range tc.wantText {
				require.Contains(t, m.Text, w)
			}
			js := blocksJSON(t, m)
			for _, w := range tc.wantBlocks {
				require.Contains(t, js, w)
			}
			for _, w := range tc.notInBlocks {
				require.NotContains(t, js, w)
			}
			if tc.issue != "" {
				require.Contains(t, m.Text, tc.issue)
			}
		})
	}
}

func TestStoppedMessageHasEveryPart(t *testing.T) {
	m := stoppedMessage(testOp(), testPod("team-a", "web", ownedByReplicaSet("web-1")), false, testIssue, alice, noticeTime)
	var blocks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(blocksJSON(t, m)), &blocks))
	var types []string
	for _, b := range blocks {
		types = append(types, b["type"].(string))
	}
	require.Equal(t, []string{"header", "section", "section", "section", "context"}, types)
	fields := blocks[2]["fields"].([]any)
	var labels []string
	for _, f := range fields {
		label, _, _ := strings.Cut(f.(map[string]any)["text"].(string), "\n")
		labels = append(labels, label)
	}
	require.Equal(t, []string{"*Seen*", "*Done*", "*When*", "*Node*", "*By*", "*Repair*", "*Issue*"}, labels,
		"what was seen, what was done, when, where, by whom, why, and the issue")
}

// A drain after the capture says the node's diagnostics were kept, and
// where; an operation without a bundle says nothing of it.
func TestStoppedMessageSaysDiagnosticsWereKept(t *testing.T) {
	op := testOp()
	plain := stoppedMessage(op, testPod("team-a", "web", ownedByReplicaSet("web-1")), false, "", alice, noticeTime)
	require.NotContains(t, plain.Text, "diagnostics")
	op.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured,
		Bundle: &v1alpha1.DiagnosticsBundle{Key: "gpu-017/" + op.Name + ".tar.gz", Stored: true}}
	m := stoppedMessage(op, testPod("team-a", "web", ownedByReplicaSet("web-1")), false, "", alice, noticeTime)
	require.Contains(t, m.Text, "The node's diagnostics were kept before the repair (gpu-017/"+op.Name+".tar.gz, in the diagnostics store)")
	require.Contains(t, blocksJSON(t, m), "*Diagnostics*\\nkept before the repair: `gpu-017/"+op.Name+".tar.gz`, in the diagnostics store")
	op.Status.Diagnostics.Bundle.Stored = false
	m = stoppedMessage(op, testPod("team-a", "web", ownedByReplicaSet("web-1")), false, "", alice, noticeTime)
	require.Contains(t, m.Text, "on the node, waiting for the diagnostics store")
}

func TestIssueURL(t *testing.T) {
	op := func(v string) *v1alpha1.NodeOperation {
		o := testOp()
		if v != "" {
			o.Annotations = map[string]string{v1alpha1.AnnotationGitHubIssue: v}
		}
		return o
	}
	node := func(v string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-017"}}
		if v != "" {
			n.Annotations = map[string]string{v1alpha1.AnnotationGitHubIssue: v}
		}
		return n
	}
	for _, tc := range []struct {
		desc     string
		op, node string
		want     string
	}{
		{"none", "", "", ""},
		{"the node's", "", testIssue, testIssue},
		{"the operation's wins", "https://github.com/acme/gpu-fleet/issues/7", testIssue, "https://github.com/acme/gpu-fleet/issues/7"},
		{"an unusable operation annotation falls back to the node's", "see #42", testIssue, testIssue},
		{"no scheme is not a link", "", "github.com/acme/gpu-fleet/issues/42", ""},
		{"javascript is not a link", "javascript:alert(1)", "", ""},
		{"white space is trimmed", " " + testIssue + "\n", "", testIssue},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, issueURL(op(tc.op), node(tc.node)))
		})
	}
	require.Equal(t, testIssue, issueURL(op(testIssue), nil), "no node")
	require.Equal(t, "GitHub issue", issueLabel("https://github.example.com/issues"))
}

func TestUIDSet(t *testing.T) {
	s := newUIDSet(2, time.Hour)
	now := noticeTime
	require.True(t, s.add("a", now))
	require.False(t, s.add("a", now.Add(time.Minute)), "a retried pass does not tell twice")
	require.True(t, s.add("b", now.Add(time.Minute)))
	require.True(t, s.add("c", now.Add(2*time.Minute)), "full: the key closest to expiry goes")
	require.True(t, s.add("a", now.Add(3*time.Minute)), "a was forgotten to make room")
	require.False(t, s.add("c", now.Add(3*time.Minute)))
	require.True(t, s.add("c", now.Add(2*time.Minute+time.Hour)), "expired")
	require.LessOrEqual(t, len(s.seen), 2)
}

// queued returns the notices waiting in the sender's queue.
func queued(s *sender) []notice {
	var out []notice
	for {
		select {
		case n := <-s.queue:
			out = append(out, n)
		default:
			return out
		}
	}
}

func newTestOwnerNotifier(t *testing.T, c client.Reader, defaultChannel string) *ownerNotifier {
	results := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_notifications_total"}, []string{"result"})
	return &ownerNotifier{
		sender:         newSender(notify.Disabled{}, 16, time.Second, results, testr.New(t)),
		reader:         c,
		defaultChannel: defaultChannel,
		notified:       newUIDSet(notifiedMax, notifiedTTL),
	}
}

func TestOwnerNotifierTell(t *testing.T) {
	ctx := log.IntoContext(t.Context(), testr.New(t))
	namespaces := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: map[string]string{notify.AnnotationOwner: "alice@example.com"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}},
	}
	gets := 0
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(namespaces...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			if key.Name == "forbidden" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, key.Name, errors.New("no RBAC"))
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	o := newTestOwnerNotifier(t, c, "")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-017", Annotations: map[string]string{v1alpha1.AnnotationGitHubIssue: testIssue}}}
	pods := []corev1.Pod{
		*testPod("team-a", "web-1", ownedByReplicaSet("web")),
		*testPod("team-a", "notebook"),
		*testPod("nobody", "orphan"),
		*testPod("forbidden", "own", func(p *corev1.Pod) { p.Annotations = map[string]string{notify.AnnotationOwner: "U0BOB1234"} }),
		*testPod("team-a", "replaced"),
	}
	stop := func(p corev1.Pod, deleted bool) drain.Stopped {
		return drain.Stopped{Pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, UID: p.UID, Deleted: deleted}
	}
	stopped := []drain.Stopped{
		stop(pods[0], false), stop(pods[1], true), stop(pods[2], false), stop(pods[3], false),
		{Pod: types.NamespacedName{Namespace: "team-a", Name: "replaced"}, UID: "another-uid"},
	}

	o.tell(ctx, testOp(), node, pods, stopped, noticeTime)
	got := queued(o.sender)
	var who []string
	for _, n := range got {
		who = append(who, n.pod.String()+" → "+n.to.String())
		require.Contains(t, n.msg.Text, testIssue, "the node's issue")
		require.Contains(t, n.msg.Text, "on node gpu-017")
	}
	require.Equal(t, []string{
		"team-a/web-1 → email alice@example.com (from namespace annotation kubemedic.io/owner)",
		"team-a/notebook → email alice@example.com (from namespace annotation kubemedic.io/owner)",
		"forbidden/own → user U0BOB1234 (from pod annotation kubemedic.io/owner)",
	}, who, "no owner, no message; an unreadable namespace leaves the pod's own annotation; a UID the drain did not decide on is skipped")
	require.Equal(t, types.UID("uid-web-1"), got[0].uid)
	require.Contains(t, got[0].msg.Text, "will recreate it")
	require.Contains(t, got[1].msg.Text, "deleted at")
	require.Contains(t, got[1].msg.Text, "submit it again")
	require.Equal(t, 3, gets, "each namespace read once per pass")

	// The same pass retried (a status write that conflicted): nobody is
	// told twice.
	o.tell(ctx, testOp(), node, pods, stopped, noticeTime.Add(5*time.Second))
	require.Empty(t, queued(o.sender))

	t.Run("the default channel catches pods without an owner", func(t *testing.T) {
		o := newTestOwnerNotifier(t, c, "#gpu-ops")
		o.tell(ctx, testOp(), nil, pods[2:3], []drain.Stopped{stop(pods[2], false)}, noticeTime)
		got := queued(o.sender)
		require.Len(t, got, 1)
		require.Equal(t, "channel gpu-ops (from default channel)", got[0].to.String())
		require.NotContains(t, got[0].msg.Text, "Issue", "no node, no operation annotation: no issue")
	})

	t.Run("a nil notifier (Slack not configured) does nothing", func(t *testing.T) {
		var off *ownerNotifier
		off.tell(ctx, testOp(), node, pods, stopped, noticeTime)
	})
}

// fakeNotifier records Posts and answers with err; while block is open,
// Post waits for it or for its context.
type fakeNotifier struct {
	posted chan string // the Text of each Post, in order
	err    error
	block  chan struct{}
}

func (f *fakeNotifier) Post(ctx context.Context, to notify.Recipient, thread *notify.Thread, msg notify.Message) (notify.Thread, error) {
	if thread != nil {
		return notify.Thread{}, errors.New("the remediator starts a thread per pod; it never replies")
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return notify.Thread{}, ctx.Err()
		}
	}
	f.posted <- msg.Text
	if f.err != nil {
		return notify.Thread{}, f.err
	}
	return notify.Thread{Channel: "D0001", TS: "1.0", Recipient: to.String()}, nil
}

func newTestSender(t *testing.T, n notify.Notifier, size int, timeout time.Duration) (*sender, *prometheus.CounterVec) {
	results := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_notifications_total"}, []string{"result"})
	return newSender(n, size, timeout, results, logr.Discard()), results
}

func msg(text string) notice {
	return notice{to: alice, msg: notify.Message{Text: text}, pod: types.NamespacedName{Namespace: "ns", Name: text}}
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
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func TestSender(t *testing.T) {
	t.Run("messages go out in order, one at a time", func(t *testing.T) {
		f := &fakeNotifier{posted: make(chan string, 10)}
		s, results := newTestSender(t, f, 10, time.Second)
		for _, m := range []string{"one", "two", "three"} {
			require.True(t, s.enqueue(msg(m)))
		}
		stop := runSender(t, s)
		require.Equal(t, []string{"one", "two", "three"}, []string{<-f.posted, <-f.posted, <-f.posted})
		stop()
		require.Equal(t, 3, count(results, notificationSent))
		require.Zero(t, count(results, notificationFailed)+count(results, notificationDropped))
	})

	t.Run("a full queue drops without blocking", func(t *testing.T) {
		f := &fakeNotifier{posted: make(chan string, 10), block: make(chan struct{})}
		s, results := newTestSender(t, f, 2, time.Minute)
		stop := runSender(t, s)
		// The worker takes the first and waits on Slack; two fit the queue.
		require.True(t, s.enqueue(msg("first")))
		require.Eventually(t, func() bool { return len(s.queue) == 0 }, 5*time.Second, time.Millisecond)
		require.True(t, s.enqueue(msg("second")))
		require.True(t, s.enqueue(msg("third")))
		require.False(t, s.enqueue(msg("fourth")), "full")
		require.Equal(t, 1, count(results, notificationDropped))
		close(f.block)
		require.Equal(t, []string{"first", "second", "third"}, []string{<-f.posted, <-f.posted, <-f.posted})
		stop()
		require.Equal(t, 3, count(results, notificationSent))
	})

	t.Run("a failing Slack is counted and not retried", func(t *testing.T) {
		f := &fakeNotifier{posted: make(chan string, 10), err: fmt.Errorf("notify email alice@example.com: %w", notify.ErrNoRecipient)}
		s, results := newTestSender(t, f, 4, time.Second)
		require.True(t, s.enqueue(msg("a")))
		require.True(t, s.enqueue(msg("b")))
		stop := runSender(t, s)
		require.Equal(t, []string{"a", "b"}, []string{<-f.posted, <-f.posted})
		require.Eventually(t, func() bool { return count(results, notificationFailed) == 2 }, 5*time.Second, time.Millisecond)
		stop()
		require.Empty(t, f.posted, "each message is posted once")
		require.Zero(t, count(results, notificationSent))
	})

	t.Run("a Slack that hangs is cut off by the timeout", func(t *testing.T) {
		f := &fakeNotifier{posted: make(chan string, 10), block: make(chan struct{})}
		s, results := newTestSender(t, f, 4, 20*time.Millisecond)
		require.True(t, s.enqueue(msg("a")))
		stop := runSender(t, s)
		require.Eventually(t, func() bool { return count(results, notificationFailed) == 1 }, 5*time.Second, time.Millisecond)
		stop()
	})

	t.Run("what is queued when the manager stops is dropped and counted", func(t *testing.T) {
		f := &fakeNotifier{posted: make(chan string, 10), block: make(chan struct{})}
		s, results := newTestSender(t, f, 4, time.Minute)
		stop := runSender(t, s)
		require.True(t, s.enqueue(msg("in flight")))
		require.Eventually(t, func() bool { return len(s.queue) == 0 }, 5*time.Second, time.Millisecond)
		require.True(t, s.enqueue(msg("waiting 1")))
		require.True(t, s.enqueue(msg("waiting 2")))
		stop()
		require.Equal(t, 2, count(results, notificationDropped))
		require.Equal(t, 1, count(results, notificationFailed), "the message in flight is cut off")
	})

	t.Run("Disabled fails every message", func(t *testing.T) {
		s, results := newTestSender(t, notify.Disabled{}, 4, time.Second)
		require.True(t, s.enqueue(msg("a")))
		stop := runSender(t, s)
		require.Eventually(t, func() bool { return count(results, notificationFailed) == 1 }, 5*time.Second, time.Millisecond)
		stop()
	})

	require.True(t, (&sender{}).NeedLeaderElection(), "only the leader drains, so only it sends")
}
