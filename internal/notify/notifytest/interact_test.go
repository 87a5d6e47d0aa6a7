package notifytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
)

func button(actionID, text, value string) map[string]any {
	return map[string]any{"type": "button", "action_id": actionID, "value": value, "text": map[string]any{"type": "plain_text", "text": text}}
}

func actions(elems ...map[string]any) string {
	var es []any
	for _, e := range elems {
		es = append(es, e)
	}
	b, _ := json.Marshal([]any{map[string]any{"type": "actions", "block_id": "kubemedic", "elements": es}})
	return string(b)
}

func TestPostMessageChecksInteractiveLimits(t *testing.T) {
	s := New(t)
	s.AddChannel("C0000001", "gpu")
	many := make([]map[string]any, 26)
	for i := range many {
		many[i] = button(fmt.Sprintf("a%d", i), "x", "v")
	}
	for _, tc := range []struct {
		desc   string
		blocks string
		err    string // "" for accepted
	}{
		{desc: "at every limit", blocks: actions(button(strings.Repeat("a", 255), strings.Repeat("t", 75), strings.Repeat("v", 2000)))},
		{desc: "button text of 76", blocks: actions(button("a", strings.Repeat("t", 76), "v")), err: "/blocks/0/elements/0/text/text"},
		{desc: "empty button text", blocks: actions(button("a", "", "v")), err: "/text/text"},
		{desc: "value of 2001", blocks: actions(button("a", "t", strings.Repeat("v", 2001))), err: "/blocks/0/elements/0/value"},
		{desc: "action_id of 256", blocks: actions(button(strings.Repeat("a", 256), "t", "v")), err: "/action_id"},
		{desc: "26 elements", blocks: actions(many...), err: "no more than 25 items"},
		{desc: "duplicate action_id", blocks: actions(button("a", "t", "v"), button("a", "u", "w")), err: "duplicate action_id"},
		{desc: "mrkdwn button text", blocks: `[{"type":"actions","elements":[{"type":"button","action_id":"a","text":{"type":"mrkdwn","text":"x"}}]}]`, err: "plain_text"},
		{desc: "bad style", blocks: `[{"type":"actions","elements":[{"type":"button","action_id":"a","style":"green","text":{"type":"plain_text","text":"x"}}]}]`, err: "style"},
		{desc: "confirm text of 301", blocks: `[{"type":"actions","elements":[{"type":"button","action_id":"a","text":{"type":"plain_text","text":"x"},"confirm":{"title":{"type":"plain_text","text":"t"},"text":{"type":"plain_text","text":"` + strings.Repeat("c", 301) + `"},"confirm":{"type":"plain_text","text":"ok"},"deny":{"type":"plain_text","text":"no"}}}]}]`, err: "/confirm/text/text"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, body := call(t, s, MethodPostMessage, withToken("channel", "C0000001", "text", "t", "blocks", tc.blocks), nil)
			if tc.err == "" {
				require.Equal(t, true, body["ok"], "%v", body)
				return
			}
			require.Equal(t, "invalid_blocks", body["error"], "%v", body)
			require.Contains(t, fmt.Sprint(body["response_metadata"]), tc.err)
		})
	}
}

func TestPressSignsAsSlackAndServesResponseURL(t *testing.T) {
	s := New(t)
	s.AddUser("U0000001", "alice@example.com")
	s.AddChannel("C0000001", "gpu")
	_, _, body := call(t, s, MethodPostMessage, withToken("channel", "C0000001", "text", "notice", "blocks",
		actions(button("kubemedic-keep-240m", "Keep 4 h", `{"a":"keep"}`))), nil)
	require.Equal(t, true, body["ok"])
	msg := s.Messages()[0]

	_, err := s.Press("U0000001", msg, "Keep 99 h")
	require.ErrorContains(t, err, `has no button "Keep 99 h"`)
	_, err = s.Press("U9999999", msg, "Keep 4 h")
	require.ErrorContains(t, err, "not in the workspace")

	const secret = "signing-secret"
	var got []slack.InteractionCallback
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			_, _ = sv.Write(raw)
			err = sv.Ensure()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		form, _ := url.ParseQuery(string(raw))
		var ic slack.InteractionCallback
		if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got = append(got, ic)
	}))
	defer app.Close()

	in, err := s.Press("U0000001", msg, "Keep 4 h")
	require.NoError(t, err)
	status, _, err := in.Signed(secret, time.Now()).Send(app.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "slack-go's own verifier accepts the signature")
	require.Len(t, got, 1)
	ic := got[0]
	require.Equal(t, slack.InteractionTypeBlockActions, ic.Type)
	require.Equal(t, "U0000001", ic.User.ID)
	require.Equal(t, msg.Channel, ic.Container.ChannelID)
	require.Equal(t, msg.TS, ic.Container.MessageTs)
	require.Equal(t, in.ResponseURL, ic.ResponseURL)
	require.Len(t, ic.ActionCallback.BlockActions, 1)
	require.Equal(t, "kubemedic-keep-240m", ic.ActionCallback.BlockActions[0].ActionID)
	require.Equal(t, `{"a":"keep"}`, ic.ActionCallback.BlockActions[0].Value)

	forged, _ := s.Press("U0000001", msg, "Keep 4 h")
	status, _, _ = forged.Signed("not-the-secret", time.Now()).Send(app.URL)
	require.Equal(t, http.StatusUnauthorized, status)
	stale, _ := s.Press("U0000001", msg, "Keep 4 h")
	status, _, _ = stale.Signed(secret, time.Now().Add(-6*time.Minute)).Send(app.URL)
	require.Equal(t, http.StatusUnauthorized, status)
	status, _, _ = in.Send(app.URL)
	require.Equal(t, http.StatusOK, status, "a replay passes slack-go's verifier: the app must remember signatures")

	// An app that answers after 3 s has failed the press, as in Slack.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer slow.Close()
	_, _, err = in.Send(slow.URL)
	close(release)
	require.ErrorContains(t, err, "no answer within Slack's 3s")

	// The response_url takes 5 answers, then refuses, as Slack's does.
	for i := 0; i < 5; i++ {
		require.NoError(t, slack.PostWebhook(in.ResponseURL, &slack.WebhookMessage{ResponseType: "ephemeral", Text: fmt.Sprint("answer ", i)}))
	}
	require.Error(t, slack.PostWebhook(in.ResponseURL, &slack.WebhookMessage{Text: "sixth"}))
	require.Error(t, slack.PostWebhook(s.URL()+"response_url/T0KUBEMED/1/unknown", &slack.WebhookMessage{Text: "x"}))
	rs := s.ResponsesTo(in)
	require.Len(t, rs, 5)
	require.Equal(t, "ephemeral", rs[0].ResponseType)
	require.Equal(t, "answer 0", rs[0].Text)
}
