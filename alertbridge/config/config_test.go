package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
)

const src = "alertbridge.yaml"

func TestParseDefaults(t *testing.T) {
	cfg, err := config.Parse(src, []byte("defaultRepo: acme/gpu-oncall\n"))
	require.NoError(t, err)
	want := config.Default(config.Repo{Owner: "acme", Name: "gpu-oncall"})
	want.Source = src
	require.Equal(t, want, cfg)
	require.Equal(t, "kubemedic-alert", cfg.IdentityLabel)
	require.Equal(t, "kubemedic-ignore", cfg.IgnoreLabel)
	require.True(t, cfg.AutoClose)
	require.False(t, cfg.DryRun)
	require.Equal(t, 24*time.Hour, cfg.ReopenWindow)
	require.Equal(t, config.StormGuard{MaxNewIssues: 20, Window: 10 * time.Minute}, cfg.StormGuard)
	require.Equal(t, config.NodeHistory{Enabled: false, MaxOperations: 10}, cfg.NodeHistory, "off unless asked for: it needs Kubernetes access")
	require.Nil(t, cfg.Templates.Title)
	require.Nil(t, cfg.Templates.Labels)
}

const full = `defaultRepo: acme/gpu-oncall
identityLabel: alertbridge
ignoreLabel: hands-off
autoClose: false
reopenWindow: 1d
stormGuard:
  maxNewIssues: 0
  window: 90m
nodeHistory:
  enabled: true
  maxOperations: 25
dryRun: true
routes:
  - matchers: ['team="storage"', 'severity=~"critical|page"']
    repo: acme/storage-oncall
    labels: [storage, nfs]
  - matchers: ['team="storage"']
    repo: acme/storage-tickets
  - matchers: ['cluster!~"dev-.*"', 'team="gpu"']
    repo: acme/storage-oncall
assignees:
  - matchers: ['team="gpu"']
    users: [alice, bob]
  - matchers: ['severity="critical"']
    users: [carol, alice]
  - users: [dave]
templates:
  dedupeKey: '{{ .Receiver }}/{{ .CommonLabels.node }}'
  title: '{{ .CommonLabels.alertname }}'
  body: |
    Node {{ .CommonLabels.node }}
  labels: ['team:{{ .CommonLabels.team }}', '']
`

func TestParseFull(t *testing.T) {
	cfg, err := config.Parse(src, []byte(full))
	require.NoError(t, err)
	require.Equal(t, "alertbridge", cfg.IdentityLabel)
	require.Equal(t, "hands-off", cfg.IgnoreLabel)
	require.False(t, cfg.AutoClose)
	require.True(t, cfg.DryRun)
	require.Equal(t, 24*time.Hour, cfg.ReopenWindow)
	require.Equal(t, config.StormGuard{MaxNewIssues: 0, Window: 90 * time.Minute}, cfg.StormGuard)
	require.Equal(t, config.NodeHistory{Enabled: true, MaxOperations: 25}, cfg.NodeHistory)
	require.Len(t, cfg.Routes, 3)
	require.Equal(t, "acme/storage-oncall", cfg.Routes[0].Repo.String())
	require.Equal(t, []string{"storage", "nfs"}, cfg.Routes[0].Labels)
	require.Equal(t, `{team="storage",severity=~"critical|page"}`, cfg.Routes[0].Matchers.String())
	require.Len(t, cfg.Assignees, 3)
	require.Empty(t, cfg.Assignees[2].Matchers)
	require.Equal(t, "{{ .CommonLabels.alertname }}", cfg.Templates.Title.Text())
	require.Equal(t, "templates.body", cfg.Templates.Body.Field())
	require.NotNil(t, cfg.Templates.DedupeKey)
	require.Len(t, cfg.Templates.Labels, 1, "an empty label template is dropped")
}

func TestParseNodeHistoryEnabledKeepsTheDefaultMaximum(t *testing.T) {
	cfg, err := config.Parse(src, []byte("defaultRepo: acme/gpu-oncall\nnodeHistory:\n  enabled: true\n"))
	require.NoError(t, err)
	require.Equal(t, config.NodeHistory{Enabled: true, MaxOperations: config.DefaultHistoryOperations}, cfg.NodeHistory)
}

