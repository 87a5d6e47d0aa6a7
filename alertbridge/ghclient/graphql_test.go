package ghclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
)

func ptr[T any](v T) *T { return &v }

func TestTransitionIsOneRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	is, err := e.client.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "GPU lost on gpu-7", Body: "firing", Labels: []string{"kubemedic"}})
	require.NoError(t, err)
	require.NotEmpty(t, is.NodeID)
	e.fake.ResetCalls()

	got, err := e.client.Transition(ctx, repo, is.Number, is.NodeID,
		ghclient.Edit{Body: ptr("resolved"), State: ptr(ghclient.StateClosed), StateReason: ptr(ghclient.ReasonCompleted)}, "**Resolved**")
	require.NoError(t, err)
	calls := e.fake.Calls()
	require.Len(t, calls, 1, "edit and comment in one request")
	assert.Equal(t, "/api/graphql", calls[0].Path)
	body := string(calls[0].Body)
	assert.Less(t, strings.Index(body, "addComment"), strings.Index(body, "closeIssue"), "the comment comes first, as with REST")
	assert.Equal(t, ghclient.StateClosed, got.State)
	assert.Equal(t, ghclient.ReasonCompleted, got.StateReason)
	assert.Equal(t, "resolved", got.Body)
	assert.Equal(t, is.NodeID, got.NodeID)
	assert.Equal(t, []string{"kubemedic"}, got.Labels)
	assert.Equal(t, []string{"**Resolved**"}, e.fake.Comments(repo, is.Number))

	// Reopen with a comment; then an edit without a comment or state.
	got, err = e.client.Transition(ctx, repo, is.Number, is.NodeID, ghclient.Edit{Body: ptr("firing again"), State: ptr(ghclient.StateOpen)}, "**Re-fired**")
	require.NoError(t, err)
	assert.Equal(t, ghclient.StateOpen, got.State)
	assert.Equal(t, ghclient.ReasonReopened, got.StateReason)
	got, err = e.client.Transition(ctx, repo, is.Number, is.NodeID, ghclient.Edit{Body: ptr("table only")}, "")
	require.NoError(t, err)
	assert.Equal(t, "table only", got.Body)
	assert.Len(t, e.fake.Comments(repo, is.Number), 2)
}

func TestTransitionRetriesWithoutDuplicatingTheComment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	is, err := e.client.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "x", Body: "firing"})
	require.NoError(t, err)
	failures := 2
	e.fake.SetFault(func(r *http.Request) *ghfake.Fault {
		if strings.HasSuffix(r.URL.Path, "graphql") && failures > 0 {
			failures--
			return &ghfake.Fault{Status: http.StatusBadGateway, Body: "bad gateway"}
		}
		return nil
	})
	_, err = e.client.Transition(ctx, repo, is.Number, is.NodeID, ghclient.Edit{Body: ptr("resolved"), State: ptr(ghclient.StateClosed)}, "**Resolved**")
	require.NoError(t, err)
	assert.Equal(t, []string{"**Resolved**"}, e.fake.Comments(repo, is.Number))
	assert.Len(t, e.waits, 2, "two backoffs")
}

func TestTransitionErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.client.Transition(ctx, repo, 1, "I_kwDOnope", ghclient.Edit{Body: ptr("x")}, "c")
	require.Error(t, err)
	var pe *ghclient.PermanentError
	require.ErrorAs(t, err, &pe, "a node GitHub cannot resolve is permanent: %v", err)
	assert.Equal(t, http.StatusNotFound, pe.Status)
	assert.Contains(t, err.Error(), "NOT_FOUND")
	assert.Equal(t, 1, e.fake.CallCount("", "/api/graphql"), "not retried")

	_, err = e.client.Transition(ctx, repo, 1, "", ghclient.Edit{Body: ptr("x")}, "c")
	assert.True(t, ghclient.IsPermanent(err), "an issue without a node ID: %v", err)

	calls := e.fake.CallCount("", "/api/graphql")
	_, err = e.client.Transition(ctx, repo, 1, "I_kwDOnope", ghclient.Edit{Body: ptr("x"), Labels: &[]string{"incident:quarantined"}}, "c")
	assert.True(t, ghclient.IsPermanent(err), "labels go by name through REST only: %v", err)
	_, err = e.client.Transition(ctx, repo, 1, "I_kwDOnope", ghclient.Edit{Title: ptr("t")}, "c")
	assert.True(t, ghclient.IsPermanent(err), "a title too: %v", err)
	assert.Equal(t, calls, e.fake.CallCount("", "/api/graphql"), "refused before any request")
}
