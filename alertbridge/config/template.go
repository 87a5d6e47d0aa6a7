package config

import (
	"fmt"
	tmplhtml "html/template"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	tmpltext "text/template"
	"time"
	"unicode/utf8"

	"github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/alertmanager/template"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

// funcs are the functions the bridge adds to Alertmanager's template
// functions (listed in the package doc). Alertmanager's DefaultFuncs win on
// a name clash, so none of these may shadow one of them.
var funcs = map[string]any{
	"silenceURL":    SilenceURL,
	"mdCell":        mdCell,
	"truncate":      truncate,
	"labelSet":      func(kv template.KV) string { return LabelSet(kv) },
	"startedAt":     StartedAt,
	"timestamp":     timestamp,
	"annotation":    annotation,
	"labelValues":   labelValues,
	"varyingLabels": varyingLabels,
	"headAlerts":    headAlerts,
	"pick":          pick,
	"sub":           func(a, b int) int { return a - b },
	"matchAlerts":   matchAlerts,
}

// FuncNames returns the names of the functions the bridge adds to
// Alertmanager's, sorted (see the package doc).
func FuncNames() []string {
	names := make([]string, 0, len(funcs))
	for n := range funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// engine executes every template of the bridge. It is never parsed into
// after creation, so concurrent executions are safe (each clones it).
var engine = newEngine()

func newEngine() *template.Template {
	t, err := template.New(func(text *tmpltext.Template, html *tmplhtml.Template) {
		text.Funcs(tmpltext.FuncMap(funcs))
		html.Funcs(tmplhtml.FuncMap(funcs))
	})
	if err != nil {
		// template.New only returns nil errors; a change there is a bug here.
		panic(fmt.Sprintf("alertbridge template engine: %v", err))
	}
	return t
}

// Template is one issue template, parsed and executed successfully on a
// sample alert group when it was made.
type Template struct {
	field string
	text  string
}

// NewTemplate parses text and executes it once on a sample alert group, so
// that a syntax error or a template that cannot execute (an unknown function,
// a field the payload lacks, a bad argument) is an error now. field names the
// template in errors, e.g. templates.title.
func NewTemplate(field, text string) (*Template, error) {
	t := &Template{field: field, text: text}
	if _, err := engine.ExecuteTextString(text, sampleMessage()); err != nil {
		line, msg := templateErr(err)
		return nil, &TemplateError{Field: field, Line: line, Msg: msg}
	}
	return t, nil
}

// Text returns the template's source.
func (t *Template) Text() string { return t.text }

// Field returns the name the template was made with.
func (t *Template) Field() string { return t.field }

// Execute renders the template on msg.
func (t *Template) Execute(msg *payload.Message) (string, error) {
	out, err := engine.ExecuteTextString(t.text, msg)
	if err != nil {
		line, m := templateErr(err)
		return "", &TemplateError{Field: t.field, Line: line, Msg: m}
	}
	return out, nil
}

// TemplateError is a template that does not parse or execute. Line is the
// line within the template, counted from 1.
type TemplateError struct {
	Field string
	Line  int
	Msg   string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("%s: template line %d: %s", e.Field, e.Line, e.Msg)
}

var (
	parseErrRE = regexp.MustCompile(`^template: [^:]*:(\d+): (?s)(.*)$`)
	execErrRE  = regexp.MustCompile(`^template: [^:]*:(\d+):(\d+): executing "[^"]*" at (?s)(.*)$`)
)

// templateErr drops text/template's "template: NAME:LINE:" prefix, which
// names an internal template, returns the line it names and says whether
// parsing or executing failed.
func templateErr(err error) (line int, msg string) {
	s := err.Error()
	if m := execErrRE.FindStringSubmatch(s); m != nil {
		line, _ = strconv.Atoi(m[1])
		return max(line, 1), "does not execute: at " + m[3]
	}
	if m := parseErrRE.FindStringSubmatch(s); m != nil {
		line, _ = strconv.Atoi(m[1])
		return max(line, 1), "syntax error: " + m[2]
	}
	return 1, s
}

// sampleMessage is a realistic firing group of two alerts on which every
// template is executed at load.
func sampleMessage() *payload.Message {
	start := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	labels := func(gpu string) template.KV {
		return template.KV{"alertname": "KubemedicGPULost", "severity": "critical", "node": "gpu-7",
			"condition": "GPULost", "team": "gpu", "gpu": gpu, "instance": "gpu-7:9100", "job": "kubemedic-detect"}
	}
	ann := template.KV{"summary": "GPU lost on gpu-7", "description": "The node lost a GPU.",
		"reason": "GPUFellOffTheBus", "message": "GPU 0000:3b:00.0 fell off the bus (Xid 79)",
		"runbook_url": "https://runbooks.example.com/gpu-lost", "dashboard_url": "https://grafana.example.com/d/gpu"}
	return &payload.Message{
		Version:         payload.Version,
		GroupKey:        `{}/{team="gpu"}:{alertname="KubemedicGPULost", node="gpu-7"}`,
		TruncatedAlerts: 1,
		Data: template.Data{
			Receiver: "gpu-oncall",
			Status:   payload.StatusFiring,
			Alerts: template.Alerts{
				{Status: payload.StatusFiring, Labels: labels("0"), Annotations: ann, StartsAt: start,
					GeneratorURL: "http://prometheus.example.com/graph?g0.expr=up", Fingerprint: "5f1c3a9be0d2c471"},
				{Status: payload.StatusResolved, Labels: labels("1"), Annotations: ann, StartsAt: start.Add(-time.Hour),
					EndsAt: start.Add(time.Minute), GeneratorURL: "http://prometheus.example.com/graph?g0.expr=up", Fingerprint: "9a0b7c6d5e4f3a21"},
			},
			GroupLabels:       template.KV{"alertname": "KubemedicGPULost", "node": "gpu-7"},
			CommonLabels:      template.KV{"alertname": "KubemedicGPULost", "severity": "critical", "node": "gpu-7", "condition": "GPULost", "team": "gpu", "instance": "gpu-7:9100", "job": "kubemedic-detect"},
			CommonAnnotations: ann,
			RouteLabels:       template.KV{},
			ExternalURL:       "http://alertmanager.example.com",
		},
	}
}

// classicLabelName is a label name that needs no quoting.
var classicLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// LabelSet formats labels as {name="value",...}, sorted by name, each value
// quoted with strconv.Quote (and a name that is not a classic Prometheus
// label name quoted too), so that no two label sets format alike.
func LabelSet(kv map[string]string) string {
	names := make([]string, 0, len(kv))
	for n := range kv {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		if classicLabelName.MatchString(n) {
			b.WriteString(n)
		} else {
			b.WriteString(strconv.Quote(n))
		}
		b.WriteByte('=')
		b.WriteString(strconv.Quote(kv[n]))
	}
	b.WriteByte('}')
	return b.String()
}

// SilenceURL links to Alertmanager's new-silence form prefilled with the
// group labels (the common labels when the group has none). It is "" when
// the payload has no external URL.
func SilenceURL(msg *payload.Message) string {
	if msg == nil || msg.ExternalURL == "" {
		return ""
	}
	kv := map[string]string(msg.GroupLabels)
	if len(kv) == 0 {
		kv = msg.CommonLabels
	}
	return strings.TrimRight(msg.ExternalURL, "/") + "/#/silences/new?filter=" + url.QueryEscape(LabelSet(kv))
}

// StartedAt is since when the group is a problem: the earliest StartsAt of
// its firing alerts, or of all its alerts when none fires.
func StartedAt(msg *payload.Message) time.Time {
	if msg == nil {
		return time.Time{}
	}
	earliest := func(as []template.Alert) time.Time {
		var t time.Time
		for _, a := range as {
			if !a.StartsAt.IsZero() && (t.IsZero() || a.StartsAt.Before(t)) {
				t = a.StartsAt
			}
		}
		return t
	}
	if t := earliest(msg.Alerts.Firing()); !t.IsZero() {
		return t
	}
	return earliest(msg.Alerts)
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

var mdCellReplacer = strings.NewReplacer("|", `\|`, "\r\n", "<br>", "\n", "<br>", "\r", "<br>")

func mdCell(s string) string {
	return mdCellReplacer.Replace(strings.TrimSpace(s))
}

func truncate(n int, s string) string {
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func annotation(name string, msg *payload.Message) string {
	if msg == nil {
		return ""
	}
	if v := msg.CommonAnnotations[name]; v != "" {
		return v
	}
	var found string
	for _, a := range msg.Alerts {
		v := a.Annotations[name]
		switch {
		case v == "":
		case found == "":
			found = v
		case v != found:
			return ""
		}
	}
	return found
}

func labelValues(name string, alerts template.Alerts) []string {
	var vs []string
	for _, a := range alerts {
		if v := a.Labels[name]; v != "" {
			vs = append(vs, v)
		}
	}
	sort.Strings(vs)
	return slices.Compact(vs)
}

func varyingLabels(alerts template.Alerts) []string {
	if len(alerts) < 2 {
		return nil
	}
	names := map[string]bool{}
	for _, a := range alerts {
		for n := range a.Labels {
			names[n] = true
		}
	}
	var varying []string
	for n := range names {
		for _, a := range alerts[1:] {
			v0, ok0 := alerts[0].Labels[n]
			v, ok := a.Labels[n]
			if v != v0 || ok != ok0 {
				varying = append(varying, n)
				break
			}
		}
	}
	sort.Strings(varying)
	return varying
}

func headAlerts(n int, alerts template.Alerts) template.Alerts {
	if n < 0 {
		n = 0
	}
	if len(alerts) <= n {
		return alerts
	}
	return alerts[:n]
}

func pick(names []string, kv template.KV) template.KV {
	out := template.KV{}
	for _, n := range names {
		if v, ok := kv[n]; ok {
			out[n] = v
		}
	}
	return out
}

// matchAlerts returns the alerts whose labels match an Alertmanager matcher
// (name="value", name!="value", name=~"regex", name!~"regex"; a label an
// alert lacks matches as ""), in their order. A matcher that does not parse
// is an error, which the check at load reports.
func matchAlerts(matcher string, alerts template.Alerts) (template.Alerts, error) {
	m, err := labels.ParseMatcher(matcher)
	if err != nil {
		return nil, fmt.Errorf("matchAlerts: bad matcher %q: %w", matcher, err)
	}
	var out template.Alerts
	for _, a := range alerts {
		if m.Matches(a.Labels[m.Name]) {
			out = append(out, a)
		}
	}
	return out, nil
}
