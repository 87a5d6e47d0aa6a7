package bridge

import (
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

const cacheRepo = "acme/gpu-oncall"

var t0 = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

// ghIssue is an issue as ListIssues returns it, with the bridge's marker.
type ghIssue struct {
	number           int
	key              string
	open             bool
	reason           ghclient.StateReason
	created, updated time.Time
	labels           []string
	st               marker.State
	body             string // overrides the marker when set
}

func (g ghIssue) issue(t *testing.T) ghclient.Issue {
	t.Helper()
	body := g.body
	if body == "" {
		var err error
		body, err = marker.Append("Alert group body", g.key, g.st)
		require.NoError(t, err)
	}
	state := ghclient.StateClosed
	if g.open {
		state = ghclient.StateOpen
	}
	return ghclient.Issue{Repo: cacheRepo, Number: g.number, State: state, StateReason: g.reason, Body: body,
		CreatedAt: g.created, UpdatedAt: g.updated, Labels: g.labels}
}

// view is what a test checks of a cache entry.
type view struct {
	number   int
	open     bool
	reason   ghclient.StateReason
	labels   []string
	firing   []string
	applied  string
	inRollup bool
}

func viewOf(t *tracked) view {
	return view{number: t.number, open: t.open, reason: t.stateReason, labels: t.labels,
		firing: t.state.Firing, applied: t.state.Applied, inRollup: t.inRollup}
}

func TestAbsorb(t *testing.T) {
	own := &tracked{repo: cacheRepo, number: 7, open: true, createdAt: at(0), updatedAt: at(10), wroteAt: at(10),
		labels: []string{"kubemedic-alert"}, state: marker.State{Firing: []string{"fp1"}, Applied: "e-own"}}
	rollupMember := &tracked{repo: cacheRepo, inRollup: true, state: marker.State{Firing: []string{"fp1"}}}

	tests := []struct {
		desc     string
		cache    map[string]*tracked
		issues   []ghIssue
		rebuild  bool
		listedAt time.Time
		want     map[string]view
		wantN    int
		// wantCreated are the storm guard's creation times after absorb.
		wantCreated []time.Time
		// wantRollup is the number of the adopted roll-up, 0 for none.
		wantRollup  int
		wantMembers []string
		wantLog     string
	}{
		{
			desc:     "empty cache takes the listed issue",
			issues:   []ghIssue{{number: 7, key: "k1", open: true, created: at(0), updated: at(1), st: marker.State{Firing: []string{"fp1"}, Applied: "e1"}}},
			rebuild:  true,
			listedAt: at(2),
			want:     map[string]view{"k1": {number: 7, open: true, firing: []string{"fp1"}, applied: "e1"}},
			wantN:    1, wantCreated: []time.Time{at(0)},
		},
		{
			desc: "newer issue of a key wins when listed first",
			issues: []ghIssue{
				{number: 9, key: "k1", open: true, created: at(60), updated: at(61)},
				{number: 7, key: "k1", created: at(0), updated: at(5)},
			},
			rebuild: true, listedAt: at(70),
			want:  map[string]view{"k1": {number: 9, open: true}},
			wantN: 1, wantCreated: []time.Time{at(60), at(0)},
		},
		{
			desc: "newer issue of a key wins when listed last",
			issues: []ghIssue{
				{number: 7, key: "k1", created: at(0), updated: at(5)},
				{number: 9, key: "k1", open: true, created: at(60), updated: at(61)},
			},
			rebuild: true, listedAt: at(70),
			want:  map[string]view{"k1": {number: 9, open: true}},
			wantN: 1, wantCreated: []time.Time{at(0), at(60)},
		},
		{
			desc:     "a refresh that lists a newer issue of a tracked key takes it",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 12, key: "k1", open: true, created: at(30), updated: at(30)}},
			listedAt: at(31),
			want:     map[string]view{"k1": {number: 12, open: true}},
		},
		{
			desc:     "an older issue of a tracked key is ignored",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 3, key: "k1", open: true, created: at(-60), updated: at(20)}},
			listedAt: at(21),
			want:     map[string]view{"k1": viewOf(own)},
		},
		{
			desc:     "same issue with an older updated_at is ignored",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 7, key: "k1", created: at(0), updated: at(9), reason: ghclient.ReasonNotPlanned}},
			listedAt: at(30),
			want:     map[string]view{"k1": viewOf(own)},
		},
		{
			desc:  "a refresh takes what people changed and keeps the bridge's own state",
			cache: map[string]*tracked{"k1": own},
			issues: []ghIssue{{number: 7, key: "k1", created: at(0), updated: at(20), reason: ghclient.ReasonNotPlanned,
				labels: []string{"kubemedic-alert", "kubemedic-ignore"}, st: marker.State{Firing: []string{"stale"}, Applied: "e-old"}}},
			listedAt: at(20),
			want: map[string]view{"k1": {number: 7, open: false, reason: ghclient.ReasonNotPlanned,
				labels: []string{"kubemedic-alert", "kubemedic-ignore"}, firing: []string{"fp1"}, applied: "e-own"}},
		},
		{
			desc:     "same updated_at is not older",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 7, key: "k1", created: at(0), updated: at(10), reason: ghclient.ReasonCompleted}},
			listedAt: at(11),
			want: map[string]view{"k1": {number: 7, open: false, reason: ghclient.ReasonCompleted, labels: nil,
				firing: []string{"fp1"}, applied: "e-own"}},
		},
		{
			desc:     "a refresh listed before the bridge's own write does not override it",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 7, key: "k1", created: at(0), updated: at(11), reason: ghclient.ReasonCompleted}},
			listedAt: at(9),
			want:     map[string]view{"k1": viewOf(own)},
		},
		{
			desc:     "a refresh listed at the very time of the bridge's write does not override it",
			cache:    map[string]*tracked{"k1": own},
			issues:   []ghIssue{{number: 7, key: "k1", created: at(0), updated: at(11), reason: ghclient.ReasonCompleted}},
			listedAt: at(10),
			want:     map[string]view{"k1": viewOf(own)},
		},
		{
			desc:  "a rebuild replaces the whole entry, state included",
			cache: map[string]*tracked{"k1": {repo: cacheRepo, number: 7, open: true, createdAt: at(0), updatedAt: at(10)}},
			issues: []ghIssue{{number: 7, key: "k1", open: true, created: at(0), updated: at(20),
				st: marker.State{Firing: []string{"a", "b"}, Applied: "e9"}}},
			rebuild: true, listedAt: at(21),
			want:        map[string]view{"k1": {number: 7, open: true, firing: []string{"a", "b"}, applied: "e9"}},
			wantCreated: []time.Time{at(0)},
		},
		{
			desc: "a rebuild collects creation times of the bridge's issues but not of roll-ups",
			issues: []ghIssue{
				{number: 1, key: "k1", created: at(1), updated: at(1)},
				{number: 2, key: "k2", open: true, created: at(2), updated: at(2)},
				{number: 3, key: marker.RollupKey, open: true, created: at(3), updated: at(3)},
				{number: 4, key: "k1", created: at(4), updated: at(4)},
				{number: 5, body: "A human's issue with the label and no marker", created: at(5), updated: at(5)},
			},
			rebuild: true, listedAt: at(10),
			want:        map[string]view{"k1": {number: 4}, "k2": {number: 2, open: true}},
			wantN:       2,
			wantCreated: []time.Time{at(1), at(2), at(4)},
			wantRollup:  3,
		},
		{
			desc: "a refresh collects no creation times",
			issues: []ghIssue{
				{number: 1, key: "k1", open: true, created: at(1), updated: at(1)},
			},
			listedAt: at(10),
			want:     map[string]view{"k1": {number: 1, open: true}},
			wantN:    1,
		},
		{
			desc: "damaged markers are skipped",
			issues: []ghIssue{
				{number: 1, body: "x\n<!-- kubemedic-alertbridge key=k1 state=bm90LWd6aXA -->\n", created: at(1), updated: at(1)},
				{number: 2, body: "<!-- kubemedic-alertbridge key=k2 state= -->\n<!-- kubemedic-alertbridge key=k2 state= -->", created: at(1), updated: at(1)},
				{number: 3, key: "k3", open: true, created: at(1), updated: at(1)},
			},
			rebuild: true, listedAt: at(10),
			want:        map[string]view{"k3": {number: 3, open: true}},
			wantN:       1,
			wantCreated: []time.Time{at(1)},
			wantLog:     "Ignoring issue with a damaged marker",
		},
		{
			desc:     "issues without a marker are ignored",
			issues:   []ghIssue{{number: 1, body: "Filed by a human, with the label", open: true, created: at(1), updated: at(1)}},
			rebuild:  true,
			listedAt: at(10),
			want:     map[string]view{},
		},
		{
			desc: "an open roll-up is adopted with its members",
			issues: []ghIssue{{number: 30, key: marker.RollupKey, open: true, created: at(1), updated: at(1),
				st: marker.State{Members: []marker.Member{{Key: "m1", Firing: 2, Since: at(1)}, {Key: "m2", Since: at(1), Resolved: at(2)}}}}},
			rebuild: true, listedAt: at(10),
			want: map[string]view{
				"m1": {inRollup: true, firing: []string{"rollup:2"}},
				"m2": {inRollup: true},
			},
			wantRollup: 30, wantMembers: []string{"m1", "m2"},
		},
		{
			desc: "a closed roll-up is not adopted",
			issues: []ghIssue{{number: 30, key: marker.RollupKey, created: at(1), updated: at(1), reason: ghclient.ReasonCompleted,
				st: marker.State{Members: []marker.Member{{Key: "m1", Since: at(1)}}}}},
			rebuild: true, listedAt: at(10),
			want: map[string]view{},
		},
		{
			desc: "a refresh never adopts a roll-up",
			issues: []ghIssue{{number: 30, key: marker.RollupKey, open: true, created: at(1), updated: at(1),
				st: marker.State{Members: []marker.Member{{Key: "m1", Firing: 1, Since: at(1)}}}}},
			listedAt: at(10),
			want:     map[string]view{},
		},
		{
			desc: "of two open roll-ups the newer is adopted",
			issues: []ghIssue{
				{number: 40, key: marker.RollupKey, open: true, created: at(2), updated: at(2),
					st: marker.State{Members: []marker.Member{{Key: "new", Firing: 1, Since: at(2)}}}},
				{number: 30, key: marker.RollupKey, open: true, created: at(1), updated: at(1),
					st: marker.State{Members: []marker.Member{{Key: "old", Firing: 1, Since: at(1)}}}},
			},
			rebuild: true, listedAt: at(10),
			want:       map[string]view{"new": {inRollup: true, firing: []string{"rollup:1"}}},
			wantRollup: 40, wantMembers: []string{"new"},
		},
		{
			desc:     "a roll-up member takes its own issue once one is open",
			cache:    map[string]*tracked{"k1": rollupMember},
			issues:   []ghIssue{{number: 8, key: "k1", open: true, created: at(1), updated: at(1)}},
			listedAt: at(10),
			want:     map[string]view{"k1": {number: 8, open: true}},
			wantN:    1,
		},
		{
			desc:     "a roll-up member stays in the roll-up when its old issue is listed closed",
			cache:    map[string]*tracked{"k1": rollupMember},
			issues:   []ghIssue{{number: 8, key: "k1", created: at(1), updated: at(1)}},
			listedAt: at(10),
			want:     map[string]view{"k1": viewOf(rollupMember)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			b, logs := newTestBridge(t, internalConfig, nil)
			for k, v := range tc.cache {
				c := *v
				b.byKey[k] = &c
			}
			var issues []ghclient.Issue
			for _, g := range tc.issues {
				issues = append(issues, g.issue(t))
			}
			n, _ := b.absorb(cacheRepo, issues, tc.rebuild, tc.listedAt)

			got := map[string]view{}
			for k, v := range b.byKey {
				got[k] = viewOf(v)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantN, n, "keys added")
			assert.Equal(t, tc.wantCreated, b.created[cacheRepo], "storm guard creation times")
			if tc.wantRollup == 0 {
				assert.Nil(t, b.rollups[cacheRepo], "no roll-up adopted")
			} else if assert.NotNil(t, b.rollups[cacheRepo]) {
				r := b.rollups[cacheRepo]
				assert.Equal(t, tc.wantRollup, r.number)
				var members []string
				for k := range r.members {
					members = append(members, k)
				}
				sort.Strings(members)
				assert.Equal(t, tc.wantMembers, members)
			}
			if tc.wantLog != "" {
				assert.Contains(t, logs.String(), tc.wantLog)
			}
		})
	}
}

