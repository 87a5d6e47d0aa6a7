package ghfake

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// Documentation URLs GitHub puts in its error bodies.
const (
	docNotFound          = "https://docs.github.com/rest"
	docBadCredentials    = "https://docs.github.com/rest"
	docPrimaryRateLimit  = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"
	docCreateIssue       = "https://docs.github.com/rest/issues/issues#create-an-issue"
	docUpdateIssue       = "https://docs.github.com/rest/issues/issues#update-an-issue"
	docCreateComment     = "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
	docCreateLabel       = "https://docs.github.com/rest/issues/labels#create-a-label"
	docListIssues        = "https://docs.github.com/rest/issues/issues#list-repository-issues"
	docSecondaryRateLimt = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// SecondaryRateLimitDoc is the documentation_url GitHub sends with a
// secondary rate limit 403, for tests that inject one with SetFault.
const SecondaryRateLimitDoc = docSecondaryRateLimt

// enterprisePrefix is where GitHub Enterprise Server serves the REST API.
const enterprisePrefix = "/api/v3"

// Call is one HTTP request the fake received, recorded before it is answered.
type Call struct {
	Method string
	// Path is the API path with GitHub Enterprise's /api/v3 prefix removed,
	// e.g. /repos/acme/x/issues.
	Path string
	// RawPath is the path as received, prefix included.
	RawPath string
	Query   string
	Header  http.Header
	Body    []byte
	Status  int
	Time    time.Time
	// Lost marks a request that was carried out and whose answer was
	// lost (a Fault with Apply): Status is what the client was sent
	// instead, 0 for an answer held until the client gave up.
	Lost bool
}

// Fault is an answer injected instead of the normal handler's. An empty Body
// becomes {"message":"<status text>"}.
type Fault struct {
	Status int
	Header http.Header
	Body   string
	// Apply has the request carried out first, its write included, and
	// the fault answered instead of the handler's answer: the write
	// happened and its answer is lost (LostAnswer).
	Apply bool
	// Hold, with Apply, answers nothing until the client gives up (its
	// request times out or is canceled) or the Fake closes.
	Hold bool
}

// Issue is a snapshot of one issue (or pull request) held by the fake.
type Issue struct {
	Number      int
	NodeID      string
	Title       string
	Body        string
	State       ghclient.IssueState
	StateReason ghclient.StateReason
	Labels      []string
	Assignees   []string
	PullRequest bool
	// User is the login of who opened it.
	User      string
	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  time.Time
	Comments  []Comment
}

// Comment is a snapshot of one issue comment.
type Comment struct {
	ID        int64
	Body      string
	User      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Fake is an httptest GitHub. All methods are safe for concurrent use.
type Fake struct {
	srv *httptest.Server

	// mu guards everything below.
	mu     sync.Mutex
	clock  clock.PassiveClock
	token  string
	repos  map[string]*repo
	calls  []Call
	fault  func(r *http.Request) *Fault
	nextID int64
	rate   rateLimit
	// rejected counts refused writes by reason (Rejected).
	rejected map[string]int
	// endpointFaults are the faults queued per write (FailEndpoint).
	endpointFaults map[Endpoint][]Fault

	// closing is closed by Close, ending held answers.
	closing   chan struct{}
	closeOnce sync.Once
}

type rateLimit struct {
	limit, remaining int
	reset            time.Time // zero until first use
}

type repo struct {
	id         int64
	fullName   string
	issues     []*issue // by number-1
	labels     []*label
	nextNumber int
}

type issue struct {
	id          int64
	number      int
	title       string
	body        string
	state       ghclient.IssueState
	stateReason ghclient.StateReason
	labels      []string
	assignees   []string
	pullRequest bool
	user        string
	createdAt   time.Time
	updatedAt   time.Time
	closedAt    time.Time
	comments    []*comment
}

type comment struct {
	id        int64
	body      string
	user      string
	createdAt time.Time
	updatedAt time.Time
}

type label struct {
	id          int64
	name        string
	color       string
	description string
}

// New starts a fake GitHub on a loopback port. Close stops it.
func New() *Fake {
	f := &Fake{
		clock:   clock.RealClock{},
		repos:   map[string]*repo{},
		rate:    rateLimit{limit: 5000, remaining: 5000},
		closing: make(chan struct{}),
	}
	page := f.Page()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not a ServeMux: the API handler sees every other path as sent,
		// uncleaned.
		if r.URL.Path == PagePath {
			page.ServeHTTP(w, r)
			return
		}
		f.serveHTTP(w, r)
	}))
	return f
}

// Close stops the server.
func (f *Fake) Close() {
	f.closeOnce.Do(func() { close(f.closing) })
	f.srv.Close()
}

// URL is the server's base URL with a trailing slash, as go-github expects.
func (f *Fake) URL() string { return f.srv.URL + "/" }

// EnterpriseURL is the base URL under GitHub Enterprise's /api/v3/ prefix.
func (f *Fake) EnterpriseURL() string { return f.srv.URL + enterprisePrefix + "/" }

