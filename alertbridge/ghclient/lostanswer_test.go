package ghclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
)

// findByBody is a NewIssue.Find that lists the labelled issues changed
// since since and picks the one with body, as the bridge picks by marker.
func findByBody(c ghclient.Client, label, body string) func(context.Context, time.Time) (ghclient.Issue, bool, error) {
	return func(ctx context.Context, since time.Time) (ghclient.Issue, bool, error) {
		issues, err := c.ListIssues(ctx, repo, ghclient.StateAll, since, label)
		if err != nil {
			return ghclient.Issue{}, false, err
		}
		for _, is := range issues {
			if is.Body == body {
				return is, true, nil
			}
		}
		return ghclient.Issue{}, false, nil
	}
}

// TestLostAnswersAreNotWrittenTwice: GitHub carries each write out and the
// answer is lost, to a proxy's 502 or to the client's timeout. Creates and
// comments are looked for before they are sent again and found; edits are
// sent again. Every write is on GitHub exactly once: one issue, one comment.
func TestLostAnswersAreNotWrittenTwice(t *testing.T) {
	const comment = "**Resolved**\n\n<!-- kubemedic-alertbridge transition=00000000000000000042 -->"
	type run struct {
		e      *env
		number int
		nodeID string
	}
	for _, tc := range []struct {
		desc string
		ep   ghfake.Endpoint
		// checked: the client looks for the write before sending it again.
		checked bool
		do      func(t *testing.T, r run) ghclient.Issue
		want    func(t *testing.T, r run, got ghclient.Issue)
	}{
		{
			desc: "create", ep: ghfake.EndpointCreateIssue, checked: true,
			do: func(t *testing.T, r run) ghclient.Issue {
				body := "firing\n<!-- kubemedic-alertbridge key=abc -->"
				is, err := r.e.client.CreateIssue(context.Background(), repo, ghclient.NewIssue{
					Title: "GPU lost on gpu-7", Body: body, Labels: []string{"kubemedic"},
					Find: findByBody(r.e.client, "kubemedic", body),
				})
				require.NoError(t, err)
				return is
			},
			want: func(t *testing.T, r run, got ghclient.Issue) {
				issues := r.e.fake.Issues(repo)
				require.Len(t, issues, 2, "the issue there before and one filed")
				require.Equal(t, issues[1].Number, got.Number, "the issue found is returned")
				require.Equal(t, issues[1].NodeID, got.NodeID)
			},
		},
		{
			desc: "comment", ep: ghfake.EndpointCreateComment, checked: true,
			do: func(t *testing.T, r run) ghclient.Issue {
				require.NoError(t, r.e.client.CreateComment(context.Background(), repo, r.number, comment))
				return ghclient.Issue{}
			},
			want: func(t *testing.T, r run, _ ghclient.Issue) {
				require.Equal(t, []string{"a person's", comment}, r.e.fake.Comments(repo, r.number))
			},
		},
		{
			desc: "edit", ep: ghfake.EndpointEditIssue,
			do: func(t *testing.T, r run) ghclient.Issue {
				is, err := r.e.client.EditIssue(context.Background(), repo, r.number, ghclient.Edit{Body: ptr("new table")})
				require.NoError(t, err)
				return is
			},
			want: func(t *testing.T, r run, got ghclient.Issue) {
				is, _ := r.e.fake.Issue(repo, r.number)
				require.Equal(t, "new table", is.Body)
				require.Equal(t, "new table", got.Body)
				require.Equal(t, ghclient.StateOpen, is.State)
			},
		},
		{
			desc: "close", ep: ghfake.EndpointEditIssue,
			do: func(t *testing.T, r run) ghclient.Issue {
				is, err := r.e.client.EditIssue(context.Background(), repo, r.number,
					ghclient.Edit{Body: ptr("resolved"), State: ptr(ghclient.StateClosed), StateReason: ptr(ghclient.ReasonNotPlanned)})
				require.NoError(t, err)
				return is
			},
			want: func(t *testing.T, r run, got ghclient.Issue) {
				is, _ := r.e.fake.Issue(repo, r.number)
				require.Equal(t, ghclient.StateClosed, is.State)
				require.Equal(t, ghclient.ReasonNotPlanned, is.StateReason)
				require.Equal(t, ghclient.StateClosed, got.State)
				require.Equal(t, is.ClosedAt, got.ClosedAt, "closed once: the retry finds it closed")
			},
		},
		{
			desc: "GraphQL transition", ep: ghfake.EndpointTransition, checked: true,
			do: func(t *testing.T, r run) ghclient.Issue {
				is, err := r.e.client.Transition(context.Background(), repo, r.number, r.nodeID,
					ghclient.Edit{Body: ptr("resolved"), State: ptr(ghclient.StateClosed), StateReason: ptr(ghclient.ReasonCompleted)}, comment)
				require.NoError(t, err)
				return is
			},
			want: func(t *testing.T, r run, got ghclient.Issue) {
				require.Equal(t, []string{"a person's", comment}, r.e.fake.Comments(repo, r.number))
				is, _ := r.e.fake.Issue(repo, r.number)
				require.Equal(t, "resolved", is.Body)
				require.Equal(t, ghclient.StateClosed, is.State)
				require.Equal(t, ghclient.StateClosed, got.State, "the edit is sent again and answers with the issue")
				var graphql []ghfake.Call
				for _, c := range r.e.fake.Calls() {
					if c.Path == "/api/graphql" {
						graphql = append(graphql, c)
					}
				}
				require.Len(t, graphql, 2)
				require.Contains(t, string(graphql[0].Body), "addComment")
				require.NotContains(t, string(graphql[1].Body), "addComment", "the comment made is left out")
				require.Contains(t, string(graphql[1].Body), "closeIssue")
			},
		},
	} {
		for _, loss := range []struct {
			name string
			loss ghfake.Loss
		}{{"502 after the write", ghfake.LossBadGateway}, {"timeout after the write", ghfake.LossTimeout}} {
			t.Run(tc.desc+"/"+loss.name, func(t *testing.T) {
				e := newEnv(t, func(o *ghclient.Options) { o.RequestTimeout = 200 * time.Millisecond })
				n := e.fake.AddIssue(repo, "there before", "firing", "kubemedic")
				e.fake.AddComment(repo, n, "alice", "a person's")
				snap, _ := e.fake.Issue(repo, n)
				e.fake.LoseAnswers(tc.ep, 1, loss.loss)
				r := run{e: e, number: n, nodeID: snap.NodeID}

				got := tc.do(t, r)
				tc.want(t, r, got)
				require.Zero(t, e.fake.PendingFaults(tc.ep), "the answer was lost")
				lost := 0
				for _, c := range e.fake.Calls() {
					if c.Lost {
						lost++
					}
				}
				require.Equal(t, 1, lost)
				logs := e.logs.String()
				require.Contains(t, logs, "Retrying GitHub request")
				if tc.checked {
					require.Contains(t, logs, "GitHub answer lost; checking whether the write happened")
				} else {
					require.NotContains(t, logs, "checking whether the write happened", "an idempotent edit is sent again as it is")
				}
			})
		}
	}
}

