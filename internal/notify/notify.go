package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"
)

// ErrNotConfigured is returned by Disabled: no Slack token is configured.
// Callers treat it like a failing Slack (a notice that was not delivered);
// IsPermanent reports true for it.
var ErrNotConfigured = errors.New("slack notifier not configured")

// ErrNoRecipient is returned by Post when the Recipient has no user ID, email
// or channel. It is permanent.
var ErrNoRecipient = errors.New("no Slack recipient")

// ErrInvalidMessage is returned by Post for a message Slack would refuse
// (no fallback Text, or a reply to a Thread without channel or timestamp).
// It is permanent.
var ErrInvalidMessage = errors.New("invalid Slack message")

// Recipient is who a message goes to, in order of preference: UserID, then
// Email, then Channel. Post falls back to the next field that is set when
// Slack cannot find the person (see Slack.Post).
type Recipient struct {
	// UserID is a Slack user ID (U… or W…); the message goes to the
	// person's direct-message channel with the app.
	UserID string
	// Email is resolved to a user with users.lookupByEmail, then as UserID.
	Email string
	// Channel is a channel ID or name. It is used when neither of the above
	// is set, or when Slack cannot find the person.
	Channel string
	// Source says where the recipient came from, for messages and logs,
	// e.g. "pod annotation kubemedic.io/owner".
	Source string
}

// String describes the recipient for logs and Events, e.g.
// "email alice@example.com, else channel gpu-users (from pod annotation kubemedic.io/owner)".
func (r Recipient) String() string {
	var parts []string
	for _, c := range r.candidates() {
		parts = append(parts, c.String())
	}
	s := strings.Join(parts, ", else ")
	if s == "" {
		s = "nobody"
	}
	if r.Source != "" {
		s += " (from " + r.Source + ")"
	}
	return s
}

// candidate is one way to reach a Recipient.
type candidate struct {
	kind  candidateKind
	value string
}

type candidateKind int

const (
	byUserID candidateKind = iota
	byEmail
	byChannel
)

func (c candidate) String() string {
	switch c.kind {
	case byUserID:
		return "user " + c.value
	case byEmail:
		return "email " + c.value
	default:
		return "channel " + c.value
	}
}

// candidates lists the ways to reach r, most preferred first.
func (r Recipient) candidates() []candidate {
	var cs []candidate
	if r.UserID != "" {
		cs = append(cs, candidate{byUserID, r.UserID})
	}
	if r.Email != "" {
		cs = append(cs, candidate{byEmail, r.Email})
	}
	if r.Channel != "" {
		cs = append(cs, candidate{byChannel, r.Channel})
	}
	return cs
}

// Thread identifies a posted message so that follow-ups go into its thread.
// Callers may persist Channel and TS (e.g. in an annotation) and build a
// Thread from them later; Recipient and Fallback are for Events and logs.
type Thread struct {
	// Channel is the ID of the conversation the message was posted in (a
	// D… direct-message channel or a channel ID, never a name).
	Channel string
	// TS is Slack's timestamp of the thread's first message.
	TS string
	// Recipient says which of the Recipient's fields was used, e.g.
	// "email alice@example.com" or "channel C0123ABCD".
	Recipient string
	// Fallback is empty when the preferred field was used; otherwise it says
	// why the earlier ones were not, e.g.
	// "email alice@example.com: users_not_found".
	Fallback string
}

// Message is one Slack message.
type Message struct {
	// Text is the notification fallback, shown in notifications and by
	// clients that cannot render blocks. Required. It is sent as mrkdwn:
	// escape user-provided parts with Escape.
	Text string
	// Blocks is the Block Kit body; see Section, Fields, Context.
	Blocks []slack.Block
}

// Notifier posts messages. Post starts a thread (thread == nil), sending to
// the best reachable field of to, or replies in thread (to is then only
// used in error messages). It returns the thread to reply in next.
type Notifier interface {
	Post(ctx context.Context, to Recipient, thread *Thread, msg Message) (Thread, error)
}

// Disabled is the Notifier used when no Slack token is configured: every
// Post fails with ErrNotConfigured, so that callers take the same path as
// when Slack is down and never assume a notice was delivered.
type Disabled struct{}

var _ Notifier = Disabled{}

// Post returns ErrNotConfigured.
func (Disabled) Post(_ context.Context, to Recipient, _ *Thread, _ Message) (Thread, error) {
	return Thread{}, fmt.Errorf("notify %s: %w", to, ErrNotConfigured)
}
