package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
)

func slackErr(code string) error { return slack.SlackErrorResponse{Err: code} }

func TestClassify(t *testing.T) {
	// What slack-go returns when a proxy answers 200 with an HTML page.
	syntaxErr := json.Unmarshal([]byte("<html>"), &struct{}{})

	tests := []struct {
		desc      string
		err       error
		wantClass errorClass
		wantWait  time.Duration
	}{
		{desc: "429 with Retry-After", err: &slack.RateLimitedError{RetryAfter: 7 * time.Second}, wantClass: classRateLimited, wantWait: 7 * time.Second},
		{desc: "429 with Retry-After 0 waits the minimum", err: &slack.RateLimitedError{}, wantClass: classRateLimited, wantWait: time.Second},
		{desc: "wrapped 429", err: fmt.Errorf("slack chat.postMessage: %w", &slack.RateLimitedError{RetryAfter: 2 * time.Second}), wantClass: classRateLimited, wantWait: 2 * time.Second},
		{desc: "429 without Retry-After backs off", err: slack.StatusCodeError{Code: 429, Status: "429 Too Many Requests"}, wantClass: classRateLimited},
		{desc: "500", err: slack.StatusCodeError{Code: 500, Status: "500 Internal Server Error"}, wantClass: classTransient},
		{desc: "502", err: slack.StatusCodeError{Code: 502}, wantClass: classTransient},
		{desc: "503 wrapped", err: fmt.Errorf("x: %w", slack.StatusCodeError{Code: 503}), wantClass: classTransient},
		{desc: "408", err: slack.StatusCodeError{Code: 408}, wantClass: classTransient},
		{desc: "400", err: slack.StatusCodeError{Code: 400}, wantClass: classPermanent},
		{desc: "403", err: slack.StatusCodeError{Code: 403}, wantClass: classPermanent},
		{desc: "404", err: slack.StatusCodeError{Code: 404}, wantClass: classPermanent},
		{desc: "users_not_found", err: slackErr("users_not_found"), wantClass: classPermanent},
		{desc: "user_not_found", err: slackErr("user_not_found"), wantClass: classPermanent},
		{desc: "channel_not_found", err: slackErr("channel_not_found"), wantClass: classPermanent},
		{desc: "not_in_channel", err: slackErr("not_in_channel"), wantClass: classPermanent},
		{desc: "invalid_auth", err: slackErr("invalid_auth"), wantClass: classPermanent},
		{desc: "not_authed", err: slackErr("not_authed"), wantClass: classPermanent},
		{desc: "account_inactive", err: slackErr("account_inactive"), wantClass: classPermanent},
		{desc: "token_revoked", err: slackErr("token_revoked"), wantClass: classPermanent},
		{desc: "is_archived", err: slackErr("is_archived"), wantClass: classPermanent},
		{desc: "msg_too_long", err: slackErr("msg_too_long"), wantClass: classPermanent},
		{desc: "missing_scope", err: slackErr("missing_scope"), wantClass: classPermanent},
		{desc: "invalid_blocks", err: slackErr("invalid_blocks"), wantClass: classPermanent},
		{desc: "invalid_thread_ts", err: slackErr("invalid_thread_ts"), wantClass: classPermanent},
		{desc: "an error code Slack adds later", err: slackErr("some_new_error"), wantClass: classPermanent},
		{desc: "internal_error", err: slackErr("internal_error"), wantClass: classTransient},
		{desc: "fatal_error", err: slackErr("fatal_error"), wantClass: classTransient},
		{desc: "service_unavailable", err: slackErr("service_unavailable"), wantClass: classTransient},
		{desc: "request_timeout", err: slackErr("request_timeout"), wantClass: classTransient},
		{desc: "ratelimited in the body", err: slackErr("ratelimited"), wantClass: classTransient},
		{desc: "wrapped Slack error", err: fmt.Errorf("notify: %w", slackErr("is_archived")), wantClass: classPermanent},
		{desc: "connection reset", err: &url.Error{Op: "Post", URL: "https://slack.com/api/chat.postMessage", Err: &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}}, wantClass: classTransient},
		{desc: "connection closed", err: &url.Error{Op: "Post", URL: "https://slack.com/api/chat.postMessage", Err: io.EOF}, wantClass: classTransient},
		{desc: "per-request timeout", err: &url.Error{Op: "Post", Err: context.DeadlineExceeded}, wantClass: classTransient},
		{desc: "HTML instead of JSON", err: syntaxErr, wantClass: classTransient},
		{desc: "not configured", err: fmt.Errorf("notify: %w", ErrNotConfigured), wantClass: classPermanent},
		{desc: "no recipient", err: ErrNoRecipient, wantClass: classPermanent},
		{desc: "invalid message", err: fmt.Errorf("x: %w", ErrInvalidMessage), wantClass: classPermanent},
		{desc: "redacted keeps its class", err: &redactedError{msg: "x", class: classRateLimited, wait: 3 * time.Second}, wantClass: classRateLimited, wantWait: 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			class, wait := classify(tc.err)
			require.Equal(t, tc.wantClass.String(), class.String())
			require.Equal(t, tc.wantWait, wait)
			require.Equal(t, tc.wantClass == classPermanent, IsPermanent(tc.err))
		})
	}
}

func TestIsPermanentEdges(t *testing.T) {
	require.False(t, IsPermanent(nil))
	require.False(t, IsPermanent(context.Canceled), "a cancelled caller is not Slack refusing")
	require.False(t, IsPermanent(fmt.Errorf("slack chat.postMessage: %w (stopped: %w)", slack.StatusCodeError{Code: 500}, context.Canceled)))
}

func TestIsUnreachable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{slackErr("users_not_found"), true},
		{slackErr("user_not_found"), true},
		{slackErr("user_disabled"), true},
		{slackErr("cannot_dm_bot"), true},
		{fmt.Errorf("slack users.lookupByEmail: %w", slackErr("users_not_found")), true},
		{&redactedError{unreachable: true}, true},
		{slackErr("channel_not_found"), false},
		{slackErr("missing_scope"), false},
		{slackErr("invalid_auth"), false},
		{slack.StatusCodeError{Code: 500}, false},
		{io.EOF, false},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			require.Equal(t, tc.want, IsUnreachable(tc.err))
		})
	}
}