func TestStormAllows(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil) // at most 2 per 10m
	now := at(0)
	assert.True(t, b.stormAllows(cacheRepo, now))
	assert.True(t, b.stormAllows(cacheRepo, now.Add(time.Minute)))
	assert.False(t, b.stormAllows(cacheRepo, now.Add(2*time.Minute)), "the third in the window is refused")
	assert.Len(t, b.created[cacheRepo], 2, "a refusal takes no slot")
	assert.True(t, b.stormAllows("acme/other", now.Add(2*time.Minute)), "each repository has its own budget")

	// The first creation leaves the window at exactly now+10m.
	assert.False(t, b.stormAllows(cacheRepo, now.Add(10*time.Minute-time.Nanosecond)))
	assert.True(t, b.stormAllows(cacheRepo, now.Add(10*time.Minute)))
	assert.Equal(t, []time.Time{now.Add(time.Minute), now.Add(10 * time.Minute)}, b.created[cacheRepo],
		"creations out of the window are forgotten")

	// unreserve gives a slot back, once.
	b.unreserve(cacheRepo, now.Add(10*time.Minute))
	assert.Equal(t, []time.Time{now.Add(time.Minute)}, b.created[cacheRepo])
	b.unreserve(cacheRepo, now.Add(10*time.Minute))
	b.unreserve(cacheRepo, now.Add(42*time.Minute))
	b.unreserve("acme/unknown", now)
	assert.Equal(t, []time.Time{now.Add(time.Minute)}, b.created[cacheRepo], "unreserving what was not reserved changes nothing")
	assert.True(t, b.stormAllows(cacheRepo, now.Add(10*time.Minute)))
}

