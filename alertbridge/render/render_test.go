package render_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/alertmanager/template"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// fixture decodes testdata/NAME.json.
func fixture(t *testing.T, name string) *payload.Message {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	msg, err := payload.DecodeBytes(data)
	require.NoError(t, err)
	return msg
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return cfg
}

const routed = `defaultRepo: acme/gpu-oncall
routes:
  - matchers: ['team="storage"', 'severity=~"critical|page"']
    repo: acme/storage-oncall
    labels: [storage, kubemedic-alert]
assignees:
  - matchers: ['team="gpu"']
    users: [bob, alice]
  - matchers: ['severity="critical"']
    users: [carol, alice]
`

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:32]
}

func TestKey(t *testing.T) {
	def := config.Default(config.Repo{Owner: "acme", Name: "gpu-oncall"})
	withKey := func(tmpl string) *config.Config {
		return parse(t, "defaultRepo: acme/gpu-oncall\ntemplates:\n  dedupeKey: '"+tmpl+"'\n")
	}
	group := func(receiver string, kv template.KV) *payload.Message {
		return &payload.Message{Data: template.Data{Receiver: receiver, GroupLabels: kv}}
	}
	for _, tc := range []struct {
		desc   string
		cfg    *config.Config
		msg    *payload.Message
		want   string
		errHas string
	}{
		{desc: "default: receiver and sorted group labels", cfg: def, msg: fixture(t, "gpu-lost"),
			want: `gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}`},
		{desc: "default ignores Alertmanager's groupKey", cfg: def, msg: func() *payload.Message {
			m := fixture(t, "gpu-lost")
			m.GroupKey = `{}/{team="gpu",cluster="new-route"}:{alertname="KubemedicGPULost", node="gpu-7"}`
			return m
		}(), want: `gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}`},
		{desc: "default with one group label", cfg: def, msg: fixture(t, "multi"), want: `gpu-oncall/{alertname="KubemedicGPUXidError"}`},
		{desc: "default without group labels", cfg: def, msg: group("all", nil), want: `all/{}`},
		{desc: "values are quoted", cfg: def, msg: group("r", template.KV{"a": `x",b="y`}), want: `r/{a="x\",b=\"y"}`},
		{desc: "odd label names are quoted", cfg: def, msg: group("r", template.KV{"gpu.model": "h100"}), want: `r/{"gpu.model"="h100"}`},
		{desc: "custom template", cfg: withKey(`{{ .CommonLabels.team }}/{{ .CommonLabels.node }}`), msg: fixture(t, "gpu-lost"), want: `gpu/gpu-7`},
		{desc: "custom template is trimmed", cfg: withKey(` {{ .CommonLabels.node }} `), msg: fixture(t, "gpu-lost"), want: `gpu-7`},
		{desc: "custom template rendering empty is an error", cfg: withKey(`{{ .CommonLabels.cluster }}`), msg: fixture(t, "gpu-lost"),
			errHas: `templates.dedupeKey rendered empty for receiver "gpu-oncall", group {alertname="KubemedicGPULost",node="gpu-7"}`},
		{desc: "custom template failing is an error", cfg: withKey(`{{ (index .Alerts 1).Fingerprint }}`), msg: fixture(t, "gpu-lost"),
			errHas: `render dedupe key: templates.dedupeKey: template line 1: does not execute`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			key, hash, err := render.Key(tc.cfg, tc.msg)
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, key)
			require.Equal(t, sha(tc.want), hash)
			require.Len(t, hash, 32)
		})
	}

	t.Run("label order does not matter", func(t *testing.T) {
		a := []byte(`{"version":"4","receiver":"r","status":"firing","groupLabels":{"node":"gpu-7","alertname":"A"},"alerts":[{"status":"firing","fingerprint":"1"}]}`)
		b := []byte(`{"version":"4","receiver":"r","status":"firing","groupLabels":{"alertname":"A","node":"gpu-7"},"alerts":[{"status":"firing","fingerprint":"2"}]}`)
		ma, err := payload.DecodeBytes(a)
		require.NoError(t, err)
		mb, err := payload.DecodeBytes(b)
		require.NoError(t, err)
		ka, ha, err := render.Key(def, ma)
		require.NoError(t, err)
		kb, hb, err := render.Key(def, mb)
		require.NoError(t, err)
		require.Equal(t, ka, kb)
		require.Equal(t, ha, hb)
	})
	t.Run("a value with a comma or brace cannot collide", func(t *testing.T) {
		k1, _, err := render.Key(def, group("r", template.KV{"a": "x", "b": "y"}))
		require.NoError(t, err)
		k2, _, err := render.Key(def, group("r", template.KV{"a": `x",b="y`}))
		require.NoError(t, err)
		k3, _, err := render.Key(def, group("r", template.KV{"a": `x"}`}))
		require.NoError(t, err)
		require.NotEqual(t, k1, k2)
		require.NotEqual(t, k1, k3)
		require.NotEqual(t, k2, k3)
	})
	t.Run("nil", func(t *testing.T) {
		_, _, err := render.Key(nil, &payload.Message{})
		require.Error(t, err)
	})
}