// TestWriteRefusedBeforeItHappenedIsSentAgain: a 502 that GitHub answered
// without writing: the check finds nothing and the write is sent again.
func TestWriteRefusedBeforeItHappenedIsSentAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.fake.AddIssue(repo, "t", "b")
	e.fake.FailEndpoint(ghfake.EndpointCreateComment, 2, ghfake.Fault{Status: http.StatusBadGateway})
	e.fake.FailEndpoint(ghfake.EndpointCreateIssue, 1, ghfake.Fault{Status: http.StatusServiceUnavailable})

	require.NoError(t, e.client.CreateComment(ctx, repo, n, "c"))
	require.Equal(t, []string{"c"}, e.fake.Comments(repo, n))
	require.Equal(t, 2, e.fake.CallCount(http.MethodGet, "/repos/*/*/issues/*/comments"), "looked for before each resend")
	require.Equal(t, 3, e.fake.CallCount(http.MethodPost, "/repos/*/*/issues/*/comments"))

	finds := 0
	is, err := e.client.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "new", Body: "x", Find: func(context.Context, time.Time) (ghclient.Issue, bool, error) {
		finds++
		return ghclient.Issue{}, false, nil
	}})
	require.NoError(t, err)
	require.Equal(t, 1, finds)
	require.Equal(t, "new", is.Title)
	require.Len(t, e.fake.Issues(repo), 2)
}

// TestFindThatFailsStopsTheCreate: when the check cannot be made the create
// is not sent again blindly.
func TestFindThatFailsStopsTheCreate(t *testing.T) {
	e := newEnv(t)
	e.fake.LoseAnswers(ghfake.EndpointCreateIssue, 1, ghfake.LossBadGateway)
	gone := &ghclient.PermanentError{Endpoint: ghclient.EndpointListIssues, Repo: repo, Status: 404, Reason: ghclient.ReasonNotFound, Err: errors.New("Not Found")}
	_, err := e.client.CreateIssue(context.Background(), repo, ghclient.NewIssue{Title: "new", Find: func(context.Context, time.Time) (ghclient.Issue, bool, error) {
		return ghclient.Issue{}, false, gone
	}})
	require.Error(t, err)
	require.True(t, ghclient.IsPermanent(err), "%v", err)
	require.True(t, strings.Contains(err.Error(), "look for the issue filed"), "%v", err)
	require.Equal(t, 1, e.fake.CallCount(http.MethodPost, "/repos/*/*/issues"))
	require.Len(t, e.fake.Issues(repo), 1)
}

func TestTransitionWithACommentAloneIsRefused(t *testing.T) {
	e := newEnv(t)
	_, err := e.client.Transition(context.Background(), repo, 1, "I_kwDOx", ghclient.Edit{}, "c")
	require.True(t, ghclient.IsPermanent(err), "%v", err)
	require.Empty(t, e.fake.Calls())
}
