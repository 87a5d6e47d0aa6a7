package xid

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const (
	gpuA = "0000:3b:00.0"
	gpuB = "0000:86:00.0"
)

// ev is an Xid at a time in seconds since boot.
func ev(bus string, xid int, sec int64) Found {
	return Found{Bus: bus, Event: Event{Xid: xid, Usec: sec * 1e6, Seq: -1}}
}

func ev154(bus string, named gpuaction.Action, sec int64) Found {
	f := ev(bus, 154, sec)
	f.Named = named
	return f
}

type reset struct {
	bus string
	sec int64
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		events  []Found
		resets  []reset
		unknown UnknownPolicy
		want    string // the line NPD shows
		status  plugin.Status
	}{
		{desc: "nothing", want: OKMessage},
		{desc: "only ignored and app errors", events: []Found{ev(gpuA, 13, 1), ev(gpuA, 63, 2), ev(gpuB, 94, 3)}, want: OKMessage},
		{desc: "fallen off the bus", events: []Found{ev(gpuA, 79, 10)},
			want: "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reboot required"},
		{desc: "reboot beats an earlier reset", events: []Found{ev(gpuA, 46, 5), ev(gpuA, 79, 10)},
			want: "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reboot required"},
		{desc: "earliest of the worst names the fault", events: []Found{ev(gpuA, 62, 20), ev(gpuA, 46, 5), ev(gpuA, 13, 1)},
			want: "XidResetRequired: Xid 46 on 0000:3b:00.0: GPU timeout; reset required"},
		{desc: "a reset clears earlier Xids", events: []Found{ev(gpuA, 46, 5)}, resets: []reset{{gpuA, 6}}, want: OKMessage},
		{desc: "an Xid logged at the reset's instant is cleared", events: []Found{ev(gpuA, 46, 6)}, resets: []reset{{gpuA, 6}}, want: OKMessage},
		{desc: "a reset clears a reboot-worthy Xid too", events: []Found{ev(gpuA, 79, 5)}, resets: []reset{{gpuA, 6}}, want: OKMessage},
		{desc: "an Xid after the reset counts", events: []Found{ev(gpuA, 46, 5), ev(gpuA, 62, 7)}, resets: []reset{{gpuA, 6}},
			want: "XidResetRequired: Xid 62 on 0000:3b:00.0: PMU halt; reset required"},
		{desc: "the last of several resets counts", events: []Found{ev(gpuA, 46, 5), ev(gpuA, 62, 7)}, resets: []reset{{gpuA, 6}, {gpuA, 8}, {gpuA, 1}}, want: OKMessage},
		{desc: "a reset of another GPU clears nothing", events: []Found{ev(gpuA, 46, 5)}, resets: []reset{{gpuB, 6}},
			want: "XidResetRequired: Xid 46 on 0000:3b:00.0: GPU timeout; reset required"},
		{desc: "two GPUs: the earlier fault first", events: []Found{ev(gpuA, 46, 10), ev(gpuB, 62, 5)},
			want: "XidResetRequired: Xid 62 on 0000:86:00.0 (+1 GPU): PMU halt; reset required"},
		{desc: "two GPUs: the reboot first", events: []Found{ev(gpuA, 46, 5), ev(gpuB, 79, 10)},
			want: "XidRebootRequired: Xid 79 on 0000:86:00.0 (+1 GPU): fell off the bus; reboot required"},
		{desc: "two GPUs, one reset", events: []Found{ev(gpuA, 46, 5), ev(gpuB, 62, 10)}, resets: []reset{{gpuA, 6}},
			want: "XidResetRequired: Xid 62 on 0000:86:00.0: PMU halt; reset required"},
		{desc: "three GPUs", events: []Found{ev(gpuA, 46, 5), ev(gpuB, 62, 10), ev("0000:af:00.0", 119, 10)},
			want: "XidResetRequired: Xid 46 on 0000:3b:00.0 (+2 GPUs): GPU timeout; reset required"},
		{desc: "154 follows the reboot it names", events: []Found{ev(gpuA, 46, 5), ev154(gpuA, gpuaction.NodeReboot, 6)},
			want: "XidRebootRequired: Xid 154 on 0000:3b:00.0: driver asks reboot; reboot required"},
		{desc: "154 follows the reset it names", events: []Found{ev154(gpuA, gpuaction.DrainAndReset, 6)},
			want: "XidResetRequired: Xid 154 on 0000:3b:00.0: driver asks reset; reset required"},
		{desc: "154 naming none is nothing", events: []Found{ev154(gpuA, gpuaction.None, 6)}, want: OKMessage},
		{desc: "48 once", events: []Found{ev(gpuA, 48, 5)},
			want: "XidResetRequired: Xid 48 on 0000:3b:00.0: DBE ECC; reset required"},
		{desc: "48 twice without a reset is not a recurrence", events: []Found{ev(gpuA, 48, 5), ev(gpuA, 48, 9)},
			want: "XidResetRequired: Xid 48 on 0000:3b:00.0: DBE ECC; reset required"},
		{desc: "48 again after a reset", events: []Found{ev(gpuA, 48, 5), ev(gpuA, 48, 9)}, resets: []reset{{gpuA, 6}},
			want: "XidResetRequired: Xid 48 on 0000:3b:00.0: DBE ECC again after reset; reset required"},
		{desc: "48 on another GPU before the reset is no recurrence", events: []Found{ev(gpuB, 48, 5), ev(gpuA, 48, 9)}, resets: []reset{{gpuA, 6}, {gpuB, 6}},
			want: "XidResetRequired: Xid 48 on 0000:3b:00.0: DBE ECC; reset required"},
		{desc: "unknown Xid ignored by default", events: []Found{ev(gpuA, 14, 5)}, want: OKMessage},
		{desc: "unknown Xid reset when asked", events: []Found{ev(gpuA, 14, 5)}, unknown: UnknownReset,
			want: "XidResetRequired: Xid 14 on 0000:3b:00.0: unknown Xid; reset required"},
		{desc: "NVLink", events: []Found{ev(gpuA, 74, 5)},
			want: "XidResetRequired: Xid 74 on 0000:3b:00.0: NVLink error; reset required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := NewState("boot-1")
			st.AddEvents(tc.events)
			for _, r := range tc.resets {
				st.AddReset(r.bus, r.sec*1e6)
			}
			res := Decide(st, tc.unknown).Result()
			line := res.Line()
			require.Equal(t, tc.want, line)
			require.LessOrEqual(t, len(line), plugin.MaxLine)
			if line == OKMessage {
				require.Equal(t, plugin.StatusOK, res.Status)
				return
			}
			require.Equal(t, plugin.StatusNonOK, res.Status)
			require.Equal(t, res.Reason, v1alpha1.EffectiveReason(v1alpha1.ConditionGPUXidError, v1alpha1.DetectReason, line))
			// The GPU named first is the one the reset-gpu template resets.
			m := resetGPURegex.FindStringSubmatch(line)
			require.NotNil(t, m)
			require.Contains(t, line, "on "+m[1])
		})
	}
}

