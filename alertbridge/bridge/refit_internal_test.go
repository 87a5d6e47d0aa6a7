package bridge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// limitedGitHub refuses bodies longer than limit as GitHub does (422), and
// records the bodies it took. Reads are not used.
type limitedGitHub struct {
	ghclient.Client
	limit  int
	status int // answer every write with this permanent status instead, when set
	sent   []string
}

func (g *limitedGitHub) check(bodies ...string) error {
	if g.status != 0 {
		return &ghclient.PermanentError{Status: g.status, Reason: ghclient.ReasonNotFound, Err: errors.New("Not Found")}
	}
	for _, b := range bodies {
		if len([]rune(b)) > g.limit {
			return &ghclient.PermanentError{Status: http.StatusUnprocessableEntity, Reason: ghclient.ReasonValidationFailed,
				Err: &github.ErrorResponse{Response: &http.Response{StatusCode: 422}, Message: "Validation Failed",
					Errors: []github.Error{{Resource: "Issue", Field: "body", Code: "custom", Message: "body is too long (maximum is 65536 characters)"}}}}
		}
	}
	g.sent = append(g.sent, bodies...)
	return nil
}

func (g *limitedGitHub) CreateIssue(_ context.Context, _ string, in ghclient.NewIssue) (ghclient.Issue, error) {
	return ghclient.Issue{Number: 1, Body: in.Body}, g.check(in.Body)
}

func (g *limitedGitHub) EditIssue(_ context.Context, _ string, n int, e ghclient.Edit) (ghclient.Issue, error) {
	return ghclient.Issue{Number: n}, g.check(*e.Body)
}

func (g *limitedGitHub) CreateComment(_ context.Context, _ string, _ int, body string) error {
	return g.check(body)
}

func (g *limitedGitHub) Transition(_ context.Context, _ string, n int, _ string, e ghclient.Edit, comment string) (ghclient.Issue, error) {
	return ghclient.Issue{Number: n}, g.check(*e.Body, comment)
}

func TestRefittingSendsATooLongBodyAgainShorter(t *testing.T) {
	body, err := marker.Append("## group\n\n"+strings.Repeat("| row |\n", 500), "k1", marker.State{Firing: []string{"fp"}, Applied: "7"})
	require.NoError(t, err)
	comment := "**Resolved**: " + strings.Repeat("word ", 400) + marker.Transition("7")
	ctx := context.Background()

	tests := []struct {
		desc       string
		limit      int
		status     int
		call       func(c ghclient.Client) error
		wantErr    bool
		wantReason string
	}{
		{desc: "create: cut once, sent", limit: 3000, call: func(c ghclient.Client) error {
			_, err := c.CreateIssue(ctx, "acme/x", ghclient.NewIssue{Title: "t", Body: body})
			return err
		}},
		{desc: "edit: cut twice, sent", limit: 1400, call: func(c ghclient.Client) error {
			_, err := c.EditIssue(ctx, "acme/x", 1, ghclient.Edit{Body: &body})
			return err
		}},
		{desc: "transition: body and comment cut, sent", limit: 1400, call: func(c ghclient.Client) error {
			_, err := c.Transition(ctx, "acme/x", 1, "I_1", ghclient.Edit{Body: &body}, comment)
			return err
		}},
		{desc: "comment: cut, sent", limit: 1500, call: func(c ghclient.Client) error {
			return c.CreateComment(ctx, "acme/x", 1, comment)
		}},
		{desc: "still too long after every cut: rejected for good", limit: 200, wantErr: true, wantReason: ghclient.RejectBodyTooLong,
			call: func(c ghclient.Client) error {
				_, err := c.CreateIssue(ctx, "acme/x", ghclient.NewIssue{Title: "t", Body: body})
				return err
			}},
		{desc: "another permanent error is not retried, and is counted", limit: 1 << 20, status: 404, wantErr: true, wantReason: ghclient.ReasonNotFound,
			call: func(c ghclient.Client) error {
				_, err := c.EditIssue(ctx, "acme/x", 1, ghclient.Edit{Body: &body})
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			gh := &limitedGitHub{limit: tc.limit, status: tc.status}
			var rejected []string
			c := &refitting{Client: gh, log: slog.New(slog.DiscardHandler), rejected: func(r string) { rejected = append(rejected, r) }}
			err := tc.call(c)
			if tc.wantErr {
				require.Error(t, err)
				assert.Equal(t, []string{tc.wantReason}, rejected)
				assert.Empty(t, gh.sent)
				return
			}
			require.NoError(t, err)
			assert.Empty(t, rejected)
			require.NotEmpty(t, gh.sent)
			for _, s := range gh.sent {
				assert.LessOrEqual(t, len(s), tc.limit)
				if strings.Contains(s, "**Resolved**") {
					assert.True(t, marker.HasTransition(s, "7"), "the comment keeps its transition mark")
				} else {
					key, st, ok, err := marker.Parse(s)
					require.NoError(t, err)
					require.True(t, ok, "the body keeps its marker")
					assert.Equal(t, "k1", key)
					assert.Equal(t, "7", st.Applied)
				}
				assert.Contains(t, s, "[truncated]", "the cut is visible")
			}
		})
	}
	assert.Contains(t, body, "| row |\n| row |", "the caller's body is not cut")
}
