package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// orphanWindow bounds the orphans the rebuild closes: an open issue of a
// key created at most this long before the key's latest issue. An older
// issue a person reopened was filed before the reopen window ran out, well
// before that.
const orphanWindow = time.Hour

// retainWindow is how long after an issue closed the cache keeps it: the
// reopen window, or the storm guard's window when that is longer (its count
// of new issues reads their creation times). 0 keeps no closed issue but
// those with the ignore label, which the cache keeps for good.
func (b *Bridge) retainWindow() time.Duration {
	w := b.cfg.ReopenWindow
	if g := b.cfg.StormGuard; g.MaxNewIssues > 0 && g.Window > w {
		w = g.Window
	}
	return w
}

// retention is what the cache keeps of an issue of a key.
type retention int

const (
	// retainAll: an open issue, or one closed within the window (it may be
	// reopened, or have its body rewritten with its history section).
	retainAll retention = iota
	// retainDecisions: a closed issue with the ignore label beyond the
	// window: what decisions need, without the history section.
	retainDecisions
	// retainNone: a closed issue beyond the window; forgotten.
	retainNone
)

// retain decides what the cache keeps of t at now. An issue closed at an
// unknown time is kept whole: that it closed long ago is not known.
func retain(t *tracked, now time.Time, window time.Duration, ignoreLabel string) retention {
	switch {
	case t.inRollup, t.open, t.closedAt.IsZero(), now.Sub(t.closedAt) <= window:
		return retainAll
	case ignoreLabel != "" && slices.Contains(t.labels, ignoreLabel):
		return retainDecisions
	default:
		return retainNone
	}
}

// orphanOf reports whether open, an open issue of a key, is an orphan of
// latest, the key's latest issue: the bridge never files a second issue of
// a key while one is open, so an older one still open was filed by a create
// whose answer was lost, by a version that did not look for it before
// filing again. Only one created in the same repository at most
// orphanWindow before latest is taken for one.
func orphanOf(open, latest decide.CachedIssue) bool {
	return open.Open && !open.InRollup && !latest.InRollup && open.Repo == latest.Repo && open.Number != latest.Number &&
		open.CreatedAt.Before(latest.CreatedAt) && latest.CreatedAt.Sub(open.CreatedAt) <= orphanWindow
}

// rebuild reads the issues with the identity label in every configured
// repository (the list API, which is consistent; never search) and keeps
// the newest issue of each key. It reads what decisions can need, not the
// repository's history: the open issues, those closed within the retain
// window, and the closed ones with the ignore label (which stay closed for
// good). It retries until GitHub answers or ctx ends.
func (b *Bridge) rebuild(ctx context.Context) error {
	for _, repo := range b.cfg.Repos() {
		start := b.clock.Now()
		issues, err := b.listAtStart(ctx, repo.String(), start)
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
		n, orphans := b.absorb(repo.String(), issues, true, start)
		b.mu.Lock()
		b.refreshedAt[repo.String()] = start
		b.mu.Unlock()
		b.log.Info("Rebuilt issue cache", "repo", repo.String(), "issues", len(issues), "keys", n)
		for _, o := range orphans {
			if err := b.closeOrphan(ctx, o); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.log.Error("Cannot close an issue filed twice; the next start tries again", "repo", o.repo, "issue", o.number, "follows", o.follows, "err", err)
			}
		}
	}
	return nil
}

// listAtStart lists what the rebuild reads of repo: the open issues with
// the identity label, the closed ones updated within the retain window
// before now (every one closed in it), and the closed ones with both the
// identity and the ignore label, each once.
func (b *Bridge) listAtStart(ctx context.Context, repo string, now time.Time) ([]ghclient.Issue, error) {
	type list struct {
		what   string
		state  ghclient.IssueState
		since  time.Time
		labels []string
	}
	lists := []list{{"open", ghclient.StateOpen, time.Time{}, []string{b.cfg.IdentityLabel}}}
	if w := b.retainWindow(); w > 0 {
		lists = append(lists, list{"closed within the window", ghclient.StateClosed, now.Add(-w), []string{b.cfg.IdentityLabel}})
	}
	if b.cfg.IgnoreLabel != "" {
		lists = append(lists, list{"closed and ignored", ghclient.StateClosed, time.Time{}, []string{b.cfg.IdentityLabel, b.cfg.IgnoreLabel}})
	}
	var out []ghclient.Issue
	seen := map[int]bool{}
	for _, l := range lists {
		issues, err := b.gh.ListIssues(ctx, repo, l.state, l.since, l.labels...)
		if err != nil {
			return nil, fmt.Errorf("list the %s issues: %w", l.what, err)
		}
		for _, is := range issues {
			if !seen[is.Number] {
				seen[is.Number] = true
				out = append(out, is)
			}
		}
	}
	return out, nil
}

