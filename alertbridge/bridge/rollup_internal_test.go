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
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

func TestRollupSortedMembers(t *testing.T) {
	r := &rollup{members: map[string]*marker.Member{
		"b": {Key: "b", Since: at(1)},
		"a": {Key: "a", Since: at(1)},
		"c": {Key: "c", Since: at(0)},
	}}
	var keys []string
	for _, m := range r.sortedMembers() {
		keys = append(keys, m.Key)
	}
	assert.Equal(t, []string{"c", "a", "b"}, keys, "by Since, then key: the body's order is stable")
}

func TestLoadRollupsRestoresLocalState(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	r := &rollup{repo: cacheRepo, number: 0, members: map[string]*marker.Member{
		"m1": {Key: "m1", Title: "one", Firing: 3, Since: at(0)},
	}}
	require.NoError(t, b.saveRollup(r))
	// The roll-up was created on GitHub just before a crash: rebuild adopted it.
	b.rollups[cacheRepo] = &rollup{repo: cacheRepo, number: 77, members: map[string]*marker.Member{}}

	require.NoError(t, b.loadRollups())
	got := b.rollups[cacheRepo]
	require.NotNil(t, got)
	assert.Equal(t, 77, got.number, "the number GitHub has is kept")
	assert.Equal(t, 1, got.version, "scheduled for a sync")
	require.Contains(t, got.members, "m1")
	require.NotNil(t, b.byKey["m1"])
	assert.True(t, b.byKey["m1"].inRollup)
	assert.Equal(t, []string{"rollup:3"}, b.byKey["m1"].state.Firing)
	select {
	case <-b.rollupKick:
	default:
		t.Error("loading a roll-up kicks the sync")
	}
}

