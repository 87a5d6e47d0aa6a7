package bridge_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// The storm guard files at most maxNewIssues issues in a window; the other
// groups go to one roll-up issue, edited in batches, that closes when every
// group resolved.
func TestStormGuardRollsUp(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range 300 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			assert.Equal(t, http.StatusOK, e.post(gpuLost(fmt.Sprintf("node-%03d", i), false)))
		})
	}
	wg.Wait()
	e.settle()
	var rollups, own []ghfake.Issue
	require.Eventually(t, func() bool {
		rollups, own = nil, nil
		for _, is := range e.fake.Issues(repo) {
			if k, _, _, _ := marker.Parse(is.Body); k == marker.RollupKey {
				rollups = append(rollups, is)
			} else {
				own = append(own, is)
			}
		}
		if len(rollups) != 1 {
			return false
		}
		// The marker keeps the first members that fit and the count of all
		// (the local roll-up file keeps them all); the body counts all.
		_, st, _, _ := marker.Parse(rollups[0].Body)
		return st.MembersTotal == 280 && len(st.Members) > 0 && strings.Contains(rollups[0].Body, "**Firing: 280 · Resolved: 0**")
	}, 10*time.Second, 20*time.Millisecond)
	assert.Len(t, own, 20)
	assert.Contains(t, rollups[0].Body, "**Firing: 280 · Resolved: 0**")
	assert.Equal(t, 280.0, e.metric("kubemedic_alertbridge_storm_guard_activations_total", map[string]string{"repo": repo}))
	assert.Less(t, e.fake.CallCount("", "/repos/acme/gpu-oncall/issues/*"), 30, "roll-up edits are gathered, not one per group")

	// Everything resolves: the roll-up says so and closes.
	for i := range 300 {
		require.Equal(t, http.StatusOK, e.post(gpuLost(fmt.Sprintf("node-%03d", i), true)))
	}
	e.settle()
	require.Eventually(t, func() bool {
		is, _ := e.fake.Issue(repo, rollups[0].Number)
		return is.State == ghclient.StateClosed
	}, 10*time.Second, 20*time.Millisecond)
	is, _ := e.fake.Issue(repo, rollups[0].Number)
	assert.Contains(t, is.Body, "**Firing: 0 · Resolved: 280**")
	for _, o := range own {
		got, _ := e.fake.Issue(repo, o.Number)
		assert.Equal(t, ghclient.StateClosed, got.State, "issue #%d", o.Number)
	}
}

// A roll-up a person closed, even as not planned, stays closed when its
// table changes: a roll-up sync only ever closes the issue, never sends
// state open (the refresh does not read roll-up issues, so the bridge does
// not know it was closed). doc.go: never reopen an issue a human closed as
// not planned.
func TestRollupClosedAsNotPlannedStaysClosed(t *testing.T) {
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

// A group held back by the storm guard is counted once in the storm metric,
// even when recording it in the roll-up fails and the worker retries it:
// only a recorded group counts.
func TestStormMetricCountedOnceAcrossRetries(t *testing.T) {
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
