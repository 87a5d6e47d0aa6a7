package ghclient

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// NewDryRun returns a Client that sends no writes. Each create, edit or
// comment is logged at Info as "Would call GitHub" with the method, the API
// path and the exact JSON body the real client would send, and answered from
// memory: a created issue gets a synthetic number counting up from
// 1,000,000, and an edit returns the issue's last known state with the edit
// applied. Reads go to reads when it is non-nil (else they find nothing),
// and see the dry run's own writes on top, so a dry-run bridge behaves as it
// would for real instead of filing the same issue on every webhook.
func NewDryRun(log *slog.Logger, reads Client) Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &dryRun{
		log: log, reads: reads, nextNumber: dryRunFirstIssueNumber, nextCommentID: dryRunFirstIssueNumber,
		written: map[issueKey]*Issue{}, seen: map[issueKey]Issue{}, comments: map[issueKey][]Comment{},
	}
}

type issueKey struct {
	repo   string
	number int
}

// dryRun is the Client NewDryRun returns.
type dryRun struct {
	log   *slog.Logger
	reads Client

	// mu guards everything below.
	mu            sync.Mutex
	nextNumber    int
	nextCommentID int64
	// written holds the issues the dry run created or edited, as they would
	// be now; seen holds the last state read of the others.
	written  map[issueKey]*Issue
	created  []issueKey
	seen     map[issueKey]Issue
	comments map[issueKey][]Comment
}

var _ Client = (*dryRun)(nil)

func (d *dryRun) wouldCall(ctx context.Context, method, path string, body any) error {
	b, err := encodeBody(body)
	if err != nil {
		return fmt.Errorf("dry run: encode %s %s: %w", method, path, err)
	}
	d.log.InfoContext(ctx, "Would call GitHub", "method", method, "path", path, "body", string(b))
	return nil
}

func (d *dryRun) ListIssues(ctx context.Context, repo string, state IssueState, since time.Time, labels ...string) ([]Issue, error) {
	if _, _, err := splitRepo(EndpointListIssues, repo); err != nil {
		return nil, err
	}
	if err := checkListState(repo, state); err != nil {
		return nil, err
	}
	var read []Issue
	if d.reads != nil {
		var err error
		if read, err = d.reads.ListIssues(ctx, repo, state, since, labels...); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Issue, 0, len(read))
	for _, is := range read {
		k := issueKey{repo, is.Number}
		if w, ok := d.written[k]; ok {
			// As the dry run left it: its own edits may have moved it out of
			// the filter.
			if listed(*w, state, labels) {
				out = append(out, cloneIssue(*w))
			}
			continue
		}
		d.seen[k] = cloneIssue(is)
		out = append(out, is)
	}
	for _, k := range d.created {
		w := d.written[k]
		if k.repo == repo && listed(*w, state, labels) && !w.UpdatedAt.Before(since) {
			out = append(out, cloneIssue(*w))
		}
	}
	return out, nil
}

// listed reports whether the list filter takes is: its state, and every
// label (case-insensitively, as GitHub matches them).
func listed(is Issue, state IssueState, labels []string) bool {
	if state != StateAll && is.State != state {
		return false
	}
	for _, l := range listLabels(labels) {
		if !slices.ContainsFunc(is.Labels, func(have string) bool { return strings.EqualFold(have, l) }) {
			return false
		}
	}
	return true
}

