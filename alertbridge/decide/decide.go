package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// Kind names a transition of an alert group.
type Kind string

// Transition kinds, also the values of the transitions metric's kind label.
const (
	// None: nothing changed that a person needs to hear about.
	None Kind = "none"
	// Fired: the group fires and has no issue yet (or only an old one).
	Fired Kind = "fired"
	// Resolved: every alert of the group resolved.
	Resolved Kind = "resolved"
	// Refired: the group fires again after it had resolved.
	Refired Kind = "refired"
	// AlertsChanged: alerts joined or left a group that keeps firing.
	AlertsChanged Kind = "alerts_changed"
)

// Known is what the bridge knows about the latest issue of one dedupe key.
type Known struct {
	// Exists is false when the key never had an issue (or it was lost).
	Exists      bool
	Number      int
	Open        bool
	StateReason ghclient.StateReason
	ClosedAt    time.Time
	Labels      []string
	// Firing holds the fingerprints that fired at the last applied
	// transition. When the issue's marker had to leave them out (a group of
	// hundreds of alerts), Firing is nil and FiringCount and FiringDigest
	// (marker.FiringDigest) stand for them.
	Firing       []string
	FiringCount  int
	FiringDigest string
	// LastComment is the digest of the last timeline comment the bridge
	// posted (or suppressed) on the issue.
	LastComment string
}

// Alert is one alert of the incoming group, as far as comments need it.
type Alert struct {
	Fingerprint string
	Firing      bool
	// Name is a short human label for the alert, e.g. `node="gpu-7"`.
	Name string
}

// Event is the group's state in one webhook.
type Event struct {
	Alerts []Alert
	// SkipAutoClose is set when an alert carries kubemedic_skip_auto_close.
	SkipAutoClose bool
	Now           time.Time
}

// Firing returns the sorted fingerprints of the firing alerts.
func (e Event) Firing() []string {
	var fps []string
	for _, a := range e.Alerts {
		if a.Firing {
			fps = append(fps, a.Fingerprint)
		}
	}
	sort.Strings(fps)
	return slices.Compact(fps)
}

// Policy is the part of the configuration the decisions use.
type Policy struct {
	AutoClose bool
	// ReopenWindow: a group that fires again within this time after its
	// issue closed reopens it; later it gets a new issue. Zero never reopens.
	ReopenWindow time.Duration
	IgnoreLabel  string
}

// Action is what one transition does on GitHub. The zero Action does nothing.
type Action struct {
	Kind Kind
	// Create files a new issue. LinkTo is the number of the previous issue of
	// the key that the new one links, or 0.
	Create bool
	LinkTo int
	// Comment is the timeline comment to post on the existing issue, "" for
	// none. CommentDigest identifies it for suppression; it is recorded even
	// when the comment is suppressed.
	Comment       string
	CommentDigest string
	// State is the issue's new state, "" for unchanged; StateReason goes
	// with it.
	State       ghclient.IssueState
	StateReason ghclient.StateReason
	// UpdateBody rewrites the issue body (alert table and hidden state).
	UpdateBody bool
	// Why explains a decision not to do the obvious thing, for logs and the
	// comment: e.g. "not reopened: closed as not planned".
	Why string
	// Suppressed is set when Comment was dropped because it repeats the last.
	Suppressed bool
}

// Calls returns how many GitHub write calls the action makes.
func (a Action) Calls() int {
	n := 0
	if a.Create {
		n++
	}
	if a.Comment != "" {
		n++
	}
	if a.State != "" || a.UpdateBody {
		n++
	}
	return n
}

// firingTotal is how many alerts fired at the last applied transition.
func (k Known) firingTotal() int {
	if k.Firing == nil {
		return k.FiringCount
	}
	return len(k.Firing)
}

// compacted: only the count and digest of the last firing set are known.
func (k Known) compacted() bool { return k.Firing == nil && k.FiringCount > 0 }

// sameFiring reports whether firing is the last applied firing set.
func (k Known) sameFiring(firing []string) bool {
	if k.compacted() {
		return len(firing) == k.FiringCount && marker.FiringDigest(firing) == k.FiringDigest
	}
	return slices.Equal(firing, k.Firing)
}

// Plan decides what a webhook for a group does to its issue.
func Plan(k Known, e Event, p Policy) Action {
	firing := e.Firing()
	wasFiring := k.firingTotal() > 0
	switch {
	case !k.Exists:
		if len(firing) == 0 {
			return Action{Kind: None, Why: "resolved group without an issue"}
		}
		return Action{Kind: Fired, Create: true}
	case len(firing) == 0 && !wasFiring:
		return Action{Kind: None}
	case len(firing) == 0:
		return resolved(k, e, p)
	case !wasFiring:
		return refired(k, e, p)
	case k.sameFiring(firing):
		return Action{Kind: None}
	default:
		return changed(k, e)
	}
}

