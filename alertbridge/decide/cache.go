package decide

import "time"

// CachedIssue is what the bridge's issue cache knows of one issue of a
// dedupe key, as the choice of which issue the cache keeps needs it: the
// issue cached for the key, or one listed from GitHub.
type CachedIssue struct {
	// InRollup: the key has no issue of its own; it is a member of its
	// repository's roll-up issue. The other fields are then unset.
	InRollup bool
	Repo     string
	Number   int
	Open     bool
	// CreatedAt and UpdatedAt are GitHub's, in whole seconds.
	CreatedAt, UpdatedAt time.Time
	// WroteAt is when the bridge's last write of the issue returned; zero
	// for an issue it did not write since it started.
	WroteAt time.Time
}

// Merge is what the issue cache does with an issue listed from GitHub for a
// key it may already hold an issue of.
type Merge string

// Merges of a listed issue.
const (
	// MergeKeep: the cached entry stays as it is.
	MergeKeep Merge = "keep"
	// MergeAdd: the cache held no issue of the key's own (nothing, or a
	// roll-up membership that an open issue of its own ends): the listed
	// issue is taken, and counted as a key found.
	MergeAdd Merge = "add"
	// MergeReplace: the listed issue replaces the cached one, the bridge's
	// state in its marker included.
	MergeReplace Merge = "replace"
	// MergeRefresh: the listed issue is the cached one, changed since the
	// bridge wrote it: the cache takes what people change (state, state
	// reason, close time, title, labels, update time) and leaves the bridge's own
	// state to the bridge, whose worker may be between two writes of it.
	MergeRefresh Merge = "refresh"
)

// MergeListed decides which issue of a key the cache keeps when GitHub
// lists one: cur is the cached entry (nil for none), listed the issue read
// from the list, rebuild whether the list is the rebuild at start rather
// than a periodic refresh, and listedAt when the list request was sent.
//
// The latest issue of a key is the one that counts: the one created later,
// or of two created in the same second in the same repository the higher
// number. The same issue listed again is taken only when it is not older
// than the cached one (GitHub's timestamps have whole seconds, so the same
// updated_at is not older) and the list was sent after the bridge's own
// last write of it, so that a list answered just before that write cannot
// undo it. A roll-up member keeps its membership until an issue of its own
// is listed open.
func MergeListed(cur *CachedIssue, listed CachedIssue, rebuild bool, listedAt time.Time) Merge {
	switch {
	case cur == nil, cur.InRollup && listed.Open:
		return MergeAdd
	case cur.InRollup:
		return MergeKeep
	case cur.Repo == listed.Repo && cur.Number == listed.Number:
		switch {
		case listed.UpdatedAt.Before(cur.UpdatedAt) || !listedAt.After(cur.WroteAt):
			return MergeKeep
		case rebuild:
			return MergeReplace
		default:
			return MergeRefresh
		}
	case listed.CreatedAt.After(cur.CreatedAt),
		listed.CreatedAt.Equal(cur.CreatedAt) && listed.Repo == cur.Repo && listed.Number > cur.Number:
		return MergeReplace
	default:
		return MergeKeep
	}
}

// MemberInRollup reports whether a key listed as a member of its
// repository's roll-up issue is routed to the roll-up, given the entry the
// cache holds for it (nil for none). A key joins a roll-up when it has no
// open issue of its own, so an issue of its own that is open, or that was
// created after the key joined (since), wins over the membership.
func MemberInRollup(own *CachedIssue, since time.Time) bool {
	return own == nil || own.InRollup || (!own.Open && !own.CreatedAt.After(since))
}

// AdoptRollup reports whether a roll-up issue listed while rebuilding
// becomes its repository's roll-up: only an open one does, and of several
// the one with the highest number. adopted is the number of the roll-up the
// bridge holds for the repository so far, 0 for none or one not filed yet.
func AdoptRollup(open bool, number, adopted int) bool {
	return open && number >= adopted
}
