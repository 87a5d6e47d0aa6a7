package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
)

// recordingClock is a fake clock that reports every wait Slack starts, so a
// test can check the duration and then step past it.
type recordingClock struct {
	*testingclock.FakeClock
	waits chan time.Duration
}

func newRecordingClock() *recordingClock {
	return &recordingClock{
		FakeClock: testingclock.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)),
		waits:     make(chan time.Duration, 100),
	}
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.waits <- d
	return t
}

// expectWait fails t unless Slack starts a wait of want, then steps the
// clock past it.
func (c *recordingClock) expectWait(t *testing.T, want time.Duration) {
	t.Helper()
	select {
	case d := <-c.waits:
		require.Equal(t, want, d)
		c.Step(d)
	case <-time.After(10 * time.Second):
		t.Fatalf("no wait of %s started", want)
	}
}

// await returns what ch delivers, failing t rather than hanging when a
// broken retry loop never returns.
func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("Post did not return")
		var zero T
		return zero
	}
}

func (c *recordingClock) expectNoWait(t *testing.T) {
	t.Helper()
	require.Empty(t, c.waits, "no retry wait expected")
}

type harness struct {
	srv   *notifytest.Server
	clock *recordingClock
	slack *Slack
}

func newHarness(t *testing.T, opts ...func(*SlackOptions)) *harness {
	t.Helper()
	srv := notifytest.New(t)
	srv.AddUser("U0000ALICE", "alice@example.com")
	srv.AddUser("U0000BOB", "bob@example.com")
	srv.AddChannel("C0000GPU", "gpu-users")
	c := newRecordingClock()
	o := SlackOptions{APIURL: srv.URL(), Clock: c, Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 1}), RequestTimeout: 10 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	return &harness{srv: srv, clock: c, slack: NewSlack(notifytest.Token, o)}
}

func testMessage() Message {
	return Message{
		Text: "Your GPU pod team-a/train-0 has been idle for 3h",
		Blocks: []slack.Block{
			Section("*Seen:* GPU utilisation 0% for 3h on " + Code("team-a/train-0")),
			Fields("Reclaim at", "2026-11-21 15:00 UTC", "To keep it", "annotate the pod"),
			Context("kubemedic janitor"),
		},
	}
}

func TestPostDMByEmail(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	msg := testMessage()

	th, err := h.slack.Post(ctx, Recipient{Email: "alice@example.com", Channel: "gpu-users"}, nil, msg)
	require.NoError(t, err)

	got := h.srv.Messages()
	require.Len(t, got, 1)
	dm := h.srv.DMChannel("U0000ALICE")
	require.NotEmpty(t, dm)
	require.Equal(t, dm, got[0].Channel)
	require.Equal(t, "U0000ALICE", got[0].User)
	require.Empty(t, got[0].ThreadTS)
	require.Equal(t, msg.Text, got[0].Text)
	wantBlocks, err := json.Marshal(msg.Blocks)
	require.NoError(t, err)
	require.JSONEq(t, string(wantBlocks), string(got[0].Blocks))
	require.Equal(t, "false", got[0].Form.Get("unfurl_links"))
	require.Equal(t, "false", got[0].Form.Get("unfurl_media"))
	require.Equal(t, Thread{Channel: dm, TS: got[0].TS, Recipient: "email alice@example.com"}, th)

	t.Run("lookups are cached", func(t *testing.T) {
		_, err := h.slack.Post(ctx, Recipient{Email: "Alice@Example.com"}, nil, msg)
		require.NoError(t, err)
		require.Len(t, h.srv.Messages(), 2)
		require.Equal(t, 1, h.srv.Calls(notifytest.MethodLookupByEmail))
		require.Equal(t, 1, h.srv.Calls(notifytest.MethodOpen))
	})
	t.Run("cache entries expire", func(t *testing.T) {
		h.clock.Step(DefaultCacheTTL)
		_, err := h.slack.Post(ctx, Recipient{Email: "alice@example.com"}, nil, msg)
		require.NoError(t, err)
		require.Equal(t, 2, h.srv.Calls(notifytest.MethodLookupByEmail))
		require.Equal(t, 2, h.srv.Calls(notifytest.MethodOpen))
	})
}