// SetClock makes the fake read time (timestamps, rate limit resets) from c.
func (f *Fake) SetClock(c clock.PassiveClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock = c
}

// SetToken makes every API request without "Authorization: token <tok>" or
// "Bearer <tok>" fail with 401 Bad credentials. An empty tok turns the check
// off (the default). It is also the token handed out to GitHub Apps.
func (f *Fake) SetToken(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = tok
}

// AddRepo registers "owner/name". Requests for unregistered repositories are
// answered 404 like GitHub answers a repository the token cannot see.
func (f *Fake) AddRepo(fullName string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.repos[fullName]; ok {
		return
	}
	f.repos[fullName] = &repo{id: f.newID(), fullName: fullName, nextNumber: 1}
}

// AddIssue files an open issue as a person would and returns its number.
// It panics when the repository is unknown: that is a broken test.
func (f *Fake) AddIssue(fullName, title, body string, labels ...string) int {
	return f.addIssue(fullName, title, body, labels, false)
}

// AddPullRequest opens a pull request, which GitHub lists among issues.
func (f *Fake) AddPullRequest(fullName, title string, labels ...string) int {
	return f.addIssue(fullName, title, "", labels, true)
}

func (f *Fake) addIssue(fullName, title, body string, labels []string, pr bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(fullName)
	now := f.now()
	iss := &issue{
		id: f.newID(), number: r.nextNumber, title: title, body: body, state: ghclient.StateOpen,
		labels: f.ensureLabels(r, labels), pullRequest: pr, user: "octocat",
		createdAt: now, updatedAt: now,
	}
	r.nextNumber++
	r.issues = append(r.issues, iss)
	return iss.number
}

// CloseIssue closes an issue as a person would; reason "" is completed.
func (f *Fake) CloseIssue(fullName string, number int, reason ghclient.StateReason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	if reason == "" {
		reason = ghclient.ReasonCompleted
	}
	now := f.now()
	iss.state, iss.stateReason, iss.closedAt, iss.updatedAt = ghclient.StateClosed, reason, now, now
}

// ReopenIssue reopens an issue as a person would.
func (f *Fake) ReopenIssue(fullName string, number int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	now := f.now()
	iss.state, iss.stateReason, iss.closedAt, iss.updatedAt = ghclient.StateOpen, ghclient.ReasonReopened, time.Time{}, now
}

// AddLabel adds a label to an issue as a person would, creating the label.
func (f *Fake) AddLabel(fullName string, number int, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.mustRepo(fullName)
	iss := f.mustIssue(fullName, number)
	if !containsFold(iss.labels, name) {
		iss.labels = append(iss.labels, f.ensureLabels(r, []string{name})...)
	}
	iss.updatedAt = f.now()
}

// RemoveLabel takes a label off an issue as a person would (the label
// stays in the repository).
func (f *Fake) RemoveLabel(fullName string, number int, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	iss.labels = slices.DeleteFunc(iss.labels, func(l string) bool { return strings.EqualFold(l, name) })
	iss.updatedAt = f.now()
}

// SetTitle retitles an issue as a person would.
func (f *Fake) SetTitle(fullName string, number int, title string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	iss.title, iss.updatedAt = title, f.now()
}

// SetAssignees replaces an issue's assignees as a person would.
func (f *Fake) SetAssignees(fullName string, number int, logins ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	iss.assignees, iss.updatedAt = slices.Clone(logins), f.now()
}

// AddComment comments on an issue as user and returns the comment ID.
func (f *Fake) AddComment(fullName string, number int, user, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.mustIssue(fullName, number)
	return f.addComment(iss, user, body).id
}

// Issues returns a snapshot of the repository's issues and pull requests in
// number order; nil for an unknown repository.
func (f *Fake) Issues(fullName string) []Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.repos[fullName]
	if !ok {
		return nil
	}
	out := make([]Issue, 0, len(r.issues))
	for _, iss := range r.issues {
		out = append(out, iss.snapshot())
	}
	return out
}

// Issue returns a snapshot of one issue.
func (f *Fake) Issue(fullName string, number int) (Issue, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.issue(fullName, number)
	if iss == nil {
		return Issue{}, false
	}
	return iss.snapshot(), true
}

// Comments returns the bodies of an issue's comments, oldest first.
func (f *Fake) Comments(fullName string, number int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	iss := f.issue(fullName, number)
	if iss == nil {
		return nil
	}
	var out []string
	for _, c := range iss.comments {
		out = append(out, c.body)
	}
	return out
}

// Labels returns the names of the repository's labels in creation order.
func (f *Fake) Labels(fullName string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.repos[fullName]
	if !ok {
		return nil
	}
	var out []string
	for _, l := range r.labels {
		out = append(out, l.name)
	}
	return out
}

// Calls returns every request received so far, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Call, len(f.calls))
	copy(out, f.calls)
	return out
}

