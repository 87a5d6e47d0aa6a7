package bridge_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// shippedConfig is deploy/alertbridge/config.yaml without the node history
// (which needs Kubernetes).
func shippedConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/alertbridge/config.yaml")
	require.NoError(t, err)
	cfg := strings.Replace(string(b), "nodeHistory:\n  enabled: true", "nodeHistory:\n  enabled: false", 1)
	require.NotEqual(t, string(b), cfg, "the shipped config enables nodeHistory")
	return cfg
}

// incident is the group of the shipped receiver's node route for gpu-7:
// its group labels are the node alone. Each name is a firing alert of it,
// with the labels deploy/prometheus gives it.
func incident(names ...string) []byte {
	var alerts []alert
	for _, n := range names {
		a := alert{fp: n, labels: map[string]string{"alertname": n}}
		switch n {
		case "KubemedicGPUXidError":
			a.labels["condition"] = "GPUXidError"
		case "KubemedicNodeRepairing":
			a.labels["severity"] = "info"
		case "KubemedicNodeRemediationFailed", "KubemedicNodeQuarantined":
			a.labels["severity"] = "warning"
		}
		alerts = append(alerts, a)
	}
	if len(alerts) == 0 {
		alerts = []alert{{fp: "KubemedicGPUXidError", resolved: true, labels: map[string]string{"alertname": "KubemedicGPUXidError", "condition": "GPUXidError"}},
			{fp: "KubemedicNodeQuarantined", resolved: true, labels: map[string]string{"alertname": "KubemedicNodeQuarantined", "severity": "warning"}}}
	}
	return group("kubemedic-alertbridge", map[string]string{"node": "gpu-7"}, alerts...)
}

// TestNodeIncidentFollows: one issue for a node's incident, whose title and
// incident label follow it detected → repairing → quarantined → resolved,
// each change said in the transition's comment, while what people did to
// the title and labels stays.
func TestNodeIncidentFollows(t *testing.T) {
	e := newEnv(t, shippedConfig(t), nil)
	step := func(names ...string) ghfake.Issue {
		t.Helper()
		require.Equal(t, http.StatusOK, e.post(incident(names...)))
		e.settle()
		return onlyIssue(t, e.fake, repo)
	}
	record := func(is ghfake.Issue) marker.State {
		t.Helper()
		_, st, ok, err := marker.Parse(is.Body)
		require.NoError(t, err)
		require.True(t, ok)
		return st
	}

	is := step("KubemedicGPUXidError")
	assert.Equal(t, "[critical] Node gpu-7: GPUXidError — detected", is.Title)
	assert.Equal(t, []string{"incident:detected", "kubemedic-alert", "severity:critical"}, is.Labels)
	assert.Equal(t, marker.TitleDigest(is.Title), record(is).TitleDigest, "the filed title is recorded as the bridge's")
	assert.Equal(t, is.Labels, record(is).Labels)
	e.fake.AddLabel(repo, is.Number, "hardware")

	// kubemedic repairs the node: retitled and relabelled, the person's
	// label kept, the phase change in the comment; one more PATCH.
	e.fake.ResetCalls()
	is = step("KubemedicGPUXidError", "KubemedicNodeRepairing")
	assert.Equal(t, "[critical] Node gpu-7: GPUXidError — repairing", is.Title)
	assert.ElementsMatch(t, []string{"hardware", "incident:repairing", "kubemedic-alert", "severity:critical"}, is.Labels)
	comments := e.fake.Comments(repo, is.Number)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "**Alerts changed**")
	assert.Contains(t, comments[0], "Incident now repairing (was detected).")
	assert.Equal(t, 1, e.fake.CallCount(http.MethodPatch, "/repos/*/*/issues/*"), "title and labels in one PATCH after the transition")
	assert.Equal(t, []string{"incident:repairing", "kubemedic-alert", "severity:critical"}, record(is).Labels)

	// A person takes the phase label off; a step fails, the phase stays:
	// the label is not put back, and nothing but the transition is written.
	e.fake.RemoveLabel(repo, is.Number, "incident:repairing")
	e.fake.ResetCalls()
	is = step("KubemedicGPUXidError", "KubemedicNodeRepairing", "KubemedicNodeRemediationFailed")
	assert.Equal(t, "[critical] Node gpu-7: GPUXidError — repairing", is.Title)
	assert.NotContains(t, is.Labels, "incident:repairing", "a rendered label a person removed is not put back")
	assert.Len(t, e.fake.Comments(repo, is.Number), 2)
	assert.Zero(t, e.fake.CallCount(http.MethodPatch, "/repos/*/*/issues/*"), "no retitle, no relabel")

	// Quarantined: the title and label follow, the issue stays open.
	is = step("KubemedicGPUXidError", "KubemedicNodeQuarantined")
	assert.Equal(t, ghclient.StateOpen, is.State)
	assert.Equal(t, "[critical] Node gpu-7: GPUXidError — quarantined", is.Title)
	assert.ElementsMatch(t, []string{"hardware", "incident:quarantined", "kubemedic-alert", "severity:critical"}, is.Labels)
	comments = e.fake.Comments(repo, is.Number)
	assert.Contains(t, comments[len(comments)-1], "Incident now quarantined (was repairing).")

	// A person retitles it; the node heals: closed, their title kept, the
	// label says resolved.
	e.fake.SetTitle(repo, is.Number, "gpu-7: GPU 3 replaced (RMA 4411)")
	is = step()
	assert.Equal(t, ghclient.StateClosed, is.State)
	assert.Equal(t, "gpu-7: GPU 3 replaced (RMA 4411)", is.Title, "a person's title is theirs")
	assert.ElementsMatch(t, []string{"hardware", "incident:resolved", "kubemedic-alert", "severity:critical"}, is.Labels)
	comments = e.fake.Comments(repo, is.Number)
	assert.Contains(t, comments[len(comments)-1], "**Resolved**")
	assert.Contains(t, comments[len(comments)-1], "Incident now resolved (was quarantined).")
	assert.Len(t, e.fake.Issues(repo), 1, "one issue for the whole incident")
}

