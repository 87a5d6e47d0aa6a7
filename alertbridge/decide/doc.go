// Package decide holds the alertbridge's decisions as pure functions: given
// what the bridge knows about a group's issue, the group's new state, the
// policy and the time, which GitHub change (if any) one transition makes.
//
// It makes no GitHub calls, reads no clock and keeps no state; the bridge
// acts on its answers. Every rule an on-call SRE relies on lives here and is
// table-tested: the reopen window, never reopening an issue a human closed as
// not planned or marked with the ignore label, auto-close and its opt-out,
// the storm guard and the suppression of identical consecutive comments,
// where a transition goes (the group's own issue, a new one if the storm
// guard has a slot, or the roll-up), which issue the cache keeps for a key
// when GitHub lists several (and which roll-up issue it adopts), and the
// roll-up issue's life: a member's start and resolve, when a sync files,
// edits or closes the roll-up, and when it is finished; and how an issue's
// title and labels follow what its group renders (a node incident's phase)
// without undoing what people changed (FollowRendered). The bridge keeps
// the state and its locks, and hands these functions copies.
package decide