// CallCount counts recorded requests whose method equals method ("" matches
// any) and whose Path matches pattern: a path.Match glob when pattern holds
// '*', '?' or '[' (so /repos/*/*/issues/* matches one issue but not its
// comments), else a prefix.
func (f *Fake) CallCount(method, pattern string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if method != "" && c.Method != method {
			continue
		}
		if matchPath(pattern, c.Path) {
			n++
		}
	}
	return n
}

func matchPath(pattern, p string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		ok, err := path.Match(pattern, p)
		return err == nil && ok
	}
	return strings.HasPrefix(p, pattern)
}

// Rejected returns how many writes GitHub would have refused as invalid
// (a REST 422, or a GraphQL UNPROCESSABLE error) so far, by reason:
// RejectBodyTooLong, RejectTitleTooLong, RejectValidation. A reason with
// none is absent.
func (f *Fake) Rejected() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.rejected)
}

// ResetCalls forgets the recorded requests.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// SetFault installs fn, consulted before each request is handled; a non-nil
// Fault is answered (and recorded) instead, after carrying the request out
// when the Fault says Apply. nil removes it.
func (f *Fake) SetFault(fn func(r *http.Request) *Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fn
}

// FailNext answers the next n requests of any method with status and header.
func (f *Fake) FailNext(n, status int, header http.Header) {
	f.failMatching(n, status, header, func(*http.Request) bool { return true })
}

// FailWrites answers the next n non-GET requests with status and header.
func (f *Fake) FailWrites(n, status int, header http.Header) {
	f.failMatching(n, status, header, func(r *http.Request) bool { return r.Method != http.MethodGet })
}

func (f *Fake) failMatching(n, status int, header http.Header, match func(*http.Request) bool) {
	var mu sync.Mutex
	left := n
	f.SetFault(func(r *http.Request) *Fault {
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 || !match(r) {
			return nil
		}
		left--
		return &Fault{Status: status, Header: header.Clone()}
	})
}

// SetRateLimit sets the primary rate limit the fake reports. With remaining
// 0, requests are answered 403 "API rate limit exceeded" until the fake's
// clock reaches reset; then remaining starts again from limit.
func (f *Fake) SetRateLimit(limit, remaining int, reset time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rate = rateLimit{limit: limit, remaining: remaining, reset: reset}
}

func (f *Fake) now() time.Time { return f.clock.Now().UTC().Truncate(time.Second) }

func (f *Fake) newID() int64 {
	f.nextID++
	return f.nextID
}

func (f *Fake) mustRepo(fullName string) *repo {
	r, ok := f.repos[fullName]
	if !ok {
		panic(fmt.Sprintf("ghfake: unknown repository %q (call AddRepo first)", fullName))
	}
	return r
}

func (f *Fake) issue(fullName string, number int) *issue {
	r, ok := f.repos[fullName]
	if !ok || number < 1 || number > len(r.issues) {
		return nil
	}
	return r.issues[number-1]
}

func (f *Fake) mustIssue(fullName string, number int) *issue {
	iss := f.issue(fullName, number)
	if iss == nil {
		panic(fmt.Sprintf("ghfake: unknown issue %s#%d", fullName, number))
	}
	return iss
}

// ensureLabels returns names as the repository spells them, creating the
// labels that do not exist yet like GitHub does on issue create and update.
func (f *Fake) ensureLabels(r *repo, names []string) []string {
	var out []string
	for _, n := range names {
		if n == "" || containsFold(out, n) {
			continue
		}
		l := r.label(n)
		if l == nil {
			l = &label{id: f.newID(), name: n, color: "ededed"}
			r.labels = append(r.labels, l)
		}
		out = append(out, l.name)
	}
	return out
}

func (f *Fake) addComment(iss *issue, user, body string) *comment {
	now := f.now()
	c := &comment{id: f.newID(), body: body, user: user, createdAt: now, updatedAt: now}
	iss.comments = append(iss.comments, c)
	iss.updatedAt = now
	return c
}

func (r *repo) label(name string) *label {
	for _, l := range r.labels {
		if strings.EqualFold(l.name, name) {
			return l
		}
	}
	return nil
}

func (iss *issue) snapshot() Issue {
	s := Issue{
		Number: iss.number, NodeID: nodeID("I_kwDO", iss.id), Title: iss.title, Body: iss.body,
		State: iss.state, StateReason: iss.stateReason, Labels: slices.Clone(iss.labels),
		Assignees: slices.Clone(iss.assignees), PullRequest: iss.pullRequest, User: iss.user,
		CreatedAt: iss.createdAt, UpdatedAt: iss.updatedAt, ClosedAt: iss.closedAt,
	}
	for _, c := range iss.comments {
		s.Comments = append(s.Comments, Comment{ID: c.id, Body: c.body, User: c.user, CreatedAt: c.createdAt, UpdatedAt: c.updatedAt})
	}
	return s
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// nodeID makes a GraphQL-style global ID such as I_kwDOAB...; only its shape
// matters.
func nodeID(prefix string, id int64) string {
	return prefix + strings.TrimRight(base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%010d", id)), "=")
}

// readBody reads at most 1 MiB of a request body.
func readBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	return b
}