func TestRenderRouting(t *testing.T) {
	cfg := parse(t, routed)
	for _, tc := range []struct {
		desc      string
		fixture   string
		repo      string
		labels    []string
		assignees []string
		skip      bool
	}{
		{desc: "gpu group goes to the default repo", fixture: "gpu-lost", repo: "acme/gpu-oncall",
			labels: []string{"kubemedic-alert", "severity:critical"}, assignees: []string{"alice", "bob", "carol"}},
		{desc: "storage page goes to the storage route, with its labels", fixture: "truncated", repo: "acme/storage-oncall",
			labels: []string{"kubemedic-alert", "severity:page", "storage"}, assignees: nil},
		{desc: "resolved group asks not to be closed", fixture: "resolved", repo: "acme/gpu-oncall",
			labels: []string{"kubemedic-alert", "severity:critical"}, assignees: []string{"alice", "bob", "carol"}, skip: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			msg := fixture(t, tc.fixture)
			iss, err := render.Render(cfg, msg)
			require.NoError(t, err)
			require.Equal(t, tc.repo, iss.Repo.String())
			require.Equal(t, tc.labels, iss.Labels)
			require.Equal(t, tc.assignees, iss.Assignees)
			require.Equal(t, tc.skip, iss.SkipAutoClose)
			key, hash, err := render.Key(cfg, msg)
			require.NoError(t, err)
			require.Equal(t, key, iss.Key)
			require.Equal(t, hash, iss.KeyHash)
		})
	}
}

func TestRenderLabels(t *testing.T) {
	for _, tc := range []struct {
		desc string
		yaml string
		want []string
	}{
		{desc: "default: identity and severity", yaml: "defaultRepo: a/b\n", want: []string{"kubemedic-alert", "severity:critical"}},
		{desc: "custom identity label", yaml: "defaultRepo: a/b\nidentityLabel: from-alertmanager\n", want: []string{"from-alertmanager", "severity:critical"}},
		{desc: "templates replace the default; trimmed, empties dropped, sorted, unique",
			yaml: "defaultRepo: a/b\ntemplates:\n  labels: ['  node:{{ .CommonLabels.node }} ', '{{ .CommonLabels.cluster }}', 'team:{{ .CommonLabels.team }}', 'node:gpu-7', 'Node:GPU-7']\n",
			want: []string{"kubemedic-alert", "node:gpu-7", "team:gpu"}},
		{desc: "long labels are cut to 50 characters",
			yaml: "defaultRepo: a/b\ntemplates:\n  labels: ['{{ .CommonAnnotations.message }}']\n",
			want: []string{"GPU 0000:3b:00.0 (index 2) fell off the bus: Xid 7", "kubemedic-alert"}},
		{desc: "a label rendered over lines becomes one line",
			yaml: "defaultRepo: a/b\ntemplates:\n  labels: [\"a\\n  b\"]\n",
			want: []string{"a b", "kubemedic-alert"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			iss, err := render.Render(parse(t, tc.yaml), fixture(t, "gpu-lost"))
			require.NoError(t, err)
			require.Equal(t, tc.want, iss.Labels)
			for _, l := range iss.Labels {
				require.LessOrEqual(t, utf8.RuneCountInString(l), render.MaxLabelLength)
			}
		})
	}
}

