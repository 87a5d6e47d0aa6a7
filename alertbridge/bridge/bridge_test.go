package bridge_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// skewClock is the real clock moved forward by a settable offset, so a test
// can pass a reopen window without sleeping while tickers keep real time.
type skewClock struct {
	clock.RealClock
	off atomic.Int64
}

func (c *skewClock) Now() time.Time                  { return c.RealClock.Now().Add(time.Duration(c.off.Load())) }
func (c *skewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *skewClock) Advance(d time.Duration)         { c.off.Add(int64(d)) }

func withClock(c *skewClock) func(*bridge.Options) {
	return func(o *bridge.Options) { o.Clock = c }
}

func onlyIssue(t *testing.T, f *ghfake.Fake, r string) ghfake.Issue {
	t.Helper()
	issues := f.Issues(r)
	require.Len(t, issues, 1, "issues in %s", r)
	return issues[0]
}

func TestLifecycle(t *testing.T) {
	clk := &skewClock{}
	e := newEnv(t, baseConfig, withClock(clk))
	e.fake.SetClock(clk)

	// Fire: one issue with the routed repo, labels, assignees and body.
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateOpen, is.State)
	assert.Contains(t, is.Title, "KubemedicGPULost")
	assert.Contains(t, is.Title, "gpu-7")
	assert.Contains(t, is.Labels, "kubemedic-alert")
	assert.Contains(t, is.Labels, "severity:critical")
	assert.ElementsMatch(t, []string{"alice", "bob"}, is.Assignees)
	assert.Contains(t, is.Body, "gpu-7")
	assert.Contains(t, is.Body, "https://runbooks.example/gpu-lost")
	assert.Contains(t, is.Body, "#/silences/new?filter=")
	assert.Contains(t, is.Body, "fp-gpu-7")
	_, st, ok, err := marker.Parse(is.Body)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"fp-gpu-7"}, st.Firing)

	// Alertmanager repeats the group: nothing is written.
	require.Equal(t, 1, e.fake.CallCount("POST", "/"), "the pattern counts the create")
	e.fake.ResetCalls()
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	assert.Zero(t, e.fake.CallCount("POST", "/")+e.fake.CallCount("PATCH", "/"), "a repeat writes nothing")

	// A human retitles and relabels the issue: the bridge keeps their edits.
	e.fake.SetTitle(repo, is.Number, "GPU 3 on gpu-7 is gone, RMA opened")
	e.fake.AddLabel(repo, is.Number, "rma")

	// Resolve: a comment, then closed as completed.
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", true)))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateClosed, is.State)
	assert.Equal(t, ghclient.ReasonCompleted, is.StateReason)
	comments := e.fake.Comments(repo, is.Number)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "**Resolved**")
	assert.Equal(t, "GPU 3 on gpu-7 is gone, RMA opened", is.Title, "the human's title is kept")
	assert.Contains(t, is.Labels, "rma", "the human's label is kept")

	// Re-fire inside the window: reopened, with a comment.
	clk.Advance(30 * time.Minute)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateOpen, is.State)
	comments = e.fake.Comments(repo, is.Number)
	require.Len(t, comments, 2)
	assert.Contains(t, comments[1], "Reopening")

	// Resolve again, then re-fire after the window: a new issue linking the old.
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", true)))
	e.settle()
	clk.Advance(2 * time.Hour)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	issues := e.fake.Issues(repo)
	require.Len(t, issues, 2)
	assert.Equal(t, ghclient.StateClosed, issues[0].State)
	assert.Equal(t, ghclient.StateOpen, issues[1].State)
	assert.Contains(t, issues[1].Body, fmt.Sprintf("#%d", issues[0].Number))

	assert.Equal(t, 2.0, e.metric("kubemedic_alertbridge_transitions_total", map[string]string{"kind": "resolved"}))
	assert.Equal(t, 2.0, e.metric("kubemedic_alertbridge_transitions_total", map[string]string{"kind": "refired"}))
	assert.Zero(t, e.fake.CallCount("", "/search/*"), "never the search API")
}