func resolved(k Known, e Event, p Policy) Action {
	a := Action{Kind: Resolved, UpdateBody: true}
	if !k.Open {
		// Closed by a human while it fired: the alert table says it
		// resolved; a comment on a closed issue is noise, most of all when
		// it flaps on an issue closed as not planned.
		a.Why = "issue already closed"
		return a
	}
	text := fmt.Sprintf("**Resolved**: all %s of this group resolved.", plural(k.firingTotal(), "alert"))
	switch {
	case !p.AutoClose:
		a.Why = "not closed: auto-close is off"
	case e.SkipAutoClose:
		a.Why = "not closed: an alert has the annotation kubemedic_skip_auto_close"
	default:
		a.State, a.StateReason = ghclient.StateClosed, ghclient.ReasonCompleted
		text += " Closing."
	}
	if a.Why != "" {
		text += " " + capitalize(a.Why) + "."
	}
	return withComment(a, k, text, digest(Resolved, nil, a.Why))
}

func refired(k Known, e Event, p Policy) Action {
	firing := e.Firing()
	a := Action{Kind: Refired, UpdateBody: true}
	text := fmt.Sprintf("**Re-fired**: %s firing again: %s.", plural(len(firing), "alert"), names(e.Alerts, firing))
	if k.Open {
		return withComment(a, k, text, digest(Refired, firing, ""))
	}
	ignored := p.IgnoreLabel != "" && slices.Contains(k.Labels, p.IgnoreLabel)
	age := e.Now.Sub(k.ClosedAt)
	inWindow := p.ReopenWindow > 0 && !k.ClosedAt.IsZero() && age <= p.ReopenWindow
	switch {
	case ignored:
		a.Why = fmt.Sprintf("not reopened: the issue has the label %q", p.IgnoreLabel)
	case k.StateReason == ghclient.ReasonNotPlanned && inWindow:
		a.Why = "not reopened: closed as not planned"
	case inWindow:
		a.State, a.StateReason = ghclient.StateOpen, ""
		text += " Reopening."
	default:
		// Past the window (or a not-planned issue past it): a new issue
		// that links this one. A comment here would go unread.
		return Action{Kind: Refired, Create: true, LinkTo: k.Number,
			Why: fmt.Sprintf("closed %s ago, beyond the reopen window of %s", age.Round(time.Second), p.ReopenWindow)}
	}
	if a.Why != "" {
		text += " " + capitalize(a.Why) + "."
	}
	return withComment(a, k, text, digest(Refired, firing, a.Why))
}

func changed(k Known, e Event) Action {
	firing := e.Firing()
	if k.compacted() {
		// Which alerts joined or left is unknown: the issue kept only how
		// many fired. Say what is known.
		text := fmt.Sprintf("**Alerts changed**: %s firing now, %d before. The issue's hidden state holds only the count for a group this large, so which alerts changed is not listed; the table above is current.",
			plural(len(firing), "alert"), k.FiringCount)
		return withComment(Action{Kind: AlertsChanged, UpdateBody: true}, k, text, digest(AlertsChanged, firing, ""))
	}
	added := minus(firing, k.Firing)
	gone := minus(k.Firing, firing)
	var parts []string
	if len(added) > 0 {
		parts = append(parts, fmt.Sprintf("%s started firing: %s", plural(len(added), "alert"), names(e.Alerts, added)))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("%s resolved: %s", plural(len(gone), "alert"), names(e.Alerts, gone)))
	}
	text := fmt.Sprintf("**Alerts changed**: %s. %s firing now.", strings.Join(parts, "; "), plural(len(firing), "alert"))
	return withComment(Action{Kind: AlertsChanged, UpdateBody: true}, k, text, digest(AlertsChanged, firing, ""))
}

// withComment adds the comment unless it repeats the last one.
func withComment(a Action, k Known, text, d string) Action {
	a.CommentDigest = d
	if d == k.LastComment {
		a.Suppressed = true
		return a
	}
	a.Comment = text
	return a
}

// digest identifies a comment by what it says, not when: the same kind, the
// same firing set and the same reason make the same digest.
func digest(kind Kind, firing []string, why string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", kind, strings.Join(firing, ","), why)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// names lists the alerts with the given fingerprints, at most five.
func names(alerts []Alert, fps []string) string {
	byFP := make(map[string]string, len(alerts))
	for _, a := range alerts {
		if a.Name != "" {
			byFP[a.Fingerprint] = a.Name
		}
	}
	const max = 5
	var out []string
	for i, fp := range fps {
		if i == max {
			out = append(out, fmt.Sprintf("and %d more", len(fps)-max))
			break
		}
		if n, ok := byFP[fp]; ok {
			out = append(out, fmt.Sprintf("%s (`%s`)", n, fp))
		} else {
			out = append(out, "`"+fp+"`")
		}
	}
	return strings.Join(out, ", ")
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
