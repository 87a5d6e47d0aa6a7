package config_test

import (
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

func TestFuncsDoNotShadowAlertmanagers(t *testing.T) {
	require.Equal(t, []string{"annotation", "headAlerts", "labelSet", "labelValues", "matchAlerts", "mdCell", "pick", "silenceURL", "startedAt", "sub", "timestamp", "truncate", "varyingLabels"}, config.FuncNames())
	for _, name := range config.FuncNames() {
		_, clash := template.DefaultFuncs[name]
		require.False(t, clash, "%s is an Alertmanager function; Alertmanager's would win", name)
	}
}

func TestTemplateFuncs(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	msg := &payload.Message{Version: "4", Data: template.Data{
		Receiver:     "gpu-oncall",
		Status:       "firing",
		ExternalURL:  "http://am.example.com/",
		GroupLabels:  template.KV{"node": "gpu-7", "alertname": "KubemedicGPULost"},
		CommonLabels: template.KV{"alertname": "KubemedicGPULost", "node": "gpu-7"},
		Alerts: template.Alerts{
			{Status: "resolved", StartsAt: t0.Add(-time.Hour), Labels: template.KV{"node": "gpu-7", "gpu": "0", "alertname": "KubemedicGPULost"}, Annotations: template.KV{"message": "a"}},
			{Status: "firing", StartsAt: t0.Add(time.Minute), Labels: template.KV{"node": "gpu-7", "gpu": "1", "alertname": "KubemedicGPULost"}, Annotations: template.KV{"message": "a"}},
			{Status: "firing", StartsAt: t0, Labels: template.KV{"node": "gpu-7", "gpu": "2", "alertname": "KubemedicGPULost", "extra": "x"}, Annotations: template.KV{"message": "b", "reason": "r"}},
		},
	}}
	for _, tc := range []struct {
		desc, text, want string
	}{
		{desc: "silenceURL prefills the group labels", text: `{{ silenceURL . }}`,
			want: `http://am.example.com/#/silences/new?filter=%7Balertname%3D%22KubemedicGPULost%22%2Cnode%3D%22gpu-7%22%7D`},
		{desc: "labelSet sorts and quotes", text: `{{ labelSet .GroupLabels }}`, want: `{alertname="KubemedicGPULost",node="gpu-7"}`},
		{desc: "mdCell escapes pipes and line breaks", text: `{{ mdCell " a|b\nc " }}`, want: `a\|b<br>c`},
		{desc: "truncate is rune-safe", text: `{{ truncate 3 "äöüß" }}|{{ truncate 9 "äöüß" }}`, want: `äö…|äöüß`},
		{desc: "startedAt is the earliest firing alert", text: `{{ timestamp (startedAt .) }}`, want: `2026-03-14 09:00:00 UTC`},
		{desc: "timestamp of the zero time is empty", text: `[{{ timestamp (index .Alerts 0).EndsAt }}]`, want: `[]`},
		{desc: "annotation the alerts disagree on is empty", text: `[{{ annotation "message" . }}]`, want: `[]`},
		{desc: "annotation only one alert has", text: `{{ annotation "reason" . }}`, want: `r`},
		{desc: "labelValues", text: `{{ join "," (labelValues "gpu" .Alerts) }}`, want: `0,1,2`},
		{desc: "varyingLabels", text: `{{ join "," (varyingLabels .Alerts) }}`, want: `extra,gpu`},
		{desc: "varyingLabels of the firing alerts", text: `{{ join "," (varyingLabels .Alerts.Firing) }}`, want: `extra,gpu`},
		{desc: "headAlerts and sub", text: `{{ len (headAlerts 2 .Alerts) }} {{ sub (len .Alerts) 2 }} {{ len (headAlerts 10 .Alerts) }}`, want: `2 1 3`},
		{desc: "pick", text: `{{ (pick (varyingLabels .Alerts) (index .Alerts 1).Labels).SortedPairs }}`, want: `gpu=1`},
		{desc: "matchAlerts by equality", text: `{{ len (matchAlerts "gpu=\"1\"" .Alerts) }}`, want: `1`},
		{desc: "matchAlerts by regex, firing only", text: "{{ range matchAlerts `gpu=~\"[12]\"` .Alerts.Firing }}{{ .Labels.gpu }}{{ end }}", want: `12`},
		{desc: "matchAlerts: a missing label matches as empty", text: "{{ len (matchAlerts `extra!=\"x\"` .Alerts) }} {{ len (matchAlerts `extra=\"\"` .Alerts) }}", want: `2 2`},
		{desc: "matchAlerts of none is empty, and false", text: "{{ if matchAlerts `node=\"gpu-8\"` .Alerts }}some{{ else }}none{{ end }}", want: `none`},
		{desc: "Alertmanager functions work", text: `{{ .CommonLabels.node | toUpper }}`, want: `GPU-7`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tmpl, err := config.NewTemplate("templates.body", tc.text)
			require.NoError(t, err)
			got, err := tmpl.Execute(msg)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMatchAlertsBadMatcher(t *testing.T) {
	_, err := config.NewTemplate("templates.title", "{{ matchAlerts `severity~\"x\"` .Alerts }}")
	require.ErrorContains(t, err, "templates.title: template line 1: does not execute")
	require.ErrorContains(t, err, `matchAlerts: bad matcher "severity~\"x\""`, "the check at load names the matcher")
}

func TestTemplateExecuteError(t *testing.T) {
	tmpl, err := config.NewTemplate("templates.title", `{{ (index .Alerts 1).Status }}`)
	require.NoError(t, err, "the sample group has two alerts")
	_, err = tmpl.Execute(&payload.Message{Data: template.Data{Alerts: template.Alerts{{}}}})
	require.ErrorContains(t, err, "templates.title: template line 1: does not execute: at <index .Alerts 1>: error calling index: ")
}

func TestSilenceURL(t *testing.T) {
	require.Empty(t, config.SilenceURL(&payload.Message{}), "no external URL, no link")
	msg := &payload.Message{Data: template.Data{ExternalURL: "https://am", CommonLabels: template.KV{"a": "b"}}}
	require.Equal(t, "https://am/#/silences/new?filter=%7Ba%3D%22b%22%7D", config.SilenceURL(msg), "common labels when the group has none")
}