func TestRouteFor(t *testing.T) {
	cfg, err := config.Parse(src, []byte(full))
	require.NoError(t, err)
	for _, tc := range []struct {
		desc   string
		labels map[string]string
		repo   string
		extra  []string
	}{
		{desc: "first match wins over a later match", labels: map[string]string{"team": "storage", "severity": "critical"}, repo: "acme/storage-oncall", extra: []string{"storage", "nfs"}},
		{desc: "regex is anchored: critical-ish does not match", labels: map[string]string{"team": "storage", "severity": "critical-ish"}, repo: "acme/storage-tickets"},
		{desc: "second alternative of the regex", labels: map[string]string{"team": "storage", "severity": "page"}, repo: "acme/storage-oncall", extra: []string{"storage", "nfs"}},
		{desc: "negative regex on a missing label matches", labels: map[string]string{"team": "gpu"}, repo: "acme/storage-oncall"},
		{desc: "negative regex excludes", labels: map[string]string{"team": "gpu", "cluster": "dev-3"}, repo: "acme/gpu-oncall"},
		{desc: "no match goes to the default repo", labels: map[string]string{"team": "network"}, repo: "acme/gpu-oncall"},
		{desc: "no labels at all", labels: nil, repo: "acme/gpu-oncall"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := cfg.RouteFor(tc.labels)
			require.Equal(t, tc.repo, r.Repo.String())
			require.Equal(t, tc.extra, r.Labels)
		})
	}
}

func TestAssigneesFor(t *testing.T) {
	cfg, err := config.Parse(src, []byte(full))
	require.NoError(t, err)
	for _, tc := range []struct {
		desc   string
		labels map[string]string
		want   []string
	}{
		{desc: "rule without matchers applies to every group", labels: map[string]string{"team": "network"}, want: []string{"dave"}},
		{desc: "union of every matching rule, sorted and unique", labels: map[string]string{"team": "gpu", "severity": "critical"}, want: []string{"alice", "bob", "carol", "dave"}},
		{desc: "one rule plus the catch-all", labels: map[string]string{"team": "gpu", "severity": "warning"}, want: []string{"alice", "bob", "dave"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, cfg.AssigneesFor(tc.labels))
		})
	}
	require.Nil(t, config.Default(config.Repo{Owner: "a", Name: "b"}).AssigneesFor(map[string]string{"team": "gpu"}))
}

func TestRepos(t *testing.T) {
	cfg, err := config.Parse(src, []byte(full))
	require.NoError(t, err)
	var got []string
	for _, r := range cfg.Repos() {
		got = append(got, r.String())
	}
	require.Equal(t, []string{"acme/gpu-oncall", "acme/storage-oncall", "acme/storage-tickets"}, got)
	require.Equal(t, []config.Repo{{Owner: "o", Name: "n"}}, config.Default(config.Repo{Owner: "o", Name: "n"}).Repos())
}

func TestParseRepo(t *testing.T) {
	for _, tc := range []struct {
		desc, in string
		want     config.Repo
		errHas   string
	}{
		{desc: "plain", in: "acme/gpu-oncall", want: config.Repo{Owner: "acme", Name: "gpu-oncall"}},
		{desc: "dots and underscores in the name", in: "acme-inc/gpu_oncall.v2", want: config.Repo{Owner: "acme-inc", Name: "gpu_oncall.v2"}},
		{desc: "enterprise managed login", in: "alice_acme/notes", want: config.Repo{Owner: "alice_acme", Name: "notes"}},
		{desc: "empty", in: "", errHas: "empty"},
		{desc: "no slash", in: "acme", errHas: `not "owner/name"`},
		{desc: "two slashes", in: "acme/a/b", errHas: `not "owner/name"`},
		{desc: "url", in: "https://github.com/acme/x", errHas: `not "owner/name"`},
		{desc: "leading hyphen owner", in: "-acme/x", errHas: "not a GitHub login"},
		{desc: "double hyphen owner", in: "ac--me/x", errHas: "not a GitHub login"},
		{desc: "owner too long", in: strings.Repeat("a", 40) + "/x", errHas: "not a GitHub login"},
		{desc: "space in name", in: "acme/gpu oncall", errHas: "not a GitHub repository name"},
		{desc: "dot-dot name", in: "acme/..", errHas: "not a GitHub repository name"},
		{desc: "empty name", in: "acme/", errHas: "not a GitHub repository name"},
		{desc: "name too long", in: "acme/" + strings.Repeat("x", 101), errHas: "not a GitHub repository name"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, err := config.ParseRepo(tc.in)
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r)
			require.Equal(t, tc.in, r.String())
		})
	}
}

