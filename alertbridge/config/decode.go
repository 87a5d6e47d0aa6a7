package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// FieldError is one problem in a config file.
type FieldError struct {
	File  string
	Line  int
	Field string // field path such as routes[1].matchers[0]; empty for the whole document
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Parse decodes and checks a config. source names the file in errors. The
// error joins one *FieldError per problem, ordered by line.
func Parse(source string, data []byte) (*Config, error) {
	d := &decoder{source: source}
	root := d.document(data)
	var cfg *Config
	if root != nil {
		cfg = d.config(root)
	}
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		errs := make([]error, len(d.errs))
		for i, e := range d.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	cfg.Source = source
	return cfg, nil
}

// fields are the known keys of each mapping.
var (
	topFields        = []string{"defaultRepo", "identityLabel", "ignoreLabel", "autoClose", "reopenWindow", "stormGuard", "dryRun", "routes", "assignees", "templates"}
	stormGuardFields = []string{"maxNewIssues", "window"}
	routeFields      = []string{"matchers", "repo", "labels"}
	assigneeFields   = []string{"matchers", "users"}
	templateFields   = []string{"dedupeKey", "title", "body", "labels"}
)

type decoder struct {
	source string
	errs   []*FieldError
}

func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.source, Line: max(line, 1), Field: field, Msg: fmt.Sprintf(format, args...)})
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (?s)(.*)$`)

// document returns the root node of the file's single YAML document, or nil
// after recording why there is none.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(1, "", "the file is empty; want a mapping with at least defaultRepo: owner/name")
			return nil
		}
		d.yamlError(data, err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.errorf(next.Line, "", "a second YAML document (---); the config is one document")
	case !errors.Is(err, io.EOF):
		d.yamlError(data, err)
	}
	if len(doc.Content) == 0 {
		d.errorf(1, "", "the file is empty; want a mapping with at least defaultRepo: owner/name")
		return nil
	}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		d.errorf(root.Line, "", "the document is empty; want a mapping with at least defaultRepo: owner/name")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root.Line, "", "the document is %s; want a mapping with at least defaultRepo: owner/name", describe(root))
		return nil
	}
	return root
}

// yamlError records a YAML syntax error. yaml.v3 leaves the line out on
// the first line and for bad characters; those are found here.
func (d *decoder) yamlError(data []byte, err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.errorf(line, "", "YAML syntax: %s", m[2])
		return
	}
	d.errorf(badCharLine(data), "", "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

// badCharLine returns the line of the first character YAML does not allow,
// else 1 (yaml.v3 omits the line of errors on line 1).
func badCharLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		bad := r == utf8.RuneError && size == 1 ||
			r < 0x20 && r != '\t' && r != '\n' && r != '\r' ||
			r >= 0x7f && r < 0xa0 && r != 0x85 ||
			r == 0xfffe || r == 0xffff
		if bad {
			return line
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	return 1
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), truncate(40, n.Value))
	default:
		return "an alias"
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// entry is one key of a mapping.
type entry struct {
	line  int // the key's line
	value *yaml.Node
}

// mapping returns the known keys of n with their values. Unknown and
// duplicate keys are errors. null values count as absent.
func (d *decoder) mapping(n *yaml.Node, path string, known []string) map[string]entry {
	out := map[string]entry{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			d.errorf(k.Line, path, "merge keys (<<) are not supported; write the fields out")
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k.Line, path, "key %s is not a field name", describe(k))
			continue
		}
		field := join(path, k.Value)
		if !containsString(known, k.Value) {
			d.errorf(k.Line, field, "unknown field%s", suggest(k.Value, known))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			d.errorf(k.Line, field, "duplicate key; first set on line %d", prev.line)
			continue
		}
		out[k.Value] = entry{line: k.Line, value: v}
	}
	for k, e := range out {
		if isNull(e.value) {
			delete(out, k)
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// suggest names the known field closest to an unknown one.
func suggest(unknown string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(unknown), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return fmt.Sprintf("; known fields: %s", strings.Join(known, ", "))
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		d.errorf(n.Line, field, "want a string, got %s (quote it if it is meant as a string)", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		d.errorf(n.Line, field, "want true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

func (d *decoder) integer(n *yaml.Node, field string) (int, bool) {
	var i int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
		d.errorf(n.Line, field, "want an integer, got %s", describe(n))
		return 0, false
	}
	return i, true
}

func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, field, "want a duration such as 10m, 24h or 1d, got %s", describe(n))
		return 0, false
	}
	v, err := model.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n.Line, field, "%q is not a duration (want e.g. 90s, 10m, 24h, 1d)", n.Value)
		return 0, false
	}
	return time.Duration(v), true
}

func (d *decoder) seq(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, field, "want a list, got %s", describe(n))
		return nil, false
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = resolve(c)
	}
	return items, true
}

func (d *decoder) repo(n *yaml.Node, field string) (Repo, bool) {
	s, ok := d.str(n, field)
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
	s, ok := d.str(n, field)
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
	items, ok := d.seq(n, field)
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
	items, ok := d.seq(n, field)
	if !ok {
		return nil
	}
	var ms labels.Matchers
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := d.str(it, f)
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
	f := d.mapping(root, "", topFields)
	if e, ok := f["defaultRepo"]; ok {
		cfg.DefaultRepo, _ = d.repo(e.value, "defaultRepo")
	} else {
		d.errorf(root.Line, "defaultRepo", "required: the owner/name of the repository for groups no route matches")
	}
	if e, ok := f["identityLabel"]; ok {
		if l, ok := d.label(e.value, "identityLabel"); ok {
			cfg.IdentityLabel = l
		}
	}
	if e, ok := f["ignoreLabel"]; ok {
		if l, ok := d.label(e.value, "ignoreLabel"); ok {
			cfg.IgnoreLabel = l
			if l == cfg.IdentityLabel {
				d.errorf(e.value.Line, "ignoreLabel", "%q is also the identityLabel; every bridge issue would be ignored", l)
			}
		}
	} else if cfg.IgnoreLabel == cfg.IdentityLabel {
		d.errorf(f["identityLabel"].line, "identityLabel", "%q is also the (default) ignoreLabel; every bridge issue would be ignored", cfg.IdentityLabel)
	}
	if e, ok := f["autoClose"]; ok {
		cfg.AutoClose, _ = d.boolean(e.value, "autoClose")
	}
	if e, ok := f["dryRun"]; ok {
		cfg.DryRun, _ = d.boolean(e.value, "dryRun")
	}
	if e, ok := f["reopenWindow"]; ok {
		if w, ok := d.duration(e.value, "reopenWindow"); ok {
			cfg.ReopenWindow = w
		}
	}
	if e, ok := f["stormGuard"]; ok {
		d.stormGuard(e.value, &cfg.StormGuard)
	}
	if e, ok := f["routes"]; ok {
		cfg.Routes = d.routes(e.value)
	}
	if e, ok := f["assignees"]; ok {
		cfg.Assignees = d.assignees(e.value)
	}
	if e, ok := f["templates"]; ok {
		cfg.Templates = d.templates(e.value)
	}
	return cfg
}

func (d *decoder) stormGuard(n *yaml.Node, sg *StormGuard) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, "stormGuard", "want a mapping with maxNewIssues and window, got %s", describe(n))
		return
	}
	f := d.mapping(n, "stormGuard", stormGuardFields)
	if e, ok := f["maxNewIssues"]; ok {
		if i, ok := d.integer(e.value, "stormGuard.maxNewIssues"); ok {
			if i < 0 {
				d.errorf(e.value.Line, "stormGuard.maxNewIssues", "%d is negative; 0 disables the guard", i)
			} else {
				sg.MaxNewIssues = i
			}
		}
	}
	if e, ok := f["window"]; ok {
		if w, ok := d.duration(e.value, "stormGuard.window"); ok {
			if w == 0 {
				d.errorf(e.value.Line, "stormGuard.window", "must be longer than 0s (set maxNewIssues: 0 to disable the guard)")
			} else {
				sg.Window = w
			}
		}
	}
}

func (d *decoder) routes(n *yaml.Node) []Route {
	items, ok := d.seq(n, "routes")
	if !ok {
		return nil
	}
	var routes []Route
	for i, it := range items {
		path := fmt.Sprintf("routes[%d]", i)
		if it.Kind != yaml.MappingNode {
			d.errorf(it.Line, path, "want a mapping with matchers, repo and labels, got %s", describe(it))
			continue
		}
		f := d.mapping(it, path, routeFields)
		var r Route
		if e, ok := f["matchers"]; ok {
			r.Matchers = d.matchers(e.value, path+".matchers")
			if len(e.value.Content) == 0 && e.value.Kind == yaml.SequenceNode {
				d.errorf(e.value.Line, path+".matchers", "empty: a route without matchers takes every group; set defaultRepo instead")
			}
		} else {
			d.errorf(it.Line, path+".matchers", "required: a route without matchers takes every group; set defaultRepo instead")
		}
		if e, ok := f["repo"]; ok {
			r.Repo, _ = d.repo(e.value, path+".repo")
		} else {
			d.errorf(it.Line, path+".repo", "required")
		}
		if e, ok := f["labels"]; ok {
			r.Labels = d.labels(e.value, path+".labels")
		}
		routes = append(routes, r)
	}
	return routes
}

func (d *decoder) assignees(n *yaml.Node) []AssigneeRule {
	items, ok := d.seq(n, "assignees")
	if !ok {
		return nil
	}
	var rules []AssigneeRule
	for i, it := range items {
		path := fmt.Sprintf("assignees[%d]", i)
		if it.Kind != yaml.MappingNode {
			d.errorf(it.Line, path, "want a mapping with matchers and users, got %s", describe(it))
			continue
		}
		f := d.mapping(it, path, assigneeFields)
		var a AssigneeRule
		if e, ok := f["matchers"]; ok {
			a.Matchers = d.matchers(e.value, path+".matchers")
		}
		e, ok := f["users"]
		if !ok {
			d.errorf(it.Line, path+".users", "required: the GitHub logins to assign")
			continue
		}
		users, ok := d.seq(e.value, path+".users")
		if !ok {
			continue
		}
		if len(users) == 0 {
			d.errorf(e.value.Line, path+".users", "empty: list the GitHub logins to assign")
		}
		for j, u := range users {
			uf := fmt.Sprintf("%s.users[%d]", path, j)
			s, ok := d.str(u, uf)
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
		d.errorf(n.Line, "templates", "want a mapping with dedupeKey, title, body and labels, got %s", describe(n))
		return t
	}
	f := d.mapping(n, "templates", templateFields)
	for _, name := range []string{"dedupeKey", "title", "body"} {
		e, ok := f[name]
		if !ok {
			continue
		}
		tmpl := d.template(e.value, "templates."+name)
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
		items, ok := d.seq(e.value, "templates.labels")
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
	s, ok := d.str(n, field)
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
