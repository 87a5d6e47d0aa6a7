package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/kubemedic/kubemedic/internal/strictyaml"
)

// FieldError is one problem in a config file: FILE:LINE: FIELD: MSG.
type FieldError = strictyaml.Error

// Parse decodes and checks a config. source names the file in errors. The
// error joins one *FieldError per problem, ordered by line.
func Parse(source string, data []byte) (*Config, error) {
	d := &decoder{strictyaml.New(source)}
	root := d.document(data)
	var cfg *Config
	if root != nil {
		cfg = d.config(root)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	cfg.Source = source
	return cfg, nil
}

// fields are the known keys of each mapping.
var (
	topFields         = []string{"defaultRepo", "identityLabel", "ignoreLabel", "autoClose", "reopenWindow", "stormGuard", "nodeHistory", "dryRun", "routes", "assignees", "templates"}
	stormGuardFields  = []string{"maxNewIssues", "window"}
	nodeHistoryFields = []string{"enabled", "maxOperations"}
	routeFields       = []string{"matchers", "repo", "labels"}
	assigneeFields    = []string{"matchers", "users"}
	templateFields    = []string{"dedupeKey", "title", "body", "labels"}
)

// decoder reads the config's fields with strictyaml and checks what they
// mean (repositories, labels, matchers, templates).
type decoder struct {
	*strictyaml.Decoder
}

// errorf records a problem; every problem of a config has a line.
func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.Errorf(max(line, 1), field, format, args...)
}

// document returns the root node of the file's single YAML document, or nil
// after recording why there is none.
func (d *decoder) document(data []byte) *yaml.Node {
	docs := d.Documents(data)
	if len(docs) == 0 {
		if len(d.Errors()) == 0 { // not a syntax error: nothing at all
			d.errorf(1, "", "the file is empty; it must be a mapping with at least defaultRepo: owner/name")
		}
		return nil
	}
	if len(docs) > 1 {
		d.errorf(docs[1].Line, "", "a second YAML document (---); the config is one document")
	}
	root := docs[0].Root
	switch {
	case root == nil:
		d.errorf(1, "", "the file is empty; it must be a mapping with at least defaultRepo: owner/name")
		return nil
	case strictyaml.IsNull(root):
		d.errorf(root.Line, "", "the document is empty; it must be a mapping with at least defaultRepo: owner/name")
		return nil
	case root.Kind != yaml.MappingNode:
		d.errorf(root.Line, "", "the document must be a mapping with at least defaultRepo: owner/name, got %s", strictyaml.Describe(root))
		return nil
	}
	return root
}

func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode {
		if v, err := model.ParseDuration(n.Value); err == nil {
			return time.Duration(v), true
		}
	}
	d.errorf(n.Line, field, "must be a duration such as 90s, 10m, 24h or 1d, got %s", strictyaml.Describe(n))
	return 0, false
}

func (d *decoder) repo(n *yaml.Node, field string) (Repo, bool) {
	s, ok := d.String(n, field)
	if !ok {
		return Repo{}, false
	}
	r, err := ParseRepo(s)
	if err != nil {
		d.errorf(n.Line, field, "%v", err)
		return Repo{}, false
	}
	return r, true
}

// label checks a label name.
func (d *decoder) label(n *yaml.Node, field string) (string, bool) {
	s, ok := d.String(n, field)
	if !ok {
		return "", false
	}
	switch t := strings.TrimSpace(s); {
	case t == "":
		d.errorf(n.Line, field, "empty label")
	case t != s:
		d.errorf(n.Line, field, "label %q has leading or trailing spaces", s)
	case utf8.RuneCountInString(s) > MaxLabelLength:
		d.errorf(n.Line, field, "label %q is longer than GitHub's %d characters", s, MaxLabelLength)
	default:
		return s, true
	}
	return "", false
}

func (d *decoder) labels(n *yaml.Node, field string) []string {
	items, ok := d.Seq(n, field)
	if !ok {
		return nil
	}
	var out []string
	for i, it := range items {
		if l, ok := d.label(it, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, l)
		}
	}
	return out
}

func (d *decoder) matchers(n *yaml.Node, field string) labels.Matchers {
	items, ok := d.Seq(n, field)
	if !ok {
		return nil
	}
	var ms labels.Matchers
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := d.String(it, f)
		if !ok {
			continue
		}
		m, err := labels.ParseMatcher(s)
		if err != nil {
			d.errorf(it.Line, f, "bad matcher %q: %v (want name=\"value\", name!=\"value\", name=~\"regex\" or name!~\"regex\")", s, err)
			continue
		}
		ms = append(ms, m)
	}
	return ms
}

