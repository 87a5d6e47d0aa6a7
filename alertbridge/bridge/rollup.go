package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// rollup is a repository's roll-up issue: the alert groups the storm guard
// held back. Its members are written to a local file (durably, before the
// journal entry is done) and gathered into one GitHub edit every RollupDelay,
// so a storm of hundreds of groups costs a handful of calls, not hundreds.
//
// Lock order: b.mu and r.mu are never held together.
type rollup struct {
	// mu guards every field but repo.
	mu      sync.Mutex
	repo    string
	number  int // 0 until the issue exists on GitHub
	members map[string]*marker.Member
	// version counts local changes; synced is the version last on GitHub.
	version, synced int
	// closed is set once GitHub has the roll-up closed with every member
	// resolved: the roll-up is finished and the next storm gets a new one.
	closed bool
	// links is where the members' alerts are seen: the latest member's
	// Alertmanager and receiver.
	links render.RollupLinks
}

// sortedMembers returns the members in the body's order: by Since, then
// key. Called with r.mu held.
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

// view is the roll-up as the decisions see it. Called with r.mu held.
func (r *rollup) view() decide.Rollup {
	return decide.Rollup{Exists: r.number != 0, Version: r.version, Synced: r.synced, Finished: r.closed,
		Members: r.sortedMembers()}
}

// lockBridge takes b.mu for the roll-up code, telling the test hook first.
func (b *Bridge) lockBridge(site string) {
	if b.testHookBeforeLock != nil {
		b.testHookBeforeLock(site)
	}
	b.mu.Lock()
}

// Sites of lockBridge, for the test hook.
const (
	lockSiteToRollup     = "toRollup"
	lockSiteForgetRollup = "forgetRollup"
)

// inOpenRollup reports whether key is a member of repo's roll-up and the
// roll-up is not finished: its transitions then go to the roll-up.
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

// lockOpenRollup returns repo's roll-up that is not finished, with r.mu
// held, creating it when there is none. A roll-up finished between the
// lookup and r.mu is dropped and the lookup repeated.
func (b *Bridge) lockOpenRollup(repo string) *rollup {
	for {
		b.lockBridge(lockSiteToRollup)
		r := b.rollups[repo]
		if r == nil {
			r = &rollup{repo: repo, members: map[string]*marker.Member{}}
			b.rollups[repo] = r
		}
		b.mu.Unlock()
		r.mu.Lock()
		if !r.closed {
			return r
		}
		r.mu.Unlock()
		b.mu.Lock()
		if b.rollups[repo] == r {
			delete(b.rollups, repo)
		}
		b.mu.Unlock()
	}
}

// toRollup records a group's state in its repository's roll-up.
func (b *Bridge) toRollup(_ context.Context, log *slog.Logger, repo, key string, msg *payload.Message, iss *render.Issue, ev decide.Event) error {
	firing := ev.Firing()
	r := b.lockOpenRollup(repo)
	m := decide.RollupMember(r.members[key], key, iss.Title, len(firing), ev.Now)
	m.Alertname, m.Node = msg.CommonLabels["alertname"], msg.CommonLabels["node"]
	r.members[key] = &m
	if msg.ExternalURL != "" {
		r.links = render.RollupLinks{Alertmanager: msg.ExternalURL, Receiver: msg.Receiver}
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

// syncRollup sends the roll-up's latest version to GitHub: it reads the
// roll-up, asks decide what to send, renders the issue and sends it, then
// records what GitHub has.
func (b *Bridge) syncRollup(ctx context.Context, r *rollup) error {
	r.mu.Lock()
	st, number, links := r.view(), r.number, r.links
	r.mu.Unlock()
	plan := decide.PlanRollupSync(st, b.cfg.AutoClose)
	if !plan.Send {
		return nil
	}
	body, err := marker.Append(render.RollupBody(r.repo, b.cfg.StormGuard, st.Members, links), marker.RollupKey,
		marker.State{Members: st.Members})
	if err != nil {
		return fmt.Errorf("roll-up issue of %s: %w", r.repo, err)
	}
	if plan.Create {
		is, err := b.gh.CreateIssue(ctx, r.repo, ghclient.NewIssue{
			Title:  render.RollupTitle(r.repo, st.Members[0].Since),
			Body:   body,
			Labels: render.RollupLabels(b.cfg.IdentityLabel),
			Find: b.findFiled(r.repo, func(key string, _ marker.State, is ghclient.Issue) bool {
				return key == marker.RollupKey && is.State == ghclient.StateOpen
			}),
		})
		if err != nil {
			return fmt.Errorf("create roll-up issue in %s: %w", r.repo, err)
		}
		number = is.Number
		b.log.Warn("Filed roll-up issue for an alert storm", "repo", r.repo, "issue", number, "groups", len(st.Members))
	} else {
		edit := ghclient.Edit{Body: &body}
		if plan.Close {
			state, reason := ghclient.StateClosed, ghclient.ReasonCompleted
			edit.State, edit.StateReason = &state, &reason
		}
		if _, err := b.gh.EditIssue(ctx, r.repo, number, edit); err != nil {
			return fmt.Errorf("edit roll-up issue %s#%d: %w", r.repo, number, err)
		}
	}
	return b.recordRollupSync(r, plan, st.Version, number)
}

// recordRollupSync records a sync GitHub accepted: the issue's number, the
// version it has, and, once it is closed with every member resolved,
// forgets the roll-up and its members so the next storm files a new one.
func (b *Bridge) recordRollupSync(r *rollup, plan decide.RollupSync, sent, number int) error {
	r.mu.Lock()
	if r.number == 0 {
		r.number = number
		if err := b.saveRollup(r); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	after := decide.AfterRollupSync(plan, sent, decide.Rollup{Exists: true, Version: r.version, Synced: r.synced})
	r.synced, r.closed = after.Synced, after.Finished
	var keys []string
	var err error
	if after.Finished {
		for key := range r.members {
			keys = append(keys, key)
		}
		err = os.Remove(b.rollupPath(r.repo))
	}
	r.mu.Unlock()
	if after.Again {
		b.kickRollups()
	}
	if !after.Finished {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove roll-up state: %w", err)
	}
	b.lockBridge(lockSiteForgetRollup)
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
