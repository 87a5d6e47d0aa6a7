package ghclient

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GraphQL errors arrive inside a 200; graphqlErrors maps them to the answer
// Classify already knows, so a bad node is dropped and a rate limit waits.
func TestGraphQLErrorsClassify(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		desc          string
		typ           string
		header        http.Header
		wantPermanent bool
		wantRetry     bool
		wantAfter     time.Duration
	}{
		{desc: "an unknown node is permanent", typ: "NOT_FOUND", wantPermanent: true},
		{desc: "forbidden is permanent", typ: "FORBIDDEN", wantPermanent: true},
		{desc: "unprocessable is permanent", typ: "UNPROCESSABLE", wantPermanent: true},
		{
			desc: "rate limited waits for the reset", typ: "RATE_LIMITED",
			header:    http.Header{"X-Ratelimit-Reset": {"1795255260"}},
			wantRetry: true, wantAfter: time.Unix(1795255260, 0).Sub(now) + time.Second,
		},
		{desc: "anything else is retried", typ: "INTERNAL", wantRetry: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			hr := &http.Response{StatusCode: http.StatusOK, Header: tc.header}
			if hr.Header == nil {
				hr.Header = http.Header{}
			}
			hr.Header.Set("X-RateLimit-Remaining", "4000")
			out := graphqlResponse{}
			out.Errors = append(out.Errors, struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			}{Type: tc.typ, Message: "m"})
			resp, err := graphqlErrors(&github.Response{Response: hr}, out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.typ)
			d := Classify(resp.Response, err, 1, now)
			assert.Equal(t, tc.wantPermanent, d.Permanent, "%+v", d)
			assert.Equal(t, tc.wantRetry, d.Retry, "%+v", d)
			if tc.wantAfter > 0 {
				assert.Equal(t, tc.wantAfter, d.After)
			}
		})
	}
	resp, err := graphqlErrors(&github.Response{Response: &http.Response{StatusCode: 200, Header: http.Header{}}}, graphqlResponse{})
	assert.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
}

func TestGraphQLURL(t *testing.T) {
	for base, want := range map[string]string{
		"":                                "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/": "https://ghe.example.com/api/graphql",
		"https://ghe.example.com/":        "https://ghe.example.com/api/graphql",
	} {
		c, err := New(Options{BaseURL: base})
		require.NoError(t, err)
		assert.Equal(t, want, c.(*client).graphqlURL(), "base %q", base)
	}
}

func TestDryRunTransitionLogsTheDocument(t *testing.T) {
	var logs bytes.Buffer
	d := NewDryRun(slog.New(slog.NewTextHandler(&logs, nil)), nil)
	body, state := "resolved", StateClosed
	is, err := d.Transition(context.Background(), "acme/x", 7, "I_node", Edit{Body: &body, State: &state}, "**Resolved**")
	require.NoError(t, err)
	assert.Equal(t, StateClosed, is.State)
	assert.Equal(t, "resolved", is.Body)
	out := logs.String()
	assert.Contains(t, out, "Would call GitHub")
	assert.Contains(t, out, "/graphql")
	assert.Contains(t, out, "addComment")
	assert.True(t, strings.Index(out, "addComment") < strings.Index(out, "closeIssue"))
	comments, err := d.ListComments(context.Background(), "acme/x", 7, time.Time{})
	require.NoError(t, err)
	require.Len(t, comments, 1)
}
