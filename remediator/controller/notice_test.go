package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
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

// The message a notice owes is the message about the pod it keeps: the
// same words as stoppedMessage on the pod itself, at the time it was
// stopped, though the pod is gone.
func TestNoticeMessage(t *testing.T) {
	op := testOp()
	for _, tc := range []struct {
		desc    string
		pod     *corev1.Pod
		deleted bool
	}{
		{"a Deployment's pod evicted", testPod("team-a", "web-7d9f-abcde", ownedByReplicaSet("web-7d9f")), false},
		{"a bare pod deleted after the timeout", testPod("team-a", "notebook"), true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := pendingNotice(tc.pod, alice, tc.deleted)
			n.State, n.StoppedAt = v1alpha1.OwnerNoticeOwed, ptrTime(noticeTime)
			to, m := noticeMessage(op, n, testIssue)
			require.Equal(t, alice, to)
			want := stoppedMessage(op, tc.pod, tc.deleted, testIssue, alice, noticeTime)
			require.Equal(t, want.Text, m.Text)
			require.Equal(t, blocksJSON(t, want), blocksJSON(t, m))
		})
	}
}
