package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// rollup is a repository's roll-up issue: the alert groups the storm guard
// held back. Its members are written to a local file (durably, before the
// journal entry is done) and gathered into one GitHub edit every RollupDelay,
// so a storm of hundreds of groups costs a handful of calls, not hundreds.
type rollup struct {
	mu      sync.Mutex
	repo    string
	number  int // 0 until the issue exists on GitHub
	members map[string]*marker.Member
	// version counts local changes; synced is the version last on GitHub.
	version, synced int
	// closed is set once GitHub has the roll-up closed with every member
	// resolved: the roll-up is finished and the next storm gets a new one.
	closed bool
}

// rollupFile is the roll-up's durable local state.
type rollupFile struct {
	Repo    string          `json:"repo"`
	Number  int             `json:"number"`
	Members []marker.Member `json:"members"`
}

func (b *Bridge) rollupDir() string { return filepath.Join(b.journal.Dir(), "rollups") }

func (b *Bridge) rollupPath(repo string) string {
	h := sha256.Sum256([]byte(repo))
	return filepath.Join(b.rollupDir(), hex.EncodeToString(h[:8])+".json")
}

func (r *rollup) sortedMembers() []marker.Member {
	out := make([]marker.Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b marker.Member) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// save writes the roll-up's local file. Called with r.mu held.
func (b *Bridge) saveRollup(r *rollup) error {
	data, err := json.Marshal(rollupFile{Repo: r.repo, Number: r.number, Members: r.sortedMembers()})
	if err != nil {
		return fmt.Errorf("encode roll-up of %s: %w", r.repo, err)
	}
	if err := os.MkdirAll(b.rollupDir(), 0o700); err != nil {
		return fmt.Errorf("roll-up state: %w", err)
	}
	if err := journal.WriteFileAtomic(b.rollupPath(r.repo), data, 0o600); err != nil {
		return fmt.Errorf("write roll-up state of %s: %w", r.repo, err)
	}
	return nil
}

// adoptRollupLocked takes an open roll-up issue found while rebuilding.
func (b *Bridge) adoptRollupLocked(repo string, is ghclient.Issue, t *tracked) {
	if is.State != ghclient.StateOpen {
		return
	}
	if cur := b.rollups[repo]; cur != nil && cur.number > is.Number {
		return
	}
	r := &rollup{repo: repo, number: is.Number, members: map[string]*marker.Member{}}
	for _, m := range t.state.Members {
		m := m
		r.members[m.Key] = &m
		b.trackMemberLocked(repo, m)
	}
	b.rollups[repo] = r
}

// trackMemberLocked routes a roll-up member's key to the roll-up, unless the
// key has an issue of its own that is open or newer than its membership
// (a key joins a roll-up when its old issue was closed beyond the window).
func (b *Bridge) trackMemberLocked(repo string, m marker.Member) {
	if t := b.byKey[m.Key]; t != nil && !t.inRollup && (t.open || t.createdAt.After(m.Since)) {
		return
	}
	b.byKey[m.Key] = &tracked{repo: repo, inRollup: true, state: marker.State{Firing: firingPlaceholder(m.Firing)}}
}

// firingPlaceholder stands for n firing alerts of a roll-up member, whose
// fingerprints the roll-up does not keep.
func firingPlaceholder(n int) []string {
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("rollup:%d", n)}
}

// loadRollups reads the local roll-up files, which are newer than anything on
// GitHub, and schedules a sync of each.
func (b *Bridge) loadRollups() error {
	files, err := filepath.Glob(filepath.Join(b.rollupDir(), "*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read roll-up state: %w", err)
		}
		var rf rollupFile
		if err := json.Unmarshal(data, &rf); err != nil {
			return fmt.Errorf("roll-up state %s: %w", f, err)
		}
		b.mu.Lock()
		r := &rollup{repo: rf.Repo, number: rf.Number, members: map[string]*marker.Member{}, version: 1}
		if gh := b.rollups[rf.Repo]; gh != nil && r.number == 0 {
			// Created on GitHub just before a crash, not yet recorded here.
			r.number = gh.number
		}
		for _, m := range rf.Members {
			m := m
			r.members[m.Key] = &m
			b.trackMemberLocked(rf.Repo, m)
		}
		b.rollups[rf.Repo] = r
		b.mu.Unlock()
		b.log.Info("Loaded roll-up state", "repo", rf.Repo, "issue", r.number, "members", len(r.members))
	}
	if len(files) > 0 {
		b.kickRollups()
	}
	return nil
}

