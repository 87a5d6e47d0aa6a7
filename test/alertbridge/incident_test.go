package alertbridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// newShippedWorld is a world whose Alertmanager runs the shipped
// deploy/alertbridge/alertmanager-receiver.yaml (its routes, matchers and
// groupings as they are; the webhook pointed at the bridge with the token
// file; group_wait 0s, group_interval 1s) and whose bridge runs the shipped
// deploy/alertbridge/config.yaml (without the node history, which needs
// Kubernetes).
func newShippedWorld(t *testing.T) *world {
	t.Helper()
	harness.Tool(t, harness.AlertmanagerBinary)
	w := &world{t: t, fake: ghfake.New(), dir: t.TempDir(), port: harness.FreePort(t), logs: &testsupport.SyncBuffer{}}
	t.Cleanup(w.fake.Close)
	w.fake.AddRepo(repo)
	w.fake.AddRepo("acme/storage-oncall") // the shipped config's route
	w.fake.SetToken(githubToken)
	w.cfgFile = filepath.Join(w.dir, "alertbridge.yaml")
	w.stateDir = filepath.Join(w.dir, "state")
	w.tokenFile = filepath.Join(w.dir, "webhook-token")
	w.ghToken = filepath.Join(w.dir, "github-token")

	b, err := os.ReadFile("../../deploy/alertbridge/config.yaml")
	require.NoError(t, err)
	cfg := strings.Replace(string(b), "nodeHistory:\n  enabled: true", "nodeHistory:\n  enabled: false", 1)
	require.NotEqual(t, string(b), cfg, "the shipped config enables nodeHistory")
	require.Contains(t, cfg, "defaultRepo: "+repo+"\n")
	require.NoError(t, os.WriteFile(w.cfgFile, []byte(cfg), 0o600))
	require.NoError(t, os.WriteFile(w.tokenFile, []byte(webhookToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(w.ghToken, []byte(githubToken+"\n"), 0o600))

	b, err = os.ReadFile("../../deploy/alertbridge/alertmanager-receiver.yaml")
	require.NoError(t, err)
	var am map[string]any
	require.NoError(t, yaml.Unmarshal(b, &am))
	route := am["route"].(map[string]any)
	for _, r := range route["routes"].([]any) {
		r := r.(map[string]any)
		if _, ok := r["group_wait"]; ok {
			r["group_wait"], r["group_interval"], r["repeat_interval"] = "0s", "1s", "1h"
		}
	}
	hooks := 0
	for _, r := range am["receivers"].([]any) {
		hs, _ := r.(map[string]any)["webhook_configs"].([]any) // the default receiver has none
		for _, h := range hs {
			h := h.(map[string]any)
			h["url"] = fmt.Sprintf("http://127.0.0.1:%d/webhook", w.port)
			h["http_config"] = map[string]any{"authorization": map[string]any{"type": "Bearer", "credentials_file": w.tokenFile}}
			hooks++
		}
	}
	require.Equal(t, 1, hooks, "one webhook, the bridge's")
	out, err := yaml.Marshal(am)
	require.NoError(t, err)
	w.am = harness.StartAlertmanager(t, string(out))
	return w
}

// nodeAlert is one of kubemedic's alerts about node, labelled as
// deploy/prometheus's rules label it.
func nodeAlert(name, node string) harness.PostableAlert {
	labels := map[string]string{"alertname": name, "node": node}
	switch name {
	case "KubemedicGPUXidError":
		labels["severity"], labels["condition"] = "critical", "GPUXidError"
	case "KubemedicNodeRepairing":
		labels["severity"] = "info"
	default: // KubemedicNodeRemediationFailed, KubemedicNodeQuarantined
		labels["severity"] = "warning"
	}
	return harness.PostableAlert{Labels: labels, StartsAt: time.Now().Add(-time.Minute),
		Annotations: map[string]string{"summary": name + " on " + node}}
}

// TestOneIssuePerNodeIncident: the escalate story's alerts (a broken GPU:
// the Xid, the reset running then failing, the reboot, the quarantine)
// through the real Alertmanager with the shipped route and the shipped
// bridge config file one issue for the node, whose title and incident
// label follow detected → repairing → quarantined, with each change in a
// comment; it stays open while the node is quarantined and closes when the
// node is healthy again. The fleet-wide KubemedicRemediationFailed files
// nothing beside it.
func TestOneIssuePerNodeIncident(t *testing.T) {
	w := newShippedWorld(t)
	w.startInProcess()
	const node = "gpu-node-001"
	xid, repairing, failed, quarantined := nodeAlert("KubemedicGPUXidError", node), nodeAlert("KubemedicNodeRepairing", node),
		nodeAlert("KubemedicNodeRemediationFailed", node), nodeAlert("KubemedicNodeQuarantined", node)
	fleetFailed := harness.PostableAlert{StartsAt: time.Now().Add(-time.Minute),
		Labels: map[string]string{"alertname": "KubemedicRemediationFailed", "policy": "gpu-xid-reset", "step": "reset-gpu", "severity": "warning"}}

	var number int
	phase := func(title string, labels ...string) {
		t.Helper()
		w.eventually(func() bool {
			issues := w.fake.Issues(repo)
			if len(issues) != 1 {
				return false
			}
			number = issues[0].Number
			return issues[0].Title == title && assert.ObjectsAreEqual(labels, slices.Sorted(slices.Values(issues[0].Labels)))
		}, 20*time.Second, "one issue titled "+title)
	}
	// said reports whether a comment on the issue says s (Alertmanager may
	// send a change in one notification or in two, so not necessarily the
	// last comment).
	said := func(s string) bool {
		for _, c := range w.fake.Comments(repo, number) {
			if strings.Contains(c, s) {
				return true
			}
		}
		return false
	}

	w.fire(xid)
	phase("[critical] Node gpu-node-001: GPUXidError — detected", "incident:detected", "kubemedic-alert", "severity:critical")

	w.fire(repairing)
	phase("[critical] Node gpu-node-001: GPUXidError — repairing", "incident:repairing", "kubemedic-alert", "severity:critical")
	assert.True(t, said("Incident now repairing (was detected)."), "the phase change is in a comment")

	// The reset fails: the per-node failure joins the node's issue, the
	// fleet's view goes elsewhere. The reboot clears the Xid for a while.
	w.fire(failed, fleetFailed)
	w.resolve(xid)
	phase("[warning] Node gpu-node-001 — repairing", "incident:repairing", "kubemedic-alert", "severity:warning")
	assert.True(t, said("Severity now warning (was critical)."))

	// The Xid returns after the boot; the ladder ends in the quarantine.
	xid.StartsAt = time.Now()
	w.fire(xid, quarantined)
	w.resolve(repairing, failed)
	phase("[critical] Node gpu-node-001: GPUXidError — quarantined", "incident:quarantined", "kubemedic-alert", "severity:critical")
	assert.True(t, said("Incident now quarantined (was repairing)."))

	// Quarantined, it stays open: Alertmanager keeps the group, nothing
	// closes it.
	time.Sleep(3 * time.Second) // three group intervals
	is, ok := w.fake.Issue(repo, number)
	require.True(t, ok)
	assert.Equal(t, ghclient.StateOpen, is.State, "open while the node is quarantined")

	// A person replaces the GPU and lifts the quarantine: the node is
	// healthy again and the issue closes.
	w.resolve(xid, quarantined)
	w.eventually(func() bool {
		is, _ := w.fake.Issue(repo, number)
		return is.State == ghclient.StateClosed && strings.HasSuffix(is.Title, "— resolved")
	}, 20*time.Second, "a healed node closes its issue, titled resolved")
	is, _ = w.fake.Issue(repo, number)
	// Which conditions the last notification names depends on whether the
	// two resolved together; the node and the phase do not.
	assert.Regexp(t, `^\[(critical|warning)\] Node gpu-node-001(: GPUXidError)? — resolved$`, is.Title)
	assert.Contains(t, is.Labels, "incident:resolved")
	assert.NotContains(t, is.Labels, "incident:quarantined")
	assert.True(t, said("**Resolved**"))

	require.Len(t, w.fake.Issues(repo), 1, "one issue for the node's whole incident:\n%s", w.describe())
	assert.Empty(t, w.fake.Issues("acme/storage-oncall"))
}
