package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

func TestRollupMember(t *testing.T) {
	earlier := t0.Add(-time.Hour)
	tests := []struct {
		desc   string
		prev   *marker.Member
		title  string
		firing int
		want   marker.Member
	}{
		{
			desc:  "a group joins firing: it starts now",
			title: "GPU lost on gpu-7", firing: 2,
			want: marker.Member{Key: "k", Title: "GPU lost on gpu-7", Firing: 2, Since: t0},
		},
		{
			desc:  "a group joins already resolved: it starts and resolves now",
			title: "t", firing: 0,
			want: marker.Member{Key: "k", Title: "t", Since: t0, Resolved: t0},
		},
		{
			desc:  "a member resolves",
			prev:  &marker.Member{Key: "k", Title: "t", Firing: 1, Since: earlier},
			title: "t", firing: 0,
			want: marker.Member{Key: "k", Title: "t", Since: earlier, Resolved: t0},
		},
		{
			desc:  "a repeat of the resolve keeps the first resolve time",
			prev:  &marker.Member{Key: "k", Title: "t", Since: earlier, Resolved: earlier.Add(time.Minute)},
			title: "t", firing: 0,
			want: marker.Member{Key: "k", Title: "t", Since: earlier, Resolved: earlier.Add(time.Minute)},
		},
		{
			desc:  "a resolved member fires again: no longer resolved, same start",
			prev:  &marker.Member{Key: "k", Title: "t", Since: earlier, Resolved: earlier.Add(time.Minute)},
			title: "t", firing: 3,
			want: marker.Member{Key: "k", Title: "t", Firing: 3, Since: earlier},
		},
		{
			desc:  "the title follows the group",
			prev:  &marker.Member{Key: "k", Title: "old title", Firing: 1, Since: earlier},
			title: "new title", firing: 1,
			want: marker.Member{Key: "k", Title: "new title", Firing: 1, Since: earlier},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var before marker.Member
			if tc.prev != nil {
				before = *tc.prev
			}
			assert.Equal(t, tc.want, RollupMember(tc.prev, "k", tc.title, tc.firing, t0))
			if tc.prev != nil {
				assert.Equal(t, before, *tc.prev, "the previous member is not changed in place")
			}
		})
	}
}

func TestPlanRollupSync(t *testing.T) {
	firingM := marker.Member{Key: "a", Firing: 1, Since: t0}
	resolvedM := marker.Member{Key: "b", Since: t0, Resolved: t0}
	tests := []struct {
		desc      string
		rollup    Rollup
		autoClose bool
		want      RollupSync
	}{
		{
			desc:   "GitHub has the latest version: nothing to send",
			rollup: Rollup{Exists: true, Version: 3, Synced: 3, Members: []marker.Member{firingM}},
			want:   RollupSync{},
		},
		{
			desc:   "no members: nothing to show",
			rollup: Rollup{Version: 1},
			want:   RollupSync{},
		},
		{
			desc:      "a finished roll-up is never written again",
			rollup:    Rollup{Exists: true, Version: 4, Synced: 3, Finished: true, Members: []marker.Member{resolvedM}},
			autoClose: true,
			want:      RollupSync{},
		},
		{
			desc:      "a new roll-up is filed",
			rollup:    Rollup{Version: 1, Members: []marker.Member{firingM, resolvedM}},
			autoClose: true,
			want:      RollupSync{Send: true, Create: true, Firing: 1},
		},
		{
			desc:      "a new roll-up with every member resolved is filed, and closed by the next sync",
			rollup:    Rollup{Version: 1, Members: []marker.Member{resolvedM}},
			autoClose: true,
			want:      RollupSync{Send: true, Create: true, CloseNext: true},
		},
		{
			desc:      "a change with members still firing edits the table",
			rollup:    Rollup{Exists: true, Version: 2, Synced: 1, Members: []marker.Member{firingM, resolvedM}},
			autoClose: true,
			want:      RollupSync{Send: true, Firing: 1},
		},
		{
			desc:      "every member resolved closes it with the edit",
			rollup:    Rollup{Exists: true, Version: 2, Synced: 1, Members: []marker.Member{resolvedM}},
			autoClose: true,
			want:      RollupSync{Send: true, Close: true},
		},
		{
			desc:   "every member resolved with auto-close off only edits the table",
			rollup: Rollup{Exists: true, Version: 2, Synced: 1, Members: []marker.Member{resolvedM}},
			want:   RollupSync{Send: true},
		},
		{
			desc:   "a new roll-up all resolved with auto-close off is never closed",
			rollup: Rollup{Version: 1, Members: []marker.Member{resolvedM}},
			want:   RollupSync{Send: true, Create: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, PlanRollupSync(tc.rollup, tc.autoClose))
		})
	}
}

