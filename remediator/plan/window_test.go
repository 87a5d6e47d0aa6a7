package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestInWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	// local is a wall-clock time in Berlin.
	local := func(month time.Month, day, hour, min int) time.Time {
		return time.Date(2026, month, day, hour, min, 0, 0, berlin)
	}
	utc := func(month time.Month, day, hour, min int) time.Time {
		return time.Date(2026, month, day, hour, min, 0, 0, time.UTC)
	}
	weekdays := []v1alpha1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}
	// nights is Mon-Fri 22:00-04:00 in Berlin; each night belongs to the day
	// it starts on, so Friday's runs into Saturday and Sunday night has none.
	nights := []v1alpha1.MaintenanceWindow{{Days: weekdays, Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"}}
	everyNight := []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"}}
	// March 2026: Wed 4, Fri 6, Sat 7, Sun 8, Mon 9. Berlin is UTC+1 until
	// Sunday 29 March 02:00, then UTC+2 until Sunday 25 October 03:00.
	for _, tc := range []struct {
		desc string
		ws   []v1alpha1.MaintenanceWindow
		at   time.Time
		in   bool
		next time.Time
	}{
		{desc: "no windows: always open, never changes", at: now, in: true},

		{desc: "Wednesday midday: closed until 22:00 Berlin", ws: nights, at: local(time.March, 4, 13, 0), next: local(time.March, 4, 22, 0)},
		{desc: "the next opening is in UTC an hour earlier in winter", ws: nights, at: now, next: utc(time.March, 4, 21, 0)},
		{desc: "a minute before it opens: closed", ws: nights, at: local(time.March, 4, 21, 59), next: local(time.March, 4, 22, 0)},
		{desc: "at the opening minute: open until 04:00 the next morning", ws: nights, at: local(time.March, 4, 22, 0), in: true, next: local(time.March, 5, 4, 0)},
		{desc: "after midnight, the window of the day before: open", ws: nights, at: local(time.March, 5, 3, 59), in: true, next: local(time.March, 5, 4, 0)},
		{desc: "at the closing minute: closed until the evening", ws: nights, at: local(time.March, 5, 4, 0), next: local(time.March, 5, 22, 0)},
		{desc: "Friday night: open", ws: nights, at: local(time.March, 6, 23, 30), in: true, next: local(time.March, 7, 4, 0)},
		{desc: "Friday's window into Saturday morning: open", ws: nights, at: local(time.March, 7, 3, 30), in: true, next: local(time.March, 7, 4, 0)},
		{desc: "Saturday morning after 04:00: closed until Monday night", ws: nights, at: local(time.March, 7, 4, 0), next: local(time.March, 9, 22, 0)},
		{desc: "Saturday night: closed", ws: nights, at: local(time.March, 7, 23, 0), next: local(time.March, 9, 22, 0)},
		{desc: "Saturday night after midnight (Sunday): closed", ws: nights, at: local(time.March, 8, 2, 0), next: local(time.March, 9, 22, 0)},
		{desc: "Sunday night into Monday morning: closed, Sunday has no window", ws: nights, at: local(time.March, 9, 3, 0), next: local(time.March, 9, 22, 0)},
		{desc: "Monday night: open", ws: nights, at: local(time.March, 9, 22, 30), in: true, next: local(time.March, 10, 4, 0)},
		{desc: "in summer the window is at 20:00 UTC", ws: nights, at: utc(time.July, 1, 20, 0), in: true, next: utc(time.July, 2, 2, 0)},
		{desc: "in summer 19:59 UTC is before the opening", ws: nights, at: utc(time.July, 1, 19, 59), next: utc(time.July, 1, 20, 0)},

		// Daylight saving time.
		{desc: "spring forward: the night of 28-29 March is an hour shorter, opening at 21:00 UTC", ws: everyNight, at: utc(time.March, 28, 20, 59), next: utc(time.March, 28, 21, 0)},
		{desc: "spring forward: at 03:30 CEST the window is open until 04:00 CEST (02:00 UTC)", ws: everyNight, at: utc(time.March, 29, 1, 30), in: true, next: utc(time.March, 29, 2, 0)},
		{desc: "spring forward: at 04:00 CEST it has closed until 22:00 CEST (20:00 UTC)", ws: everyNight, at: utc(time.March, 29, 2, 0), next: utc(time.March, 29, 20, 0)},
		{desc: "fall back: the night of 24-25 October is an hour longer, opening at 20:00 UTC", ws: everyNight, at: utc(time.October, 24, 19, 0), next: utc(time.October, 24, 20, 0)},
		{desc: "fall back: at 03:30 CET (02:30 UTC) it is still open until 04:00 CET (03:00 UTC)", ws: everyNight, at: utc(time.October, 25, 2, 30), in: true, next: utc(time.October, 25, 3, 0)},
		{desc: "fall back: at 04:00 CET it has closed until 22:00 CET (21:00 UTC)", ws: everyNight, at: utc(time.October, 25, 3, 0), next: utc(time.October, 25, 21, 0)},
		{desc: "a window inside the hour that spring skips does not open that day",
			ws: []v1alpha1.MaintenanceWindow{{Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}, at: utc(time.March, 29, 0, 30), next: utc(time.March, 30, 0, 0)},
		{desc: "a window inside the skipped hour, the day before: closed until the night, no error",
			ws: []v1alpha1.MaintenanceWindow{{Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}, at: utc(time.March, 28, 12, 0), next: utc(time.March, 30, 0, 0)},
		{desc: "a window inside the skipped hour, the day after: open at 02:00 CEST",
			ws: []v1alpha1.MaintenanceWindow{{Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}, at: utc(time.March, 30, 0, 30), in: true, next: utc(time.March, 30, 1, 0)},
		{desc: "a window inside the skipped hour, the day after, once closed: closed until the next night, no error",
			ws: []v1alpha1.MaintenanceWindow{{Start: "02:00", End: "03:00", TimeZone: "Europe/Berlin"}}, at: utc(time.March, 30, 1, 30), next: utc(time.March, 31, 0, 0)},
		{desc: "a window across the skipped hour keeps what is left of it",
			ws: []v1alpha1.MaintenanceWindow{{Start: "01:00", End: "04:00", TimeZone: "Europe/Berlin"}}, at: utc(time.March, 29, 1, 30), in: true, next: utc(time.March, 29, 2, 0)},

		// End of day.
		{desc: `"24:00" ends at midnight: open a minute before`, ws: []v1alpha1.MaintenanceWindow{{Start: "20:00", End: "24:00", TimeZone: "UTC"}},
			at: utc(time.March, 4, 23, 59), in: true, next: utc(time.March, 5, 0, 0)},
		{desc: `"24:00" ends at midnight: closed at midnight`, ws: []v1alpha1.MaintenanceWindow{{Start: "20:00", End: "24:00", TimeZone: "UTC"}},
			at: utc(time.March, 5, 0, 0), next: utc(time.March, 5, 20, 0)},
		{desc: `"24:00" on one day of the week: closed on the next day, open again a week later`,
			ws: []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Wed"}, Start: "20:00", End: "24:00", TimeZone: "UTC"}},
			at: utc(time.March, 5, 0, 0), next: utc(time.March, 11, 20, 0)},
		{desc: `"00:00"-"24:00" on weekends: open all Saturday`,
			ws: []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat", "Sun"}, Start: "00:00", End: "24:00", TimeZone: "UTC"}},
			at: utc(time.March, 7, 0, 0), in: true, next: utc(time.March, 8, 0, 0)},
		{desc: "an empty time zone is UTC", ws: []v1alpha1.MaintenanceWindow{{Start: "11:00", End: "13:00"}}, at: now, in: true, next: utc(time.March, 4, 13, 0)},

		// Several windows.
		{desc: "several windows: closed between them, next is the earliest opening",
			ws: []v1alpha1.MaintenanceWindow{{Start: "14:00", End: "16:00", TimeZone: "UTC"}, {Start: "10:00", End: "11:00", TimeZone: "UTC"}, {Start: "13:00", End: "13:30", TimeZone: "UTC"}},
			at: now, next: utc(time.March, 4, 13, 0)},
		{desc: "several windows: inside the second",
			ws: []v1alpha1.MaintenanceWindow{{Start: "14:00", End: "16:00", TimeZone: "UTC"}, {Start: "11:00", End: "12:30", TimeZone: "UTC"}},
			at: now, in: true, next: utc(time.March, 4, 12, 30)},
		{desc: "several windows: inside two that overlap, next is the later close",
			ws: []v1alpha1.MaintenanceWindow{{Start: "11:00", End: "13:00", TimeZone: "UTC"}, {Start: "11:30", End: "14:00", TimeZone: "UTC"}, {Start: "10:00", End: "12:30", TimeZone: "UTC"}},
			at: now, in: true, next: utc(time.March, 4, 14, 0)},
		{desc: "weeknights in Berlin and weekends in UTC: open on Saturday afternoon",
			ws: append([]v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat", "Sun"}, Start: "00:00", End: "24:00", TimeZone: "UTC"}}, nights...),
			at: utc(time.March, 7, 15, 0), in: true, next: utc(time.March, 8, 0, 0)},
		{desc: "weeknights in Berlin and weekends in UTC: closed on Wednesday midday",
			ws: append([]v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Sat", "Sun"}, Start: "00:00", End: "24:00", TimeZone: "UTC"}}, nights...),
			at: now, next: utc(time.March, 4, 21, 0)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in, next := InWindow(parseWindows(t, tc.ws), tc.at)
			require.Equal(t, tc.in, in, "in")
			require.True(t, tc.next.Equal(next), "next: want %s, got %s", tc.next.UTC(), next.UTC())
		})
	}
}

// TestInWindowWalk steps through a week in Berlin minute by minute across the
// spring change and checks InWindow against a direct reading of the wall
// clock, and that the state never changes before the reported next time.
func TestInWindowWalk(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	ws := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}, Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"}}
	wantIn := func(at time.Time) bool {
		l := at.In(berlin)
		hm := l.Hour()*60 + l.Minute()
		switch {
		case hm >= 22*60:
			return l.Weekday() != time.Sunday
		case hm < 4*60:
			return l.Weekday() != time.Monday // Sunday's night has no window
		}
		return false
	}
	parsed := parseWindows(t, ws)
	start := time.Date(2026, time.March, 25, 0, 0, 0, 0, time.UTC)
	var pending time.Time
	var state bool
	for at := start; at.Before(start.Add(8 * 24 * time.Hour)); at = at.Add(time.Minute) {
		in, next := InWindow(parsed, at)
		require.Equal(t, wantIn(at), in, "at %s (%s)", at, at.In(berlin))
		require.True(t, next.After(at), "at %s next %s", at, next)
		if !pending.IsZero() && at.Before(pending) {
			require.Equal(t, state, in, "changed at %s before the announced %s", at, pending)
		}
		pending, state = next, in
	}
}

func parseWindows(t *testing.T, ws []v1alpha1.MaintenanceWindow) []policies.Window {
	t.Helper()
	out := make([]policies.Window, len(ws))
	for i, w := range ws {
		var errs field.ErrorList
		out[i], errs = policies.ParseWindow(w, field.NewPath("w").Index(i))
		require.Empty(t, errs)
	}
	return out
}

// TestBadWindowsFailClosed: a window policies.Validate refuses is read by
// the remediator with the same parser, field path and words, and fails
// closed: the policy still compiles (its breaker and budgets still hold its
// nodes) but no window opens, so a non-urgent operation waits, naming the
// problem, and an urgent one (a quarantine) still starts.
func TestBadWindowsFailClosed(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ws   []v1alpha1.MaintenanceWindow
		err  string
	}{
		{desc: "an unknown time zone names the window",
			ws:  []v1alpha1.MaintenanceWindow{{Start: "11:00", End: "13:00", TimeZone: "UTC"}, {Start: "22:00", End: "23:00", TimeZone: "Mars/Olympus_Mons"}},
			err: `spec.safety.maintenanceWindows[1].timeZone: Invalid value: "Mars/Olympus_Mons"`},
		{desc: "Local is refused", ws: []v1alpha1.MaintenanceWindow{{Start: "11:00", End: "13:00", TimeZone: "Local"}}, err: "maintenanceWindows[0].timeZone"},
		{desc: "a start that is not HH:MM", ws: []v1alpha1.MaintenanceWindow{{Start: "9:00", End: "13:00"}}, err: `maintenanceWindows[0].start: Invalid value: "9:00"`},
		{desc: "an hour past 24", ws: []v1alpha1.MaintenanceWindow{{Start: "10:00", End: "25:00"}}, err: `maintenanceWindows[0].end: Invalid value: "25:00"`},
		{desc: `"24:30"`, ws: []v1alpha1.MaintenanceWindow{{Start: "10:00", End: "24:30"}}, err: `end: Invalid value: "24:30"`},
		{desc: `"24:00" as a start`, ws: []v1alpha1.MaintenanceWindow{{Start: "24:00", End: "23:00", CrossesMidnight: true}}, err: `start: Invalid value: "24:00"`},
		{desc: "an end before the start without crossesMidnight", ws: []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "04:00"}}, err: "a window that ends the next day sets crossesMidnight: true"},
		{desc: "an end equal to the start", ws: []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "22:00"}}, err: `must be after start "22:00"`},
		{desc: "an unknown day", ws: []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Funday"}, Start: "01:00", End: "02:00"}}, err: `days[0]: Unsupported value: "Funday"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			obj := policy(t, "p").Obj.DeepCopy()
			obj.Spec.Safety.MaintenanceWindows = tc.ws
			p, err := Compile(obj)
			require.NoError(t, err)
			require.ErrorContains(t, p.WindowError(), tc.err)
			require.NotEmpty(t, policies.Validate(obj), "policies.Validate agrees")

			n := node("gpu-1", xid(ago(time.Hour)))
			waiting := op("op", "gpu-1", of("p", "e", 0), phase(v1alpha1.PhaseWaitingForBudget))
			a := Admit(AdmitInput{Op: waiting, Node: n, Policies: []*Policy{p}, Nodes: []*corev1.Node{n}, Now: now})
			require.Equal(t, Wait, a.Verdict)
			require.Equal(t, v1alpha1.ReasonOutsideWindow, a.Reason)
			require.Contains(t, a.Message, "cannot read the maintenance windows, so none opens: ")
			require.Contains(t, a.Message, tc.err)

			urgent := waiting.DeepCopy()
			urgent.Spec.Urgent = true
			require.Equal(t, Start, Admit(AdmitInput{Op: urgent, Node: n, Policies: []*Policy{p}, Nodes: []*corev1.Node{n}, Now: now}).Verdict)

			pl := Evaluate(PolicyInput{Policy: p, Policies: []*Policy{p}, Nodes: []*corev1.Node{n}, Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
			require.Equal(t, p.WindowError(), pl.WindowError, "the plan carries it for the Ready condition")
		})
	}
}

// TestEmptyTimeZoneIsUTC: the API server defaults timeZone to UTC; a window
// read before defaulting means the same.
func TestEmptyTimeZoneIsUTC(t *testing.T) {
	w := parseWindows(t, []v1alpha1.MaintenanceWindow{{Start: "11:00", End: "13:00"}})
	in, next := InWindow(w, now) // 12:00 UTC
	require.True(t, in)
	require.Equal(t, time.Date(2026, time.March, 4, 13, 0, 0, 0, time.UTC), next)
}