func TestStormAllowsUnreserveTakesOneOfEqualTimes(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	now := at(0)
	require.True(t, b.stormAllows(cacheRepo, now))
	require.True(t, b.stormAllows(cacheRepo, now))
	require.False(t, b.stormAllows(cacheRepo, now))
	b.unreserve(cacheRepo, now)
	assert.Len(t, b.created[cacheRepo], 1, "two workers reserving at the same instant: one unreserve frees one slot")
	assert.True(t, b.stormAllows(cacheRepo, now))
}

func TestStormAllowsCountsRebuiltIssues(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	b.absorb(cacheRepo, []ghclient.Issue{
		ghIssue{number: 1, key: "k1", open: true, created: at(0), updated: at(0)}.issue(t),
		ghIssue{number: 2, key: "k2", open: true, created: at(1), updated: at(1)}.issue(t),
	}, true, at(2))
	assert.False(t, b.stormAllows(cacheRepo, at(3)), "issues filed before a restart count against the window")
	assert.True(t, b.stormAllows(cacheRepo, at(10)))
}

func TestStormAllowsDisabled(t *testing.T) {
	b, _ := newTestBridge(t, "defaultRepo: acme/gpu-oncall\nstormGuard: {maxNewIssues: 0, window: 10m}\n", nil)
	for range 100 {
		require.True(t, b.stormAllows(cacheRepo, at(0)))
	}
}

func TestStormAllowsParallelWorkersCannotShareTheLastSlot(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if b.stormAllows(cacheRepo, at(0)) {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(2), allowed.Load())
}