func (b *Bridge) inOpenRollup(repo, key string) bool {
	b.mu.Lock()
	r := b.rollups[repo]
	b.mu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.members[key]
	return ok && !r.closed
}

// toRollup records a group's state in its repository's roll-up.
func (b *Bridge) toRollup(_ context.Context, log *slog.Logger, repo, key string, iss *render.Issue, ev decide.Event) error {
	firing := ev.Firing()
	// Lock order: b.mu and r.mu are never held together. A roll-up closed
	// between the lookup and r.mu is finished: take a new one.
	var r *rollup
	for {
		b.mu.Lock()
		r = b.rollups[repo]
		if r == nil {
			r = &rollup{repo: repo, members: map[string]*marker.Member{}}
			b.rollups[repo] = r
		}
		b.mu.Unlock()
		r.mu.Lock()
		if !r.closed {
			break
		}
		r.mu.Unlock()
		b.mu.Lock()
		if b.rollups[repo] == r {
			delete(b.rollups, repo)
		}
		b.mu.Unlock()
	}
	m := r.members[key]
	if m == nil {
		m = &marker.Member{Key: key, Since: ev.Now}
		r.members[key] = m
	}
	m.Title, m.Firing = iss.Title, len(firing)
	switch {
	case len(firing) == 0 && m.Resolved.IsZero():
		m.Resolved = ev.Now
	case len(firing) > 0:
		m.Resolved = time.Time{}
	}
	r.version++
	err := b.saveRollup(r)
	r.mu.Unlock()
	if err != nil {
		// Not recorded: keep the journal entry and try again.
		return &transientError{err}
	}
	b.put(key, &tracked{repo: repo, inRollup: true, state: marker.State{Firing: firing}})
	b.metrics.transitions.WithLabelValues("rollup").Inc()
	log.Info("Recorded group in the roll-up", "repo", repo, "firing", len(firing))
	b.kickRollups()
	return nil
}

func (b *Bridge) kickRollups() {
	select {
	case b.rollupKick <- struct{}{}:
	default:
	}
}

// rollupLoop syncs changed roll-ups to GitHub, gathering the changes of
// RollupDelay into one call per repository.
func (b *Bridge) rollupLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.rollupKick:
		}
		select {
		case <-ctx.Done():
			return
		case <-b.clock.After(b.opts.RollupDelay):
		}
		b.mu.Lock()
		var rs []*rollup
		for _, r := range b.rollups {
			rs = append(rs, r)
		}
		b.mu.Unlock()
		for _, r := range rs {
			if err := b.syncRollup(ctx, r); err != nil {
				if ctx.Err() != nil {
					return
				}
				b.log.Error("Syncing roll-up issue", "repo", r.repo, "err", err)
				if !ghclient.IsPermanent(err) {
					b.kickRollups()
				}
			}
		}
	}
}

