package demo

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/decide"
)

// posted is a message of the stand-in with one actions block of buttons,
// each acting on pod as the janitor writes their values.
func posted(t *testing.T, ts, thread, text, ns, pod string, labels ...string) notifytest.Posted {
	t.Helper()
	var elems []map[string]any
	for _, l := range labels {
		b := decide.Button{Action: decide.ActionKeep, Namespace: ns, Pod: pod, UID: types.UID("uid-" + pod), Keep: 1}
		if l == "Restore" {
			b = decide.Button{Action: decide.ActionRestore, Namespace: ns, Pod: pod, UID: types.UID("uid-" + pod), TargetKind: decide.TargetDeployment, TargetName: "d", TargetUID: "uid-d"}
		}
		elems = append(elems, map[string]any{"type": "button", "action_id": b.ActionID() + l, "value": b.Encode(),
			"text": map[string]any{"type": "plain_text", "text": l}})
	}
	blocks, err := json.Marshal([]map[string]any{{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}}, {"type": "actions", "elements": elems}})
	require.NoError(t, err)
	return notifytest.Posted{Channel: "D0CAROL", TS: ts, ThreadTS: thread, Text: text, Blocks: blocks}
}

func TestPressable(t *testing.T) {
	msgs := []notifytest.Posted{
		posted(t, "1.0", "", "notice a", "nb", "a-0", "Keep 4 h", "Keep 24 h", "Reclaim now"),
		posted(t, "2.0", "", "notice b", "nb", "b-0", "Keep 4 h", "Keep 24 h", "Reclaim now"),
		posted(t, "3.0", "1.0", "reclaimed a", "nb", "a-0", "Restore"),
		posted(t, "4.0", "", "notice a in another namespace", "other", "a-0", "Keep 4 h"),
		{Channel: "C0GPUOPS1", TS: "5.0", Text: "no buttons"},
	}
	for _, tc := range []struct {
		desc   string
		req    PressRequest
		wantTS string
	}{
		{desc: "the notice of the pod, not another pod's", req: PressRequest{Namespace: "nb", Pod: "b-0", Button: "Keep 4 h"}, wantTS: "2.0"},
		{desc: "the pod's own, not one of the same name in another namespace", req: PressRequest{Namespace: "nb", Pod: "a-0", Button: "Keep 4 h"}, wantTS: "1.0"},
		{desc: "Restore is on the reclaim reply", req: PressRequest{Namespace: "nb", Pod: "a-0", Button: "Restore"}, wantTS: "3.0"},
		{desc: "no such button yet", req: PressRequest{Namespace: "nb", Pod: "b-0", Button: "Restore"}},
		{desc: "a label that is not a button", req: PressRequest{Namespace: "nb", Pod: "a-0", Button: "notice a"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := pressable(msgs, tc.req)
			require.Equal(t, tc.wantTS != "", ok)
			require.Equal(t, tc.wantTS, got.TS)
		})
	}

	// The newest wins: a second notice after the pod was noticed again.
	again := append(msgs, posted(t, "6.0", "", "notice b again", "nb", "b-0", "Keep 4 h"))
	got, ok := pressable(again, PressRequest{Namespace: "nb", Pod: "b-0", Button: "Keep 4 h"})
	require.True(t, ok)
	require.Equal(t, "6.0", got.TS)
}

func TestConfirmation(t *testing.T) {
	msgs := []notifytest.Posted{
		{TS: "7.0", ThreadTS: "2.0", Text: "Kept: <@U0CAROL03> pressed \"Keep 4 h\". nb/b-0 is kept until ..."},
		{TS: "8.0", ThreadTS: "1.0", Text: "Reclaimed nb/a-0: ..."},
		{TS: "9.0", ThreadTS: "1.0", Text: "Restored nb/a-0: <@U0CAROL03> pressed Restore and the janitor scaled Deployment d back to 1 replicas."},
	}
	for _, tc := range []struct {
		desc, thread, user, want string
	}{
		{desc: "the presser's confirmation in the pressed thread", thread: "1.0", user: "U0CAROL03", want: msgs[2].Text},
		{desc: "another thread's", thread: "2.0", user: "U0CAROL03", want: msgs[0].Text},
		{desc: "a message in the thread that does not name the presser is no confirmation", thread: "1.0", user: "U0ALICE01"},
		{desc: "nothing in the thread", thread: "3.0", user: "U0CAROL03"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := confirmation(msgs, tc.thread, tc.user)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, got)
		})
	}
}
