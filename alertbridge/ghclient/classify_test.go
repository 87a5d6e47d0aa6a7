package ghclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// answer builds a response as GitHub would send it and the error go-github
// makes of it, so the table exercises go-github's real error types.
func answer(status int, body string, header ...string) (*http.Response, error) {
	h := http.Header{"Date": {now.Format(http.TimeFormat)}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/acme/x/issues", nil)
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewBufferString(body)), Request: req}
	return resp, github.CheckResponse(resp)
}

func unix(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

func TestClassify(t *testing.T) {
	const secondaryBody = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	type in struct {
		resp *http.Response
		err  error
	}
	with := func(resp *http.Response, err error) in { return in{resp, err} }
	emptyHeader403 := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{}}

	for _, tc := range []struct {
		desc    string
		in      in
		attempt int
		want    Decision
	}{
		{desc: "200 succeeds", in: with(answer(200, `[]`)), want: Decision{Reason: ReasonOK}},
		{desc: "201 succeeds", in: with(answer(201, `{}`)), want: Decision{Reason: ReasonOK}},
		{desc: "2xx with an undecodable body is not retried: a create may have happened",
			in:   in{resp: &http.Response{StatusCode: 201, Header: http.Header{}}, err: errors.New("unexpected EOF")},
			want: Decision{Permanent: true, Reason: ReasonBadResponse}},
		{desc: "429 with Retry-After seconds and no documentation URL",
			in:   with(answer(429, `{"message":"Too Many Requests"}`, "Retry-After", "1")),
			want: Decision{Retry: true, After: time.Second, Reason: ReasonTooManyRequests}},
		{desc: "429 with Retry-After as an HTTP date",
			in:   with(answer(429, ``, "Retry-After", now.Add(30*time.Second).Format(http.TimeFormat))),
			want: Decision{Retry: true, After: 30 * time.Second, Reason: ReasonTooManyRequests}},
		{desc: "429 with Retry-After 0 still waits a second",
			in:   with(answer(429, ``, "Retry-After", "0")),
			want: Decision{Retry: true, After: time.Second, Reason: ReasonTooManyRequests}},
		{desc: "429 with remaining 0 waits until the reset",
			in:   with(answer(429, ``, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(90*time.Second))),
			want: Decision{Retry: true, After: 91 * time.Second, Reason: ReasonTooManyRequests}},
		{desc: "429 without hints backs off exponentially", attempt: 3,
			in:   with(answer(429, ``, "X-RateLimit-Remaining", "12")),
			want: Decision{Retry: true, After: 4 * time.Second, Reason: ReasonTooManyRequests, Jitter: true}},
		{desc: "403 with remaining 0 is the primary limit: wait until reset plus a second",
			in:   with(answer(403, `{"message":"API rate limit exceeded for installation ID 1."}`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(2*time.Minute))),
			want: Decision{Retry: true, After: 121 * time.Second, Reason: ReasonRateLimited}},
		{desc: "primary limit whose reset already passed waits a second",
			in:   with(answer(403, ``, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(-time.Minute))),
			want: Decision{Retry: true, After: time.Second, Reason: ReasonRateLimited}},
		{desc: "primary limit without a reset waits a minute",
			in:   with(answer(403, ``, "X-RateLimit-Remaining", "0")),
			want: Decision{Retry: true, After: time.Minute, Reason: ReasonRateLimited}},
		{desc: "go-github refusing locally waits for the reset it remembers",
			in: in{err: &github.RateLimitError{
				Rate:     github.Rate{Limit: 5000, Remaining: 0, Reset: github.Timestamp{Time: now.Add(5 * time.Minute)}},
				Response: emptyHeader403, Message: "API rate limit of 5000 still exceeded, not making remote request.",
			}},
			want: Decision{Retry: true, After: 5*time.Minute + time.Second, Reason: ReasonRateLimited}},
		{desc: "403 with Retry-After is the secondary limit",
			in:   with(answer(403, `{"message":"slow down"}`, "Retry-After", "30")),
			want: Decision{Retry: true, After: 30 * time.Second, Reason: ReasonSecondaryRateLimited}},
		{desc: "secondary limit without Retry-After waits at least a minute",
			in:   with(answer(403, secondaryBody)),
			want: Decision{Retry: true, After: time.Minute, Reason: ReasonSecondaryRateLimited}},
		{desc: "secondary limit without Retry-After grows exponentially", attempt: 3,
			in:   with(answer(403, secondaryBody)),
			want: Decision{Retry: true, After: 4 * time.Minute, Reason: ReasonSecondaryRateLimited}},
		{desc: "secondary limit growth is bounded", attempt: 40,
			in:   with(answer(403, secondaryBody)),
			want: Decision{Retry: true, After: 30 * time.Minute, Reason: ReasonSecondaryRateLimited}},
		{desc: "secondary limit named only in the message (no documentation URL)",
			in:   with(answer(403, `{"message":"You have exceeded a secondary rate limit."}`)),
			want: Decision{Retry: true, After: time.Minute, Reason: ReasonSecondaryRateLimited}},
		{desc: "old abuse wording is the secondary limit",
			in:   with(answer(403, `{"message":"You have triggered an abuse detection mechanism.","documentation_url":"https://developer.github.com/v3/#abuse-rate-limits"}`)),
			want: Decision{Retry: true, After: time.Minute, Reason: ReasonSecondaryRateLimited}},
		{desc: "go-github refusing locally for a secondary limit waits what it remembers",
			in:   in{err: &github.AbuseRateLimitError{Response: emptyHeader403, RetryAfter: ptr(45 * time.Second)}},
			want: Decision{Retry: true, After: 45 * time.Second, Reason: ReasonSecondaryRateLimited}},
		{desc: "other 403 is permanent",
			in:   with(answer(403, `{"message":"Resource not accessible by integration"}`, "X-RateLimit-Remaining", "4999")),
			want: Decision{Permanent: true, Reason: ReasonForbidden}},
		{desc: "401 is retried: credentials rotate",
			in:   with(answer(401, `{"message":"Bad credentials"}`)),
			want: Decision{Retry: true, After: time.Second, Reason: ReasonUnauthorized, Jitter: true}},
		{desc: "404 is permanent", in: with(answer(404, `{"message":"Not Found"}`)), want: Decision{Permanent: true, Reason: ReasonNotFound}},
		{desc: "410 is permanent", in: with(answer(410, `{"message":"Issues are disabled for this repo"}`)), want: Decision{Permanent: true, Reason: ReasonGone}},
		{desc: "422 is permanent", in: with(answer(422, `{"message":"Validation Failed"}`)), want: Decision{Permanent: true, Reason: ReasonValidationFailed}},
		{desc: "400 is permanent", in: with(answer(400, `{"message":"Problems parsing JSON"}`)), want: Decision{Permanent: true, Reason: ReasonBadRequest}},
		{desc: "405 is permanent", in: with(answer(405, ``)), want: Decision{Permanent: true, Reason: ReasonClientError}},
		{desc: "3xx is permanent", in: with(answer(302, ``)), want: Decision{Permanent: true, Reason: ReasonUnexpectedStatus}},
		{desc: "500 backs off", in: with(answer(500, ``)), want: Decision{Retry: true, After: time.Second, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "502 backs off exponentially", attempt: 2, in: with(answer(502, ``)), want: Decision{Retry: true, After: 2 * time.Second, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "503 backs off", attempt: 3, in: with(answer(503, ``)), want: Decision{Retry: true, After: 4 * time.Second, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "504 backs off", in: with(answer(504, ``)), want: Decision{Retry: true, After: time.Second, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "a proxy's 502 page after GitHub wrote backs off, the write perhaps done",
			in:   with(answer(502, "<html><head><title>502 Bad Gateway</title></head></html>", "Content-Type", "text/html")),
			want: Decision{Retry: true, After: time.Second, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "408 backs off, the write perhaps done", in: with(answer(408, ``)), want: Decision{Retry: true, After: time.Second, Reason: ReasonTimeout, Jitter: true, Ambiguous: true}},
		{desc: "a connection reset after sending backs off, the write perhaps done",
			in:   in{err: &url.Error{Op: "Post", URL: "https://api.github.com/", Err: &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}}},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonNetwork, Jitter: true, Ambiguous: true}},
		{desc: "a name that does not resolve backs off, nothing sent",
			in:   in{err: &url.Error{Op: "Post", URL: "https://api.github.com/", Err: &net.DNSError{Err: "no such host", Name: "api.github.com"}}},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonNetwork, Jitter: true}},
		{desc: "409 backs off", in: with(answer(409, `{"message":"Conflict"}`)), want: Decision{Retry: true, After: time.Second, Reason: ReasonConflict, Jitter: true}},
		{desc: "backoff growth is bounded", attempt: 1000, in: with(answer(502, ``)), want: Decision{Retry: true, After: time.Hour, Reason: ReasonServerError, Jitter: true, Ambiguous: true}},
		{desc: "connection refused backs off, nothing sent",
			in:   in{err: &url.Error{Op: "Get", URL: "https://api.github.com/", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonNetwork, Jitter: true}},
		{desc: "attempt timeout backs off",
			in:   in{err: context.DeadlineExceeded},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonTimeout, Jitter: true, Ambiguous: true}},
		{desc: "network timeout backs off",
			in:   in{err: &url.Error{Op: "Get", URL: "https://api.github.com/", Err: timeoutErr{}}},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonTimeout, Jitter: true, Ambiguous: true}},
		{desc: "unreadable credentials back off",
			in:   in{err: &url.Error{Op: "Get", URL: "https://api.github.com/", Err: &AuthError{Source: "token file /t", Err: errors.New("file is empty")}}},
			want: Decision{Retry: true, After: time.Second, Reason: ReasonCredentials, Jitter: true}},
		{desc: "cancelled context stops without giving up the work",
			in:   in{err: &url.Error{Op: "Get", URL: "https://api.github.com/", Err: context.Canceled}},
			want: Decision{Reason: ReasonCanceled}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			attempt := tc.attempt
			if attempt == 0 {
				attempt = 1
			}
			require.Equal(t, tc.want, Classify(tc.in.resp, tc.in.err, attempt, now))
		})
	}
}

func ptr[T any](v T) *T { return &v }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyReadsTheResponseInsideTheError(t *testing.T) {
	resp, err := answer(429, ``, "Retry-After", "7")
	require.Equal(t, Classify(resp, err, 1, now), Classify(nil, err, 1, now))
}

func TestJitterStaysWithinHalfAndWhole(t *testing.T) {
	for range 1000 {
		d := jitter(10 * time.Second)
		require.GreaterOrEqual(t, d, 5*time.Second)
		require.LessOrEqual(t, d, 10*time.Second)
	}
}