func TestAfterRollupSync(t *testing.T) {
	tests := []struct {
		desc string
		sent RollupSync
		// version is the local version the sync showed; now the roll-up
		// when the call returned.
		version int
		now     Rollup
		want    RollupSynced
	}{
		{
			desc:    "an edit with nothing changed meanwhile: GitHub is current",
			sent:    RollupSync{Send: true, Firing: 1},
			version: 2, now: Rollup{Version: 2, Synced: 1},
			want: RollupSynced{Synced: 2},
		},
		{
			desc:    "a change arrived during the call: sync again, GitHub is not current",
			sent:    RollupSync{Send: true, Firing: 1},
			version: 2, now: Rollup{Version: 3, Synced: 1},
			want: RollupSynced{Synced: 1, Again: true},
		},
		{
			desc:    "the close went through with nothing changed: finished",
			sent:    RollupSync{Send: true, Close: true},
			version: 5, now: Rollup{Version: 5, Synced: 4},
			want: RollupSynced{Synced: 5, Finished: true},
		},
		{
			desc:    "a change arrived during the close: not finished, the change is synced next",
			sent:    RollupSync{Send: true, Close: true},
			version: 5, now: Rollup{Version: 6, Synced: 4},
			want: RollupSynced{Synced: 4, Again: true},
		},
		{
			desc:    "filed all resolved: the close is still due",
			sent:    RollupSync{Send: true, Create: true, CloseNext: true},
			version: 1, now: Rollup{Version: 1},
			want: RollupSynced{Synced: 0, Again: true},
		},
		{
			desc:    "filed with members firing: GitHub is current",
			sent:    RollupSync{Send: true, Create: true, Firing: 2},
			version: 1, now: Rollup{Version: 1},
			want: RollupSynced{Synced: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := AfterRollupSync(tc.sent, tc.version, tc.now)
			assert.Equal(t, tc.want, got)
			// Whatever it decides, a roll-up that is not current is synced again.
			if got.Synced != tc.now.Version && !got.Finished {
				assert.True(t, got.Again, "GitHub lacks version %d: another sync is due", tc.now.Version)
			}
		})
	}
}

// TestRollupCloseTakesTwoSyncsWhenFiledResolved walks the decisions through a
// roll-up filed with every member resolved: filed first, closed by the next
// sync, then never written again.
func TestRollupCloseTakesTwoSyncsWhenFiledResolved(t *testing.T) {
	r := Rollup{Version: 1, Members: []marker.Member{{Key: "a", Since: t0, Resolved: t0}}}
	first := PlanRollupSync(r, true)
	assert.True(t, first.Create)
	assert.False(t, first.Close)
	after := AfterRollupSync(first, r.Version, r)
	r.Exists, r.Synced = true, after.Synced

	second := PlanRollupSync(r, true)
	assert.Equal(t, RollupSync{Send: true, Close: true}, second)
	after = AfterRollupSync(second, r.Version, r)
	assert.True(t, after.Finished)
	r.Synced, r.Finished = after.Synced, after.Finished

	assert.Equal(t, RollupSync{}, PlanRollupSync(r, true))
}
