package render_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// incidentAlert is one of kubemedic's alerts about node gpu-7, labelled as
// deploy/prometheus's rules label it.
func incidentAlert(name, severity string, firing bool, extra ...string) template.Alert {
	a := template.Alert{Status: payload.StatusFiring, StartsAt: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC),
		Labels: template.KV{"alertname": name, "severity": severity, "node": "gpu-7"}, Fingerprint: name}
	if !firing {
		a.Status = payload.StatusResolved
	}
	for i := 0; i+1 < len(extra); i += 2 {
		a.Labels[extra[i]] = extra[i+1]
	}
	return a
}

// nodeGroup is a group of the shipped receiver's node route: its group
// labels are the node alone.
func nodeGroup(alerts ...template.Alert) *payload.Message {
	m := &payload.Message{Version: payload.Version, Data: template.Data{Receiver: "kubemedic-alertbridge",
		Status: payload.StatusResolved, GroupLabels: template.KV{"node": "gpu-7"}, CommonLabels: template.KV{"node": "gpu-7"},
		ExternalURL: "http://alertmanager.example:9093", Alerts: alerts}}
	for _, a := range alerts {
		if a.Status == payload.StatusFiring {
			m.Status = payload.StatusFiring
		}
	}
	return m
}

// TestShippedIncidentTitles: the shipped config's title and labels say the
// node, the conditions seen and the incident's phase, with the highest
// severity; a group without a node, or grouped by alertname and node as
// before, keeps the default title.
func TestShippedIncidentTitles(t *testing.T) {
	cfg, err := config.Load("../../deploy/alertbridge/config.yaml")
	require.NoError(t, err)
	var (
		xid = func(firing bool) template.Alert {
			return incidentAlert("KubemedicGPUXidError", "critical", firing, "condition", "GPUXidError")
		}
		nfs         = incidentAlert("KubemedicNFSMountUnhealthy", "warning", true, "condition", "NFSMountUnhealthy")
		unknown     = incidentAlert("KubemedicNodeConditionUnknown", "warning", true, "condition", "GPULost")
		repairing   = func(firing bool) template.Alert { return incidentAlert("KubemedicNodeRepairing", "info", firing) }
		failed      = incidentAlert("KubemedicNodeRemediationFailed", "warning", true)
		quarantined = func(firing bool) template.Alert { return incidentAlert("KubemedicNodeQuarantined", "warning", firing) }
	)
	for _, tc := range []struct {
		desc       string
		msg        *payload.Message
		wantTitle  string
		wantLabels []string
	}{
		{desc: "detected: only a condition alert fires", msg: nodeGroup(xid(true)),
			wantTitle:  "[critical] Node gpu-7: GPUXidError — detected",
			wantLabels: []string{"incident:detected", "kubemedic-alert", "severity:critical"}},
		{desc: "repairing: kubemedic repairs the node", msg: nodeGroup(xid(true), repairing(true)),
			wantTitle:  "[critical] Node gpu-7: GPUXidError — repairing",
			wantLabels: []string{"incident:repairing", "kubemedic-alert", "severity:critical"}},
		{desc: "repairing: a step failed, the condition cleared for now", msg: nodeGroup(xid(false), failed, repairing(true)),
			wantTitle:  "[warning] Node gpu-7 — repairing",
			wantLabels: []string{"incident:repairing", "kubemedic-alert", "severity:warning"}},
		{desc: "quarantined wins over repairing", msg: nodeGroup(xid(true), failed, quarantined(true), repairing(false)),
			wantTitle:  "[critical] Node gpu-7: GPUXidError — quarantined",
			wantLabels: []string{"incident:quarantined", "kubemedic-alert", "severity:critical"}},
		{desc: "several conditions, sorted, and one that cannot be told", msg: nodeGroup(xid(true), nfs, unknown),
			wantTitle:  "[critical] Node gpu-7: GPUXidError, NFSMountUnhealthy; GPULost unknown — detected",
			wantLabels: []string{"incident:detected", "kubemedic-alert", "severity:critical"}},
		{desc: "only a remediation alert: no condition named", msg: nodeGroup(repairing(true)),
			wantTitle:  "[info] Node gpu-7 — repairing",
			wantLabels: []string{"incident:repairing", "kubemedic-alert", "severity:info"}},
		{desc: "resolved: the conditions of the last notification", msg: nodeGroup(xid(false), quarantined(false)),
			wantTitle:  "[critical] Node gpu-7: GPUXidError — resolved",
			wantLabels: []string{"incident:resolved", "kubemedic-alert", "severity:critical"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			iss, err := render.Render(cfg, tc.msg)
			require.NoError(t, err)
			require.Equal(t, tc.wantTitle, iss.Title)
			require.Equal(t, tc.wantLabels, iss.Labels)
			require.Equal(t, `kubemedic-alertbridge/{node="gpu-7"}`, iss.Key, "one key per node, whatever fires")
			for _, a := range tc.msg.Alerts {
				require.Contains(t, strings.SplitN(iss.Body, "\n", 2)[0], a.Labels["alertname"], "the heading names the node's alerts")
			}
		})
	}

	// A group without a node (grouped by alertname) keeps the default title.
	breaker := &payload.Message{Version: payload.Version, Data: template.Data{Receiver: "kubemedic-alertbridge", Status: payload.StatusFiring,
		GroupLabels:  template.KV{"alertname": "KubemedicRemediationBreakerOpen"},
		CommonLabels: template.KV{"alertname": "KubemedicRemediationBreakerOpen", "severity": "critical", "policy": "nfs-mounts"},
		Alerts: template.Alerts{{Status: payload.StatusFiring, Fingerprint: "b1",
			Labels: template.KV{"alertname": "KubemedicRemediationBreakerOpen", "severity": "critical", "policy": "nfs-mounts"}}}}}
	iss, err := render.Render(cfg, breaker)
	require.NoError(t, err)
	require.Equal(t, "[critical] KubemedicRemediationBreakerOpen", iss.Title)
	require.Equal(t, []string{"kubemedic-alert", "severity:critical"}, iss.Labels, "no incident label")

	// The old grouping by alertname and node keeps the default title too.
	old := nodeGroup(xid(true))
	old.GroupLabels["alertname"] = "KubemedicGPUXidError"
	old.CommonLabels = template.KV{"alertname": "KubemedicGPUXidError", "severity": "critical", "node": "gpu-7"}
	iss, err = render.Render(cfg, old)
	require.NoError(t, err)
	require.Equal(t, "[critical] KubemedicGPUXidError on gpu-7", iss.Title)
	require.Equal(t, []string{"kubemedic-alert", "severity:critical"}, iss.Labels)
}
