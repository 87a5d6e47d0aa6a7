package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// rollupFile is the roll-up's durable local state.
type rollupFile struct {
	Repo    string          `json:"repo"`
	Number  int             `json:"number"`
	Members []marker.Member `json:"members"`
	// Alertmanager and Receiver are the roll-up's links (render.RollupLinks).
	Alertmanager string `json:"alertmanager,omitempty"`
	Receiver     string `json:"receiver,omitempty"`
}

func (b *Bridge) rollupDir() string { return filepath.Join(b.journal.Dir(), "rollups") }

func (b *Bridge) rollupPath(repo string) string {
	h := sha256.Sum256([]byte(repo))
	return filepath.Join(b.rollupDir(), hex.EncodeToString(h[:8])+".json")
}

// saveRollup writes the roll-up's local file. Called with r.mu held.
func (b *Bridge) saveRollup(r *rollup) error {
	data, err := json.Marshal(rollupFile{Repo: r.repo, Number: r.number, Members: r.sortedMembers(),
		Alertmanager: r.links.Alertmanager, Receiver: r.links.Receiver})
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
	adopted := 0
	if cur := b.rollups[repo]; cur != nil {
		adopted = cur.number
	}
	if !decide.AdoptRollup(is.State == ghclient.StateOpen, is.Number, adopted) {
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
// key has an issue of its own that wins (decide.MemberInRollup).
func (b *Bridge) trackMemberLocked(repo string, m marker.Member) {
	if !decide.MemberInRollup(b.byKey[m.Key].cached(), m.Since) {
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
		return fmt.Errorf("list roll-up state: %w", err)
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
		r := &rollup{repo: rf.Repo, number: rf.Number, members: map[string]*marker.Member{}, version: 1,
			links: render.RollupLinks{Alertmanager: rf.Alertmanager, Receiver: rf.Receiver}}
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