func TestPostDMByUserID(t *testing.T) {
	h := newHarness(t)
	th, err := h.slack.Post(t.Context(), Recipient{UserID: "U0000BOB", Email: "alice@example.com"}, nil, testMessage())
	require.NoError(t, err)
	got := h.srv.Messages()
	require.Len(t, got, 1)
	require.Equal(t, "U0000BOB", got[0].User, "the user ID is preferred over the email")
	require.Equal(t, "user U0000BOB", th.Recipient)
	require.Zero(t, h.srv.Calls(notifytest.MethodLookupByEmail))
}

func TestPostToChannel(t *testing.T) {
	h := newHarness(t)
	th, err := h.slack.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, testMessage())
	require.NoError(t, err)
	require.Equal(t, "C0000GPU", th.Channel, "the thread names the channel by ID, for replies")
	require.Equal(t, "channel gpu-users", th.Recipient)
	require.Len(t, h.srv.Messages(), 1)
	require.Zero(t, h.srv.Calls(notifytest.MethodOpen))
}

func TestPostFallsBack(t *testing.T) {
	tests := []struct {
		desc          string
		to            Recipient
		setup         func(*notifytest.Server)
		wantChannel   func(*notifytest.Server) string
		wantRecipient string
		wantFallback  string
	}{
		{
			desc:          "unknown email to channel",
			to:            Recipient{Email: "carol@example.com", Channel: "gpu-users"},
			wantChannel:   func(*notifytest.Server) string { return "C0000GPU" },
			wantRecipient: "channel gpu-users",
			wantFallback:  "email carol@example.com: users_not_found",
		},
		{
			desc:          "unknown user ID to email",
			to:            Recipient{UserID: "U0000CAROL", Email: "alice@example.com", Channel: "gpu-users"},
			wantChannel:   func(s *notifytest.Server) string { return s.DMChannel("U0000ALICE") },
			wantRecipient: "email alice@example.com",
			wantFallback:  "user U0000CAROL: user_not_found",
		},
		{
			desc:          "unknown user ID and email to channel",
			to:            Recipient{UserID: "U0000CAROL", Email: "carol@example.com", Channel: "gpu-users"},
			wantChannel:   func(*notifytest.Server) string { return "C0000GPU" },
			wantRecipient: "channel gpu-users",
			wantFallback:  "user U0000CAROL: user_not_found; email carol@example.com: users_not_found",
		},
		{
			desc:          "deactivated account to channel",
			to:            Recipient{Email: "bob@example.com", Channel: "gpu-users"},
			setup:         func(s *notifytest.Server) { s.DeactivateUser("U0000BOB") },
			wantChannel:   func(*notifytest.Server) string { return "C0000GPU" },
			wantRecipient: "channel gpu-users",
			wantFallback:  "email bob@example.com: user_disabled",
		},
		{
			desc: "conversations.open refuses a disabled user",
			to:   Recipient{UserID: "U0000BOB", Channel: "gpu-users"},
			setup: func(s *notifytest.Server) {
				s.FailNext(notifytest.MethodOpen, notifytest.SlackError("user_disabled"))
			},
			wantChannel:   func(*notifytest.Server) string { return "C0000GPU" },
			wantRecipient: "channel gpu-users",
			wantFallback:  "user U0000BOB: user_disabled",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h.srv)
			}
			th, err := h.slack.Post(t.Context(), tc.to, nil, testMessage())
			require.NoError(t, err)
			got := h.srv.Messages()
			require.Len(t, got, 1)
			require.Equal(t, tc.wantChannel(h.srv), got[0].Channel)
			require.Equal(t, got[0].Channel, th.Channel)
			require.Equal(t, tc.wantRecipient, th.Recipient)
			require.Equal(t, tc.wantFallback, th.Fallback)
			h.clock.expectNoWait(t)
		})
	}
}

