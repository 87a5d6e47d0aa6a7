package ghclient

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"
	"k8s.io/utils/clock"
)

// Endpoint names, used as the endpoint label of the request metric and in
// logs and errors.
const (
	EndpointListIssues     = "issues.list"
	EndpointCreateIssue    = "issues.create"
	EndpointEditIssue      = "issues.edit"
	EndpointCreateComment  = "comments.create"
	EndpointListComments   = "comments.list"
	endpointUnknown        = "other"
	defaultMaxBackoff      = 5 * time.Minute
	defaultRequestTimeout  = 30 * time.Second
	defaultUserAgent       = "kubemedic-alertbridge"
	listPageSize           = 100
	dryRunFirstIssueNumber = 1_000_000
)

// Issue is a GitHub issue as the bridge sees it.
type Issue struct {
	Repo        string // "owner/name"
	Number      int
	NodeID      string
	Title       string
	Body        string
	State       IssueState  // StateOpen or StateClosed
	StateReason StateReason // "" for an issue never closed
	Labels      []string
	Assignees   []string // logins
	HTMLURL     string
	CreatedAt   time.Time
	ClosedAt    time.Time
	// UpdatedAt is GitHub's updated_at: any change, by anyone.
	UpdatedAt time.Time
}

// NewIssue is what the bridge files.
type NewIssue struct {
	Title     string
	Body      string
	Labels    []string
	Assignees []string
	// Find, when set, looks for this issue on GitHub among those changed
	// since since. CreateIssue calls it after an attempt whose answer may
	// have been lost (a 5xx, a timeout), before filing again: an issue it
	// finds is returned instead of filing a second one. Without it such a
	// create is sent again blindly.
	Find func(ctx context.Context, since time.Time) (Issue, bool, error)
}

// Edit changes an issue; a nil field is left as it is. It has no
// assignees: people own those after creation. Title and Labels are set only
// as decide.Follow allows (a title the bridge set and nobody changed, the
// labels it rendered), and only through EditIssue: GitHub's GraphQL takes
// labels by ID, not by name, so Transition refuses an Edit with either.
type Edit struct {
	Body        *string
	State       *IssueState
	StateReason *StateReason
	Title       *string
	// Labels replaces the issue's whole label set (REST PATCH semantics):
	// build it from the labels GitHub last answered with, so that the
	// labels people set are kept.
	Labels *[]string
}

// Comment is one issue comment.
type Comment struct {
	ID        int64
	Body      string
	CreatedAt time.Time
}

// Client is the GitHub issue store the bridge writes to.
type Client interface {
	// ListIssues lists the issues (not pull requests) in state (StateOpen,
	// StateClosed or StateAll) that carry every one of labels (GitHub ANDs
	// them; none: any issue), through the issues list endpoint, following
	// pagination. Never the Search API. A non-zero since lists only issues
	// updated at or after it (GitHub's since: updated_at, which is never
	// before closed_at, so closed since T lists every issue closed since T).
	ListIssues(ctx context.Context, repo string, state IssueState, since time.Time, labels ...string) ([]Issue, error)
	// CreateIssue files an issue.
	CreateIssue(ctx context.Context, repo string, in NewIssue) (Issue, error)
	// EditIssue changes body, state, state reason, title and labels as
	// the Edit says, never the assignees.
	EditIssue(ctx context.Context, repo string, number int, e Edit) (Issue, error)
	// CreateComment comments on an issue.
	CreateComment(ctx context.Context, repo string, number int, body string) error
	// Transition applies an edit and then posts a comment on one issue in
	// one GraphQL request (one call instead of two); see client.Transition.
	Transition(ctx context.Context, repo string, number int, nodeID string, e Edit, comment string) (Issue, error)
	// ListComments lists comments updated at or after since (GitHub's since
	// parameter; zero lists all), following pagination.
	ListComments(ctx context.Context, repo string, number int, since time.Time) ([]Comment, error)
}

// Options configure New. The zero value talks to github.com without
// credentials.
type Options struct {
	// BaseURL is the REST API root: "" for https://api.github.com/, or a
	// GitHub Enterprise Server URL such as https://ghe.example.com/api/v3/
	// (go-github adds /api/v3/ when it is missing).
	BaseURL string
	// HTTPClient carries authentication (see NewHTTPClient). Its Transport is
	// wrapped to count requests; the client itself is not modified.
	HTTPClient *http.Client
	// Metrics may be nil.
	Metrics *Metrics
	// Log may be nil (discard).
	Log *slog.Logger
	// Clock supplies the time and, when Sleep is nil, the timers for waits.
	// Defaults to the real clock.
	Clock clock.WithTicker
	// Sleep, when set, replaces the Clock's timers for waits between
	// attempts; it must return ctx.Err() when ctx ends first. Tests use it to
	// record waits and step a fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxBackoff caps exponential backoff (not waits GitHub asks for).
	// Default 5m.
	MaxBackoff time.Duration
	// RequestTimeout bounds one HTTP attempt. Default 30s.
	RequestTimeout time.Duration
}