func TestRenderTitle(t *testing.T) {
	def := config.Default(config.Repo{Owner: "acme", Name: "gpu-oncall"})
	withLabels := func(common, group template.KV, alerts ...template.KV) *payload.Message {
		m := &payload.Message{Version: "4", Data: template.Data{Receiver: "r", Status: "firing", CommonLabels: common, GroupLabels: group}}
		for i, l := range alerts {
			m.Alerts = append(m.Alerts, template.Alert{Status: "firing", Labels: l, Fingerprint: fmt.Sprint(i)})
		}
		if len(m.Alerts) == 0 {
			m.Alerts = template.Alerts{{Status: "firing", Labels: common, Fingerprint: "0"}}
		}
		return m
	}
	for _, tc := range []struct {
		desc string
		cfg  *config.Config
		msg  *payload.Message
		want string
	}{
		{desc: "severity, alertname and node", cfg: def, msg: fixture(t, "gpu-lost"), want: "[critical] KubemedicGPULost on gpu-7"},
		{desc: "nodes of a multi-node group", cfg: def, msg: fixture(t, "multi"), want: "[critical] KubemedicGPUXidError on 3 nodes: gpu-7, gpu-8, gpu-9"},
		{desc: "many nodes are counted", cfg: def, msg: withLabels(template.KV{"alertname": "A"}, nil,
			template.KV{"node": "n1"}, template.KV{"node": "n2"}, template.KV{"node": "n3"}, template.KV{"node": "n4"}), want: "A on 4 nodes"},
		{desc: "one node among alerts without one", cfg: def, msg: withLabels(template.KV{"alertname": "A"}, nil,
			template.KV{"node": "n1"}, template.KV{"x": "y"}), want: "A on n1"},
		{desc: "instance without node", cfg: def, msg: withLabels(template.KV{"alertname": "NodeDown", "severity": "warning", "instance": "10.0.0.5:9100"}, nil), want: "[warning] NodeDown on 10.0.0.5:9100"},
		{desc: "other group labels", cfg: def, msg: withLabels(template.KV{"alertname": "Quota", "namespace": "ml"}, template.KV{"alertname": "Quota", "namespace": "ml", "cluster": "prod"}), want: "Quota (cluster=prod, namespace=ml)"},
		{desc: "no labels at all", cfg: def, msg: withLabels(nil, nil), want: "Alert"},
		{desc: "custom title", cfg: parse(t, "defaultRepo: a/b\ntemplates:\n  title: '{{ .CommonLabels.node | toUpper }} is sick'\n"), msg: fixture(t, "gpu-lost"), want: "GPU-7 is sick"},
		{desc: "custom title rendering empty falls back to the default", cfg: parse(t, "defaultRepo: a/b\ntemplates:\n  title: '{{ .CommonLabels.cluster }}'\n"), msg: fixture(t, "gpu-lost"), want: "[critical] KubemedicGPULost on gpu-7"},
		{desc: "custom title over lines is one line", cfg: parse(t, "defaultRepo: a/b\ntemplates:\n  title: |\n    {{ .Status }}\n      {{ .CommonLabels.node }}\n"), msg: fixture(t, "gpu-lost"), want: "firing gpu-7"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			iss, err := render.Render(tc.cfg, tc.msg)
			require.NoError(t, err)
			require.Equal(t, tc.want, iss.Title)
		})
	}

	t.Run("long titles are cut to 256 characters", func(t *testing.T) {
		msg := fixture(t, "gpu-lost")
		msg.CommonLabels["node"] = strings.Repeat("ü", 300)
		iss, err := render.Render(def, msg)
		require.NoError(t, err)
		require.Equal(t, render.MaxTitleLength, utf8.RuneCountInString(iss.Title))
		require.True(t, utf8.ValidString(iss.Title))
		require.True(t, strings.HasPrefix(iss.Title, "[critical] KubemedicGPULost on üü"))
		require.True(t, strings.HasSuffix(iss.Title, "… [truncated]"))
	})
}

