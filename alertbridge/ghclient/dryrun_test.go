package ghclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

type wouldCall struct {
	Level, Msg, Method, Path, Body string
}

func wouldCalls(t *testing.T, logs string) []wouldCall {
	t.Helper()
	var out []wouldCall
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var w wouldCall
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		for k, dst := range map[string]*string{"level": &w.Level, "msg": &w.Msg, "method": &w.Method, "path": &w.Path, "body": &w.Body} {
			*dst, _ = line[k].(string)
		}
		out = append(out, w)
	}
	return out
}

func TestDryRunLogsWritesAndSendsNothing(t *testing.T) {
	e := newEnv(t)
	existing := e.fake.AddIssue(repo, "GPULost on node-3", "old", "kubemedic")
	logs := &testsupport.SyncBuffer{}
	dry := ghclient.NewDryRun(slog.New(slog.NewJSONHandler(logs, nil)), e.client)
	ctx := context.Background()

	in := ghclient.NewIssue{Title: "GPULost on node-7 <b>&</b>", Body: "fingerprint abc", Labels: []string{"kubemedic"}, Assignees: []string{"oncall"}}
	first, err := dry.CreateIssue(ctx, repo, in)
	require.NoError(t, err)
	require.Equal(t, 1_000_000, first.Number)
	require.Equal(t, ghclient.StateOpen, first.State)
	require.Equal(t, in.Title, first.Title)
	second, err := dry.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "other", Labels: []string{"elsewhere"}})
	require.NoError(t, err)
	require.Equal(t, 1_000_001, second.Number)

	listed, err := dry.ListIssues(ctx, repo, ghclient.StateAll, time.Time{}, "kubemedic")
	require.NoError(t, err)
	require.Len(t, listed, 2, "the real issue, and the dry run's own issue carrying the label")
	require.Equal(t, existing, listed[0].Number)
	require.Equal(t, first.Number, listed[1].Number)

	body, closed := "resolved", ghclient.StateClosed
	edited, err := dry.EditIssue(ctx, repo, existing, ghclient.Edit{Body: &body, State: &closed})
	require.NoError(t, err)
	require.Equal(t, "GPULost on node-3", edited.Title, "last known state, edit applied")
	require.Equal(t, "resolved", edited.Body)
	require.Equal(t, ghclient.StateClosed, edited.State)
	require.Equal(t, ghclient.ReasonCompleted, edited.StateReason)
	require.False(t, edited.ClosedAt.IsZero())

	require.NoError(t, dry.CreateComment(ctx, repo, existing, "resolved at 10:00"))
	comments, err := dry.ListComments(ctx, repo, existing, edited.CreatedAt)
	require.NoError(t, err)
	require.Len(t, comments, 1)

	for _, c := range e.fake.Calls() {
		require.Equal(t, http.MethodGet, c.Method, "a dry run sends no writes")
	}
	got := wouldCalls(t, logs.String())
	require.Len(t, got, 4)
	for _, w := range got {
		require.Equal(t, "INFO", w.Level)
		require.Equal(t, "Would call GitHub", w.Msg)
	}
	require.Equal(t, []string{"POST /repos/acme/gpu-alerts/issues", "POST /repos/acme/gpu-alerts/issues",
		"PATCH /repos/acme/gpu-alerts/issues/1", "POST /repos/acme/gpu-alerts/issues/1/comments"},
		[]string{got[0].Method + " " + got[0].Path, got[1].Method + " " + got[1].Path, got[2].Method + " " + got[2].Path, got[3].Method + " " + got[3].Path})
	require.Equal(t, `{"body":"resolved","state":"closed"}`, got[2].Body)
	require.Equal(t, `{"body":"resolved at 10:00"}`, got[3].Body)

	// The logged body is exactly what the real client sends.
	live := newEnv(t)
	_, err = live.client.CreateIssue(ctx, repo, in)
	require.NoError(t, err)
	require.NoError(t, live.client.CreateComment(ctx, repo, 1, "resolved at 10:00"))
	_, err = live.client.EditIssue(ctx, repo, 1, ghclient.Edit{Body: &body, State: &closed})
	require.NoError(t, err)
	sent := live.fake.Calls()
	require.Equal(t, got[0].Body, strings.TrimSuffix(string(sent[0].Body), "\n"))
	require.Equal(t, got[3].Body, strings.TrimSuffix(string(sent[1].Body), "\n"))
	require.Equal(t, got[2].Body, strings.TrimSuffix(string(sent[2].Body), "\n"))
}

func TestDryRunWithoutReads(t *testing.T) {
	dry := ghclient.NewDryRun(nil, nil)
	ctx := context.Background()
	issues, err := dry.ListIssues(ctx, repo, ghclient.StateAll, time.Time{}, "kubemedic")
	require.NoError(t, err)
	require.Empty(t, issues)
	comments, err := dry.ListComments(ctx, repo, 7, time.Time{})
	require.NoError(t, err)
	require.Empty(t, comments)

	open := ghclient.StateOpen
	edited, err := dry.EditIssue(ctx, repo, 7, ghclient.Edit{State: &open})
	require.NoError(t, err)
	require.False(t, edited.UpdatedAt.IsZero())
	edited.UpdatedAt = time.Time{}
	require.Equal(t, ghclient.Issue{Repo: repo, Number: 7, State: ghclient.StateOpen}, edited)

	title, labels := "[warning] Node gpu-7: GPUXidError — quarantined", []string{"incident:quarantined", "kubemedic"}
	edited, err = dry.EditIssue(ctx, repo, 7, ghclient.Edit{Title: &title, Labels: &labels})
	require.NoError(t, err)
	require.Equal(t, title, edited.Title, "a retitle is applied to the dry run's view")
	require.Equal(t, labels, edited.Labels)

	_, err = dry.CreateIssue(ctx, "no-slash", ghclient.NewIssue{Title: "t"})
	require.True(t, ghclient.IsPermanent(err), "a malformed repository fails as it would for real")
}