// TestNodeIncidentFollowsAfterARestart: the record of what the bridge set
// is in the issue, so a restarted bridge (its cache rebuilt from GitHub)
// still tells its own title from a person's.
func TestNodeIncidentFollowsAfterARestart(t *testing.T) {
	e := newEnv(t, shippedConfig(t), nil)
	require.Equal(t, http.StatusOK, e.post(incident("KubemedicGPUXidError")))
	e.settle()
	e.restart()
	require.Equal(t, http.StatusOK, e.post(incident("KubemedicGPUXidError", "KubemedicNodeRepairing")))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	assert.Equal(t, "[critical] Node gpu-7: GPUXidError — repairing", is.Title)
	assert.Contains(t, is.Labels, "incident:repairing")
	assert.NotContains(t, is.Labels, "incident:detected")
}

// TestNodeIncidentHistoryFollows: the node's issue is filed at its first
// alert, before kubemedic tried anything; each change of its alerts reads
// the node's operations again, so that at the quarantine the issue lists
// every attempt (the handoff), without a comment of its own.
func TestNodeIncidentHistoryFollows(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	ops := &fakeOps{}
	cfg := strings.Replace(shippedConfig(t), "nodeHistory:\n  enabled: false", "nodeHistory:\n  enabled: true", 1)
	e := newEnv(t, cfg, withOps(ops, time.Second, nil))

	require.Equal(t, http.StatusOK, e.post(incident("KubemedicGPUXidError")))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	require.Contains(t, is.Body, "### Operation history on node `gpu-7`")
	require.NotContains(t, is.Body, "gpu-xid.gpu-7.a")

	ops.set([]v1alpha1.NodeOperation{
		nodeOp("gpu-xid.gpu-7.a", "gpu-7", t0, v1alpha1.PhaseFailed, "reset-gpu failed"),
		nodeOp("gpu-xid.gpu-7.b", "gpu-7", t0.Add(time.Minute), v1alpha1.PhaseFailed, "RecoveryTimeout"),
	}, nil)
	require.Equal(t, http.StatusOK, e.post(incident("KubemedicGPUXidError", "KubemedicNodeQuarantined")))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	require.Contains(t, is.Body, "gpu-xid.gpu-7.a", "the handoff lists every attempt")
	require.Contains(t, is.Body, "gpu-xid.gpu-7.b")
	require.Equal(t, 1, strings.Count(is.Body, "### Operation history"))
	comments := e.fake.Comments(repo, is.Number)
	require.Len(t, comments, 1)
	require.NotContains(t, comments[0], "### Operation history", "the body's history, not the comment's")
	require.Equal(t, 2, ops.callCount())

	// The node heals: the resolve carries the section over, unread.
	require.Equal(t, http.StatusOK, e.post(incident()))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	require.Equal(t, ghclient.StateClosed, is.State)
	require.Contains(t, is.Body, "gpu-xid.gpu-7.b")
	require.Equal(t, 2, ops.callCount())
}
