package bridge_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// BUG: a webhook accepted while Run is still rebuilding the cache is pushed
// to the queue by acceptWebhook (server.go:75), and then pushed again, after
// every older pending entry, by Run's loop over journal.Pending()
// (bridge.go:130-132). A key's entry from before the restart is then applied
// after the newer webhook: here the resolve runs first (no issue: nothing to
// do), then the old firing files an issue that stays open although the group
// resolved.
func TestBugWebhookDuringRebuildOvertakesOlderPendingEntry(t *testing.T) {
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

// BUG: syncRollup always sends state=open when it does not close the roll-up
// (rollup.go:283), and the refresh ignores roll-up issues (cache.go:120), so
// a roll-up a human closed, even as not planned, is reopened by the next
// member change. doc.go: never "reopen an issue a human closed as not
// planned".
func TestBugRollupClosedAsNotPlannedIsReopened(t *testing.T) {
	cfg := strings.Replace(baseConfig, "maxNewIssues: 20", "maxNewIssues: 1", 1)
	e := newEnv(t, cfg, nil)
	require.Equal(t, http.StatusOK, e.post(gpuLost("a", false)))
	require.Equal(t, http.StatusOK, e.post(gpuLost("b", false)))
	e.settle()
	var rollupNo int
	require.Eventually(t, func() bool {
		for _, is := range e.fake.Issues(repo) {
			if k, _, _, _ := marker.Parse(is.Body); k == marker.RollupKey {
				rollupNo = is.Number
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)

	e.fake.CloseIssue(repo, rollupNo, ghclient.ReasonNotPlanned)
	waitRefresh(e)
	n := e.fake.CallCount("PATCH", "/repos/acme/gpu-oncall/issues/*")
	require.Equal(t, http.StatusOK, e.post(gpuLost("c", false)))
	e.settle()
	require.Eventually(t, func() bool { return e.fake.CallCount("PATCH", "/repos/acme/gpu-oncall/issues/*") > n }, 2*time.Second, 10*time.Millisecond,
		"the roll-up is synced after the new member")
	is, _ := e.fake.Issue(repo, rollupNo)
	assert.Equal(t, ghclient.StateClosed, is.State, "a roll-up closed as not planned stays closed")
}

// BUG: when toRollup cannot save the roll-up (a transient error), work
// retries process, which runs the storm guard again and counts the storm
// metric again (process.go:68): one group held back, counted once per try.
func TestBugStormMetricCountedOncePerRetry(t *testing.T) {
	cfg := strings.Replace(baseConfig, "maxNewIssues: 20", "maxNewIssues: 1", 1)
	e := newEnv(t, cfg, nil)
	require.Equal(t, http.StatusOK, e.post(gpuLost("a", false)))
	e.settle()

	// The roll-up state cannot be written for a while.
	blocker := filepath.Join(e.dir, "journal", "rollups")
	require.NoError(t, os.WriteFile(blocker, []byte("in the way"), 0o600))
	require.Equal(t, http.StatusOK, e.post(gpuLost("b", false)))
	require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), "Retrying transition") },
		5*time.Second, 10*time.Millisecond)
	require.NoError(t, os.Remove(blocker))
	e.settle()

	assert.Equal(t, 1.0, e.metric("kubemedic_alertbridge_storm_guard_activations_total", map[string]string{"repo": repo}),
		"one group was held back")
}