// client implements Client over go-github.
type client struct {
	baseURL, uploadURL *url.URL
	hc                 *http.Client
	log                *slog.Logger
	clock              clock.WithTicker
	sleepFn            func(ctx context.Context, d time.Duration) error
	maxBackoff         time.Duration
	timeout            time.Duration

	// mu guards notBefore: while a rate limit is being waited out, no call
	// of this client is sent before it.
	mu        sync.Mutex
	notBefore time.Time
}

var _ Client = (*client)(nil)

// New returns a Client for opts.
func New(opts Options) (Client, error) {
	base, upload, err := apiURLs(opts.BaseURL)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		copied := *opts.HTTPClient
		hc = &copied
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = &meteredTransport{next: next, metrics: opts.Metrics}
	c := &client{
		baseURL: base, uploadURL: upload, hc: hc, log: opts.Log, clock: opts.Clock,
		sleepFn: opts.Sleep, maxBackoff: opts.MaxBackoff, timeout: opts.RequestTimeout,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.maxBackoff <= 0 {
		c.maxBackoff = defaultMaxBackoff
	}
	if c.timeout <= 0 {
		c.timeout = defaultRequestTimeout
	}
	return c, nil
}

// apiURLs returns the REST and upload roots for baseURL, using go-github's
// own rules for GitHub Enterprise.
func apiURLs(baseURL string) (base, upload *url.URL, err error) {
	gh := github.NewClient(nil)
	if baseURL != "" {
		u, perr := url.Parse(baseURL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("github base URL %q: want http(s)://host/[api/v3/]", baseURL)
		}
		if u.User != nil || u.RawQuery != "" {
			return nil, nil, fmt.Errorf("github base URL: must not carry credentials or a query")
		}
		if gh, err = gh.WithEnterpriseURLs(baseURL, baseURL); err != nil {
			return nil, nil, fmt.Errorf("github base URL %q: %w", baseURL, err)
		}
	}
	return gh.BaseURL, gh.UploadURL, nil
}

// github returns a go-github client for one attempt. A fresh one each time
// keeps go-github's own rate-limit memory, which reads the wall clock, from
// refusing requests behind the retry loop's back; the loop, with the
// injected clock, is the one place that waits.
func (c *client) github() *github.Client {
	gh := github.NewClient(c.hc)
	base, upload := *c.baseURL, *c.uploadURL
	gh.BaseURL, gh.UploadURL = &base, &upload
	gh.UserAgent = defaultUserAgent
	return gh
}

var repoPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// splitRepo splits "owner/name"; a malformed one is a permanent error.
func splitRepo(endpoint, repo string) (owner, name string, err error) {
	if !repoPattern.MatchString(repo) || strings.Contains(repo, "..") {
		return "", "", &PermanentError{Endpoint: endpoint, Repo: repo, Reason: "invalid_repo",
			Err: fmt.Errorf("repository %q is not owner/name", repo)}
	}
	owner, name, _ = strings.Cut(repo, "/")
	return owner, name, nil
}

func (c *client) ListIssues(ctx context.Context, repo string, state IssueState, since time.Time, labels ...string) ([]Issue, error) {
	owner, name, err := splitRepo(EndpointListIssues, repo)
	if err != nil {
		return nil, err
	}
	if err := checkListState(repo, state); err != nil {
		return nil, err
	}
	opts := &github.IssueListByRepoOptions{
		State:       string(state),
		Labels:      listLabels(labels),
		Since:       since,
		ListOptions: github.ListOptions{PerPage: listPageSize},
	}
	var out []Issue
	for {
		var page []*github.Issue
		var next int
		err := c.do(ctx, EndpointListIssues, repo, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			page, resp, err = gh.Issues.ListByRepo(ctx, owner, name, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list %s issues labelled %q (page %d): %w", state, strings.Join(opts.Labels, ","), max(opts.Page, 1), err)
		}
		for _, gi := range page {
			if gi.IsPullRequest() {
				continue
			}
			out = append(out, fromGitHub(repo, gi))
		}
		if next == 0 {
			return out, nil
		}
		opts.Page = next
	}
}

// checkListState refuses a list filter GitHub does not know: "" would list
// the open issues only (GitHub's default), which no caller means silently.
func checkListState(repo string, state IssueState) error {
	if state.Valid() || state == StateAll {
		return nil
	}
	return &PermanentError{Endpoint: EndpointListIssues, Repo: repo, Reason: "invalid_state",
		Err: fmt.Errorf("list state %q is not open, closed or all", state)}
}

// listLabels are the labels of a list filter, empty names left out.
func listLabels(labels []string) []string {
	var out []string
	for _, l := range labels {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (c *client) CreateIssue(ctx context.Context, repo string, in NewIssue) (Issue, error) {
	owner, name, err := splitRepo(EndpointCreateIssue, repo)
	if err != nil {
		return Issue{}, err
	}
	req := createRequest(in)
	var gi *github.Issue
	var found *Issue
	var verify verifyFunc
	if in.Find != nil {
		verify = func(ctx context.Context, since time.Time) (bool, error) {
			is, ok, err := in.Find(ctx, since)
			if err != nil {
				return false, fmt.Errorf("look for the issue filed: %w", err)
			}
			if ok {
				found = &is
			}
			return ok, nil
		}
	}
	err = c.doWrite(ctx, EndpointCreateIssue, repo, verify, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		gi, resp, err = gh.Issues.Create(ctx, owner, name, req)
		return resp, err
	})
	if err != nil {
		return Issue{}, fmt.Errorf("create issue %q: %w", in.Title, err)
	}
	if found != nil {
		return *found, nil
	}
	return fromGitHub(repo, gi), nil
}

func (c *client) EditIssue(ctx context.Context, repo string, number int, e Edit) (Issue, error) {
	owner, name, err := splitRepo(EndpointEditIssue, repo)
	if err != nil {
		return Issue{}, err
	}
	req := editRequest(e)
	var gi *github.Issue
	err = c.do(ctx, EndpointEditIssue, repo, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		gi, resp, err = gh.Issues.Edit(ctx, owner, name, number, req)
		return resp, err
	})
	if err != nil {
		return Issue{}, fmt.Errorf("edit issue #%d: %w", number, err)
	}
	return fromGitHub(repo, gi), nil
}

func (c *client) CreateComment(ctx context.Context, repo string, number int, body string) error {
	owner, name, err := splitRepo(EndpointCreateComment, repo)
	if err != nil {
		return err
	}
	req := commentRequest(body)
	verify := func(ctx context.Context, since time.Time) (bool, error) {
		return c.commentMade(ctx, repo, number, body, since)
	}
	err = c.doWrite(ctx, EndpointCreateComment, repo, verify, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		_, resp, err := gh.Issues.CreateComment(ctx, owner, name, number, req)
		return resp, err
	})
	if err != nil {
		return fmt.Errorf("comment on issue #%d: %w", number, err)
	}
	return nil
}

// commentMade reports whether the issue has a comment with body among
// those changed since since: a comment whose answer was lost, made after
// all. The bridge's comments end with a transition mark unique to the
// journal entry, so an equal body is that comment.
func (c *client) commentMade(ctx context.Context, repo string, number int, body string, since time.Time) (bool, error) {
	comments, err := c.ListComments(ctx, repo, number, since)
	if err != nil {
		return false, fmt.Errorf("look for the comment made: %w", err)
	}
	want := normalizeComment(body)
	for _, cm := range comments {
		if normalizeComment(cm.Body) == want {
			return true, nil
		}
	}
	return false, nil
}

// normalizeComment is a body as compared with what GitHub gives back: line
// endings and surrounding space aside.
func normalizeComment(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}

func (c *client) ListComments(ctx context.Context, repo string, number int, since time.Time) ([]Comment, error) {
	owner, name, err := splitRepo(EndpointListComments, repo)
	if err != nil {
		return nil, err
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: listPageSize}}
	if !since.IsZero() {
		s := since.UTC()
		opts.Since = &s
	}
	var out []Comment
	for {
		var page []*github.IssueComment
		var next int
		err := c.do(ctx, EndpointListComments, repo, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			page, resp, err = gh.Issues.ListComments(ctx, owner, name, number, opts)
			if resp != nil {
				next = resp.NextPage
			}
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("list comments of issue #%d (page %d): %w", number, max(opts.Page, 1), err)
		}
		for _, gc := range page {
			out = append(out, Comment{ID: gc.GetID(), Body: gc.GetBody(), CreatedAt: gc.GetCreatedAt().Time})
		}
		if next == 0 {
			return out, nil
		}
		opts.Page = next
	}
}

// fromGitHub converts go-github's issue.
func fromGitHub(repo string, gi *github.Issue) Issue {
	is := Issue{
		Repo: repo, Number: gi.GetNumber(), NodeID: gi.GetNodeID(), Title: gi.GetTitle(),
		Body: gi.GetBody(), State: IssueState(gi.GetState()), StateReason: StateReason(gi.GetStateReason()),
		HTMLURL: gi.GetHTMLURL(), CreatedAt: gi.GetCreatedAt().Time, ClosedAt: gi.GetClosedAt().Time,
		UpdatedAt: gi.GetUpdatedAt().Time,
	}
	for _, l := range gi.Labels {
		is.Labels = append(is.Labels, l.GetName())
	}
	for _, a := range gi.Assignees {
		is.Assignees = append(is.Assignees, a.GetLogin())
	}
	return is
}
