package bridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

func TestRollupBody(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	tableRows := func(body string) []string {
		var rows []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| Alert group |") {
				rows = append(rows, l)
			}
		}
		return rows
	}
	members := func(n int) []marker.Member {
		out := make([]marker.Member, n)
		for i := range out {
			out[i] = marker.Member{Key: fmt.Sprint("k", i), Title: fmt.Sprintf("group %03d", i), Firing: i % 2, Since: at(i)}
		}
		return out
	}

	tests := []struct {
		desc     string
		members  []marker.Member
		wantRows int
		wantMore string
		contains []string
	}{
		{desc: "no members", members: nil, wantRows: 0, contains: []string{"**Firing: 0 · Resolved: 0**"}},
		{desc: "a few members", members: members(3), wantRows: 3, contains: []string{
			"These 3 alert groups", "**Firing: 1 · Resolved: 2**", "| group 001 | 1 | 2026-11-21 09:01:00 UTC |  |",
		}},
		{desc: "exactly the row cap", members: members(200), wantRows: 200},
		{desc: "one past the cap", members: members(201), wantRows: 200, wantMore: "… and 1 more groups."},
		{desc: "far past the cap", members: members(250), wantRows: 200, wantMore: "… and 50 more groups.", contains: []string{
			"These 250 alert groups", "**Firing: 125 · Resolved: 125**",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body := b.rollupBody(cacheRepo, tc.members)
			assert.Len(t, tableRows(body), tc.wantRows)
			if tc.wantMore == "" {
				assert.NotContains(t, body, "more groups")
			} else {
				assert.Contains(t, body, tc.wantMore)
			}
			assert.Contains(t, body, "at most 2 new issues per 10m0s in this repository")
			for _, s := range tc.contains {
				assert.Contains(t, body, s)
			}
		})
	}
}

func TestRollupBodyEscapesTitles(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	body := b.rollupBody(cacheRepo, []marker.Member{{
		Key: "k", Title: "disk | full\non node|a", Firing: 1, Since: at(0), Resolved: at(5),
	}})
	assert.Contains(t, body, `| disk \| full on node\|a | 1 | 2026-11-21 09:00:00 UTC | 2026-11-21 09:05:00 UTC |`)
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "| disk") {
			cells := strings.Split(strings.ReplaceAll(l, `\|`, ""), "|")
			assert.Len(t, cells, 6, "four cells between the outer pipes: %q", l)
		}
	}
}

func TestRollupBodyRoundTripsThroughTheMarker(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	ms := []marker.Member{{Key: "k1", Title: "t1", Firing: 2, Since: at(0)}, {Key: "k2", Title: "t2", Since: at(1), Resolved: at(2)}}
	body, err := marker.Append(b.rollupBody(cacheRepo, ms), marker.RollupKey, marker.State{Members: ms})
	require.NoError(t, err)
	key, st, ok, err := marker.Parse(body)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, marker.RollupKey, key)
	require.Len(t, st.Members, 2)
	assert.Equal(t, "k1", st.Members[0].Key)
	assert.True(t, st.Members[1].Resolved.Equal(at(2)))
}

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

	require.NoError(t, b.syncRollup(t.Context(), r))
	assert.True(t, r.closed)
	require.Len(t, gh.edits, 1)
	assert.Equal(t, ghclient.StateClosed, *gh.edits[0].State)
	assert.Nil(t, b.rollups[cacheRepo], "forgotten: the next storm files a new roll-up")
	assert.Nil(t, b.byKey["m1"], "its members are forgotten too")
	assert.NoFileExists(t, b.rollupPath(cacheRepo))
}
