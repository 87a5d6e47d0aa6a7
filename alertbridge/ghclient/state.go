package ghclient

// IssueState is an issue's state as GitHub's REST API spells it. The bridge
// decides on these values (reopen or not, close or not), so they are typed:
// a misspelt state is a compile error here, and a 422 from GitHub.
type IssueState string

// The states of an issue.
const (
	StateOpen   IssueState = "open"
	StateClosed IssueState = "closed"
	// StateAll is a list filter (open and closed issues), never the state of
	// an issue or of an edit.
	StateAll IssueState = "all"
)

// StateReason says why an issue is in its state. It is "" for an issue that
// was never closed.
type StateReason string

// The reasons GitHub accepts and reports.
const (
	// ReasonCompleted: closed because the work is done; the bridge closes
	// a resolved group's issue with it.
	ReasonCompleted StateReason = "completed"
	// ReasonNotPlanned: closed by a person who does not want it worked on;
	// the bridge never reopens such an issue.
	ReasonNotPlanned StateReason = "not_planned"
	// ReasonReopened: GitHub sets it when an issue is reopened.
	ReasonReopened StateReason = "reopened"
)

// Valid reports whether GitHub accepts s as the state of an edit: open or
// closed (all is only a list filter).
func (s IssueState) Valid() bool { return s == StateOpen || s == StateClosed }

// Valid reports whether GitHub accepts r as an edit's state_reason.
func (r StateReason) Valid() bool {
	return r == ReasonCompleted || r == ReasonNotPlanned || r == ReasonReopened
}
