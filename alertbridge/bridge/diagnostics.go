package bridge

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The join between NodeOperations and issues. An issue's marker state
// names the nodes its group's alerts name (state.Nodes). Every
// DiagnosticsInterval the bridge reads the NodeOperations of the nodes of
// its open issues, and comments once on each such issue about each
// operation whose capture left a stored bundle with a link: the comment
// ends with a hidden mark holding the operation's UID. Before its first
// comment on an issue after a start, the bridge reads the issue's
// comments for those marks, so a restart never comments twice.
//
// An operation belongs to an issue when its capture ended at most
// diagnosticsLookback before the issue was filed, or after: a capture runs
// when the repair starts, usually before the alert's for: has passed and
// the issue exists.
const diagnosticsLookback = 24 * time.Hour

// diagComments is what the loop knows: per issue ("repo#number"), the
// operation UIDs it has commented about, and whether its comments were
// read since the start.
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

// postDiagnostics comments on the open issues of nodes about the
// diagnostics bundles of their NodeOperations, once each. A read or a
// comment that fails is logged and tried again at the next interval.
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
			b.log.Warn("Cannot read the NodeOperations for their diagnostics bundles; trying again", "nodes", nodes, "err", err)
		}
		return
	}
	// Oldest capture first, so an issue's comments read in order.
	sort.SliceStable(ops, func(i, j int) bool { return captureEnd(&ops[i]).Before(captureEnd(&ops[j])) })
	for _, t := range targets {
		for i := range ops {
			op := &ops[i]
			if !slices.Contains(t.nodes, op.Spec.NodeName) || !render.DiagnosticsReady(op) {
				continue
			}
			if op.Status.Diagnostics.CompletionTime.Time.Before(t.created.Add(-diagnosticsLookback)) {
				continue
			}
			if err := b.commentDiagnostics(ctx, t, op); err != nil {
				if ctx.Err() == nil {
					b.metrics.diagnostics.WithLabelValues("error").Inc()
					b.log.Warn("Commenting on a node's diagnostics bundle failed; trying again", "repo", t.repo, "issue", t.number, "operation", op.Name, "err", err)
				}
				break // this issue's next comment waits for the next interval
			}
		}
	}
}

// opID is the operation's id in the mark: its UID, else its name.
func opID(op *v1alpha1.NodeOperation) string {
	if op.UID != "" {
		return string(op.UID)
	}
	return op.Name
}

// commentDiagnostics comments on t about op's bundle unless it did before:
// known since the start, or found in the issue's comments.
func (b *Bridge) commentDiagnostics(ctx context.Context, t diagTarget, op *v1alpha1.NodeOperation) error {
	id := opID(op)
	if b.diag.has(t.id(), id) {
		return nil
	}
	if !b.diag.isScanned(t.id()) {
		comments, err := b.gh.ListComments(ctx, t.repo, t.number, time.Time{})
		if err != nil {
			return err
		}
		for _, c := range comments {
			b.diag.add(t.id(), marker.DiagnosticsIDs(c.Body)...)
		}
		b.diag.setScanned(t.id())
		if b.diag.has(t.id(), id) {
			b.metrics.diagnostics.WithLabelValues("found").Inc()
			return nil
		}
	}
	body := render.DiagnosticsComment(op) + marker.Diagnostics(id)
	if err := b.gh.CreateComment(ctx, t.repo, t.number, body); err != nil {
		return err
	}
	b.diag.add(t.id(), id)
	b.metrics.diagnostics.WithLabelValues("posted").Inc()
	b.log.Info("Commented on the diagnostics bundle of a node's operation", "repo", t.repo, "issue", t.number, "operation", op.Name, "key", op.Status.Diagnostics.Bundle.Key)
	return nil
}

// captureEnd is when the operation's capture ended; zero when it has none.
func captureEnd(op *v1alpha1.NodeOperation) time.Time {
	if d := op.Status.Diagnostics; d != nil && d.CompletionTime != nil {
		return d.CompletionTime.Time
	}
	return time.Time{}
}
