package render

import "github.com/kubemedic/kubemedic/alertbridge/config"

// DefaultTitle is the title template when the config has none:
// "[critical] KubemedicGPULost on gpu-7"; the node, else the instance, else
// the nodes of the alerts, else the other group labels say where.
const DefaultTitle = `
{{- with .CommonLabels.severity }}[{{ . }}] {{ end -}}
{{- or .CommonLabels.alertname .GroupLabels.alertname "Alert" -}}
{{- $nodes := labelValues "node" .Alerts -}}
{{- if .CommonLabels.node }} on {{ .CommonLabels.node -}}
{{- else if .CommonLabels.instance }} on {{ .CommonLabels.instance -}}
{{- else if eq (len $nodes) 1 }} on {{ index $nodes 0 -}}
{{- else if $nodes }} on {{ len $nodes }} nodes{{ if le (len $nodes) 3 }}: {{ join ", " $nodes }}{{ end -}}
{{- else }}{{ with .GroupLabels.Remove (stringSlice "alertname" "severity") }} ({{ .SortedPairs }}){{ end }}
{{- end -}}
`

// DefaultLabels are the label templates when the config has none: the
// severity, when the group has one.
var DefaultLabels = []string{`{{ with .CommonLabels.severity }}severity:{{ . }}{{ end }}`}

// MaxTableRows is how many alerts the default body's table lists (the
// number is written in DefaultBody); a line counts the rest.
const MaxTableRows = 50

// DefaultBody is the body template when the config has none. It is written
// for the on-call engineer who opens the issue from a notification: what is
// wrong, where, since when and how bad first; then the condition's reason
// and message, the runbook, dashboard and silence links; then one row per
// alert (at most MaxTableRows) with the labels that differ between them.
const DefaultBody = `
{{- $nodes := labelValues "node" .Alerts -}}
{{- $conditions := labelValues "condition" .Alerts -}}
{{- $severity := or .CommonLabels.severity (join ", " (labelValues "severity" .Alerts)) "unknown" -}}
{{- $reason := annotation "reason" . -}}
{{- $message := annotation "message" . -}}
{{- $summary := annotation "summary" . -}}
{{- $description := annotation "description" . -}}
{{- $varying := varyingLabels .Alerts -}}
{{- /* The annotation to show per alert when the alerts disagree on it. */ -}}
{{- $detail := "" -}}
{{- if not $message }}{{ range .Alerts }}{{ if .Annotations.message }}{{ $detail = "message" }}{{ end }}{{ end }}{{ end -}}
{{- if not (or $detail $message $summary) }}{{ range .Alerts }}{{ if .Annotations.summary }}{{ $detail = "summary" }}{{ end }}{{ end }}{{ end -}}
### {{ if eq .Status "firing" }}Firing{{ else }}Resolved{{ end }}: {{ or .CommonLabels.alertname .GroupLabels.alertname (join ", " (labelValues "alertname" .Alerts)) "alert group" }}
{{- with .CommonLabels.node }} on ` + "`{{ . }}`" + `{{ end }}

{{ with $summary }}{{ . }}

{{ end -}}
| | |
|---|---|
| **Status** | {{ .Status }} ({{ len .Alerts.Firing }} of {{ len .Alerts }} alerts firing) |
| **Severity** | {{ mdCell $severity }} |
| **Since** | {{ or (timestamp (startedAt .)) "unknown" }} |
{{- if .CommonLabels.node }}
| **Node** | {{ mdCell .CommonLabels.node }} |
{{- else if $nodes }}
| **Nodes** | {{ len $nodes }}: {{ mdCell (truncate 300 (join ", " $nodes)) }} |
{{- else if .CommonLabels.instance }}
| **Instance** | {{ mdCell .CommonLabels.instance }} |
{{- end }}
{{- with $conditions }}
| **Condition** | {{ mdCell (join ", " .) }} |
{{- end }}
{{- with $reason }}
| **Reason** | {{ mdCell . }} |
{{- end }}
{{- with $message }}
| **Message** | {{ mdCell . }} |
{{- end }}
| **Alert group** | {{ mdCell (labelSet .GroupLabels) }} (receiver {{ mdCell .Receiver }}) |
{{ if not $message }}{{ with $description }}
{{ . }}
{{ end }}{{ end }}
{{- $runbook := annotation "runbook_url" . -}}
{{- $dashboard := annotation "dashboard_url" . -}}
{{- $silence := silenceURL . }}
**Links:**
{{- with $runbook }}
- Runbook: {{ . }}
{{- end }}
{{- with $dashboard }}
- Dashboard: {{ . }}
{{- end }}
{{- with $silence }}
- [Silence this group in Alertmanager]({{ . }}) (prefilled with ` + "`{{ labelSet (or $.GroupLabels $.CommonLabels) }}`" + `)
{{- end }}
{{- with .ExternalURL }}
- [The group's alerts in Alertmanager]({{ reReplaceAll "/+$" "" . }}/#/alerts?filter={{ urlquery (labelSet (or $.GroupLabels $.CommonLabels)) }})
{{- end }}
{{- if not (or $runbook $dashboard .ExternalURL) }}
- none: the alerts have no runbook_url or dashboard_url annotation and Alertmanager sent no external URL
{{- end }}

### Alerts ({{ len .Alerts }})
{{- if gt .TruncatedAlerts 0 }}

> [!WARNING]
> Alertmanager left {{ .TruncatedAlerts }} alerts of this group out of the payload (the receiver's max_alerts), so the table lists {{ len .Alerts }} of them. See all of them in Alertmanager{{ with .ExternalURL }}: {{ . }}{{ end }}.
{{- end }}

| Fingerprint | Status | Started | Ended |{{ if le (len $varying) 5 }}{{ range $varying }} {{ mdCell . }} |{{ end }}{{ else }} Labels |{{ end }}{{ with $detail }} {{ . }} |{{ end }} Source |
|---|---|---|---|{{ if le (len $varying) 5 }}{{ range $varying }}---|{{ end }}{{ else }}---|{{ end }}{{ with $detail }}---|{{ end }}---|
{{- range headAlerts 50 .Alerts }}
{{- $a := . }}
| ` + "`{{ .Fingerprint }}`" + ` | {{ .Status }} | {{ timestamp .StartsAt }} | {{ if eq .Status "resolved" }}{{ timestamp .EndsAt }}{{ end }} |
{{- if le (len $varying) 5 }}{{ range $varying }} {{ mdCell (index $a.Labels .) }} |{{ end }}
{{- else }} {{ mdCell (pick $varying .Labels).SortedPairs.String }} |{{ end }}
{{- with $detail }} {{ mdCell (truncate 200 (index $a.Annotations .)) }} |{{ end }}
{{- with .GeneratorURL }} [source]({{ . }}) |{{ else }} |{{ end }}
{{- end }}
{{- if gt (len .Alerts) 50 }}

… and {{ sub (len .Alerts) 50 }} more alerts
{{- end }}
`

var (
	defaultTitle  = mustTemplate("default title", DefaultTitle)
	defaultBody   = mustTemplate("default body", DefaultBody)
	defaultLabels = mustTemplates("default labels", DefaultLabels)
)

// mustTemplate compiles a template of this package; it cannot fail unless
// the constant above is broken, which the tests catch.
func mustTemplate(field, text string) *config.Template {
	t, err := config.NewTemplate(field, text)
	if err != nil {
		panic(err)
	}
	return t
}

func mustTemplates(field string, texts []string) []*config.Template {
	ts := make([]*config.Template, len(texts))
	for i, text := range texts {
		ts[i] = mustTemplate(field, text)
	}
	return ts
}