func TestParseErrors(t *testing.T) {
	const repo = "defaultRepo: acme/gpu-oncall\n"
	for _, tc := range []struct {
		desc string
		yaml string
		// want are the lines of the error, each "LINE: FIELD: " followed by
		// the start of the message; src + ":" is prefixed.
		want []string
	}{
		{desc: "empty file", yaml: "", want: []string{`1: the file is empty`}},
		{desc: "only comments", yaml: "# nothing yet\n", want: []string{`1: the file is empty`}},
		{desc: "null document", yaml: "---\n~\n", want: []string{`2: the document is empty`}},
		{desc: "not a mapping", yaml: "- acme/gpu-oncall\n", want: []string{`1: the document must be a mapping with at least defaultRepo: owner/name, got a list`}},
		{desc: "scalar document", yaml: "acme/gpu-oncall\n", want: []string{`1: the document must be a mapping with at least defaultRepo: owner/name, got "acme/gpu-oncall"`}},
		{desc: "two documents", yaml: repo + "---\n" + repo, want: []string{`2: a second YAML document`}},
		{desc: "yaml syntax on line 1", yaml: "defaultRepo: a: b\n", want: []string{`1: not valid YAML: mapping values are not allowed`}},
		{desc: "yaml syntax later", yaml: repo + "routes: [\n", want: []string{`2: not valid YAML: did not find expected node content`}},
		{desc: "control character", yaml: repo + "identityLabel: a\x01b\n", want: []string{`2: not valid YAML: control characters are not allowed`}},
		{desc: "missing defaultRepo", yaml: "dryRun: true\n", want: []string{`1: defaultRepo: required`}},
		{desc: "bad defaultRepo", yaml: "defaultRepo: acme\n", want: []string{`1: defaultRepo: "acme" is not "owner/name"`}},
		{desc: "defaultRepo wrong type", yaml: "defaultRepo: [acme/x]\n", want: []string{`1: defaultRepo: must be a string, got a list`}},
		{desc: "unknown field with suggestion", yaml: repo + "reopenWindw: 1h\n", want: []string{`2: reopenWindw: unknown field "reopenWindw" (did you mean "reopenWindow"?)`}},
		{desc: "unknown field without suggestion", yaml: repo + "slack: '#oncall'\n", want: []string{`2: slack: unknown field "slack"; known fields: defaultRepo, identityLabel, ignoreLabel, autoClose, reopenWindow, stormGuard, nodeHistory, dryRun, routes, assignees, templates`}},
		{desc: "nodeHistory not a mapping", yaml: repo + "nodeHistory: true\n", want: []string{`2: nodeHistory: must be a mapping with enabled and maxOperations, got the boolean true`}},
		{desc: "nodeHistory enabled not a bool", yaml: repo + "nodeHistory:\n  enabled: yes\n", want: []string{`3: nodeHistory.enabled: must be true or false, got "yes"`}},
		{desc: "nodeHistory maxOperations zero", yaml: repo + "nodeHistory:\n  maxOperations: 0\n", want: []string{`3: nodeHistory.maxOperations: 0 is not between 1 and 50`}},
		{desc: "nodeHistory maxOperations too many", yaml: repo + "nodeHistory:\n  maxOperations: 500\n", want: []string{`3: nodeHistory.maxOperations: 500 is not between 1 and 50`}},
		{desc: "nodeHistory maxOperations not a number", yaml: repo + "nodeHistory:\n  maxOperations: ten\n", want: []string{`3: nodeHistory.maxOperations: must be an integer, got "ten"`}},
		{desc: "unknown nodeHistory field", yaml: repo + "nodeHistory:\n  maxOperation: 3\n", want: []string{`3: nodeHistory.maxOperation: unknown field "maxOperation" (did you mean "maxOperations"?)`}},
		{desc: "duplicate key", yaml: repo + "dryRun: true\ndryRun: false\n", want: []string{`3: dryRun: duplicate field; first set on line 2`}},
		{desc: "duplicate nested key", yaml: repo + "stormGuard:\n  window: 1m\n  window: 2m\n", want: []string{`4: stormGuard.window: duplicate field; first set on line 3`}},
		{desc: "merge key", yaml: repo + "x: &x {window: 1m}\nstormGuard:\n  <<: *x\n", want: []string{`2: x: unknown field "x"; known fields: `, `4: stormGuard: merge keys (<<) are not supported`}},
		{desc: "bool as string", yaml: repo + "autoClose: yes\n", want: []string{`2: autoClose: must be true or false, got "yes"`}},
		{desc: "bool as int", yaml: repo + "dryRun: 1\n", want: []string{`2: dryRun: must be true or false, got the number 1`}},
		{desc: "bad duration", yaml: repo + "stormGuard:\n  window: 10x\n", want: []string{`3: stormGuard.window: must be a duration such as 90s, 10m, 24h or 1d, got "10x"`}},
		{desc: "negative duration", yaml: repo + "reopenWindow: -1h\n", want: []string{`2: reopenWindow: must be a duration such as 90s, 10m, 24h or 1d, got "-1h"`}},
		{desc: "duration as list", yaml: repo + "reopenWindow: [1h]\n", want: []string{`2: reopenWindow: must be a duration such as 90s, 10m, 24h or 1d, got a list`}},
		{desc: "duration without a unit", yaml: repo + "reopenWindow: 5\n", want: []string{`2: reopenWindow: must be a duration such as 90s, 10m, 24h or 1d, got the number 5`}},
		{desc: "a date where a label belongs", yaml: repo + "identityLabel: 2026-01-02\n", want: []string{`2: identityLabel: must be a string, got the time 2026-01-02 (quote it)`}},
		{desc: "zero storm window", yaml: repo + "stormGuard:\n  window: 0s\n", want: []string{`3: stormGuard.window: must be longer than 0s`}},
		{desc: "negative maxNewIssues", yaml: repo + "stormGuard:\n  maxNewIssues: -5\n", want: []string{`3: stormGuard.maxNewIssues: -5 is negative`}},
		{desc: "maxNewIssues as string", yaml: repo + "stormGuard:\n  maxNewIssues: twenty\n", want: []string{`3: stormGuard.maxNewIssues: must be an integer, got "twenty"`}},
		{desc: "maxNewIssues float", yaml: repo + "stormGuard:\n  maxNewIssues: 2.5\n", want: []string{`3: stormGuard.maxNewIssues: must be an integer, got the number 2.5`}},
		{desc: "stormGuard not a mapping", yaml: repo + "stormGuard: 20\n", want: []string{`2: stormGuard: must be a mapping with maxNewIssues and window, got the number 20`}},
		{desc: "unknown stormGuard field", yaml: repo + "stormGuard:\n  max: 3\n", want: []string{`3: stormGuard.max: unknown field "max"; known fields: maxNewIssues, window`}},
		{desc: "empty identity label", yaml: repo + "identityLabel: ''\n", want: []string{`2: identityLabel: empty label`}},
		{desc: "long label", yaml: repo + "ignoreLabel: " + strings.Repeat("x", 51) + "\n", want: []string{`2: ignoreLabel: label "xxx`}},
		{desc: "label with spaces around", yaml: repo + "ignoreLabel: ' x'\n", want: []string{`2: ignoreLabel: label " x" has leading or trailing spaces`}},
		{desc: "ignore label equals identity label", yaml: repo + "identityLabel: bridge\nignoreLabel: bridge\n", want: []string{`3: ignoreLabel: "bridge" is also the identityLabel`}},
		{desc: "identity label equals default ignore label", yaml: repo + "identityLabel: kubemedic-ignore\n", want: []string{`2: identityLabel: "kubemedic-ignore" is also the (default) ignoreLabel`}},
		{desc: "routes not a list", yaml: repo + "routes:\n  repo: a/b\n", want: []string{`3: routes: must be a list, got a mapping`}},
		{desc: "route not a mapping", yaml: repo + "routes:\n  - a/b\n", want: []string{`3: routes[0]: must be a mapping with matchers, repo and labels, got "a/b"`}},
		{desc: "bad matcher", yaml: repo + "routes:\n  - matchers: ['team=\"storage\"']\n    repo: a/b\n  - matchers: ['team=\"gpu\"', 'team=~(']\n    repo: a/c\n",
			want: []string{`5: routes[1].matchers[1]: bad matcher "team=~(": error parsing regexp`}},
		{desc: "matcher without operator", yaml: repo + "routes:\n  - matchers: [storage]\n    repo: a/b\n", want: []string{`3: routes[0].matchers[0]: bad matcher "storage": bad matcher format`}},
		{desc: "matcher not a string", yaml: repo + "routes:\n  - matchers: [{team: gpu}]\n    repo: a/b\n", want: []string{`3: routes[0].matchers[0]: must be a string, got a mapping`}},
		{desc: "matchers a string", yaml: repo + "routes:\n  - matchers: 'team=\"gpu\"'\n    repo: a/b\n", want: []string{`3: routes[0].matchers: must be a list, got "team=\"gpu\""`}},
		{desc: "route without matchers", yaml: repo + "routes:\n  - repo: a/b\n", want: []string{`3: routes[0].matchers: required`}},
		{desc: "route with empty matchers", yaml: repo + "routes:\n  - repo: a/b\n    matchers: []\n", want: []string{`4: routes[0].matchers: empty`}},
		{desc: "route without repo", yaml: repo + "routes:\n  - matchers: ['a=\"b\"']\n", want: []string{`3: routes[0].repo: required`}},
		{desc: "route with bad repo", yaml: repo + "routes:\n  - matchers: ['a=\"b\"']\n    repo: acme/storage oncall\n", want: []string{`4: routes[0].repo: "acme/storage oncall": "storage oncall" is not a GitHub repository name`}},
		{desc: "route with unknown field", yaml: repo + "routes:\n  - matchers: ['a=\"b\"']\n    repo: a/b\n    assignees: [x]\n", want: []string{`5: routes[0].assignees: unknown field "assignees"; known fields: matchers, repo, labels`}},
		{desc: "route label not a string", yaml: repo + "routes:\n  - matchers: ['a=\"b\"']\n    repo: a/b\n    labels: [ok, 42]\n", want: []string{`5: routes[0].labels[1]: must be a string, got the number 42 (quote it)`}},
		{desc: "assignee without users", yaml: repo + "assignees:\n  - matchers: ['a=\"b\"']\n", want: []string{`3: assignees[0].users: required`}},
		{desc: "assignee with empty users", yaml: repo + "assignees:\n  - users: []\n", want: []string{`3: assignees[0].users: empty`}},
		{desc: "assignee bad login", yaml: repo + "assignees:\n  - users: [alice, 'bob smith']\n", want: []string{`3: assignees[0].users[1]: "bob smith" is not a GitHub login`}},
		{desc: "assignee bad matcher", yaml: repo + "assignees:\n  - matchers: ['9team=\"gpu\"']\n    users: [alice]\n", want: []string{`3: assignees[0].matchers[0]: bad matcher "9team=\"gpu\"": bad matcher format`}},
		{desc: "templates not a mapping", yaml: repo + "templates: '{{ .Status }}'\n", want: []string{`2: templates: must be a mapping with dedupeKey, title, body and labels, got "{{ .Status }}"`}},
		{desc: "unknown template", yaml: repo + "templates:\n  comment: x\n", want: []string{`3: templates.comment: unknown field "comment"; known fields: dedupeKey, title, body, labels`}},
		{desc: "template syntax error", yaml: repo + "templates:\n  title: '{{ .Status'\n", want: []string{`3: templates.title: template line 1: syntax error: unclosed action`}},
		{desc: "template unknown function", yaml: repo + "templates:\n  title: '{{ shout .Status }}'\n", want: []string{`3: templates.title: template line 1: syntax error: function "shout" not defined`}},
		{desc: "template execution error", yaml: repo + "templates:\n  dedupeKey: '{{ .Nope }}'\n", want: []string{`3: templates.dedupeKey: template line 1: does not execute: at <.Nope>: can't evaluate field Nope`}},
		{desc: "template bad argument", yaml: repo + "templates:\n  body: '{{ toUpper .Alerts }}'\n", want: []string{`3: templates.body: template line 1: does not execute: at <.Alerts>: wrong type for value`}},
		{desc: "block template error is on its line", yaml: repo + "templates:\n  body: |\n    # {{ .Status }}\n\n    {{ range .Alerts }}\n", want: []string{`7: templates.body: template line 4: syntax error: unexpected EOF`}},
		{desc: "label template error", yaml: repo + "templates:\n  labels:\n    - ok\n    - '{{ end }}'\n", want: []string{`5: templates.labels[1]: template line 1: syntax error: unexpected {{end}}`}},
		{desc: "template not a string", yaml: repo + "templates:\n  title: [a]\n", want: []string{`3: templates.title: must be a string, got a list`}},
		{desc: "errors are all reported, by line", yaml: "dryRun: nope\nroutes:\n  - matchers: ['x']\n    repo: acme\nstormGuard: {window: 1x}\n",
			want: []string{`1: defaultRepo: required`, `1: dryRun: must be true or false, got "nope"`, `3: routes[0].matchers[0]: bad matcher "x"`, `4: routes[0].repo: "acme" is not "owner/name"`, `5: stormGuard.window: must be a duration such as 90s, 10m, 24h or 1d, got "1x"`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := config.Parse(src, []byte(tc.yaml))
			require.Error(t, err)
			require.Nil(t, cfg)
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, len(tc.want), "error:\n%s", err)
			for i, w := range tc.want {
				require.True(t, strings.HasPrefix(lines[i], src+":"+w), "line %d:\n got %s\nwant %s...", i, lines[i], src+":"+w)
			}
			var fe *config.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, src, fe.File)
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "alertbridge.yaml")
	require.NoError(t, os.WriteFile(p, []byte("defaultRepo: acme/x\nstormGuard:\n  window: 10x\n"), 0o600))
	_, err := config.Load(p)
	require.EqualError(t, err, p+`:3: stormGuard.window: must be a duration such as 90s, 10m, 24h or 1d, got "10x"`)

	require.NoError(t, os.WriteFile(p, []byte("defaultRepo: acme/x\n"), 0o600))
	cfg, err := config.Load(p)
	require.NoError(t, err)
	require.Equal(t, p, cfg.Source)

	missing := filepath.Join(dir, "nope.yaml")
	_, err = config.Load(missing)
	require.EqualError(t, err, missing+": read config: no such file or directory")
	require.True(t, errors.Is(err, fs.ErrNotExist))
}

// TestDeployedConfig keeps the example in deploy/ loadable.
func TestDeployedConfig(t *testing.T) {
	cfg, err := config.Load("../../deploy/alertbridge/config.yaml")
	require.NoError(t, err)
	require.Equal(t, "acme/gpu-oncall", cfg.DefaultRepo.String())
	require.Equal(t, config.StormGuard{MaxNewIssues: config.DefaultMaxNewIssues, Window: config.DefaultStormWindow}, cfg.StormGuard)
	require.Equal(t, "acme/storage-oncall", cfg.RouteFor(map[string]string{"team": "storage", "severity": "critical"}).Repo.String())
	require.Equal(t, "acme/gpu-oncall", cfg.RouteFor(map[string]string{"team": "storage", "severity": "warning"}).Repo.String())
	require.Equal(t, []string{"alice", "bob"}, cfg.AssigneesFor(map[string]string{"team": "gpu"}))
}