func TestRoutingToAnotherRepo(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	body := group("storage-oncall", map[string]string{"alertname": "KubemedicNFSMountUnhealthy", "node": "gpu-3", "team": "storage"},
		alert{fp: "nfs-1"})
	require.Equal(t, http.StatusOK, e.post(body))
	e.settle()
	is := onlyIssue(t, e.fake, storageRepo)
	assert.Contains(t, is.Labels, "storage")
	assert.Empty(t, is.Assignees, "the gpu team's rule does not match")
	assert.Empty(t, e.fake.Issues(repo))
}

func TestNotPlannedIsNeverReopened(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-1", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-1", true)))
	e.settle()
	e.fake.ReopenIssue(repo, is.Number)
	e.fake.CloseIssue(repo, is.Number, ghclient.ReasonNotPlanned)
	waitRefresh(e)

	// It flaps three times: one comment says it was not reopened; the
	// identical ones after it are suppressed, and resolving a closed issue
	// only updates its alert table.
	for range 3 {
		require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-1", false)))
		e.settle()
		require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-1", true)))
		e.settle()
	}
	is = onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateClosed, is.State)
	assert.Equal(t, ghclient.ReasonNotPlanned, is.StateReason)
	var notReopened, resolved int
	for _, c := range e.fake.Comments(repo, is.Number) {
		if strings.Contains(c, "Not reopened: closed as not planned") {
			notReopened++
		}
		if strings.Contains(c, "**Resolved**") {
			resolved++
		}
	}
	assert.Equal(t, 1, notReopened, "comments:\n%s", strings.Join(e.fake.Comments(repo, is.Number), "\n---\n"))
	assert.Equal(t, 1, resolved, "only the resolve that closed the issue")
}

func TestIgnoreLabelIsNeverReopened(t *testing.T) {
	clk := &skewClock{}
	e := newEnv(t, baseConfig, withClock(clk))
	e.fake.SetClock(clk)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-2", false)))
	e.settle()
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-2", true)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	e.fake.AddLabel(repo, is.Number, "kubemedic-ignore")
	waitRefresh(e)

	clk.Advance(48 * time.Hour) // past the window too: still no new issue
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-2", false)))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	assert.Equal(t, ghclient.StateClosed, is.State)
	comments := e.fake.Comments(repo, is.Number)
	require.NotEmpty(t, comments)
	assert.Contains(t, comments[len(comments)-1], `Not reopened: the issue has the label "kubemedic-ignore"`)
}

// waitRefresh waits for two refresh passes of the bridge's cache.
func waitRefresh(e *env) {
	e.t.Helper()
	n := e.fake.CallCount("GET", "/repos/*/*/issues")
	require.Eventually(e.t, func() bool { return e.fake.CallCount("GET", "/repos/*/*/issues") >= n+2*len(e.cfg.Repos()) },
		5*time.Second, 10*time.Millisecond)
}

func TestConcurrentDuplicatesFileOneIssue(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range 10 {
		wg.Go(func() { codes[i] = e.post(gpuLost("gpu-9", false)) })
	}
	wg.Wait()
	for _, c := range codes {
		assert.Equal(t, http.StatusOK, c)
	}
	e.settle()
	onlyIssue(t, e.fake, repo)
	assert.Equal(t, 1, e.fake.CallCount("POST", "/repos/acme/gpu-oncall/issues"))
}

func TestPermanentErrorIsDroppedNotRetried(t *testing.T) {
	e := newEnv(t, strings.Replace(baseConfig, "acme/storage-oncall", "acme/gone", 1), nil)
	body := group("storage-oncall", map[string]string{"alertname": "X", "team": "storage"}, alert{fp: "x1"})
	require.Equal(t, http.StatusOK, e.post(body))
	e.settle()
	assert.Equal(t, 1, e.fake.CallCount("POST", "/repos/acme/gone/issues"), "a 404 is not retried")
	assert.Equal(t, 1.0, e.metric("kubemedic_alertbridge_dropped_total", map[string]string{"reason": "github_404"}))
	assert.Contains(t, e.logs.String(), "Dropping transition")
}
