package alertbridge_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/test/harness"
)

const config = `
defaultRepo: acme/gpu-oncall
reopenWindow: %s
stormGuard: {maxNewIssues: %d, window: 10m}
assignees:
  - matchers: ['team="gpu"']
    users: [alice]
`

func TestFireResolveReopenAndNewIssue(t *testing.T) {
	w := newWorld(t, fmt.Sprintf(config, "4s", 20), 1)
	w.startInProcess()
	a := gpuLost("gpu-7")

	// Fire: exactly one issue, in the right repo, with labels, assignee and body.
	w.fire(a)
	w.eventually(func() bool { return len(w.fake.Issues(repo)) == 1 }, 15*time.Second, "fired alert files an issue")
	is := w.fake.Issues(repo)[0]
	assert.Equal(t, "[critical] KubemedicGPULost on gpu-7", is.Title)
	assert.ElementsMatch(t, []string{"kubemedic-alert", "severity:critical"}, is.Labels)
	assert.Equal(t, []string{"alice"}, is.Assignees)
	for _, want := range []string{"gpu-7", "GPULost", "2 of 8 GPUs visible (nvidia-smi: GPU is lost)",
		"docs/runbooks.md#kubemedicgpulost", w.am.URL + "/#/silences/new?filter=", "| firing |"} {
		assert.Contains(t, is.Body, want)
	}

	// Resolve: a comment, and the issue is closed.
	w.resolve(a)
	w.eventually(func() bool {
		is, _ := w.fake.Issue(repo, is.Number)
		return is.State == ghclient.StateClosed
	}, 15*time.Second, "resolved alert closes the issue")
	comments := w.fake.Comments(repo, is.Number)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "**Resolved**")

	// Re-fire inside the window: reopened.
	a.StartsAt = time.Now()
	w.fire(a)
	w.eventually(func() bool {
		is, _ := w.fake.Issue(repo, is.Number)
		return is.State == ghclient.StateOpen
	}, 15*time.Second, "re-fire inside the window reopens")
	assert.Contains(t, w.fake.Comments(repo, is.Number)[1], "Reopening")

	// Resolve, wait out the window, re-fire: a new issue that links the old one.
	w.resolve(a)
	w.eventually(func() bool {
		is, _ := w.fake.Issue(repo, is.Number)
		return is.State == ghclient.StateClosed
	}, 15*time.Second, "closed again")
	time.Sleep(4500 * time.Millisecond) // the reopen window is real time for Alertmanager and the bridge
	a.StartsAt = time.Now()
	w.fire(a)
	w.eventually(func() bool { return len(w.fake.Issues(repo)) == 2 }, 15*time.Second, "re-fire after the window files a new issue")
	issues := w.fake.Issues(repo)
	assert.Equal(t, ghclient.StateClosed, issues[0].State)
	assert.Equal(t, ghclient.StateOpen, issues[1].State)
	assert.Contains(t, issues[1].Body, fmt.Sprintf("previous occurrence: #%d", issues[0].Number))
	assert.Zero(t, w.fake.CallCount("", "/search/*"), "never the search API")
}

func TestNotPlannedIsNotReopened(t *testing.T) {
	w := newWorld(t, fmt.Sprintf(config, "1h", 20), 1)
	w.startInProcess()
	a := gpuLost("gpu-3")
	w.fire(a)
	w.eventually(func() bool { return len(w.fake.Issues(repo)) == 1 }, 15*time.Second, "issue filed")
	n := w.fake.Issues(repo)[0].Number
	w.resolve(a)
	w.eventually(func() bool { is, _ := w.fake.Issue(repo, n); return is.State == ghclient.StateClosed }, 15*time.Second, "closed")

	// A human decides it is not worth fixing.
	w.fake.ReopenIssue(repo, n)
	w.fake.CloseIssue(repo, n, ghclient.ReasonNotPlanned)
	time.Sleep(time.Second) // a few refreshes of the bridge's cache (every 200ms here)

	a.StartsAt = time.Now()
	w.fire(a)
	w.eventually(func() bool {
		for _, c := range w.fake.Comments(repo, n) {
			if strings.Contains(c, "Not reopened: closed as not planned") {
				return true
			}
		}
		return false
	}, 15*time.Second, "a comment says why it was not reopened")
	is, _ := w.fake.Issue(repo, n)
	assert.Equal(t, ghclient.StateClosed, is.State)
	assert.Equal(t, ghclient.ReasonNotPlanned, is.StateReason)
	assert.Len(t, w.fake.Issues(repo), 1)
}

