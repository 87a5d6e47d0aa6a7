package bridge

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// tracked is what the bridge knows about one key's latest issue.
type tracked struct {
	repo        string
	number      int
	nodeID      string
	open        bool
	stateReason ghclient.StateReason
	createdAt   time.Time
	closedAt    time.Time
	updatedAt   time.Time
	// wroteAt is when the bridge's last write of the issue returned.
	wroteAt time.Time
	// title and labels are the issue's as GitHub last showed them.
	title  string
	labels []string
	state  marker.State
	// inRollup: the key has no issue of its own; it is a member of its
	// repository's roll-up issue.
	inRollup bool
	// history is the node history section of the issue's body (with its
	// delimiters), carried over when the bridge rewrites the body; "" when
	// the body has none.
	history string
}

func (t *tracked) known() decide.Known {
	if t == nil || t.inRollup {
		return decide.Known{}
	}
	return decide.Known{
		Exists: true, Number: t.number, Open: t.open, StateReason: t.stateReason,
		ClosedAt: t.closedAt, Labels: t.labels, Firing: t.state.Firing, FiringCount: t.state.FiringCount,
		FiringDigest: t.state.FiringDigest, LastComment: t.state.LastComment,
	}
}

// cached is the entry as the cache's choices see it; nil for none.
func (t *tracked) cached() *decide.CachedIssue {
	if t == nil {
		return nil
	}
	return &decide.CachedIssue{InRollup: t.inRollup, Repo: t.repo, Number: t.number, Open: t.open,
		CreatedAt: t.createdAt, UpdatedAt: t.updatedAt, WroteAt: t.wroteAt}
}

func (b *Bridge) get(key string) *tracked {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.byKey[key]
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func (b *Bridge) put(key string, t *tracked) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byKey[key] = t
}

// trackedFrom reads an issue listed from GitHub. ok is false for issues
// without a marker (a human's issue that happens to carry the label).
func trackedFrom(is ghclient.Issue) (key string, t *tracked, ok bool, err error) {
	key, st, ok, err := marker.Parse(is.Body)
	if !ok || err != nil {
		return key, nil, ok, err
	}
	return key, &tracked{
		repo: is.Repo, number: is.Number, nodeID: is.NodeID, open: is.State == ghclient.StateOpen, stateReason: is.StateReason,
		createdAt: is.CreatedAt, closedAt: is.ClosedAt, updatedAt: is.UpdatedAt, title: is.Title, labels: is.Labels, state: st,
		history: render.HistoryOf(is.Body),
	}, true, nil
}

// rebuild lists every issue with the identity label in every configured
// repository (the list API, which is consistent; never search) and keeps the
// newest issue of each key. It retries until GitHub answers or ctx ends.
func (b *Bridge) rebuild(ctx context.Context) error {
	for _, repo := range b.cfg.Repos() {
		start := b.clock.Now()
		issues, err := b.gh.ListIssues(ctx, repo.String(), b.cfg.IdentityLabel, time.Time{})
		if ghclient.IsPermanent(err) {
			// A repository that does not exist (or that the token cannot
			// see) must not stop the others; its transitions will be
			// dropped with the same error, counted in the dropped metric.
			b.log.Error("Cannot list the issues of a configured repository", "repo", repo.String(), "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("rebuild the issue cache from %s: %w", repo, err)
		}
		n := b.absorb(repo.String(), issues, true, start)
		b.mu.Lock()
		b.refreshedAt[repo.String()] = start
		b.mu.Unlock()
		b.log.Info("Rebuilt issue cache", "repo", repo.String(), "issues", len(issues), "keys", n)
	}
	return nil
}

// absorb merges listed issues into the cache, keeping for each key the
// issue decide.MergeListed picks: the newer issue, or the same issue updated
// later. With rebuild set it also collects creation times for the storm
// guard and adopts open roll-up issues.
//
// listedAt is when the list request was sent: a refresh only overrides what
// the bridge itself wrote before that, so a list answered just before one of
// its writes cannot undo it.
func (b *Bridge) absorb(repo string, issues []ghclient.Issue, rebuild bool, listedAt time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, is := range issues {
		key, t, ok, err := trackedFrom(is)
		if err != nil {
			b.log.Warn("Ignoring issue with a damaged marker", "repo", repo, "issue", is.Number, "err", err)
			continue
		}
		if !ok {
			continue
		}
		if key == marker.RollupKey {
			if rebuild {
				b.adoptRollupLocked(repo, is, t)
			}
			continue
		}
		if rebuild {
			b.created[repo] = append(b.created[repo], is.CreatedAt)
		}
		cur := b.byKey[key]
		switch decide.MergeListed(cur.cached(), *t.cached(), rebuild, listedAt) {
		case decide.MergeAdd:
			b.byKey[key] = t
			n++
		case decide.MergeReplace:
			b.byKey[key] = t
		case decide.MergeRefresh:
			// What people change; the bridge's own state stays the bridge's.
			cur.open, cur.stateReason, cur.closedAt, cur.title, cur.labels, cur.updatedAt = t.open, t.stateReason, t.closedAt, t.title, t.labels, t.updatedAt
		case decide.MergeKeep:
		}
	}
	return n
}

// refreshLoop re-lists the issues updated since the last pass, so that a
// human closing an issue as not planned, labelling it ignored or reopening it
// is known before the next transition. One list call per repository per
// interval, whatever the number of issues.
func (b *Bridge) refreshLoop(ctx context.Context) {
	t := b.clock.NewTicker(b.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, repo := range b.cfg.Repos() {
			b.mu.Lock()
			since := b.refreshedAt[repo.String()]
			b.mu.Unlock()
			start := b.clock.Now()
			// GitHub's since is in whole seconds: overlap a little.
			issues, err := b.gh.ListIssues(ctx, repo.String(), b.cfg.IdentityLabel, since.Add(-2*time.Second))
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn("Refreshing issues", "repo", repo.String(), "err", err)
				}
				continue
			}
			b.absorb(repo.String(), issues, false, start)
			b.mu.Lock()
			b.refreshedAt[repo.String()] = start
			b.mu.Unlock()
		}
	}
}

// stormAllows reports whether repo may get one more new issue now, and if
// so counts it (decide.StormReserve, under the same lock, so parallel workers
// cannot both take the last slot).
func (b *Bridge) stormAllows(repo string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.cfg.StormGuard
	var ok bool
	b.created[repo], ok = decide.StormReserve(b.created[repo], now, g.MaxNewIssues, g.Window)
	return ok
}

// unreserve gives back a storm-guard slot taken for an issue that was not
// created after all.
func (b *Bridge) unreserve(repo string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.created[repo], at); i >= 0 {
		b.created[repo] = slices.Delete(b.created[repo], i, i+1)
	}
}