func TestPostDoesNotFallBackOnOtherErrors(t *testing.T) {
	h := newHarness(t)
	h.srv.FailNext(notifytest.MethodLookupByEmail, notifytest.SlackError("missing_scope"))
	_, err := h.slack.Post(t.Context(), Recipient{Email: "alice@example.com", Channel: "gpu-users"}, nil, testMessage())
	require.Error(t, err)
	require.True(t, IsPermanent(err))
	require.Contains(t, err.Error(), "missing_scope")
	require.Contains(t, err.Error(), "users.lookupByEmail")
	require.Empty(t, h.srv.Messages(), "a broken token must show, not hide behind the channel")
	require.Zero(t, h.srv.Calls(notifytest.MethodPostMessage))
}

func TestPostFallbackFailsToo(t *testing.T) {
	h := newHarness(t)
	_, err := h.slack.Post(t.Context(), Recipient{Email: "carol@example.com", Channel: "nope"}, nil, testMessage())
	require.Error(t, err)
	require.True(t, IsPermanent(err))
	require.Equal(t, "notify channel nope (after email carol@example.com: users_not_found): slack chat.postMessage: channel_not_found", err.Error())
}

func TestPostOnlyPersonUnknown(t *testing.T) {
	h := newHarness(t)
	_, err := h.slack.Post(t.Context(), Recipient{Email: "carol@example.com"}, nil, testMessage())
	require.Error(t, err)
	require.True(t, IsPermanent(err))
	require.True(t, isUnreachable(err), "callers can tell the person was not found")
	require.Empty(t, h.srv.Messages())
}

func TestReplyInThread(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	first, err := h.slack.Post(ctx, Recipient{Email: "alice@example.com"}, nil, testMessage())
	require.NoError(t, err)

	// A caller that kept only the channel and ts (e.g. in an annotation).
	again, err := h.slack.Post(ctx, Recipient{Email: "alice@example.com"}, &Thread{Channel: first.Channel, TS: first.TS}, Message{Text: "Snoozed until tomorrow"})
	require.NoError(t, err)
	require.Equal(t, Thread{Channel: first.Channel, TS: first.TS}, again)

	_, err = h.slack.Post(ctx, Recipient{}, &again, Message{Text: "Reclaimed"})
	require.NoError(t, err)

	got := h.srv.Messages()
	require.Len(t, got, 3)
	for _, m := range got[1:] {
		require.Equal(t, first.Channel, m.Channel)
		require.Equal(t, first.TS, m.ThreadTS)
	}
	require.Equal(t, 1, h.srv.Calls(notifytest.MethodLookupByEmail), "a reply does not look the person up again")

	t.Run("a thread Slack does not know", func(t *testing.T) {
		_, err := h.slack.Post(ctx, Recipient{}, &Thread{Channel: first.Channel, TS: "1600000000.000001"}, Message{Text: "x"})
		require.Error(t, err)
		require.True(t, IsPermanent(err))
		require.Contains(t, err.Error(), "invalid_thread_ts")
	})
	t.Run("a thread without a ts", func(t *testing.T) {
		_, err := h.slack.Post(ctx, Recipient{}, &Thread{Channel: first.Channel}, Message{Text: "x"})
		require.ErrorIs(t, err, ErrInvalidMessage)
	})
}

func TestRateLimitThenServerErrorThenOK(t *testing.T) {
	h := newHarness(t)
	h.srv.FailNext(notifytest.MethodPostMessage, notifytest.RateLimited(30), notifytest.ServerError())

	type result struct {
		th  Thread
		err error
	}
	done := make(chan result, 1)
	go func() {
		th, err := h.slack.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, testMessage())
		done <- result{th, err}
	}()

	h.clock.expectWait(t, 30*time.Second) // Slack's Retry-After
	h.clock.expectWait(t, backoffBase)    // after the 500
	r := await(t, done)
	require.NoError(t, r.err)
	require.Len(t, h.srv.Messages(), 1, "exactly one message")
	require.Equal(t, 3, h.srv.Calls(notifytest.MethodPostMessage))
	require.Equal(t, h.srv.Messages()[0].TS, r.th.TS)
}