// A key joins a roll-up when its group fires again beyond the reopen window
// while the storm guard is full, so after a restart the cache also holds the
// key's old closed issue. The roll-up membership, which is newer, must win:
// on the old issue the group's resolve would change nothing (it was not
// firing there), the member would stay firing and the roll-up never close.
func TestLoadRollupsPrefersMembershipToAnOlderClosedIssue(t *testing.T) {
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

func TestSyncRollupCreatesThenClosesWhenAllResolved(t *testing.T) {
	gh := &memGitHub{}
	b, _ := newTestBridge(t, internalConfig, gh)
	r := &rollup{repo: cacheRepo, version: 1, members: map[string]*marker.Member{
		"m1": {Key: "m1", Title: "one", Since: at(0), Resolved: at(1)},
	}}
	b.rollups[cacheRepo] = r
	b.byKey["m1"] = &tracked{repo: cacheRepo, inRollup: true}
	require.NoError(t, b.saveRollup(r))

	require.NoError(t, b.syncRollup(t.Context(), r))
	assert.Equal(t, 1, r.number, "created")
	assert.False(t, r.closed, "a brand new roll-up is not closed in the same sync")
	assert.NotEqual(t, r.version, r.synced, "a sync to close it is still due")
	require.Len(t, gh.created, 1)
	assert.Equal(t, render.RollupLabels("kubemedic-alert"), gh.created[0].Labels)
	assert.Contains(t, gh.created[0].Body, "**Firing: 0 · Resolved: 1**")

	require.NoError(t, b.syncRollup(t.Context(), r))
	assert.True(t, r.closed)
	require.Len(t, gh.edits, 1)
	assert.Equal(t, ghclient.StateClosed, *gh.edits[0].State)
	assert.Equal(t, ghclient.ReasonCompleted, *gh.edits[0].StateReason)
	assert.Nil(t, b.rollups[cacheRepo], "forgotten: the next storm files a new roll-up")
	assert.Nil(t, b.byKey["m1"], "its members are forgotten too")
	assert.NoFileExists(t, b.rollupPath(cacheRepo))

	require.NoError(t, b.syncRollup(t.Context(), r))
	assert.Len(t, gh.edits, 1, "a finished roll-up is never written again")
}

// A group that joins while the closing edit is on its way to GitHub keeps
// the roll-up: it is not finished, and the next sync sends the new member.
func TestSyncRollupChangeDuringTheCallIsSyncedNext(t *testing.T) {
	gh := &memGitHub{}
	b, _ := newTestBridge(t, internalConfig, gh)
	r := &rollup{repo: cacheRepo, number: 5, version: 1, members: map[string]*marker.Member{
		"old": {Key: "old", Title: "old", Since: at(0), Resolved: at(1)},
	}}
	b.rollups[cacheRepo] = r
	require.NoError(t, b.saveRollup(r))
	joined := false
	gh.onEdit = func(string, int) {
		if joined {
			return
		}
		joined = true
		// A worker records a new firing group while the edit is in flight.
		require.NoError(t, b.toRollup(t.Context(), b.log, cacheRepo, "new", &payload.Message{}, &render.Issue{Title: "new group"},
			decide.Event{Alerts: []decide.Alert{{Fingerprint: "fp", Firing: true}}, Now: at(2)}))
		<-b.rollupKick // toRollup's own kick: only the sync's is seen below
	}

	require.NoError(t, b.syncRollup(t.Context(), r))
	require.Len(t, gh.edits, 1)
	assert.Equal(t, ghclient.StateClosed, *gh.edits[0].State, "the sync closed what it saw: every member resolved")
	assert.False(t, r.closed, "not finished: a member joined during the call")
	assert.Same(t, r, b.rollups[cacheRepo])
	assert.True(t, b.byKey["new"].inRollup)
	select {
	case <-b.rollupKick:
	default:
		t.Fatal("another sync is due")
	}

	require.NoError(t, b.syncRollup(t.Context(), r))
	require.Len(t, gh.edits, 2)
	assert.Nil(t, gh.edits[1].State, "a member fires: the roll-up is not closed, and never reopened")
	assert.Contains(t, *gh.edits[1].Body, "new group")
	assert.Equal(t, r.version, r.synced, "GitHub has the latest version")
}

// toRollup (a worker recording a group) and the roll-up loop closing the
// same roll-up must never deadlock: neither holds r.mu while it waits for
// b.mu. The test holds b.mu until both goroutines are at it, then checks
// that the closing sync waits without r.mu, and that both finish.
func TestRollupCloseAndNewMemberDoNotDeadlock(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, &memGitHub{})
	r := &rollup{repo: cacheRepo, number: 5, version: 1, members: map[string]*marker.Member{
		"old": {Key: "old", Title: "old", Since: at(0), Resolved: at(1)},
	}}
	b.rollups[cacheRepo] = r
	require.NoError(t, b.saveRollup(r))
	sites := make(chan string, 16)
	b.testHookBeforeLock = func(site string) { sites <- site }

	var wg sync.WaitGroup
	var recordErr, syncErr error
	b.mu.Lock()
	// A worker records a new group: it waits for b.mu first.
	wg.Go(func() {
		recordErr = b.toRollup(t.Context(), b.log, cacheRepo, "new", &payload.Message{}, &render.Issue{Title: "new group"},
			decide.Event{Alerts: []decide.Alert{{Fingerprint: "fp", Firing: true}}, Now: at(2)})
	})
	require.Equal(t, lockSiteToRollup, <-sites)
	// The roll-up loop closes the roll-up (every member resolved) and then
	// waits for b.mu to forget it.
	wg.Go(func() { syncErr = b.syncRollup(t.Context(), r) })
	require.Equal(t, lockSiteForgetRollup, <-sites)
	require.True(t, r.mu.TryLock(), "the closing sync waits for b.mu while holding r.mu: a worker holding b.mu would deadlock it")
	r.mu.Unlock()
	b.mu.Unlock()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("toRollup and syncRollup deadlocked")
	}
	require.NoError(t, recordErr)
	require.NoError(t, syncErr)
	assert.True(t, r.closed, "the old roll-up is finished")
	next := b.rollups[cacheRepo]
	require.NotNil(t, next, "the new group is in a roll-up")
	assert.NotSame(t, r, next, "a new roll-up: nothing is written to the finished one")
	assert.Contains(t, next.members, "new")
	assert.NotContains(t, next.members, "old")
	assert.True(t, b.byKey["new"].inRollup)
}