func TestRingBufferWrapKeepsTheFault(t *testing.T) {
	st := NewState("boot-1")
	require.Len(t, st.AddEvents([]Found{ev(gpuA, 79, 10), ev(gpuA, 13, 11)}), 2)
	want := Decide(st, UnknownIgnore)
	require.Equal(t, SevReboot, want.Severity)
	// The next scan no longer sees the records, only newer noise.
	require.Empty(t, st.AddEvents(nil))
	require.Equal(t, want, Decide(st, UnknownIgnore))
}

func TestAddEventsDedupes(t *testing.T) {
	st := NewState("boot-1")
	a := Found{Bus: gpuA, Event: Event{Xid: 46, Usec: 5, Seq: 100}}
	require.Len(t, st.AddEvents([]Found{a, a}), 1)
	// The same record again: same seq.
	require.Empty(t, st.AddEvents([]Found{a}))
	// The same record from dmesg text: no seq, same time and Xid.
	require.Empty(t, st.AddEvents([]Found{{Bus: gpuA, Event: Event{Xid: 46, Usec: 5, Seq: -1}}}))
	// Another record with the same seq on another GPU is another event.
	require.Len(t, st.AddEvents([]Found{{Bus: gpuB, Event: Event{Xid: 46, Usec: 5, Seq: 100}}}), 1)
	// Same seq, other time: a duplicate by seq.
	require.Empty(t, st.AddEvents([]Found{{Bus: gpuA, Event: Event{Xid: 62, Usec: 9, Seq: 100}}}))
	require.Len(t, st.GPUs[gpuA].Events, 1)
}