func TestNetworkErrorIsRetried(t *testing.T) {
	h := newHarness(t)
	h.srv.FailNext(notifytest.MethodOpen, notifytest.Failure{Disconnect: true}, notifytest.SlackError("internal_error"))
	done := make(chan error, 1)
	go func() {
		_, err := h.slack.Post(t.Context(), Recipient{UserID: "U0000ALICE"}, nil, testMessage())
		done <- err
	}()
	h.clock.expectWait(t, backoffBase)
	h.clock.expectWait(t, 2*backoffBase)
	require.NoError(t, await(t, done))
	require.Len(t, h.srv.Messages(), 1)
}

func TestRetriesAreBounded(t *testing.T) {
	h := newHarness(t)
	for range 10 {
		h.srv.FailNext(notifytest.MethodPostMessage, notifytest.ServerError())
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.slack.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, testMessage())
		done <- err
	}()
	h.clock.expectWait(t, 1*time.Second)
	h.clock.expectWait(t, 2*time.Second)
	h.clock.expectWait(t, 4*time.Second)
	err := await(t, done)
	require.Error(t, err)
	require.False(t, IsPermanent(err), "a 5xx may pass; the caller may try again later")
	require.Contains(t, err.Error(), "giving up after 4 attempts")
	require.Equal(t, DefaultMaxAttempts, h.srv.Calls(notifytest.MethodPostMessage))
	require.Empty(t, h.srv.Messages())
	h.clock.expectNoWait(t)
}

func TestPermanentErrorReturnsAtOnce(t *testing.T) {
	for _, code := range []string{"channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "account_inactive", "msg_too_long"} {
		t.Run(code, func(t *testing.T) {
			h := newHarness(t)
			h.srv.FailNext(notifytest.MethodPostMessage, notifytest.SlackError(code))
			_, err := h.slack.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, testMessage())
			require.Error(t, err)
			require.True(t, IsPermanent(err))
			require.Contains(t, err.Error(), code)
			require.Equal(t, 1, h.srv.Calls(notifytest.MethodPostMessage))
			h.clock.expectNoWait(t)
		})
	}
	t.Run("real refusals from the stand-in", func(t *testing.T) {
		h := newHarness(t)
		h.srv.AddChannelWithoutApp("C0000PRIV", "private")
		_, err := h.slack.Post(t.Context(), Recipient{Channel: "private"}, nil, testMessage())
		require.True(t, IsPermanent(err))
		require.Contains(t, err.Error(), "not_in_channel")

		bad := NewSlack("xoxb-not-the-token", SlackOptions{APIURL: h.srv.URL(), Clock: h.clock})
		_, err = bad.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, testMessage())
		require.True(t, IsPermanent(err))
		require.Contains(t, err.Error(), "invalid_auth")
		h.clock.expectNoWait(t)
	})
}

func TestDMChannelIsForgottenAfterAPermanentError(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	_, err := h.slack.Post(ctx, Recipient{UserID: "U0000ALICE"}, nil, testMessage())
	require.NoError(t, err)
	h.srv.FailNext(notifytest.MethodPostMessage, notifytest.SlackError("channel_not_found"))
	_, err = h.slack.Post(ctx, Recipient{UserID: "U0000ALICE"}, nil, testMessage())
	require.Error(t, err)
	_, err = h.slack.Post(ctx, Recipient{UserID: "U0000ALICE"}, nil, testMessage())
	require.NoError(t, err)
	require.Equal(t, 2, h.srv.Calls(notifytest.MethodOpen), "the DM channel was opened again")
}

func TestLongRetryAfterIsNotWaitedFor(t *testing.T) {
	h := newHarness(t, func(o *SlackOptions) { o.MaxRetryAfter = time.Minute })
	h.srv.FailNext(notifytest.MethodPostMessage, notifytest.RateLimited(3600))
	// The deadline only stops a broken client; a working one returns at once.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := h.slack.Post(ctx, Recipient{Channel: "gpu-users"}, nil, testMessage())
	require.Error(t, err)
	require.False(t, IsPermanent(err))
	var rl *slack.RateLimitedError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Hour, rl.RetryAfter)
	h.clock.expectNoWait(t)
}

