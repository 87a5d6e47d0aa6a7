package bridge_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// newLossyEnv is an env whose GitHub client's attempts time out after
// 500ms, so that an answer ghfake holds back is lost quickly.
func newLossyEnv(t *testing.T, cfg string) *env {
	e := newEnv(t, cfg, nil)
	tokenFile := filepath.Join(t.TempDir(), "github-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(githubToken), 0o600))
	e.opts = func(o *bridge.Options) {
		hc, err := ghclient.NewHTTPClient(ghclient.Auth{TokenFile: tokenFile}, e.fake.URL())
		require.NoError(t, err)
		// Its requests are counted by the client start made: Metrics is
		// left out, the registry holds those already.
		gh, err := ghclient.New(ghclient.Options{BaseURL: e.fake.URL(), HTTPClient: hc, Log: o.Log,
			MaxBackoff: 200 * time.Millisecond, RequestTimeout: 500 * time.Millisecond})
		require.NoError(t, err)
		o.GitHub = gh
	}
	e.restart()
	return e
}

// loseAnswers queues n lost answers for ep, alternating a proxy's 502 and a
// timeout.
func loseAnswers(f *ghfake.Fake, ep ghfake.Endpoint, n int) {
	for i := range n {
		loss := ghfake.LossBadGateway
		if i%2 == 1 {
			loss = ghfake.LossTimeout
		}
		f.LoseAnswers(ep, 1, loss)
	}
}

func postAll(t *testing.T, e *env, bodies [][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, b := range bodies {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			assert.Equal(t, http.StatusOK, e.post(b))
		})
	}
	wg.Wait()
	e.settle()
}

// 100 groups fire, resolve and fire again while GitHub carries out writes
// and their answers are lost, 10 of each kind the bridge sends (half to a
// proxy's 502, half to a timeout): still exactly one issue per group and
// every comment once.
func TestLostAnswersFileNoDuplicates(t *testing.T) {
	const groups = 100
	cfg := strings.Replace(baseConfig, "maxNewIssues: 20", "maxNewIssues: 1000", 1)
	e := newLossyEnv(t, cfg)
	// A group whose issue a person closes resolves with a REST PATCH (no
	// comment); every other transition is one GraphQL request. The bridge
	// posts REST comments only on issues without a node ID, which GitHub
	// always gives: ghclient's tests lose those answers.
	kinds := []ghfake.Endpoint{ghfake.EndpointCreateIssue, ghfake.EndpointEditIssue, ghfake.EndpointTransition}
	for _, ep := range kinds {
		loseAnswers(e.fake, ep, 10)
	}
	node := func(i int) string { return fmt.Sprintf("gpu-%03d", i) }
	phase := func(resolved bool) [][]byte {
		var out [][]byte
		for i := range groups {
			out = append(out, gpuLost(node(i), resolved))
		}
		return out
	}

	postAll(t, e, phase(false))
	require.Equal(t, groups, len(e.fake.Issues(repo)), "one issue per group")
	byNode := map[string]int{}
	for _, is := range e.fake.Issues(repo) {
		fields := strings.Fields(is.Title)
		byNode[fields[len(fields)-1]] = is.Number
	}
	require.Len(t, byNode, groups, "one issue per group")
	// People close ten of them while they fire.
	for i := range 10 {
		e.fake.CloseIssue(repo, byNode[node(i)], ghclient.ReasonCompleted)
	}
	waitRefresh(e)
	postAll(t, e, phase(true))
	postAll(t, e, phase(false))

	require.Equal(t, groups, len(e.fake.Issues(repo)), "no issue filed twice")
	for i := range groups {
		is, ok := e.fake.Issue(repo, byNode[node(i)])
		require.True(t, ok)
		assert.Equal(t, ghclient.StateOpen, is.State, "%s fires again", node(i))
		var bodies []string
		for _, c := range is.Comments {
			bodies = append(bodies, c.Body)
		}
		want := []string{"**Resolved**", "**Re-fired**"}
		if i < 10 {
			want = []string{"**Re-fired**"} // closed by a person: the resolve only edits the table
		}
		require.Len(t, bodies, len(want), "%s: %q", node(i), bodies)
		for j, w := range want {
			assert.True(t, strings.HasPrefix(bodies[j], w), "%s comment %d: %q", node(i), j, bodies[j])
		}
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values(bodies))), len(bodies), "no comment twice on %s", node(i))
		_, st, ok, err := marker.Parse(is.Body)
		require.True(t, ok)
		require.NoError(t, err)
		assert.Equal(t, []string{"fp-" + node(i)}, st.Firing)
	}
	lost := 0
	for _, c := range e.fake.Calls() {
		if c.Lost {
			lost++
		}
	}
	assert.Equal(t, 10*len(kinds), lost, "every answer queued to be lost was lost")
	for _, ep := range kinds {
		assert.Zero(t, e.fake.PendingFaults(ep), "%s", ep)
	}
	assert.Empty(t, e.fake.Rejected())
	assert.Contains(t, e.logs.String(), "GitHub answer lost; checking whether the write happened")
}

// The roll-up issue is filed once although the answer to its create is
// lost.
func TestLostAnswerFilesOneRollup(t *testing.T) {
	for name, loss := range map[string]ghfake.Loss{"502 after the write": ghfake.LossBadGateway, "timeout after the write": ghfake.LossTimeout} {
		t.Run(name, func(t *testing.T) {
			cfg := strings.Replace(baseConfig, "maxNewIssues: 20", "maxNewIssues: 1", 1)
			e := newLossyEnv(t, cfg)
			require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-1", false)))
			e.settle()
			e.fake.LoseAnswers(ghfake.EndpointCreateIssue, 1, loss)
			require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-2", false)))
			e.settle()
			require.Eventually(t, func() bool { return strings.Contains(e.logs.String(), "Filed roll-up issue for an alert storm") },
				10*time.Second, 10*time.Millisecond)
			var rollups int
			for _, is := range e.fake.Issues(repo) {
				if k, _, _, _ := marker.Parse(is.Body); k == marker.RollupKey {
					rollups++
				}
			}
			assert.Equal(t, 1, rollups)
			assert.Equal(t, 2, len(e.fake.Issues(repo)), "the group's own issue and one roll-up")
			assert.Zero(t, e.fake.PendingFaults(ghfake.EndpointCreateIssue))
		})
	}
}
