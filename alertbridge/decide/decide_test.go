package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func firing(fps ...string) []Alert {
	var out []Alert
	for _, fp := range fps {
		out = append(out, Alert{Fingerprint: fp, Firing: true, Name: "node=" + fp})
	}
	return out
}

func resolvedAlerts(fps ...string) []Alert {
	var out []Alert
	for _, fp := range fps {
		out = append(out, Alert{Fingerprint: fp, Name: "node=" + fp})
	}
	return out
}

func TestPlan(t *testing.T) {
	policy := Policy{AutoClose: true, ReopenWindow: time.Hour, IgnoreLabel: "kubemedic-ignore"}
	open := Known{Exists: true, Number: 7, Open: true, Firing: []string{"a"}}
	closedBy := func(reason ghclient.StateReason, ago time.Duration, labels ...string) Known {
		return Known{Exists: true, Number: 7, StateReason: reason, ClosedAt: t0.Add(-ago), Labels: labels}
	}
	tests := []struct {
		desc   string
		known  Known
		event  Event
		policy Policy
		want   Action
		// wantComment is a substring of the comment; "" means no comment.
		wantComment string
	}{
		{
			desc:  "first fire files an issue",
			event: Event{Alerts: firing("a")},
			want:  Action{Kind: Fired, Create: true},
		},
		{
			desc:  "a resolved group without an issue does nothing",
			event: Event{Alerts: resolvedAlerts("a")},
			want:  Action{Kind: None, Why: "resolved group without an issue"},
		},
		{
			desc:  "repeat of the same firing set does nothing",
			known: open,
			event: Event{Alerts: firing("a")},
			want:  Action{Kind: None},
		},
		{
			desc:  "fingerprint order does not matter",
			known: Known{Exists: true, Open: true, Firing: []string{"a", "b"}},
			event: Event{Alerts: firing("b", "a")},
			want:  Action{Kind: None},
		},
		{
			desc:  "repeat of a resolved group does nothing",
			known: Known{Exists: true, Open: false, ClosedAt: t0},
			event: Event{Alerts: resolvedAlerts("a")},
			want:  Action{Kind: None},
		},
		{
			desc:        "resolve closes as completed with a comment",
			known:       open,
			event:       Event{Alerts: resolvedAlerts("a")},
			want:        Action{Kind: Resolved, State: ghclient.StateClosed, StateReason: ghclient.ReasonCompleted, UpdateBody: true},
			wantComment: "**Resolved**: all 1 alert of this group resolved. Closing.",
		},
		{
			desc:        "resolve with the opt-out annotation comments but keeps the issue open",
			known:       open,
			event:       Event{Alerts: resolvedAlerts("a"), SkipAutoClose: true},
			want:        Action{Kind: Resolved, UpdateBody: true, Why: "not closed: an alert has the annotation kubemedic_skip_auto_close"},
			wantComment: "Not closed: an alert has the annotation kubemedic_skip_auto_close.",
		},
		{
			desc:        "resolve with auto-close off keeps the issue open",
			known:       open,
			event:       Event{Alerts: resolvedAlerts("a")},
			policy:      Policy{AutoClose: false, ReopenWindow: time.Hour},
			want:        Action{Kind: Resolved, UpdateBody: true, Why: "not closed: auto-close is off"},
			wantComment: "Not closed: auto-close is off.",
		},
		{
			desc:  "resolve of an issue a human closed while firing only updates the alert table",
			known: Known{Exists: true, Number: 7, Firing: []string{"a"}, StateReason: ghclient.ReasonNotPlanned, ClosedAt: t0},
			event: Event{Alerts: resolvedAlerts("a")},
			want:  Action{Kind: Resolved, UpdateBody: true, Why: "issue already closed"},
		},
		{
			desc:        "re-fire inside the window reopens",
			known:       closedBy(ghclient.ReasonCompleted, 30*time.Minute),
			event:       Event{Alerts: firing("a"), Now: t0},
			want:        Action{Kind: Refired, State: ghclient.StateOpen, UpdateBody: true},
			wantComment: "**Re-fired**: 1 alert firing again: node=a (`a`). Reopening.",
		},
		{
			desc:        "re-fire exactly at the window edge still reopens",
			known:       closedBy(ghclient.ReasonCompleted, time.Hour),
			event:       Event{Alerts: firing("a"), Now: t0},
			want:        Action{Kind: Refired, State: ghclient.StateOpen, UpdateBody: true},
			wantComment: "Reopening.",
		},
		{
			desc:  "re-fire after the window files a new issue linking the old one",
			known: closedBy(ghclient.ReasonCompleted, 2*time.Hour),
			event: Event{Alerts: firing("a"), Now: t0},
			want:  Action{Kind: Refired, Create: true, LinkTo: 7, Why: "closed 2h0m0s ago, beyond the reopen window of 1h0m0s"},
		},
		{
			desc:   "a zero window never reopens",
			known:  closedBy(ghclient.ReasonCompleted, time.Second),
			event:  Event{Alerts: firing("a"), Now: t0},
			policy: Policy{AutoClose: true},
			want:   Action{Kind: Refired, Create: true, LinkTo: 7, Why: "closed 1s ago, beyond the reopen window of 0s"},
		},
		{
			desc:        "not planned inside the window is not reopened: a comment instead",
			known:       closedBy(ghclient.ReasonNotPlanned, 10*time.Minute),
			event:       Event{Alerts: firing("a"), Now: t0},
			want:        Action{Kind: Refired, UpdateBody: true, Why: "not reopened: closed as not planned"},
			wantComment: "Not reopened: closed as not planned.",
		},
		{
			desc:  "not planned past the window gets a new issue, the human's decision stands on the old one",
			known: closedBy(ghclient.ReasonNotPlanned, 3*time.Hour),
			event: Event{Alerts: firing("a"), Now: t0},
			want:  Action{Kind: Refired, Create: true, LinkTo: 7, Why: "closed 3h0m0s ago, beyond the reopen window of 1h0m0s"},
		},
		{
			desc:        "the ignore label is never reopened, not even past the window",
			known:       closedBy(ghclient.ReasonCompleted, 30*24*time.Hour, "bug", "kubemedic-ignore"),
			event:       Event{Alerts: firing("a"), Now: t0},
			want:        Action{Kind: Refired, UpdateBody: true, Why: `not reopened: the issue has the label "kubemedic-ignore"`},
			wantComment: `Not reopened: the issue has the label "kubemedic-ignore".`,
		},
		{
			desc:        "re-fire on an issue kept open comments",
			known:       Known{Exists: true, Number: 7, Open: true},
			event:       Event{Alerts: firing("a"), Now: t0},
			want:        Action{Kind: Refired, UpdateBody: true},
			wantComment: "**Re-fired**",
		},
		{
			desc:        "alerts joining and leaving the group",
			known:       Known{Exists: true, Open: true, Firing: []string{"a", "b"}},
			event:       Event{Alerts: append(firing("a", "c"), resolvedAlerts("b")...)},
			want:        Action{Kind: AlertsChanged, UpdateBody: true},
			wantComment: "**Alerts changed**: 1 alert started firing: node=c (`c`); 1 alert resolved: node=b (`b`). 2 alerts firing now.",
		},
		{
			desc:        "more than five names are cut",
			known:       Known{Exists: true, Open: true, Firing: []string{"a"}},
			event:       Event{Alerts: firing("a", "b", "c", "d", "e", "f", "g", "h")},
			want:        Action{Kind: AlertsChanged, UpdateBody: true},
			wantComment: "and 2 more",
		},
		{
			desc:  "an identical consecutive comment is suppressed",
			known: Known{Exists: true, Number: 7, ClosedAt: t0.Add(-time.Minute), StateReason: ghclient.ReasonNotPlanned, LastComment: digest(Refired, []string{"a"}, "not reopened: closed as not planned")},
			event: Event{Alerts: firing("a"), Now: t0},
			want:  Action{Kind: Refired, UpdateBody: true, Why: "not reopened: closed as not planned", Suppressed: true},
		},
		{
			desc:        "the same kind with another firing set is not suppressed",
			known:       Known{Exists: true, Number: 7, ClosedAt: t0.Add(-time.Minute), StateReason: ghclient.ReasonNotPlanned, LastComment: digest(Refired, []string{"a"}, "not reopened: closed as not planned")},
			event:       Event{Alerts: firing("a", "b"), Now: t0},
			want:        Action{Kind: Refired, UpdateBody: true, Why: "not reopened: closed as not planned"},
			wantComment: "2 alerts firing again",
		},
		// A group so large that its issue's marker keeps only the count
		// and digest of its firing set (marker.Append compacts it).
		{
			desc:  "compacted: the same firing set does nothing",
			known: Known{Exists: true, Open: true, FiringCount: 2, FiringDigest: marker.FiringDigest([]string{"a", "b"})},
			event: Event{Alerts: firing("b", "a")},
			want:  Action{Kind: None},
		},
		{
			desc:        "compacted: another set of the same size is a change, told by counts",
			known:       Known{Exists: true, Open: true, FiringCount: 2, FiringDigest: marker.FiringDigest([]string{"a", "b"})},
			event:       Event{Alerts: firing("a", "c")},
			want:        Action{Kind: AlertsChanged, UpdateBody: true},
			wantComment: "**Alerts changed**: 2 alerts firing now, 2 before.",
		},
		{
			desc:        "compacted: resolving counts the alerts that fired",
			known:       Known{Exists: true, Open: true, FiringCount: 300, FiringDigest: "d"},
			event:       Event{Alerts: resolvedAlerts("a")},
			want:        Action{Kind: Resolved, State: ghclient.StateClosed, StateReason: ghclient.ReasonCompleted, UpdateBody: true},
			wantComment: "all 300 alerts of this group resolved",
		},
		{
			desc:        "compacted: firing again after a resolve is a re-fire",
			known:       Known{Exists: true, Open: true},
			event:       Event{Alerts: firing("a")},
			want:        Action{Kind: Refired, UpdateBody: true},
			wantComment: "**Re-fired**",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := policy
			if tc.policy != (Policy{}) {
				p = tc.policy
			}
			got := Plan(tc.known, tc.event, p)
			if tc.wantComment == "" {
				assert.Empty(t, got.Comment)
			} else {
				assert.Contains(t, got.Comment, tc.wantComment)
			}
			assert.Equal(t, got.Comment != "" || got.Suppressed, got.CommentDigest != "", "a digest goes with every comment")
			got.Comment, got.CommentDigest = "", ""
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlanCalls(t *testing.T) {
	assert.Equal(t, 0, Action{}.Calls())
	assert.Equal(t, 1, Action{Create: true}.Calls())
	assert.Equal(t, 2, Action{Comment: "x", State: ghclient.StateClosed, UpdateBody: true}.Calls())
	assert.Equal(t, 1, Action{UpdateBody: true, Suppressed: true}.Calls())
}
