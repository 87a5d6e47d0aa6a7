package bridge

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// BUG: toRollup holds b.mu and then takes r.mu (r.isClosed, rollup.go:168),
// while syncRollup's closing path holds r.mu and then takes b.mu
// (rollup.go:295 and :320). A worker recording a group in the roll-up while
// the roll-up loop closes it deadlocks both; every other worker then blocks
// on b.mu in get/put, so webhooks are journaled and answered 200 and never
// applied.
func TestBugRollupLockOrderDeadlock(t *testing.T) {
	edited := make(chan struct{}, 1)
	gh := &memGitHub{onEdit: func(string, int) { edited <- struct{}{} }}
	b, _ := newTestBridge(t, internalConfig, gh)
	r := &rollup{repo: cacheRepo, number: 5, version: 1, members: map[string]*marker.Member{
		"old": {Key: "old", Title: "old", Since: at(0), Resolved: at(1)},
	}}
	b.rollups[cacheRepo] = r
	require.NoError(t, b.saveRollup(r))

	var wg sync.WaitGroup
	b.mu.Lock()
	// A worker records a new group: it waits for b.mu first.
	wg.Go(func() {
		_ = b.toRollup(t.Context(), b.log, cacheRepo, "new", &render.Issue{Title: "new group"},
			decide.Event{Alerts: []decide.Alert{{Fingerprint: "fp", Firing: true}}, Now: at(2)})
	})
	time.Sleep(20 * time.Millisecond) // the worker is queued on b.mu
	// The roll-up loop closes the roll-up: every member resolved.
	wg.Go(func() { _ = b.syncRollup(t.Context(), r) })
	<-edited
	require.Eventually(t, func() bool {
		if r.mu.TryLock() {
			r.mu.Unlock()
			return false
		}
		return true // syncRollup holds r.mu on its way to b.mu
	}, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // syncRollup is queued on b.mu, behind the worker
	b.mu.Unlock()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("toRollup and syncRollup deadlocked")
	}
}

// BUG: loadRollups (rollup.go:137) and adoptRollupLocked (rollup.go:96) put a
// member into the roll-up only when the key has no cache entry. A member that
// joined the roll-up because its old issue was closed beyond the reopen window
// (decide.refired → Create → storm guard) has that old closed issue in the
// cache after a restart, so its next transitions go to the closed issue:
// the resolve is a no-op (decide: not firing before, not firing now), the
// roll-up member stays firing and the roll-up never closes.
func TestBugLoadRollupsLeavesMemberWithOldIssueOutOfTheRollup(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	// Rebuild found the key's old issue, closed and resolved long ago.
	b.byKey["k"] = &tracked{repo: cacheRepo, number: 3, open: false, stateReason: ghclient.ReasonCompleted,
		createdAt: at(-300), closedAt: at(-200)}
	// The local roll-up state says the key fired again in a storm, after it.
	r := &rollup{repo: cacheRepo, members: map[string]*marker.Member{"k": {Key: "k", Title: "k", Firing: 1, Since: at(0)}}}
	require.NoError(t, b.saveRollup(r))

	require.NoError(t, b.loadRollups())
	require.NotNil(t, b.byKey["k"])
	assert.True(t, b.byKey["k"].inRollup, "the key's latest state is its roll-up membership, not its old closed issue")
}
