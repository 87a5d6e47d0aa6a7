package bridge

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The join between NodeOperations and issues. An issue's marker state
// names the nodes its group's alerts name (state.Nodes). Every
// DiagnosticsInterval the bridge reads the NodeOperations of the nodes of
// its open issues, and comments once on each such issue about each
// operation whose capture left a stored bundle with a link, and once about
// each operation whose active GPU test (the validation gate) ended Passed
// or Failed: each comment ends with a hidden mark holding the operation's
// UID, "/validation" after it for the test's. Before its first comment on
// an issue after a start, the bridge reads the issue's comments for those
// marks, so a restart never comments twice.
//
// An operation belongs to an issue when its capture (or its test) ended at
// most diagnosticsLookback before the issue was filed, or after: a capture
// runs when the repair starts, usually before the alert's for: has passed
// and the issue exists.
const diagnosticsLookback = 24 * time.Hour

// diagComments is what the loop knows: per issue ("repo#number"), the ids
// of the comments about operations it has posted there (opComment.id), and
// whether its comments were read since the start.
type diagComments struct {
	mu      sync.Mutex
	posted  map[string]map[string]bool
	scanned map[string]bool
}

func (d *diagComments) has(issue, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.posted[issue][id]
}

func (d *diagComments) add(issue string, ids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.posted == nil {
		d.posted = map[string]map[string]bool{}
	}
	if d.posted[issue] == nil {
		d.posted[issue] = map[string]bool{}
	}
	for _, id := range ids {
		d.posted[issue][id] = true
	}
}

func (d *diagComments) isScanned(issue string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scanned[issue]
}

func (d *diagComments) setScanned(issue string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.scanned == nil {
		d.scanned = map[string]bool{}
	}
	d.scanned[issue] = true
}

// unscan has the issue's comments read again before its next comment.
func (d *diagComments) unscan(issue string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.scanned, issue)
}

// keepOnly forgets what it knows of every issue but those in open (ids
// "repo#number"): an issue that closed, or that the cache forgot, needs
// nothing more, and one reopened has its comments read again before its
// next diagnostics comment. So the maps follow the open issues, not the
// repository's history.
func (d *diagComments) keepOnly(open map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.posted {
		if !open[id] {
			delete(d.posted, id)
		}
	}
	for id := range d.scanned {
		if !open[id] {
			delete(d.scanned, id)
		}
	}
}

func (b *Bridge) diagnosticsLoop(ctx context.Context) {
	t := b.clock.NewTicker(b.opts.DiagnosticsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		b.postDiagnostics(ctx)
	}
}

// diagTarget is an open issue whose group names nodes.
type diagTarget struct {
	repo    string
	number  int
	created time.Time
	nodes   []string
}

func (t diagTarget) id() string { return t.repo + "#" + strconv.Itoa(t.number) }

