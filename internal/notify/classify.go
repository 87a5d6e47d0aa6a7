package notify

import (
	"errors"
	"net/http"
	"time"

	"github.com/slack-go/slack"
)

// errorClass says what to do after a failed Slack call.
type errorClass int

const (
	// classTransient: retry after an exponential backoff (5xx, network
	// errors, Slack's own "try again" errors, anything unrecognised).
	classTransient errorClass = iota
	// classRateLimited: retry after the wait Slack asked for.
	classRateLimited
	// classPermanent: retrying the same request will not help.
	classPermanent
)

func (c errorClass) String() string {
	switch c {
	case classTransient:
		return "transient"
	case classRateLimited:
		return "rate-limited"
	default:
		return "permanent"
	}
}

// transientSlackErrors are error codes that Slack answers with ok=false (and
// HTTP 200) for failures on its side; the same request may succeed later.
var transientSlackErrors = map[string]bool{
	"internal_error":      true,
	"fatal_error":         true,
	"service_unavailable": true,
	"request_timeout":     true,
	"ratelimited":         true,
	"rate_limited":        true,
	"team_added_to_org":   true,
}

// unreachableErrors are Slack error codes meaning the person cannot be
// reached (unknown email or user, deactivated account): Post falls back to
// the Recipient's next field.
var unreachableErrors = map[string]bool{
	"users_not_found": true, // users.lookupByEmail
	"user_not_found":  true, // conversations.open
	"user_disabled":   true, // conversations.open, deactivated account
	"cannot_dm_bot":   true, // the "user" is a bot
}

// classify decides, from the error alone, whether a failed Slack call is
// worth retrying and how long Slack asked to wait (zero: use the backoff).
// It is pure: the caller's context is checked by the caller, so a
// context.DeadlineExceeded here is a per-request timeout, hence transient.
//
// Slack's ok=false error codes (users_not_found, channel_not_found,
// not_in_channel, invalid_auth, account_inactive, is_archived, msg_too_long,
// missing_scope, invalid_blocks, ...) are permanent unless listed in
// transientSlackErrors: they describe the request, the token or the
// workspace, and the same request gets the same answer.
func classify(err error) (errorClass, time.Duration) {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	var red *redactedError
	switch {
	case errors.As(err, &red):
		return red.class, red.wait
	case errors.Is(err, ErrNotConfigured), errors.Is(err, ErrNoRecipient), errors.Is(err, ErrInvalidMessage):
		return classPermanent, 0
	case errors.As(err, &rl):
		return classRateLimited, max(rl.RetryAfter, minRetryAfter)
	case errors.As(err, &sc):
		switch {
		case sc.Code == http.StatusTooManyRequests:
			// A 429 without a usable Retry-After header.
			return classRateLimited, 0
		case sc.Code >= 500, sc.Code == http.StatusRequestTimeout:
			return classTransient, 0
		default:
			return classPermanent, 0
		}
	case errors.As(err, &se):
		if transientSlackErrors[se.Err] {
			return classTransient, 0
		}
		return classPermanent, 0
	default:
		// Network errors, timeouts, a proxy's HTML page instead of JSON:
		// worth another bounded try.
		return classTransient, 0
	}
}

// minRetryAfter is the least we wait after a 429, so that a Retry-After of 0
// does not turn into a tight loop.
const minRetryAfter = time.Second

// IsPermanent reports whether err (from Post) will recur if the same
// message is posted again unchanged: Slack refused it for a reason that
// retrying does not fix (unknown channel, bad token, archived channel,
// message too long, ...), or no Slack is configured. Rate limits, 5xx,
// network errors and context cancellation are not permanent.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	c, _ := classify(err)
	return c == classPermanent
}

// IsUnreachable reports whether err (from Post or UserIDByEmail) says
// that Slack does not know the person or cannot reach them (unknown email
// or user, deactivated account, a bot), as opposed to a call that failed:
// asking again gets the same answer.
func IsUnreachable(err error) bool { return isUnreachable(err) }

// isUnreachable reports whether err says that the person cannot be found,
// so that Post should try the Recipient's next field.
func isUnreachable(err error) bool {
	var se slack.SlackErrorResponse
	var red *redactedError
	switch {
	case errors.As(err, &red):
		return red.unreachable
	case errors.As(err, &se):
		return unreachableErrors[se.Err]
	}
	return false
}
