package bridge_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// A webhook accepted while Run rebuilds the cache is only journaled: Run
// queues it after the journal's older entries, so it never overtakes an
// entry of its key from before the restart. Applied the other way round,
// the resolve would find no issue and do nothing, and the older firing would
// then file an issue that stays open although the group resolved.
func TestWebhookDuringRebuildWaitsForOlderPendingEntries(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	e.stop()

	// The group fired just before the restart; the bridge had not applied it.
	j := mustOpenJournal(t, e)
	_, err := j.Append(keyHashOf(t, e, gpuLost("gpu-8", false)), gpuLost("gpu-8", false), time.Now())
	require.NoError(t, err)
	require.NoError(t, j.Close())

	// GitHub answers the rebuild slowly; meanwhile the group resolves.
	release := make(chan struct{})
	e.fake.SetFault(func(r *http.Request) *ghfake.Fault {
		if r.Method == http.MethodGet {
			<-release
		}
		return nil
	})
	e.start()
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-8", true)))
	close(release)
	e.settle()

	for _, is := range e.fake.Issues(repo) {
		assert.Equal(t, ghclient.StateClosed, is.State, "the last webhook says the group resolved: %q", is.Title)
	}
}

func TestCrashAfterCommentDoesNotRepeatIt(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-4", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	e.stop()

	// The resolve was recorded and its comment posted, then the process died
	// before the edit: the journal still holds the entry.
	j := mustOpenJournal(t, e)
	entry, err := j.Append(keyHashOf(t, e, gpuLost("gpu-4", true)), gpuLost("gpu-4", true), time.Now())
	require.NoError(t, err)
	require.NoError(t, j.Close())
	e.fake.AddComment(repo, is.Number, "kubemedic-bot", "**Resolved**: all 1 alert of this group resolved. Closing."+marker.Transition(entry.ID))

	e.start()
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateClosed, is.State, "the edit the crash interrupted is applied")
	assert.Len(t, e.fake.Comments(repo, is.Number), 1, "the comment is not posted twice")
}
func TestRestartMidBacklogWithGitHubErrors(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	// GitHub fails writes: first 502s, then 429s asking to wait.
	var writes atomic.Int64
	e.fake.SetFault(func(r *http.Request) *ghfake.Fault {
		if r.Method == http.MethodGet {
			return nil
		}
		switch n := writes.Add(1); {
		case n <= 15:
			return &ghfake.Fault{Status: http.StatusBadGateway, Body: "bad gateway"}
		case n <= 30:
			return &ghfake.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: `{"message":"slow down"}`}
		}
		return nil
	})
	for i := range 10 {
		require.Equal(t, http.StatusOK, e.post(gpuLost(fmt.Sprintf("n%d", i), false)))
	}
	for i := range 10 {
		if i%2 == 0 {
			require.Equal(t, http.StatusOK, e.post(gpuLost(fmt.Sprintf("n%d", i), true)))
		}
	}
	require.Eventually(t, func() bool { return writes.Load() > 20 }, 20*time.Second, 10*time.Millisecond)
	require.NotZero(t, e.journal.Len(), "still a backlog when the bridge restarts")
	e.restart()
	e.settle()

	issues := e.fake.Issues(repo)
	require.Len(t, issues, 10, "no duplicates, none lost")
	for _, is := range issues {
		i := strings.TrimPrefix(strings.Fields(is.Title)[len(strings.Fields(is.Title))-1], "n")
		want := ghclient.StateOpen
		if i == "0" || i == "2" || i == "4" || i == "6" || i == "8" {
			want = ghclient.StateClosed
		}
		assert.Equal(t, want, is.State, "issue %q", is.Title)
		if want == ghclient.StateClosed {
			assert.Len(t, e.fake.Comments(repo, is.Number), 1, "one resolve comment on %q", is.Title)
		}
	}
}
