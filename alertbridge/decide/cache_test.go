package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMergeListed(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const repo = "acme/gpu-oncall"
	// own is the cached issue: created at 0, last updated and written by
	// the bridge at 10.
	own := &CachedIssue{Repo: repo, Number: 7, Open: true, CreatedAt: at(0), UpdatedAt: at(10), WroteAt: at(10)}
	member := &CachedIssue{InRollup: true}
	same := func(updated int) CachedIssue {
		return CachedIssue{Repo: repo, Number: 7, CreatedAt: at(0), UpdatedAt: at(updated)}
	}
	tests := []struct {
		desc     string
		cur      *CachedIssue
		listed   CachedIssue
		rebuild  bool
		listedAt time.Time
		want     Merge
	}{
		{desc: "empty cache takes the listed issue", listed: same(1), rebuild: true, listedAt: at(2), want: MergeAdd},
		{desc: "empty cache takes it on a refresh too", listed: same(1), listedAt: at(2), want: MergeAdd},
		{desc: "a roll-up member takes its own issue once one is open", cur: member,
			listed: CachedIssue{Repo: repo, Number: 8, Open: true, CreatedAt: at(1), UpdatedAt: at(1)}, listedAt: at(10), want: MergeAdd},
		{desc: "a roll-up member stays in the roll-up when its old issue is listed closed", cur: member,
			listed: CachedIssue{Repo: repo, Number: 8, CreatedAt: at(1), UpdatedAt: at(1)}, listedAt: at(10), want: MergeKeep},
		{desc: "a newer issue of a tracked key replaces it",
			cur: own, listed: CachedIssue{Repo: repo, Number: 12, Open: true, CreatedAt: at(30), UpdatedAt: at(30)}, listedAt: at(31), want: MergeReplace},
		{desc: "an older issue of a tracked key is ignored, even updated later",
			cur: own, listed: CachedIssue{Repo: repo, Number: 3, Open: true, CreatedAt: at(-60), UpdatedAt: at(20)}, listedAt: at(21), want: MergeKeep},
		{desc: "created in the same second: the higher number wins",
			cur: own, listed: CachedIssue{Repo: repo, Number: 8, CreatedAt: at(0), UpdatedAt: at(0)}, listedAt: at(21), want: MergeReplace},
		{desc: "created in the same second: a lower number loses",
			cur: own, listed: CachedIssue{Repo: repo, Number: 6, CreatedAt: at(0), UpdatedAt: at(30)}, listedAt: at(31), want: MergeKeep},
		{desc: "created in the same second in another repository: the cached one stays",
			cur: own, listed: CachedIssue{Repo: "acme/other", Number: 99, CreatedAt: at(0), UpdatedAt: at(30)}, listedAt: at(31), want: MergeKeep},
		{desc: "created later in another repository: the newer wins",
			cur: own, listed: CachedIssue{Repo: "acme/other", Number: 1, CreatedAt: at(1), UpdatedAt: at(1)}, listedAt: at(31), want: MergeReplace},
		{desc: "same issue with an older updated_at is ignored", cur: own, listed: same(9), listedAt: at(30), want: MergeKeep},
		{desc: "same issue with the same updated_at is not older: a refresh takes it", cur: own, listed: same(10), listedAt: at(11), want: MergeRefresh},
		{desc: "same issue updated later: a refresh takes what people changed", cur: own, listed: same(20), listedAt: at(20), want: MergeRefresh},
		{desc: "same issue updated later: a rebuild replaces the whole entry", cur: own, listed: same(20), rebuild: true, listedAt: at(21), want: MergeReplace},
		{desc: "a list sent before the bridge's own write does not override it", cur: own, listed: same(11), listedAt: at(9), want: MergeKeep},
		{desc: "a list sent at the very time of the bridge's write does not override it", cur: own, listed: same(11), listedAt: at(10), want: MergeKeep},
		{desc: "nor does a rebuild listed at that time", cur: own, listed: same(11), rebuild: true, listedAt: at(10), want: MergeKeep},
		{desc: "an issue the bridge never wrote is refreshed from any list",
			cur: &CachedIssue{Repo: repo, Number: 7, CreatedAt: at(0), UpdatedAt: at(10)}, listed: same(10), listedAt: at(0), want: MergeRefresh},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, MergeListed(tc.cur, tc.listed, tc.rebuild, tc.listedAt))
		})
	}
}

func TestMemberInRollup(t *testing.T) {
	since := t0
	tests := []struct {
		desc string
		own  *CachedIssue
		want bool
	}{
		{desc: "no issue of its own", want: true},
		{desc: "already a roll-up member", own: &CachedIssue{InRollup: true}, want: true},
		{desc: "an open issue of its own wins", own: &CachedIssue{Number: 7, Open: true, CreatedAt: since.Add(-time.Hour)}, want: false},
		{desc: "a closed issue created after it joined wins", own: &CachedIssue{Number: 7, CreatedAt: since.Add(time.Second)}, want: false},
		{desc: "a closed issue created as it joined does not", own: &CachedIssue{Number: 7, CreatedAt: since}, want: true},
		{desc: "a closed issue created before it joined does not", own: &CachedIssue{Number: 7, CreatedAt: since.Add(-time.Hour)}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, MemberInRollup(tc.own, since))
		})
	}
}

func TestAdoptRollup(t *testing.T) {
	tests := []struct {
		desc            string
		open            bool
		number, adopted int
		want            bool
	}{
		{desc: "an open roll-up when none is held", open: true, number: 30, want: true},
		{desc: "a closed roll-up never", number: 30, want: false},
		{desc: "a closed roll-up newer than the one held", number: 40, adopted: 30, want: false},
		{desc: "of two open roll-ups the newer", open: true, number: 40, adopted: 30, want: true},
		{desc: "not an older one after the newer", open: true, number: 30, adopted: 40, want: false},
		{desc: "the same issue listed again", open: true, number: 30, adopted: 30, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, AdoptRollup(tc.open, tc.number, tc.adopted))
		})
	}
}