func (d *dryRun) CreateIssue(ctx context.Context, repo string, in NewIssue) (Issue, error) {
	if _, _, err := splitRepo(EndpointCreateIssue, repo); err != nil {
		return Issue{}, err
	}
	if err := d.wouldCall(ctx, http.MethodPost, "/repos/"+repo+"/issues", createRequest(in)); err != nil {
		return Issue{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nextNumber
	d.nextNumber++
	is := Issue{
		Repo: repo, Number: n, NodeID: fmt.Sprintf("I_dryrun_%d", n), Title: in.Title, Body: in.Body,
		State: StateOpen, Labels: slices.Clone(in.Labels), Assignees: slices.Clone(in.Assignees),
		HTMLURL: fmt.Sprintf("https://github.com/%s/issues/%d", repo, n),
	}
	is.CreatedAt = time.Now().UTC()
	is.UpdatedAt = is.CreatedAt
	k := issueKey{repo, n}
	d.written[k] = &is
	d.created = append(d.created, k)
	return cloneIssue(is), nil
}

func (d *dryRun) EditIssue(ctx context.Context, repo string, number int, e Edit) (Issue, error) {
	if _, _, err := splitRepo(EndpointEditIssue, repo); err != nil {
		return Issue{}, err
	}
	if err := d.wouldCall(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/issues/%d", repo, number), editRequest(e)); err != nil {
		return Issue{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := issueKey{repo, number}
	w, ok := d.written[k]
	if !ok {
		base, seen := d.seen[k]
		if !seen {
			base = Issue{Repo: repo, Number: number, State: StateOpen}
		}
		w = &base
		d.written[k] = w
	}
	applyEdit(w, e, time.Now().UTC())
	return cloneIssue(*w), nil
}

// applyEdit changes is as GitHub would: closing stamps ClosedAt and defaults
// the reason to completed, reopening clears it and says reopened.
func applyEdit(is *Issue, e Edit, now time.Time) {
	is.UpdatedAt = now
	if e.Body != nil {
		is.Body = *e.Body
	}
	if e.Title != nil {
		is.Title = *e.Title
	}
	if e.Labels != nil {
		is.Labels = slices.Clone(*e.Labels)
	}
	wasClosed := is.State == StateClosed
	switch {
	case e.State != nil && *e.State == StateClosed && !wasClosed:
		is.State, is.ClosedAt, is.StateReason = StateClosed, now, ReasonCompleted
		if e.StateReason != nil && *e.StateReason != ReasonReopened {
			is.StateReason = *e.StateReason
		}
	case e.State != nil && *e.State == StateOpen && wasClosed:
		is.State, is.ClosedAt, is.StateReason = StateOpen, time.Time{}, ReasonReopened
	case e.StateReason != nil && wasClosed && *e.StateReason != ReasonReopened:
		is.StateReason = *e.StateReason
	}
}

func (d *dryRun) CreateComment(ctx context.Context, repo string, number int, body string) error {
	if _, _, err := splitRepo(EndpointCreateComment, repo); err != nil {
		return err
	}
	if err := d.wouldCall(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", repo, number), commentRequest(body)); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := issueKey{repo, number}
	d.comments[k] = append(d.comments[k], Comment{ID: d.nextCommentID, Body: body, CreatedAt: time.Now().UTC()})
	d.nextCommentID++
	return nil
}

func (d *dryRun) ListComments(ctx context.Context, repo string, number int, since time.Time) ([]Comment, error) {
	if _, _, err := splitRepo(EndpointListComments, repo); err != nil {
		return nil, err
	}
	var out []Comment
	if d.reads != nil && number < dryRunFirstIssueNumber {
		var err error
		if out, err = d.reads.ListComments(ctx, repo, number, since); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.comments[issueKey{repo, number}] {
		if !c.CreatedAt.Before(since) {
			out = append(out, c)
		}
	}
	return out, nil
}

func cloneIssue(is Issue) Issue {
	is.Labels = slices.Clone(is.Labels)
	is.Assignees = slices.Clone(is.Assignees)
	return is
}

// Transition logs the GraphQL document the real client would send, then
// applies it to the dry run's own view like EditIssue and CreateComment.
func (d *dryRun) Transition(ctx context.Context, repo string, number int, nodeID string, e Edit, comment string) (Issue, error) {
	if _, _, err := splitRepo(EndpointTransition, repo); err != nil {
		return Issue{}, err
	}
	query, vars := transitionDocument(nodeID, e, comment)
	if err := d.wouldCall(ctx, http.MethodPost, "/graphql", map[string]any{"query": query, "variables": vars}); err != nil {
		return Issue{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := issueKey{repo, number}
	w, ok := d.written[k]
	if !ok {
		base, seen := d.seen[k]
		if !seen {
			base = Issue{Repo: repo, Number: number, NodeID: nodeID, State: StateOpen}
		}
		w = &base
		d.written[k] = w
	}
	applyEdit(w, e, time.Now().UTC())
	if comment != "" {
		d.comments[k] = append(d.comments[k], Comment{ID: d.nextCommentID, Body: comment, CreatedAt: time.Now().UTC()})
		d.nextCommentID++
	}
	return cloneIssue(*w), nil
}