func TestRenderBody(t *testing.T) {
	cfg := parse(t, routed)
	for _, tc := range []struct {
		desc    string
		fixture string
		has     []string
		hasNot  []string
	}{
		{desc: "single alert: what, where, since when, how bad, and links", fixture: "gpu-lost", has: []string{
			"### Firing: KubemedicGPULost on `gpu-7`",
			"Node gpu-7 lost a GPU",
			"| **Severity** | critical |",
			"| **Since** | 2026-03-14 09:26:53 UTC |",
			"| **Node** | gpu-7 |",
			"| **Condition** | GPULost |",
			"| **Reason** | GPUFellOffTheBus |",
			"| **Message** | GPU 0000:3b:00.0 (index 2) fell off the bus: Xid 79; nvidia-smi sees 7 of 8 GPUs |",
			"- Runbook: https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicgpulost",
			"- Dashboard: https://grafana.example.com/d/kubemedic-node/node?var-node=gpu-7",
			"[Silence this group in Alertmanager](https://alertmanager.example.com/#/silences/new?filter=%7Balertname%3D%22KubemedicGPULost%22%2Cnode%3D%22gpu-7%22%7D)",
			"- [The group's alerts in Alertmanager](https://alertmanager.example.com/#/alerts?filter=%7Balertname%3D%22KubemedicGPULost%22%2Cnode%3D%22gpu-7%22%7D)",
			"| Fingerprint | Status | Started | Ended | Source |",
			"| `5f1c3a9be0d2c471` | firing | 2026-03-14 09:26:53 UTC |  | [source](http://prometheus-k8s-0:9090/graph?g0.expr=max+by",
		}, hasNot: []string{"kubemedic:", "<!--", "Alertmanager left", "more alerts"}},
		{desc: "multi-alert group: nodes, differing labels and messages per alert, earliest firing start", fixture: "multi", has: []string{
			"### Firing: KubemedicGPUXidError\n",
			"| **Status** | firing (2 of 3 alerts firing) |",
			"| **Since** | 2026-03-14 09:12:05 UTC |",
			"| **Nodes** | 3: gpu-7, gpu-8, gpu-9 |",
			"| **Reason** | XidNeedsReset |",
			"| Fingerprint | Status | Started | Ended | node | message | Source |",
			`| gpu-8 | Xid 79 (GPU fell off the bus) on GPU 0000:86:00.0 \| PCIe link down |`,
			"| `a41b6c9d2e8f0357` | resolved | 2026-03-14 08:02:41 UTC | 2026-03-14 09:40:11 UTC | gpu-9 |",
		}, hasNot: []string{"| **Message** |", "Dashboard:"}},
		{desc: "resolved group", fixture: "resolved", has: []string{
			"### Resolved: KubemedicGPULost on `gpu-7`",
			"| **Since** | 2026-03-14 09:26:53 UTC |",
			"| resolved | 2026-03-14 09:26:53 UTC | 2026-03-14 10:02:13 UTC |",
		}},
		{desc: "truncated payload is said so", fixture: "truncated", has: []string{
			"> Alertmanager left 38 alerts of this group out of the payload (the receiver's max_alerts), so the table lists 2 of them.",
			"| **Since** | 2026-03-14 10:59:47 UTC |",
			"| Fingerprint | Status | Started | Ended | node | summary | Source |",
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			iss, err := render.Render(cfg, fixture(t, tc.fixture))
			require.NoError(t, err)
			for _, s := range tc.has {
				require.Contains(t, iss.Body, s)
			}
			for _, s := range tc.hasNot {
				require.NotContains(t, iss.Body, s)
			}
		})
	}
}

