package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/decide"
)

// pressWait bounds each wait of a press: for the message with the button
// to arrive, then for the janitor's answer.
const pressWait = 20 * time.Second

// PressRequest asks the demo to press a button of a janitor message in
// the Slack stand-in, as a researcher would in Slack.
type PressRequest struct {
	// Namespace and Pod name the pod the button acts on, as the janitor
	// wrote them in the button's value.
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Button is the button's text, e.g. "Keep 4 h" or "Restore".
	Button string `json:"button"`
	// As is the e-mail of the researcher who presses.
	As string `json:"as"`
}

// Pressed is what came of a press: the janitor confirmed it in the
// pod's thread, or refused it with an answer only the presser sees.
type Pressed struct {
	// User is the presser's Slack user ID.
	User string `json:"user"`
	// Status is the HTTP status the janitor's endpoint answered.
	Status int `json:"status"`
	// Confirmation is the janitor's message in the thread that names the
	// presser; Refusal its ephemeral answer. One of them is set.
	Confirmation string `json:"confirmation,omitempty"`
	Refusal      string `json:"refusal,omitempty"`
}

// newSigningSecret is a fresh Slack signing secret: 32 hex digits, as
// Slack's look.
func newSigningSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a Slack signing secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Press presses a button of the janitor's newest message about a pod in
// the Slack stand-in, as req.As: it waits for the message, sends the
// request Slack would send (signed with the janitor's signing secret) to
// the janitor's interactivity endpoint, and waits for the janitor's
// answer. A refusal is an answer, not an error.
func (w *World) Press(ctx context.Context, req PressRequest) (Pressed, error) {
	if w.Slack == nil || w.interactURL == "" {
		return Pressed{}, &BadRequestError{"the demo sends to a real Slack workspace: press the buttons there"}
	}
	user := ""
	for _, r := range researchers {
		if r.Email == req.As {
			user = r.ID
		}
	}
	if user == "" {
		return Pressed{}, &BadRequestError{fmt.Sprintf("%q is not a researcher of the demo", req.As)}
	}
	ctx, cancel := context.WithTimeout(ctx, pressWait)
	defer cancel()
	var msg notifytest.Posted
	for {
		var ok bool
		if msg, ok = pressable(w.Slack.Messages(), req); ok {
			break
		}
		select {
		case <-ctx.Done():
			return Pressed{}, fmt.Errorf("no Slack message about pod %s/%s with the button %q within %s", req.Namespace, req.Pod, req.Button, pressWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
	in, err := w.Slack.Press(user, msg, req.Button)
	if err != nil {
		return Pressed{}, err
	}
	seen := len(w.Slack.Messages())
	w.say("%s presses %q on the janitor's message about pod %s/%s (the stand-in signs the request as Slack does)", req.As, req.Button, req.Namespace, req.Pod)
	status, body, err := in.Signed(w.slackSecret, time.Now()).Send(w.interactURL)
	if err != nil {
		return Pressed{}, fmt.Errorf("press %q: %w", req.Button, err)
	}
	out := Pressed{User: user, Status: status}
	if status != http.StatusOK {
		return out, fmt.Errorf("press %q: the janitor's endpoint answered %d: %s", req.Button, status, strings.TrimSpace(body))
	}
	thread := msg.ThreadTS
	if thread == "" {
		thread = msg.TS
	}
	for {
		if rs := w.Slack.ResponsesTo(in); len(rs) > 0 {
			out.Refusal = rs[0].Text
			return out, nil
		}
		if all := w.Slack.Messages(); len(all) > seen {
			if text, ok := confirmation(all[seen:], thread, user); ok {
				out.Confirmation = text
				return out, nil
			}
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("press %q: the janitor neither confirmed it in the thread nor refused it within %s (its log: %s)", req.Button, pressWait, filepath.Join(w.opts.Dir, "logs", "kubemedic-janitor.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pressable is the newest message with a button labelled req.Button that
// acts on req's pod.
func pressable(msgs []notifytest.Posted, req PressRequest) (notifytest.Posted, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		b, ok := msgs[i].Button(req.Button)
		if !ok {
			continue
		}
		if v, err := decide.ParseButton(b.Value); err == nil && v.Namespace == req.Namespace && v.Pod == req.Pod {
			return msgs[i], true
		}
	}
	return notifytest.Posted{}, false
}

// confirmation is the first of msgs posted in thread that mentions user,
// as the janitor's confirmation of a press does.
func confirmation(msgs []notifytest.Posted, thread, user string) (string, bool) {
	for _, m := range msgs {
		if m.ThreadTS == thread && strings.Contains(m.Text, notify.Mention(user)) {
			return m.Text, true
		}
	}
	return "", false
}