func TestCancelWhileWaiting(t *testing.T) {
	h := newHarness(t)
	h.srv.FailNext(notifytest.MethodPostMessage, notifytest.RateLimited(30))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := h.slack.Post(ctx, Recipient{Channel: "gpu-users"}, nil, testMessage())
		done <- err
	}()
	select {
	case d := <-h.clock.waits:
		require.Equal(t, 30*time.Second, d)
	case <-time.After(10 * time.Second):
		t.Fatal("no wait started")
	}
	cancel()
	err := await(t, done)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, IsPermanent(err))
	require.Empty(t, h.srv.Messages())
}

func TestInvalidRequests(t *testing.T) {
	h := newHarness(t)
	_, err := h.slack.Post(t.Context(), Recipient{Channel: "gpu-users"}, nil, Message{Blocks: []slack.Block{Divider()}})
	require.ErrorIs(t, err, ErrInvalidMessage)
	require.True(t, IsPermanent(err))

	_, err = h.slack.Post(t.Context(), Recipient{Source: "pod annotation kubemedic.io/owner"}, nil, testMessage())
	require.ErrorIs(t, err, ErrNoRecipient)
	require.True(t, IsPermanent(err))
	require.Contains(t, err.Error(), "pod annotation kubemedic.io/owner")

	require.Zero(t, h.srv.Calls(notifytest.MethodPostMessage))
}

func TestTokenNeverInErrors(t *testing.T) {
	h := newHarness(t, func(o *SlackOptions) { o.MaxAttempts = 1 })
	ctx := t.Context()
	h.srv.FailNext(notifytest.MethodPostMessage, notifytest.SlackError("invalid_auth"), notifytest.ServerError(), notifytest.RateLimited(1), notifytest.Failure{Disconnect: true})
	var errs []error
	for range 4 {
		_, err := h.slack.Post(ctx, Recipient{Channel: "gpu-users"}, nil, testMessage())
		errs = append(errs, err)
	}
	_, err := h.slack.Post(ctx, Recipient{Email: "nobody@example.com"}, nil, testMessage())
	errs = append(errs, err)
	for _, err := range errs {
		require.Error(t, err)
		require.NotContains(t, err.Error(), notifytest.Token)
	}

	t.Run("an error that carries the token is scrubbed", func(t *testing.T) {
		leaky := fmt.Errorf("Post %q: %w", h.srv.URL()+"chat.postMessage?token="+notifytest.Token, slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"})
		got := h.slack.redact(leaky)
		require.NotContains(t, got.Error(), notifytest.Token)
		require.Contains(t, got.Error(), "token=[REDACTED]")
		require.False(t, IsPermanent(got), "scrubbing keeps the classification")
		for e := got; e != nil; e = errors.Unwrap(e) {
			require.NotContains(t, e.Error(), notifytest.Token)
		}
		require.Same(t, errs[0], h.slack.redact(errs[0]), "errors without the token are returned as they are")
	})
}

func TestDisabled(t *testing.T) {
	var n Notifier = Disabled{}
	_, err := n.Post(t.Context(), Recipient{Email: "alice@example.com"}, nil, testMessage())
	require.ErrorIs(t, err, ErrNotConfigured)
	require.True(t, IsPermanent(err))
}

func TestConcurrentPosts(t *testing.T) {
	h := newHarness(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			to := Recipient{Email: "alice@example.com"}
			if i%2 == 1 {
				to = Recipient{UserID: "U0000BOB"}
			}
			_, err := h.slack.Post(t.Context(), to, nil, Message{Text: fmt.Sprint(i)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := h.srv.WaitMessages(t, n, 10*time.Second)
	texts := map[string]bool{}
	for _, m := range got {
		texts[m.Text] = true
		require.True(t, strings.HasPrefix(m.Channel, "D"))
	}
	require.Len(t, texts, n)
}

func TestCancelledContext(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := h.slack.Post(ctx, Recipient{Channel: "gpu-users"}, nil, testMessage())
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, IsPermanent(err))
	h.clock.expectNoWait(t)
	require.Empty(t, h.srv.Messages())
}
