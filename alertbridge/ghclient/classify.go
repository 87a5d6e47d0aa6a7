package ghclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// Reasons a Decision gives. They are stable: logs and tests use them.
const (
	// ReasonOK is a 2xx answer.
	ReasonOK = "ok"
	// ReasonCanceled is the caller's context ending: stop, nothing is lost.
	ReasonCanceled = "canceled"
	// ReasonRateLimited is the primary rate limit: wait for X-RateLimit-Reset.
	ReasonRateLimited = "rate_limited"
	// ReasonSecondaryRateLimited is the secondary (abuse) rate limit.
	ReasonSecondaryRateLimited = "secondary_rate_limited"
	// ReasonTooManyRequests is a 429.
	ReasonTooManyRequests = "too_many_requests"
	// ReasonUnauthorized is a 401: retried because credentials rotate.
	ReasonUnauthorized = "unauthorized"
	// ReasonCredentials is a token that could not be read or minted locally.
	ReasonCredentials = "credentials"
	// ReasonServerError is a 5xx.
	ReasonServerError = "server_error"
	// ReasonConflict is a 409.
	ReasonConflict = "conflict"
	// ReasonTimeout is a request that timed out (408 or locally).
	ReasonTimeout = "timeout"
	// ReasonNetwork is a request that got no answer.
	ReasonNetwork = "network"
	// ReasonForbidden is a 403 that is no rate limit: missing permission.
	ReasonForbidden = "forbidden"
	// ReasonNotFound is a 404: unknown repository or issue, or no access.
	ReasonNotFound = "not_found"
	// ReasonGone is a 410: issues disabled or the issue deleted.
	ReasonGone = "gone"
	// ReasonValidationFailed is a 422.
	ReasonValidationFailed = "validation_failed"
	// ReasonBadRequest is a 400.
	ReasonBadRequest = "bad_request"
	// ReasonClientError is any other 4xx.
	ReasonClientError = "client_error"
	// ReasonBadResponse is a 2xx whose body could not be used. The request
	// was carried out, so it is not retried: a retried create would file a
	// duplicate.
	ReasonBadResponse = "bad_response"
	// ReasonUnexpectedStatus is a 1xx or 3xx answer.
	ReasonUnexpectedStatus = "unexpected_status"
)

const (
	// baseBackoff is the first exponential backoff.
	baseBackoff = time.Second
	// maxClassifiedBackoff bounds Classify's own exponential growth; the
	// retry loop caps jittered backoff lower, at Options.MaxBackoff.
	maxClassifiedBackoff = time.Hour
	// secondaryMinWait is GitHub's advice for a secondary limit without
	// Retry-After: wait at least a minute, then longer each time.
	secondaryMinWait = time.Minute
	// secondaryMaxWait bounds that growth.
	secondaryMaxWait = 30 * time.Minute
	// minRateLimitWait is the least wait a rate limit gets, so that a
	// Retry-After of 0 or a reset already past cannot spin.
	minRateLimitWait = time.Second
)

// Decision is what Classify makes of one attempt's outcome. Exactly one of
// these holds: Retry (wait After, then try again), Permanent (give up: the
// request can never succeed as it is), or neither: success (Reason "ok") or
// the caller's context ended (Reason "canceled").
type Decision struct {
	Retry     bool
	After     time.Duration
	Permanent bool
	Reason    string
	// Jitter marks After as computed exponential backoff rather than a wait
	// GitHub asked for: the retry loop caps it at Options.MaxBackoff and
	// randomises it so that many callers do not retry in step.
	Jitter bool
	// Ambiguous marks a failure after which the request may have been
	// carried out though no answer said so: a 5xx (a proxy's 502 after
	// GitHub wrote), a 408, a timeout, or a network error once the
	// request may have been sent. Before a write that is not idempotent
	// (a create, a comment) is sent again, the retry loop checks whether
	// it took effect.
	Ambiguous bool
}

// Classify decides what to do after attempt (1 for the first) of a GitHub
// call answered resp (nil when none came back) and err, at time now. It makes
// no calls and reads no clock.
//
// It reads the status and headers of the response, falling back to the
// response inside go-github's error types when resp is nil, and the error
// messages. go-github also refuses calls on its own when it remembers an
// exhausted limit, with a *github.RateLimitError or *github.AbuseRateLimitError
// around a made-up 403 that has no headers; those wait for the remembered
// reset.
func Classify(resp *http.Response, err error, attempt int, now time.Time) Decision {
	attempt = max(attempt, 1)
	if resp == nil {
		resp = responseOf(err)
	}
	if errors.Is(err, context.Canceled) {
		return Decision{Reason: ReasonCanceled}
	}
	if resp == nil {
		switch {
		case err == nil:
			return Decision{Reason: ReasonOK}
		case errors.As(err, new(*AuthError)):
			return backoff(ReasonCredentials, attempt)
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			return ambiguous(backoff(ReasonTimeout, attempt))
		case notSent(err):
			return backoff(ReasonNetwork, attempt)
		default:
			return ambiguous(backoff(ReasonNetwork, attempt))
		}
	}

	status := resp.StatusCode
	switch {
	case status >= 200 && status <= 299:
		if err == nil {
			return Decision{Reason: ReasonOK}
		}
		return Decision{Permanent: true, Reason: ReasonBadResponse}
	case status == http.StatusTooManyRequests:
		if d, ok := retryAfter(resp.Header, now); ok {
			return rateLimited(ReasonTooManyRequests, d)
		}
		if resp.Header.Get("X-RateLimit-Remaining") == "0" {
			if reset, ok := resetTime(resp.Header, err); ok {
				return rateLimited(ReasonTooManyRequests, reset.Add(time.Second).Sub(now))
			}
		}
		return backoff(ReasonTooManyRequests, attempt)
	case status == http.StatusForbidden:
		return classifyForbidden(resp, err, attempt, now)
	case status == http.StatusUnauthorized:
		return backoff(ReasonUnauthorized, attempt)
	case status == http.StatusConflict:
		return backoff(ReasonConflict, attempt)
	case status == http.StatusRequestTimeout:
		return ambiguous(backoff(ReasonTimeout, attempt))
	case status >= 500:
		return ambiguous(backoff(ReasonServerError, attempt))
	case status == http.StatusNotFound:
		return permanent(ReasonNotFound)
	case status == http.StatusGone:
		return permanent(ReasonGone)
	case status == http.StatusUnprocessableEntity:
		return permanent(ReasonValidationFailed)
	case status == http.StatusBadRequest:
		return permanent(ReasonBadRequest)
	case status >= 400:
		return permanent(ReasonClientError)
	default:
		return permanent(ReasonUnexpectedStatus)
	}
}