func TestRenderBodyRowCap(t *testing.T) {
	msg := fixture(t, "multi")
	proto := msg.Alerts[0]
	msg.Alerts = nil
	for i := range 60 {
		a := proto
		a.Labels = template.KV{"alertname": "KubemedicGPUXidError", "node": fmt.Sprintf("gpu-%02d", i)}
		a.Fingerprint = fmt.Sprintf("%016x", i)
		a.StartsAt = proto.StartsAt.Add(time.Duration(i) * time.Second)
		msg.Alerts = append(msg.Alerts, a)
	}
	iss, err := render.Render(config.Default(config.Repo{Owner: "a", Name: "b"}), msg)
	require.NoError(t, err)
	require.Contains(t, iss.Body, "### Alerts (60)")
	require.Equal(t, render.MaxTableRows, strings.Count(iss.Body, "| firing | 2026-"))
	require.Contains(t, iss.Body, fmt.Sprintf("`%016x`", 49))
	require.NotContains(t, iss.Body, fmt.Sprintf("`%016x`", 50))
	require.Contains(t, iss.Body, "\n… and 10 more alerts\n")
	require.Contains(t, iss.Body, "| **Nodes** | 60: gpu-00, gpu-01,")
	require.Equal(t, "[critical] KubemedicGPUXidError on 60 nodes", iss.Title)
}

func TestRenderBodyManyVaryingLabels(t *testing.T) {
	msg := fixture(t, "multi")
	for i := range msg.Alerts {
		for _, l := range []string{"a", "b", "c", "d", "e"} {
			msg.Alerts[i].Labels[l] = fmt.Sprint(i)
		}
	}
	iss, err := render.Render(config.Default(config.Repo{Owner: "a", Name: "b"}), msg)
	require.NoError(t, err)
	require.Contains(t, iss.Body, "| Fingerprint | Status | Started | Ended | Labels | message | Source |")
	require.Contains(t, iss.Body, "| a=1, b=1, c=1, d=1, e=1, node=gpu-8 |")
}

func TestRenderBodyLimit(t *testing.T) {
	msg := fixture(t, "gpu-lost")
	msg.CommonAnnotations["message"] = strings.Repeat("Xid 79 on GPU 0000:3b:00.0 — ", 3000) // ~90 kB, multibyte
	iss, err := render.Render(config.Default(config.Repo{Owner: "a", Name: "b"}), msg)
	require.NoError(t, err)
	require.LessOrEqual(t, len(iss.Body), render.MaxBodyLength)
	require.Greater(t, len(iss.Body), render.MaxBodyLength-200)
	require.True(t, utf8.ValidString(iss.Body))
	require.Contains(t, iss.Body, "… [truncated] the rendered body was ")
	require.True(t, strings.HasPrefix(iss.Body, "### Firing: KubemedicGPULost on `gpu-7`"))
}

func TestRenderTemplateError(t *testing.T) {
	cfg := parse(t, "defaultRepo: a/b\ntemplates:\n  body: '{{ (index .Alerts 1).Status }}'\n")
	_, err := render.Render(cfg, fixture(t, "gpu-lost"))
	require.ErrorContains(t, err, `render issue gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}: templates.body: template line 1: does not execute`)

	iss, err := render.Render(cfg, fixture(t, "multi"))
	require.NoError(t, err)
	require.Equal(t, "firing\n", iss.Body)
}

func TestDefaultsRenderOnEmptyGroups(t *testing.T) {
	// A group with nothing but what payload.Validate requires still renders.
	msg, err := payload.DecodeBytes([]byte(`{"version":"4","receiver":"r","status":"firing","alerts":[{"status":"firing","fingerprint":"f"}]}`))
	require.NoError(t, err)
	iss, err := render.Render(config.Default(config.Repo{Owner: "a", Name: "b"}), msg)
	require.NoError(t, err)
	require.Equal(t, "Alert", iss.Title)
	require.Equal(t, []string{"kubemedic-alert"}, iss.Labels)
	require.Contains(t, iss.Body, "- none: the alerts have no runbook_url")
	require.Contains(t, iss.Body, "| **Severity** | unknown |")
}

func TestRenderExternalURLWithSlash(t *testing.T) {
	msg := fixture(t, "gpu-lost")
	msg.ExternalURL = "https://alertmanager.example.com/am/"
	iss, err := render.Render(config.Default(config.Repo{Owner: "a", Name: "b"}), msg)
	require.NoError(t, err)
	require.Contains(t, iss.Body, "(https://alertmanager.example.com/am/#/silences/new?filter=")
	require.Contains(t, iss.Body, "(https://alertmanager.example.com/am/#/alerts?filter=")
	require.NotContains(t, iss.Body, "//#")
}
