package ghclient_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

func numbers(issues []ghclient.Issue) []int {
	var out []int
	for _, is := range issues {
		out = append(out, is.Number)
	}
	slices.Sort(out)
	return out
}

// TestListIssuesByStateSinceAndLabels: the state, since and every label go
// to GitHub as the list endpoint's filters (labels ANDed), and GitHub's
// answer is what the filters select.
func TestListIssuesByStateSinceAndLabels(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	open := e.fake.AddIssue(repo, "open", "", "kubemedic")
	oldClosed := e.fake.AddIssue(repo, "closed long ago", "", "kubemedic")
	e.fake.CloseIssue(repo, oldClosed, ghclient.ReasonCompleted)
	ignored := e.fake.AddIssue(repo, "closed and ignored long ago", "", "kubemedic", "kubemedic-ignore")
	e.fake.CloseIssue(repo, ignored, ghclient.ReasonNotPlanned)
	e.fake.AddIssue(repo, "ignored, another team's", "", "kubemedic-ignore")
	e.clock.Step(48 * time.Hour)
	recent := e.fake.AddIssue(repo, "closed lately", "", "kubemedic")
	e.fake.CloseIssue(repo, recent, ghclient.ReasonCompleted)
	since := e.clock.Now().Add(-24 * time.Hour)

	tests := []struct {
		desc      string
		state     ghclient.IssueState
		since     time.Time
		labels    []string
		want      []int
		wantQuery url.Values
	}{
		{"open", ghclient.StateOpen, time.Time{}, []string{"kubemedic"}, []int{open},
			url.Values{"state": {"open"}, "labels": {"kubemedic"}, "per_page": {"100"}}},
		{"closed within a day", ghclient.StateClosed, since, []string{"kubemedic"}, []int{recent},
			url.Values{"state": {"closed"}, "labels": {"kubemedic"}, "since": {since.Format(time.RFC3339)}, "per_page": {"100"}}},
		{"closed with both labels", ghclient.StateClosed, time.Time{}, []string{"kubemedic", "kubemedic-ignore"}, []int{ignored},
			url.Values{"state": {"closed"}, "labels": {"kubemedic,kubemedic-ignore"}, "per_page": {"100"}}},
		{"all", ghclient.StateAll, time.Time{}, []string{"kubemedic"}, []int{open, oldClosed, ignored, recent},
			url.Values{"state": {"all"}, "labels": {"kubemedic"}, "per_page": {"100"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			e.fake.ResetCalls()
			got, err := e.client.ListIssues(ctx, repo, tc.state, tc.since, tc.labels...)
			require.NoError(t, err)
			require.Equal(t, tc.want, numbers(got))
			calls := e.fake.Calls()
			require.Len(t, calls, 1)
			q, err := url.ParseQuery(calls[0].Query)
			require.NoError(t, err)
			require.Equal(t, tc.wantQuery, q)
		})
	}

	t.Run("a state GitHub does not list by is refused unsent", func(t *testing.T) {
		e.fake.ResetCalls()
		_, err := e.client.ListIssues(ctx, repo, "", time.Time{}, "kubemedic")
		var pe *ghclient.PermanentError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, "invalid_state", pe.Reason)
		require.Empty(t, e.fake.Calls())
	})

	t.Run("the dry run filters its own issues alike", func(t *testing.T) {
		dry := ghclient.NewDryRun(slog.New(slog.DiscardHandler), e.client)
		made, err := dry.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "dry", Labels: []string{"kubemedic"}})
		require.NoError(t, err)
		closed, reason := ghclient.StateClosed, ghclient.ReasonCompleted
		_, err = dry.EditIssue(ctx, repo, open, ghclient.Edit{State: &closed, StateReason: &reason})
		require.NoError(t, err)

		got, err := dry.ListIssues(ctx, repo, ghclient.StateOpen, time.Time{}, "kubemedic")
		require.NoError(t, err)
		require.Equal(t, []int{made.Number}, numbers(got), "the issue the dry run closed is no longer open")
		got, err = dry.ListIssues(ctx, repo, ghclient.StateClosed, time.Time{}, "kubemedic", "kubemedic-ignore")
		require.NoError(t, err)
		require.Equal(t, []int{ignored}, numbers(got))
	})
}
