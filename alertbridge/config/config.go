package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/pkg/labels"
)

// Defaults of the optional fields.
const (
	DefaultIdentityLabel = "kubemedic-alert"
	DefaultIgnoreLabel   = "kubemedic-ignore"
	DefaultReopenWindow  = 24 * time.Hour
	DefaultMaxNewIssues  = 20
	DefaultStormWindow   = 10 * time.Minute
	// DefaultHistoryOperations is how many of a node's NodeOperations an
	// issue lists by default.
	DefaultHistoryOperations = 10
)

// MaxHistoryOperations bounds nodeHistory.maxOperations, so that the
// history fits in an issue body beside the alert table.
const MaxHistoryOperations = 50

// MaxLabelLength is GitHub's limit on a label name, in characters.
const MaxLabelLength = 50

// Repo is a GitHub repository.
type Repo struct{ Owner, Name string }

// String returns "owner/name".
func (r Repo) String() string { return r.Owner + "/" + r.Name }

var (
	// GitHub logins: letters, digits and single hyphens, not at either end;
	// underscores appear in enterprise-managed logins (alice_acme).
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_]|-[A-Za-z0-9_])*$`)
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// ParseRepo parses "owner/name" with GitHub's rules: the owner is a login
// (at most 39 letters, digits, hyphens or underscores, no leading, trailing
// or double hyphen), the name at most 100 letters, digits, '.', '-' or '_',
// and neither "." nor "..".
func ParseRepo(s string) (Repo, error) {
	owner, name, ok := strings.Cut(s, "/")
	switch {
	case s == "":
		return Repo{}, errors.New(`empty; want "owner/name"`)
	case !ok || strings.Contains(name, "/"):
		return Repo{}, fmt.Errorf(`%q is not "owner/name"`, s)
	case !validLogin(owner):
		return Repo{}, fmt.Errorf("%q: owner %q is not a GitHub login (up to 39 letters, digits and single inner hyphens)", s, owner)
	case len(name) > 100 || !nameRE.MatchString(name) || name == "." || name == "..":
		return Repo{}, fmt.Errorf("%q: %q is not a GitHub repository name (up to 100 letters, digits, '.', '-' and '_')", s, name)
	}
	return Repo{Owner: owner, Name: name}, nil
}

func validLogin(s string) bool { return len(s) <= 39 && ownerRE.MatchString(s) }

// Route sends the groups whose common labels match all Matchers to Repo,
// with Labels added to their issues.
type Route struct {
	Matchers labels.Matchers
	Repo     Repo
	Labels   []string
}

// AssigneeRule assigns Users to the issues of the groups whose common labels
// match all Matchers; no matchers match every group.
type AssigneeRule struct {
	Matchers labels.Matchers
	Users    []string
}

// StormGuard bounds how many new issues the bridge opens per repository in
// a sliding Window; MaxNewIssues 0 disables it.
type StormGuard struct {
	MaxNewIssues int
	Window       time.Duration
}

// NodeHistory makes the issue of a group whose alerts carry a node label
// list that node's NodeOperations (the remediator's attempts), newest
// MaxOperations of them, when the bridge files the issue or reopens it.
// It needs read access to NodeOperations in the cluster.
type NodeHistory struct {
	Enabled       bool
	MaxOperations int
}

// Templates are the issue templates of the file. A nil template, or no
// label templates, means the renderer's default.
type Templates struct {
	DedupeKey *Template
	Title     *Template
	Body      *Template
	Labels    []*Template
}

// Config is a loaded, valid alertbridge config. It is not changed after
// Load or Parse returns it and is safe for concurrent use.
type Config struct {
	// Source is the file the config was loaded from.
	Source string

	DefaultRepo Repo
	// IdentityLabel is put on every issue the bridge opens.
	IdentityLabel string
	// IgnoreLabel, set on an issue by a human, stops the bridge reopening it.
	IgnoreLabel string
	// AutoClose closes an issue when its group resolves.
	AutoClose bool
	// ReopenWindow is how long after closing a recurring group reopens its
	// issue rather than opening a new one; 0 never reopens.
	ReopenWindow time.Duration
	StormGuard   StormGuard
	NodeHistory  NodeHistory
	DryRun       bool
	// Routes are tried in order; the first that matches wins.
	Routes []Route
	// Assignees: every rule that matches adds its users.
	Assignees []AssigneeRule
	Templates Templates
}

// Default returns a config with every default and no routes, assignees or
// templates.
func Default(defaultRepo Repo) *Config {
	return &Config{
		DefaultRepo:   defaultRepo,
		IdentityLabel: DefaultIdentityLabel,
		IgnoreLabel:   DefaultIgnoreLabel,
		AutoClose:     true,
		ReopenWindow:  DefaultReopenWindow,
		StormGuard:    StormGuard{MaxNewIssues: DefaultMaxNewIssues, Window: DefaultStormWindow},
		NodeHistory:   NodeHistory{MaxOperations: DefaultHistoryOperations},
	}
}

// Load reads and parses the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: read config: %w", path, err)
	}
	return Parse(path, data)
}

// matches reports whether all ms match the labels; a missing label is "".
func matches(ms labels.Matchers, lset map[string]string) bool {
	for _, m := range ms {
		if !m.Matches(lset[m.Name]) {
			return false
		}
	}
	return true
}

// RouteFor returns the first route whose matchers all match the group's
// common labels, else a route to DefaultRepo without labels.
func (c *Config) RouteFor(commonLabels map[string]string) Route {
	for _, r := range c.Routes {
		if matches(r.Matchers, commonLabels) {
			return r
		}
	}
	return Route{Repo: c.DefaultRepo}
}

// AssigneesFor returns the users of every assignee rule that matches the
// group's common labels, sorted and unique; nil when none matches.
func (c *Config) AssigneesFor(commonLabels map[string]string) []string {
	var users []string
	for _, a := range c.Assignees {
		if matches(a.Matchers, commonLabels) {
			users = append(users, a.Users...)
		}
	}
	sort.Strings(users)
	return slices.Compact(users)
}

// Repos returns every repository the config can send to: the default and
// each route's, unique and sorted.
func (c *Config) Repos() []Repo {
	repos := []Repo{c.DefaultRepo}
	for _, r := range c.Routes {
		repos = append(repos, r.Repo)
	}
	sort.Slice(repos, func(i, j int) bool { return repos[i].String() < repos[j].String() })
	return slices.Compact(repos)
}