// openNodeIssues are the open issues (not roll-ups) whose groups name
// nodes, and those nodes, sorted.
func (b *Bridge) openNodeIssues() ([]diagTarget, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []diagTarget
	seen := map[string]bool{}
	var nodes []string
	for _, t := range b.byKey {
		if t.inRollup || !t.open || t.number == 0 || len(t.state.Nodes) == 0 {
			continue
		}
		out = append(out, diagTarget{repo: t.repo, number: t.number, created: t.createdAt, nodes: slices.Clone(t.state.Nodes)})
		for _, n := range t.state.Nodes {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	sort.Strings(nodes)
	return out, nodes
}

// opComment is one comment the loop owes a NodeOperation on the issues of
// its node: about its diagnostics bundle, or about how its active GPU test
// (the validation gate) ended. Each has its own id in the mark, so both are
// posted, once each.
type opComment struct {
	op         *v1alpha1.NodeOperation
	validation bool
	// ended is when the capture or the test ended: the order of the
	// comments, and the join to an issue (diagnosticsLookback).
	ended time.Time
}

// id is the comment's id in its mark.
func (c opComment) id() string {
	if c.validation {
		return marker.ValidationID(opID(c.op))
	}
	return opID(c.op)
}

// about names what the comment is about, for logs.
func (c opComment) about() string {
	if c.validation {
		return "validation"
	}
	return "diagnostics"
}

func (c opComment) body() string {
	if c.validation {
		return render.ValidationComment(c.op) + marker.Diagnostics(c.id())
	}
	return render.DiagnosticsComment(c.op) + marker.Diagnostics(c.id())
}

// opComments are the comments ops call for, the oldest end first, so an
// issue's comments read in order (a capture before its operation's test).
func opComments(ops []v1alpha1.NodeOperation) []opComment {
	var out []opComment
	for i := range ops {
		op := &ops[i]
		if render.DiagnosticsReady(op) {
			out = append(out, opComment{op: op, ended: op.Status.Diagnostics.CompletionTime.Time})
		}
		if render.ValidationEnded(op) {
			out = append(out, opComment{op: op, validation: true, ended: op.Status.Validation.CompletionTime.Time})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ended.Before(out[j].ended) })
	return out
}

// postDiagnostics comments on the open issues of nodes about their
// NodeOperations, once each: the diagnostics bundles and the validations
// that ended. A read or a comment that fails is logged and tried again at
// the next interval.
func (b *Bridge) postDiagnostics(ctx context.Context) {
	targets, nodes := b.openNodeIssues()
	open := make(map[string]bool, len(targets))
	for _, t := range targets {
		open[t.id()] = true
	}
	b.diag.keepOnly(open)
	if len(targets) == 0 {
		return
	}
	ops, err := b.readNodeOps(ctx, nodes)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("Cannot read the NodeOperations for their diagnostics bundles and validations; trying again", "nodes", nodes, "err", err)
		}
		return
	}
	comments := opComments(ops)
	for _, t := range targets {
		for _, c := range comments {
			if !slices.Contains(t.nodes, c.op.Spec.NodeName) || c.ended.Before(t.created.Add(-diagnosticsLookback)) {
				continue
			}
			if err := b.commentOn(ctx, t, c); err != nil {
				if ctx.Err() == nil {
					b.commentMetric(c).WithLabelValues("error").Inc()
					b.log.Warn("Commenting on a node's operation failed; trying again", "repo", t.repo, "issue", t.number, "operation", c.op.Name, "about", c.about(), "err", err)
				}
				break // this issue's next comment waits for the next interval
			}
		}
	}
}

// commentMetric is the counter of c's kind of comment.
func (b *Bridge) commentMetric(c opComment) *prometheus.CounterVec {
	if c.validation {
		return b.metrics.validations
	}
	return b.metrics.diagnostics
}

// opID is the operation's id in the mark: its UID, else its name.
func opID(op *v1alpha1.NodeOperation) string {
	if op.UID != "" {
		return string(op.UID)
	}
	return op.Name
}

// commentOn posts c on t unless it did before: known since the start, or
// found in the issue's comments.
func (b *Bridge) commentOn(ctx context.Context, t diagTarget, c opComment) error {
	id := c.id()
	if b.diag.has(t.id(), id) {
		return nil
	}
	if !b.diag.isScanned(t.id()) {
		comments, err := b.gh.ListComments(ctx, t.repo, t.number, time.Time{})
		if err != nil {
			return err
		}
		for _, gc := range comments {
			b.diag.add(t.id(), marker.DiagnosticsIDs(gc.Body)...)
		}
		b.diag.setScanned(t.id())
		if b.diag.has(t.id(), id) {
			b.commentMetric(c).WithLabelValues("found").Inc()
			return nil
		}
	}
	if err := b.gh.CreateComment(ctx, t.repo, t.number, c.body()); err != nil {
		// The client checks a lost answer itself, but when that check
		// failed too the comment may have been made: its mark is looked
		// for again before the next try.
		b.diag.unscan(t.id())
		return err
	}
	b.diag.add(t.id(), id)
	b.commentMetric(c).WithLabelValues("posted").Inc()
	if c.validation {
		b.log.Info("Commented on the GPU validation of a node's operation", "repo", t.repo, "issue", t.number, "operation", c.op.Name, "result", c.op.Status.Validation.Result)
	} else {
		b.log.Info("Commented on the diagnostics bundle of a node's operation", "repo", t.repo, "issue", t.number, "operation", c.op.Name, "key", c.op.Status.Diagnostics.Bundle.Key)
	}
	return nil
}
