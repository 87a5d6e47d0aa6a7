package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRouteTransition(t *testing.T) {
	tests := []struct {
		desc         string
		inOpenRollup bool
		act          Action
		want         Route
	}{
		{desc: "nothing to do", act: Action{Kind: None, Why: "resolved group without an issue"}, want: RouteNone},
		{desc: "a group fires without an issue: a new one, under the storm guard", act: Action{Kind: Fired, Create: true}, want: RouteNewIssue},
		{desc: "a refire past the reopen window: a new issue that links the old", act: Action{Kind: Refired, Create: true, LinkTo: 7}, want: RouteNewIssue},
		{desc: "a refire within the window reopens its issue", act: Action{Kind: Refired, State: "open", UpdateBody: true}, want: RouteIssue},
		{desc: "a resolve edits its issue", act: Action{Kind: Resolved, UpdateBody: true}, want: RouteIssue},
		{desc: "a suppressed comment still edits the body", act: Action{Kind: AlertsChanged, UpdateBody: true, Suppressed: true}, want: RouteIssue},
		{desc: "a member of an open roll-up stays there when Plan would file an issue", inOpenRollup: true, act: Action{Kind: Fired, Create: true}, want: RouteRollup},
		{desc: "a member of an open roll-up records its resolve there", inOpenRollup: true, act: Action{Kind: None}, want: RouteRollup},
		{desc: "a member of an open roll-up with an empty action", inOpenRollup: true, want: RouteRollup},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, RouteTransition(tc.inOpenRollup, tc.act))
		})
	}
}

func TestStormReserve(t *testing.T) {
	const window = 10 * time.Minute
	ago := func(d time.Duration) time.Time { return t0.Add(-d) }
	tests := []struct {
		desc     string
		created  []time.Time
		max      int
		wantOK   bool
		wantKept []time.Time
	}{
		{desc: "no issues yet: the first takes a slot", max: 2, wantOK: true, wantKept: []time.Time{t0}},
		{desc: "below the limit", created: []time.Time{ago(time.Minute)}, max: 2, wantOK: true,
			wantKept: []time.Time{ago(time.Minute), t0}},
		{desc: "at the limit: refused, no slot taken", created: []time.Time{ago(time.Minute), ago(2 * time.Minute)}, max: 2,
			wantKept: []time.Time{ago(time.Minute), ago(2 * time.Minute)}},
		{desc: "one nanosecond short of a window still counts", created: []time.Time{ago(window - time.Nanosecond), ago(time.Minute)}, max: 2,
			wantKept: []time.Time{ago(window - time.Nanosecond), ago(time.Minute)}},
		{desc: "a creation exactly one window old has left it and is dropped", created: []time.Time{ago(window), ago(time.Minute)}, max: 2,
			wantOK: true, wantKept: []time.Time{ago(time.Minute), t0}},
		{desc: "a refusal still drops what left the window", created: []time.Time{ago(11 * time.Minute), ago(time.Minute), ago(2 * time.Minute)}, max: 2,
			wantKept: []time.Time{ago(time.Minute), ago(2 * time.Minute)}},
		{desc: "two reservations at the same instant are two slots", created: []time.Time{t0}, max: 2, wantOK: true,
			wantKept: []time.Time{t0, t0}},
		{desc: "zero disables the guard but still counts", created: []time.Time{t0, t0, t0}, max: 0, wantOK: true,
			wantKept: []time.Time{t0, t0, t0, t0}},
		{desc: "an empty list takes the first slot", created: []time.Time{}, max: 1, wantOK: true, wantKept: []time.Time{t0}},
		{desc: "a negative limit disables the guard like zero", created: []time.Time{ago(time.Minute)}, max: -1, wantOK: true,
			wantKept: []time.Time{ago(time.Minute), t0}},
		{desc: "a creation after now (a clock stepped back) counts and is kept", created: []time.Time{t0.Add(time.Minute)}, max: 1,
			wantKept: []time.Time{t0.Add(time.Minute)}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := append([]time.Time(nil), tc.created...)
			kept, ok := StormReserve(tc.created, t0, tc.max, window)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.wantKept, kept)
			require.Equal(t, before, append([]time.Time(nil), tc.created...), "the caller's times are not changed")
		})
	}
}

func TestStormAllows(t *testing.T) {
	times := func(ago ...time.Duration) []time.Time {
		var out []time.Time
		for _, a := range ago {
			out = append(out, t0.Add(-a))
		}
		return out
	}
	tests := []struct {
		desc    string
		created []time.Time
		max     int
		want    bool
	}{
		{desc: "no issues yet", max: 2, want: true},
		{desc: "below the limit", created: times(time.Minute), max: 2, want: true},
		{desc: "at the limit", created: times(time.Minute, 2*time.Minute), max: 2, want: false},
		{desc: "old issues leave the window", created: times(time.Minute, 10*time.Minute, 11*time.Minute), max: 2, want: true},
		{desc: "an issue exactly one window old has left it", created: times(0, 10*time.Minute), max: 2, want: true},
		{desc: "zero disables the guard", created: times(0, 0, 0), max: 0, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, StormAllows(tc.created, t0, tc.max, 10*time.Minute))
		})
	}
}