func TestAddResetCapsAndDedupes(t *testing.T) {
	st := NewState("boot-1")
	require.True(t, st.AddReset(gpuA, 5))
	require.False(t, st.AddReset(gpuA, 5))
	for i := range 20 {
		st.AddReset(gpuA, int64(100-i))
	}
	r := st.GPUs[gpuA].ResetsUsec
	require.Len(t, r, maxResetsPerGPU)
	require.Equal(t, int64(100), r[len(r)-1])
	require.IsNonDecreasing(t, r)
}

func TestCompactKeepsWorstAndLatest(t *testing.T) {
	st := NewState("boot-1")
	var found []Found
	found = append(found, ev(gpuA, 48, 1)) // earliest 48, before the reset
	found = append(found, ev(gpuA, 79, 2)) // the only reboot, long ago
	for i := range 100 {
		found = append(found, ev(gpuA, 13, int64(10+i))) // noise
	}
	found = append(found, ev(gpuA, 48, 500)) // 48 after the reset
	for i := range 100 {
		found = append(found, ev(gpuA, 43, int64(600+i))) // more noise
	}
	st.AddEvents(found)
	st.Compact(UnknownIgnore)
	g := st.GPUs[gpuA]
	require.Len(t, g.Events, maxEventsPerGPU)
	require.IsNonDecreasing(t, func() []int64 {
		var u []int64
		for _, e := range g.Events {
			u = append(u, e.Usec)
		}
		return u
	}())
	require.Contains(t, g.Events, ev(gpuA, 79, 2).Event)
	require.Contains(t, g.Events, ev(gpuA, 48, 1).Event)
	require.Contains(t, g.Events, ev(gpuA, 48, 500).Event)
	require.Contains(t, g.Events, ev(gpuA, 43, 699).Event, "the newest event")
	require.Equal(t, SevReboot, Decide(st, UnknownIgnore).Severity)
	st.AddReset(gpuA, 100e6)
	v := Decide(st, UnknownIgnore)
	require.Equal(t, Verdict{Severity: SevReset, Bus: gpuA, Xid: 48, Meaning: "DBE ECC", Recurring: true}, v)
}

func TestMessageFitsAndKeepsTheBusID(t *testing.T) {
	for _, v := range []Verdict{
		{Severity: SevReboot, Bus: "10000:3b:00.1", Xid: 154, Meaning: "driver asks reboot", Others: 15},
		{Severity: SevReset, Bus: "ffff0000:3b:00.7", Xid: 48, Meaning: "DBE ECC", Recurring: true, Others: 3},
		{Severity: SevReset, Bus: gpuA, Xid: 65535, Meaning: "unknown recovery", Others: 1},
	} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			line := v.Result().Line()
			require.LessOrEqual(t, len(line), plugin.MaxLine, line)
			m := resetGPURegex.FindStringSubmatch(line)
			require.NotNil(t, m, line)
			require.Equal(t, v.Bus, m[1])
			require.Regexp(t, `; (reset|reboot)( required)?$`, line)
		})
	}
}

// TestMessageShortening: catalog meanings are short enough that a real
// message always fits; meanings built from MaxLine exercise each step of
// the shortening.
func TestMessageShortening(t *testing.T) {
	const head = "XidResetRequired: Xid 48 on " + gpuA
	// meaning returns "DBE ECC x...x" such that the line with "; reset"
	// is exactly MaxLine bytes, and longer by extra.
	meaning := func(extra int) string {
		return "DBE ECC " + strings.Repeat("x", plugin.MaxLine-len(head+": DBE ECC ; reset")+extra)
	}
	word := strings.Repeat("x", plugin.MaxLine)
	for _, tc := range []struct {
		desc    string
		meaning string
		want    string
	}{
		{"whole when it fits", "DBE ECC", head + ": DBE ECC; reset required"},
		{"first \" required\" goes", meaning(0), head + ": " + meaning(0) + "; reset"},
		{"then the meaning's last words", meaning(1), head + ": DBE ECC; reset"},
		{"then the meaning", word, head + "; reset"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			line := Verdict{Severity: SevReset, Bus: gpuA, Xid: 48, Meaning: tc.meaning}.Result().Line()
			require.Equal(t, tc.want, line)
			require.LessOrEqual(t, len(line), plugin.MaxLine)
		})
	}
	t.Run("the head and action stay when nothing fits", func(t *testing.T) {
		require.Equal(t, "Xid 48 on "+gpuA+"; reset", fitMessage(5, "Xid 48 on "+gpuA, "DBE ECC", "reset"))
	})
}