func (d *decoder) config(root *yaml.Node) *Config {
	cfg := Default(Repo{})
	f := d.Fields(root, "", topFields)
	if e, ok := f["defaultRepo"]; ok {
		cfg.DefaultRepo, _ = d.repo(e.Value, "defaultRepo")
	} else {
		d.errorf(root.Line, "defaultRepo", "required: the owner/name of the repository for groups no route matches")
	}
	if e, ok := f["identityLabel"]; ok {
		if l, ok := d.label(e.Value, "identityLabel"); ok {
			cfg.IdentityLabel = l
		}
	}
	if e, ok := f["ignoreLabel"]; ok {
		if l, ok := d.label(e.Value, "ignoreLabel"); ok {
			cfg.IgnoreLabel = l
			if l == cfg.IdentityLabel {
				d.errorf(e.Value.Line, "ignoreLabel", "%q is also the identityLabel; every bridge issue would be ignored", l)
			}
		}
	} else if cfg.IgnoreLabel == cfg.IdentityLabel {
		d.errorf(f["identityLabel"].Line, "identityLabel", "%q is also the (default) ignoreLabel; every bridge issue would be ignored", cfg.IdentityLabel)
	}
	if e, ok := f["autoClose"]; ok {
		cfg.AutoClose, _ = d.Bool(e.Value, "autoClose")
	}
	if e, ok := f["dryRun"]; ok {
		cfg.DryRun, _ = d.Bool(e.Value, "dryRun")
	}
	if e, ok := f["reopenWindow"]; ok {
		if w, ok := d.duration(e.Value, "reopenWindow"); ok {
			cfg.ReopenWindow = w
		}
	}
	if e, ok := f["stormGuard"]; ok {
		d.stormGuard(e.Value, &cfg.StormGuard)
	}
	if e, ok := f["nodeHistory"]; ok {
		d.nodeHistory(e.Value, &cfg.NodeHistory)
	}
	if e, ok := f["routes"]; ok {
		cfg.Routes = d.routes(e.Value)
	}
	if e, ok := f["assignees"]; ok {
		cfg.Assignees = d.assignees(e.Value)
	}
	if e, ok := f["templates"]; ok {
		cfg.Templates = d.templates(e.Value)
	}
	return cfg
}

func (d *decoder) stormGuard(n *yaml.Node, sg *StormGuard) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "stormGuard", "must be a mapping with maxNewIssues and window, got %s", strictyaml.Describe(n))
		return
	}
	f := d.Fields(n, "stormGuard", stormGuardFields)
	if e, ok := f["maxNewIssues"]; ok {
		if i, ok := d.Int(e.Value, "stormGuard.maxNewIssues"); ok {
			if i < 0 {
				d.errorf(e.Value.Line, "stormGuard.maxNewIssues", "%d is negative; 0 disables the guard", i)
			} else {
				sg.MaxNewIssues = i
			}
		}
	}
	if e, ok := f["window"]; ok {
		if w, ok := d.duration(e.Value, "stormGuard.window"); ok {
			if w == 0 {
				d.errorf(e.Value.Line, "stormGuard.window", "must be longer than 0s (set maxNewIssues: 0 to disable the guard)")
			} else {
				sg.Window = w
			}
		}
	}
}

func (d *decoder) nodeHistory(n *yaml.Node, nh *NodeHistory) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "nodeHistory", "must be a mapping with enabled and maxOperations, got %s", strictyaml.Describe(n))
		return
	}
	f := d.Fields(n, "nodeHistory", nodeHistoryFields)
	if e, ok := f["enabled"]; ok {
		nh.Enabled, _ = d.Bool(e.Value, "nodeHistory.enabled")
	}
	if e, ok := f["maxOperations"]; ok {
		if i, ok := d.Int(e.Value, "nodeHistory.maxOperations"); ok {
			if i < 1 || i > MaxHistoryOperations {
				d.errorf(e.Value.Line, "nodeHistory.maxOperations", "%d is not between 1 and %d", i, MaxHistoryOperations)
			} else {
				nh.MaxOperations = i
			}
		}
	}
}

