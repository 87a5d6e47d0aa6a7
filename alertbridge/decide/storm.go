package decide

import (
	"slices"
	"time"
)

// Route is where one transition of an alert group goes.
type Route string

// Routes of a transition.
const (
	// RouteNone: the transition changes nothing on GitHub (Plan's Kind is
	// None).
	RouteNone Route = "none"
	// RouteIssue: the group's own issue is edited as Plan's Action says.
	RouteIssue Route = "issue"
	// RouteNewIssue: the Action files a new issue, if the storm guard
	// (StormReserve) has a slot for it; when it has none, the group joins
	// its repository's roll-up issue instead of getting an issue of its own.
	RouteNewIssue Route = "new_issue"
	// RouteRollup: the group is a member of its repository's roll-up, which
	// is not finished: the transition updates its member there, whatever
	// Plan decided for an issue of its own.
	RouteRollup Route = "rollup"
)

// RouteTransition decides where one transition of a group goes:
// inOpenRollup is whether the group is a member of its repository's roll-up
// and that roll-up is not finished, act is what Plan decided for the
// group's own issue. A member of a finished roll-up is routed like a group
// without an issue: Plan files a new one, under the storm guard.
func RouteTransition(inOpenRollup bool, act Action) Route {
	switch {
	case inOpenRollup:
		return RouteRollup
	case act.Kind == None:
		return RouteNone
	case act.Create:
		return RouteNewIssue
	default:
		return RouteIssue
	}
}

// StormAllows reports whether a repository may get another new issue: fewer
// than max issues were created in the window before now. max 0 disables the
// guard. created holds the creation times of the bridge's issues there.
func StormAllows(created []time.Time, now time.Time, max int, window time.Duration) bool {
	if max <= 0 {
		return true
	}
	n := 0
	for _, t := range created {
		if now.Sub(t) < window {
			n++
		}
	}
	return n < max
}

// StormReserve is the storm guard's bookkeeping for one new issue in a
// repository: created holds the creation times of the bridge's issues
// there. It returns the times the guard keeps, those that left the window
// before now dropped, and whether the issue may be filed (StormAllows); when
// it may, now is added to the times kept, so the slot is taken and a second
// caller holding the same times cannot take it too. A refusal takes no slot.
// created itself is not changed.
func StormReserve(created []time.Time, now time.Time, max int, window time.Duration) (kept []time.Time, ok bool) {
	kept = slices.DeleteFunc(slices.Clone(created), func(t time.Time) bool { return now.Sub(t) >= window })
	if !StormAllows(kept, now, max, window) {
		return kept, false
	}
	return append(kept, now), true
}