func TestConcurrentDuplicateDeliveries(t *testing.T) {
	// Ten webhook integrations in one receiver: Alertmanager delivers the
	// same group ten times at once.
	w := newWorld(t, fmt.Sprintf(config, "1h", 20), 10)
	w.startInProcess()
	w.fire(gpuLost("gpu-8"))
	w.eventually(func() bool { return w.metric("kubemedic_alertbridge_webhooks_total", `code="200"`) >= 10 }, 15*time.Second, "ten deliveries arrived")
	w.eventually(func() bool { return w.metric("kubemedic_alertbridge_queue_depth", "") == 0 }, 15*time.Second, "all applied")
	assert.Len(t, w.fake.Issues(repo), 1, "exactly one issue")
	assert.Equal(t, 1, w.fake.CallCount(http.MethodPost, "/repos/acme/gpu-oncall/issues"))
}

func TestRestartMidBacklogWithGitHubErrors(t *testing.T) {
	bin := harness.GoBuild(t, "./cmd/kubemedic-alertbridge")
	w := newWorld(t, fmt.Sprintf(config, "1h", 50), 1)

	// GitHub fails every write: first with 502, then with 429 and
	// Retry-After, until the test lets it through.
	var writes atomic.Int64
	var open atomic.Bool
	w.fake.SetFault(func(r *http.Request) *ghfake.Fault {
		if r.Method == http.MethodGet || open.Load() {
			return nil
		}
		if writes.Add(1) <= 20 {
			return &ghfake.Fault{Status: http.StatusBadGateway, Body: "<html>502 Bad Gateway</html>"}
		}
		return &ghfake.Fault{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}},
			Body: `{"message":"You have exceeded a secondary rate limit"}`}
	})
	cmd := w.startProcess(bin)

	const n = 12
	var alerts []harness.PostableAlert
	for i := range n {
		alerts = append(alerts, gpuLost(fmt.Sprintf("node-%02d", i)))
	}
	w.fire(alerts...)
	w.eventually(func() bool { return w.metric("kubemedic_alertbridge_webhooks_total", `code="200"`) >= n }, 20*time.Second, "all groups delivered")
	w.resolve(alerts[:n/2]...)
	w.eventually(func() bool { return w.metric("kubemedic_alertbridge_webhooks_total", `code="200"`) >= n+n/2 }, 20*time.Second, "resolves delivered")
	w.eventually(func() bool { return writes.Load() > 25 }, 30*time.Second, "GitHub answered 429s")
	require.Positive(t, w.metric("kubemedic_alertbridge_queue_depth", ""), "a backlog when the bridge is killed")

	// SIGKILL mid-backlog: no chance to flush anything.
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	open.Store(true)
	w.startProcess(bin)

	w.eventually(func() bool {
		issues := w.fake.Issues(repo)
		if len(issues) != n {
			return false
		}
		closed := 0
		for _, is := range issues {
			if is.State == ghclient.StateClosed {
				closed++
			}
		}
		return closed == n/2
	}, 60*time.Second, "every group has its issue, the resolved half closed")
	w.eventually(func() bool { return w.metric("kubemedic_alertbridge_queue_depth", "") == 0 }, 20*time.Second, "backlog drained")

	titles := map[string]int{}
	for _, is := range w.fake.Issues(repo) {
		titles[is.Title]++
		node := is.Title[strings.LastIndex(is.Title, " ")+1:]
		var i int
		_, err := fmt.Sscanf(node, "node-%02d", &i)
		require.NoError(t, err)
		comments := w.fake.Comments(repo, is.Number)
		if i < n/2 {
			assert.Equal(t, ghclient.StateClosed, is.State, "%s", is.Title)
			require.Len(t, comments, 1, "one resolve comment on %s: %v", is.Title, comments)
			assert.Contains(t, comments[0], "**Resolved**")
		} else {
			assert.Equal(t, ghclient.StateOpen, is.State, "%s", is.Title)
			assert.Empty(t, comments, "%s", is.Title)
		}
	}
	for title, c := range titles {
		assert.Equal(t, 1, c, "duplicate issues for %s", title)
	}
}