func (d *decoder) routes(n *yaml.Node) []Route {
	items, ok := d.Seq(n, "routes")
	if !ok {
		return nil
	}
	var routes []Route
	for i, it := range items {
		path := fmt.Sprintf("routes[%d]", i)
		if it.Kind != yaml.MappingNode {
			d.errorf(it.Line, path, "must be a mapping with matchers, repo and labels, got %s", strictyaml.Describe(it))
			continue
		}
		f := d.Fields(it, path, routeFields)
		var r Route
		if e, ok := f["matchers"]; ok {
			r.Matchers = d.matchers(e.Value, path+".matchers")
			if len(e.Value.Content) == 0 && e.Value.Kind == yaml.SequenceNode {
				d.errorf(e.Value.Line, path+".matchers", "empty: a route without matchers takes every group; set defaultRepo instead")
			}
		} else {
			d.errorf(it.Line, path+".matchers", "required: a route without matchers takes every group; set defaultRepo instead")
		}
		if e, ok := f["repo"]; ok {
			r.Repo, _ = d.repo(e.Value, path+".repo")
		} else {
			d.errorf(it.Line, path+".repo", "required")
		}
		if e, ok := f["labels"]; ok {
			r.Labels = d.labels(e.Value, path+".labels")
		}
		routes = append(routes, r)
	}
	return routes
}

func (d *decoder) assignees(n *yaml.Node) []AssigneeRule {
	items, ok := d.Seq(n, "assignees")
	if !ok {
		return nil
	}
	var rules []AssigneeRule
	for i, it := range items {
		path := fmt.Sprintf("assignees[%d]", i)
		if it.Kind != yaml.MappingNode {
			d.errorf(it.Line, path, "must be a mapping with matchers and users, got %s", strictyaml.Describe(it))
			continue
		}
		f := d.Fields(it, path, assigneeFields)
		var a AssigneeRule
		if e, ok := f["matchers"]; ok {
			a.Matchers = d.matchers(e.Value, path+".matchers")
		}
		e, ok := f["users"]
		if !ok {
			d.errorf(it.Line, path+".users", "required: the GitHub logins to assign")
			continue
		}
		users, ok := d.Seq(e.Value, path+".users")
		if !ok {
			continue
		}
		if len(users) == 0 {
			d.errorf(e.Value.Line, path+".users", "empty: list the GitHub logins to assign")
		}
		for j, u := range users {
			uf := fmt.Sprintf("%s.users[%d]", path, j)
			s, ok := d.String(u, uf)
			if !ok {
				continue
			}
			if !validLogin(s) {
				d.errorf(u.Line, uf, "%q is not a GitHub login (up to 39 letters, digits and single inner hyphens)", s)
				continue
			}
			a.Users = append(a.Users, s)
		}
		rules = append(rules, a)
	}
	return rules
}

func (d *decoder) templates(n *yaml.Node) Templates {
	var t Templates
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "templates", "must be a mapping with dedupeKey, title, body and labels, got %s", strictyaml.Describe(n))
		return t
	}
	f := d.Fields(n, "templates", templateFields)
	for _, name := range []string{"dedupeKey", "title", "body"} {
		e, ok := f[name]
		if !ok {
			continue
		}
		tmpl := d.template(e.Value, "templates."+name)
		switch name {
		case "dedupeKey":
			t.DedupeKey = tmpl
		case "title":
			t.Title = tmpl
		case "body":
			t.Body = tmpl
		}
	}
	if e, ok := f["labels"]; ok {
		items, ok := d.Seq(e.Value, "templates.labels")
		if ok {
			for i, it := range items {
				if tmpl := d.template(it, fmt.Sprintf("templates.labels[%d]", i)); tmpl != nil {
					t.Labels = append(t.Labels, tmpl)
				}
			}
		}
	}
	return t
}

// template compiles a template field; "" is nil, the default.
func (d *decoder) template(n *yaml.Node, field string) *Template {
	s, ok := d.String(n, field)
	if !ok || strings.TrimSpace(s) == "" {
		return nil
	}
	t, err := NewTemplate(field, s)
	if err != nil {
		var te *TemplateError
		if !errors.As(err, &te) {
			d.errorf(n.Line, field, "%v", err)
			return nil
		}
		line := n.Line
		if n.Style&(yaml.LiteralStyle) != 0 {
			// The text of a | block starts on the line after the |.
			line = n.Line + te.Line
		}
		d.errorf(line, field, "template line %d: %s", te.Line, te.Msg)
		return nil
	}
	return t
}
