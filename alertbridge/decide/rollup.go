package decide

import (
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// RollupMember returns a roll-up member after a webhook of its group: prev
// is the member so far (nil for a group that just joined), title and firing
// the group's issue title and number of firing alerts now. A member starts
// at now; it is resolved from the first webhook with nothing firing, and no
// longer resolved when something fires again.
func RollupMember(prev *marker.Member, key, title string, firing int, now time.Time) marker.Member {
	m := marker.Member{Key: key, Since: now}
	if prev != nil {
		m = *prev
	}
	m.Title, m.Firing = title, firing
	switch {
	case firing == 0 && m.Resolved.IsZero():
		m.Resolved = now
	case firing > 0:
		m.Resolved = time.Time{}
	}
	return m
}

// Rollup is what the bridge knows of a repository's roll-up issue.
type Rollup struct {
	// Exists: the issue was filed on GitHub (it has a number).
	Exists bool
	// Version counts local changes; Synced is the version GitHub has.
	Version, Synced int
	// Finished: GitHub has it closed with every member resolved. A finished
	// roll-up is never written again; the next storm gets a new one.
	Finished bool
	// Members are the groups it holds, sorted as the body lists them.
	Members []marker.Member
}

// RollupSync is what one sync of a roll-up issue sends to GitHub. The zero
// RollupSync sends nothing.
type RollupSync struct {
	// Send: GitHub lacks the latest version.
	Send bool
	// Create files the issue; otherwise its body is edited.
	Create bool
	// Close closes it as completed with the edit: every member resolved.
	// The bridge only ever closes a roll-up: one a person closed (even as
	// not planned) stays closed while the bridge keeps its table current.
	Close bool
	// CloseNext: it is filed with every member already resolved. Closing a
	// brand-new issue in the same breath helps nobody; the next sync does.
	CloseNext bool
	// Firing is how many members have firing alerts.
	Firing int
}

// PlanRollupSync decides one sync of a roll-up issue.
func PlanRollupSync(r Rollup, autoClose bool) RollupSync {
	if r.Finished || r.Version == r.Synced || len(r.Members) == 0 {
		return RollupSync{}
	}
	s := RollupSync{Send: true, Create: !r.Exists}
	for _, m := range r.Members {
		if m.Firing > 0 {
			s.Firing++
		}
	}
	allResolved := s.Firing == 0 && autoClose
	if s.Create {
		s.CloseNext = allResolved
	} else {
		s.Close = allResolved
	}
	return s
}

// RollupSynced is what the bridge records once a sync's GitHub call
// succeeded.
type RollupSynced struct {
	// Synced is the version GitHub has now.
	Synced int
	// Again: sync once more (a change arrived during the call, or the close
	// of a roll-up filed all resolved is due).
	Again bool
	// Finished: the roll-up is closed on GitHub with every member resolved.
	Finished bool
}

// AfterRollupSync decides what a successful sync leaves: s is what was
// sent, sent the local version it showed, r the roll-up now (whose Version
// may have moved on during the call).
func AfterRollupSync(s RollupSync, sent int, r Rollup) RollupSynced {
	switch {
	case r.Version != sent:
		// A member changed meanwhile: GitHub has an older table. Even a
		// close that was sent does not finish the roll-up: the change must
		// reach the issue first, and the next sync closes it again if every
		// member is still resolved.
		return RollupSynced{Synced: r.Synced, Again: true}
	case s.Close:
		return RollupSynced{Synced: sent, Finished: true}
	case s.CloseNext:
		// GitHub has this version's table but not its close: one behind, so
		// the next sync sends the close.
		return RollupSynced{Synced: sent - 1, Again: true}
	default:
		return RollupSynced{Synced: sent}
	}
}