func classifyForbidden(resp *http.Response, err error, attempt int, now time.Time) Decision {
	var rle *github.RateLimitError
	isRLE := errors.As(err, &rle)
	if resp.Header.Get("X-RateLimit-Remaining") == "0" || isRLE {
		if reset, ok := resetTime(resp.Header, err); ok {
			return rateLimited(ReasonRateLimited, reset.Add(time.Second).Sub(now))
		}
		// Exhausted with no reset given: GitHub's window is an hour, so
		// back off from a minute rather than hammer.
		return rateLimited(ReasonRateLimited, exponential(secondaryMinWait, attempt, secondaryMaxWait))
	}
	var abuse *github.AbuseRateLimitError
	isAbuse := errors.As(err, &abuse)
	ra, hasRetryAfter := retryAfter(resp.Header, now)
	if !hasRetryAfter && !isAbuse && !mentionsSecondaryLimit(err) {
		return permanent(ReasonForbidden)
	}
	switch {
	case hasRetryAfter:
		return rateLimited(ReasonSecondaryRateLimited, ra)
	case isAbuse && abuse.RetryAfter != nil && len(resp.Header) == 0:
		// go-github refused locally, remembering an earlier Retry-After.
		return rateLimited(ReasonSecondaryRateLimited, *abuse.RetryAfter)
	default:
		return rateLimited(ReasonSecondaryRateLimited, exponential(secondaryMinWait, attempt, secondaryMaxWait))
	}
}

func backoff(reason string, attempt int) Decision {
	return Decision{Retry: true, After: exponential(baseBackoff, attempt, maxClassifiedBackoff), Reason: reason, Jitter: true}
}

func ambiguous(d Decision) Decision {
	d.Ambiguous = true
	return d
}

func rateLimited(reason string, d time.Duration) Decision {
	return Decision{Retry: true, After: max(d, minRateLimitWait), Reason: reason}
}

func permanent(reason string) Decision { return Decision{Permanent: true, Reason: reason} }

// exponential is base·2^(attempt-1), at most limit.
func exponential(base time.Duration, attempt int, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt; i++ {
		d *= 2
		if d >= limit {
			return limit
		}
	}
	return min(d, limit)
}

// retryAfter reads Retry-After as seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, true
		}
		return time.Duration(min(secs, int64(maxClassifiedBackoff/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now), true
	}
	return 0, false
}

// resetTime reads X-RateLimit-Reset (Unix seconds), else the reset go-github
// remembered in a *github.RateLimitError.
func resetTime(h http.Header, err error) (time.Time, bool) {
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		if secs, perr := strconv.ParseInt(v, 10, 64); perr == nil && secs > 0 {
			return time.Unix(secs, 0), true
		}
	}
	var rle *github.RateLimitError
	if errors.As(err, &rle) && !rle.Rate.Reset.Time.IsZero() {
		return rle.Rate.Reset.Time, true
	}
	return time.Time{}, false
}

// mentionsSecondaryLimit looks for GitHub's words for a secondary limit in
// the error's message and documentation URL.
func mentionsSecondaryLimit(err error) bool {
	if err == nil {
		return false
	}
	texts := []string{err.Error()}
	var er *github.ErrorResponse
	if errors.As(err, &er) {
		texts = append(texts, er.Message, er.DocumentationURL)
	}
	for _, t := range texts {
		t = strings.ToLower(t)
		if strings.Contains(t, "secondary rate limit") || strings.Contains(t, "secondary-rate-limit") ||
			strings.Contains(t, "abuse") {
			return true
		}
	}
	return false
}

// responseOf digs the HTTP response out of go-github's error types.
func responseOf(err error) *http.Response {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response
	}
	var rle *github.RateLimitError
	if errors.As(err, &rle) && rle.Response != nil {
		return rle.Response
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) && abuse.Response != nil {
		return abuse.Response
	}
	return nil
}

// notSent reports a network error that happened before any of the request
// could reach GitHub: the connection was never made (refused, no route, a
// name that does not resolve).
func notSent(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