// orphan is an open issue filed twice for a key: follows is the key's
// latest issue, the one the bridge keeps.
type orphan struct {
	repo            string
	number, follows int
	createdAt       time.Time
}

// closeOrphan comments on an orphan that it is a duplicate of the issue
// the bridge follows and closes it as not planned (the REST API's
// duplicate reason is not used). The comment is looked for first, so a
// start after a failed close does not post it twice.
func (b *Bridge) closeOrphan(ctx context.Context, o orphan) error {
	b.log.Warn("Closing an issue filed twice: GitHub's answer to its create was lost", "repo", o.repo, "issue", o.number, "follows", o.follows)
	text := fmt.Sprintf("Duplicate of #%d: filed twice after GitHub's answer to the create was lost; kubemedic-alertbridge follows #%d.", o.follows, o.follows)
	comments, err := b.gh.ListComments(ctx, o.repo, o.number, o.createdAt)
	if err != nil {
		return fmt.Errorf("list comments of %s#%d: %w", o.repo, o.number, err)
	}
	if !slices.ContainsFunc(comments, func(c ghclient.Comment) bool { return strings.TrimSpace(c.Body) == text }) {
		if err := b.gh.CreateComment(ctx, o.repo, o.number, text); err != nil {
			return fmt.Errorf("comment on %s#%d: %w", o.repo, o.number, err)
		}
	}
	closed, reason := ghclient.StateClosed, ghclient.ReasonNotPlanned
	if _, err := b.gh.EditIssue(ctx, o.repo, o.number, ghclient.Edit{State: &closed, StateReason: &reason}); err != nil {
		return fmt.Errorf("close %s#%d: %w", o.repo, o.number, err)
	}
	return nil
}

// absorb merges listed issues into the cache, keeping for each key the
// issue decide.MergeListed picks: the newer issue, or the same issue updated
// later. An issue closed beyond the retain window (and not ignored) is not
// taken, and the cache forgets it if it held it. With rebuild set it also
// collects creation times for the storm guard, adopts open roll-up issues
// and returns the orphans: open issues of a key older than the one it keeps
// (orphanOf).
//
// listedAt is when the list request was sent: a refresh only overrides what
// the bridge itself wrote before that, so a list answered just before one of
// its writes cannot undo it.
func (b *Bridge) absorb(repo string, issues []ghclient.Issue, rebuild bool, listedAt time.Time) (int, []orphan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	window := b.retainWindow()
	n := 0
	var open []*tracked
	var openKeys []string
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
		cur := b.byKey[key]
		switch retain(t, listedAt, window, b.cfg.IgnoreLabel) {
		case retainNone:
			// Closed long ago, listed because it changed since: a key the
			// bridge need not know. If it is the cached issue (a person
			// took the ignore label off), the cache forgets it.
			if cur != nil && !cur.inRollup && cur.repo == t.repo && cur.number == t.number && listedAt.After(cur.wroteAt) {
				delete(b.byKey, key)
			}
			continue
		case retainDecisions:
			t.history = ""
		case retainAll:
		}
		if rebuild {
			b.created[repo] = append(b.created[repo], is.CreatedAt)
			if t.open {
				open, openKeys = append(open, t), append(openKeys, key)
			}
		}
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
	var orphans []orphan
	for i, t := range open {
		if latest := b.byKey[openKeys[i]]; latest != nil && orphanOf(*t.cached(), *latest.cached()) {
			orphans = append(orphans, orphan{repo: t.repo, number: t.number, follows: latest.number, createdAt: t.createdAt})
		}
	}
	return n, orphans
}

// prune forgets what the cache need not hold at now: the issues closed
// beyond the retain window (unless they have the ignore label, whose
// history section it drops instead). Memory follows the open issues and
// the window, not the repository's history.
func (b *Bridge) prune(now time.Time) (forgotten int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	window := b.retainWindow()
	for key, t := range b.byKey {
		switch retain(t, now, window, b.cfg.IgnoreLabel) {
		case retainNone:
			delete(b.byKey, key)
			forgotten++
		case retainDecisions:
			t.history = ""
		case retainAll:
		}
	}
	return forgotten
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
			issues, err := b.gh.ListIssues(ctx, repo.String(), ghclient.StateAll, since.Add(-2*time.Second), b.cfg.IdentityLabel)
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
		if n := b.prune(b.clock.Now()); n > 0 {
			b.log.Debug("Forgot issues closed beyond the reopen window", "issues", n, "window", b.retainWindow())
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