func (b *Bridge) syncRollup(ctx context.Context, r *rollup) error {
	r.mu.Lock()
	if r.closed || r.version == r.synced {
		r.mu.Unlock()
		return nil
	}
	version, number, members := r.version, r.number, r.sortedMembers()
	r.mu.Unlock()
	if len(members) == 0 {
		return nil
	}

	firing := 0
	for _, m := range members {
		if m.Firing > 0 {
			firing++
		}
	}
	body, err := marker.Append(b.rollupBody(r.repo, members), marker.RollupKey, marker.State{Members: members})
	if err != nil {
		return err
	}
	closing := firing == 0 && b.cfg.AutoClose
	// A roll-up created with every member already resolved is closed by the
	// next sync: closing a brand new issue in the same breath helps nobody.
	closeNext := false
	if number == 0 {
		is, err := b.gh.CreateIssue(ctx, r.repo, ghclient.NewIssue{
			Title:  fmt.Sprintf("Alert storm in %s: alert groups held back by the storm guard (%s)", r.repo, members[0].Since.UTC().Format("2006-01-02 15:04 MST")),
			Body:   body,
			Labels: []string{b.cfg.IdentityLabel, "alert-storm"},
		})
		if err != nil {
			return fmt.Errorf("create roll-up issue: %w", err)
		}
		number = is.Number
		b.log.Warn("Filed roll-up issue for an alert storm", "repo", r.repo, "issue", number, "groups", len(members))
		closeNext, closing = closing, false
	} else {
		// Only ever close: a roll-up a human closed (or closed as not
		// planned) stays closed; the bridge keeps its table current.
		edit := ghclient.Edit{Body: &body}
		if closing {
			state, reason := ghclient.StateClosed, ghclient.ReasonCompleted
			edit.State, edit.StateReason = &state, &reason
		}
		if _, err := b.gh.EditIssue(ctx, r.repo, number, edit); err != nil {
			return fmt.Errorf("edit roll-up issue #%d: %w", number, err)
		}
	}

	r.mu.Lock()
	if r.number == 0 {
		r.number = number
		if err := b.saveRollup(r); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	if r.version != version {
		r.mu.Unlock()
		b.kickRollups()
		return nil
	}
	r.synced = version
	if !closing {
		if closeNext {
			r.synced--
		}
		r.mu.Unlock()
		if closeNext {
			b.kickRollups()
		}
		return nil
	}
	// Finished: forget it, so the next storm files a new roll-up.
	r.closed = true
	keys := make([]string, 0, len(r.members))
	for key := range r.members {
		keys = append(keys, key)
	}
	err = os.Remove(b.rollupPath(r.repo))
	r.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove roll-up state: %w", err)
	}
	b.mu.Lock()
	for _, key := range keys {
		if t := b.byKey[key]; t != nil && t.inRollup {
			delete(b.byKey, key)
		}
	}
	if b.rollups[r.repo] == r {
		delete(b.rollups, r.repo)
	}
	b.mu.Unlock()
	b.log.Info("Closed roll-up issue: every group resolved", "repo", r.repo, "issue", number)
	return nil
}

func (b *Bridge) rollupBody(repo string, members []marker.Member) string {
	firing := 0
	for _, m := range members {
		if m.Firing > 0 {
			firing++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Alert storm in %s\n\n", repo)
	fmt.Fprintf(&sb, "The storm guard files at most %d new issues per %s in this repository. "+
		"These %d alert groups fired beyond that; they are tracked here instead of in issues of their own. "+
		"This issue is updated as they resolve and closes when all of them have.\n\n",
		b.cfg.StormGuard.MaxNewIssues, b.cfg.StormGuard.Window, len(members))
	fmt.Fprintf(&sb, "**Firing: %d · Resolved: %d**\n\n", firing, len(members)-firing)
	sb.WriteString("| Alert group | Firing alerts | Since | Resolved |\n|---|---|---|---|\n")
	const maxRows = 200
	for i, m := range members {
		if i == maxRows {
			fmt.Fprintf(&sb, "\n… and %d more groups.\n", len(members)-maxRows)
			break
		}
		resolved := ""
		if !m.Resolved.IsZero() {
			resolved = m.Resolved.UTC().Format("2006-01-02 15:04:05 MST")
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %s |\n", strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(m.Title), m.Firing,
			m.Since.UTC().Format("2006-01-02 15:04:05 MST"), resolved)
	}
	return sb.String()
}
