package gpuhistory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/test/testsupport"
	"github.com/stretchr/testify/require"
)

var (
	t0 = time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)

	uuidA = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	uuidB = "GPU-11111111-2222-3333-4444-555555555555"
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func fault(when time.Time, bus, uuid string, xid int) Entry {
	return Entry{Time: when, Bus: bus, UUID: uuid, Fault: &Fault{Condition: "GPUXidError", Reason: "XidResetRequired", Xid: xid}}
}

func opEntry(when time.Time, bus, uuid, name string, out Outcome) Entry {
	return Entry{Time: when, Bus: bus, UUID: uuid, Operation: &Operation{Name: name, Policy: "gpu", Step: 1, Operation: "reset-gpu", Outcome: out}}
}

func hist(entries ...Entry) History { return History{Version: Version, Entries: entries} }

// TestBusRegexIsTheTemplates reads the reset-gpu template's GPU_BUS_ID
// messageRegex from the example templates: GPUFromMessage must name the GPU
// the reset acts on.
func TestBusRegexIsTheTemplates(t *testing.T) {
	require.Equal(t, testsupport.ResetGPUBusRegex(t).String(), busRe.String())
}

func TestGPUFromMessage(t *testing.T) {
	for _, tc := range []struct {
		desc, msg, bus, uuid string
	}{
		{desc: "xid message from the detector", msg: "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reboot required", bus: "0000:3b:00.0"},
		{desc: "nvidia-smi 8-digit upper-case domain", msg: "VolatileDBE: 2 volatile DBEs on 00000000:3B:00.0", bus: "0000:3b:00.0"},
		{desc: "domain above ffff keeps its digits", msg: "on 00010000:3b:00.1", bus: "10000:3b:00.1"},
		{desc: "first bus ID wins, as in the template", msg: "Xid 48 on 0000:3b:00.0 (+1 GPUs) 0000:86:00.0", bus: "0000:3b:00.0"},
		{desc: "bus and UUID", msg: "RowRemapFailed: GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B on 0000:af:00.0; replace GPU", bus: "0000:af:00.0", uuid: uuidA},
		{desc: "UUID only", msg: "GPUFellOffBus: " + uuidB + " is lost", uuid: uuidB},
		{desc: "function digit above 7 is no bus ID", msg: "on 0000:3b:00.8"},
		{desc: "3-digit domain is no bus ID", msg: "on 000:3b:00.0"},
		{desc: "bus ID inside a longer word is not taken", msg: "x0000:3b:00.0"},
		{desc: "short UUID is no UUID", msg: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5"},
		{desc: "no GPU", msg: "GPUCountMismatch: 7 GPUs visible, 8 expected"},
		{desc: "empty", msg: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bus, uuid := GPUFromMessage(tc.msg)
			require.Equal(t, tc.bus, bus, "bus")
			require.Equal(t, tc.uuid, uuid, "uuid")
		})
	}
}

func TestNormalizeBus(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3b:00.0":     "0000:3b:00.0",
		"00000000:3B:00.7": "0000:3b:00.7",
		"0001:3b:00.0":     "0001:3b:00.0",
		"ffffffff:ff:1f.0": "ffffffff:ff:1f.0",
		"0000:3b:00.0 ":    "",
		" 0000:3b:00.0":    "",
		"0000:3b:00":       "",
		"":                 "",
	} {
		require.Equal(t, want, NormalizeBus(in), "NormalizeBus(%q)", in)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   string
		want History
		err  string
	}{
		{desc: "empty string is an empty history", in: "", want: History{Version: Version}},
		{desc: "no entries", in: `{"v":1}`, want: History{Version: Version}},
		{desc: "empty entries list is no entries", in: `{"v":1,"entries":[]}`, want: History{Version: Version}},
		{
			desc: "fault and operation",
			in: `{"v":1,"entries":[` +
				`{"time":"2026-03-04T12:00:00Z","bus":"0000:3b:00.0","fault":{"condition":"GPUXidError","reason":"XidResetRequired","xid":48}},` +
				`{"time":"2026-03-04T14:00:00+02:00","bus":"0000:3b:00.0","uuid":"` + uuidA + `","op":{"name":"op-1","policy":"gpu","step":1,"operation":"reset-gpu","outcome":"Failed"}}]}`,
			want: hist(fault(t0, "0000:3b:00.0", "", 48), opEntry(t0, "0000:3b:00.0", uuidA, "op-1", Failed)),
		},
		{desc: "wrong version", in: `{"v":2}`, err: "v: 2, want 1"},
		{desc: "missing version", in: `{"entries":[]}`, err: "v: 0, want 1"},
		{desc: "unknown top-level field", in: `{"v":1,"node":"n0"}`, err: `unknown field "node"`},
		{desc: "unknown entry field", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","gpu":"0","fault":{"condition":"GPULost"}}]}`, err: `unknown field "gpu"`},
		{desc: "unknown fault field", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost","sbe":1}}]}`, err: `unknown field "sbe"`},
		{desc: "trailing data", in: `{"v":1} {}`, err: "data after the JSON object"},
		{desc: "not JSON", in: `v=1`, err: "decode kubemedic.io/gpu-history"},
		{desc: "missing time", in: `{"v":1,"entries":[{"fault":{"condition":"GPULost"}}]}`, err: "entries[0].time"},
		{desc: "bus not normalised", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","bus":"00000000:3B:00.0","fault":{"condition":"GPULost"}}]}`, err: "entries[0].bus"},
		{desc: "uuid upper case", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","uuid":"GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B","fault":{"condition":"GPULost"}}]}`, err: "entries[0].uuid"},
		{desc: "neither fault nor op", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z"}]}`, err: "entries[0].fault, op: exactly one"},
		{desc: "both fault and op", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"},"op":{"name":"a","operation":"reboot","outcome":"Failed"}}]}`, err: "entries[0].fault, op: exactly one"},
		{desc: "unknown outcome", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"a","operation":"reboot","outcome":"Running"}}]}`, err: `entries[0].op.outcome: "Running"`},
		{desc: "fault without condition", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"reason":"X"}}]}`, err: "entries[0].fault.condition: required"},
		{desc: "negative xid", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPUXidError","xid":-1}}]}`, err: "entries[0].fault.xid"},
		{desc: "negative step", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"a","operation":"reboot","outcome":"Failed","step":-1}}]}`, err: "entries[0].op.step"},
		{desc: "over-long name", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"` + strings.Repeat("a", 254) + `","operation":"reboot","outcome":"Failed"}}]}`, err: "entries[0].op.name: 254 bytes"},
		{desc: "control character", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost\n"}}]}`, err: "entries[0].fault.condition"},
		{
			desc: "entries out of order",
			in:   `{"v":1,"entries":[{"time":"2026-03-04T12:00:01Z","fault":{"condition":"GPULost"}},{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"}}]}`,
			err:  "entries[1].time: 2026-03-04T12:00:00Z is before entries[0]'s",
		},
		{desc: "UTC year past 9999", in: `{"v":1,"entries":[{"time":"9999-12-31T23:00:00-02:00","fault":{"condition":"GPULost"}}]}`, err: "entries[0].time"},
		{desc: "too many entries", in: `{"v":1,"entries":[` + strings.TrimSuffix(strings.Repeat(`{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"}},`, MaxEntries+1), ",") + `]}`, err: "entries: 65, more than 64"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		desc string
		h    History
		want string
		err  string
	}{
		{desc: "zero value is an empty history", h: History{}, want: `{"v":1}`},
		{
			desc: "fault then operation",
			h:    hist(fault(t0, "0000:3b:00.0", "", 79), opEntry(at(time.Hour), "0000:3b:00.0", uuidA, "op-1", Succeeded)),
			want: `{"v":1,"entries":[` +
				`{"time":"2026-03-04T12:00:00Z","bus":"0000:3b:00.0","fault":{"condition":"GPUXidError","reason":"XidResetRequired","xid":79}},` +
				`{"time":"2026-03-04T13:00:00Z","bus":"0000:3b:00.0","uuid":"` + uuidA + `","op":{"name":"op-1","policy":"gpu","step":1,"operation":"reset-gpu","outcome":"Succeeded"}}]}`,
		},
		{desc: "wrong version", h: History{Version: 3}, err: "v: 3, want 1"},
		{desc: "invalid entry", h: hist(Entry{Time: t0}), err: "entries[0].fault, op"},
		{desc: "non-UTC time", h: hist(fault(t0.In(time.FixedZone("CET", 3600)), "", "", 0)), err: "entries[0].time"},
		{desc: "out of order", h: hist(fault(at(time.Second), "", "", 0), fault(t0, "", "", 0)), err: "entries[1].time"},
		{
			desc: "over MaxBytes",
			h: func() History {
				var h History
				for i := range MaxEntries {
					h = hist(append(h.Entries, Entry{Time: t0, Fault: &Fault{Condition: strings.Repeat("C", maxName), Reason: fmt.Sprint(i)}})...)
				}
				return h
			}(),
			err: "more than 16384",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.h.Encode()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			back, err := Parse(got)
			require.NoError(t, err)
			if tc.h.Version == 0 {
				tc.h.Version = Version
			}
			require.Equal(t, tc.h, back)
		})
	}
}

// big is an entry of about 580 bytes encoded; its index i is the ECC
// field's last 3 characters.
func big(when time.Time, i int) Entry {
	return Entry{Time: when, Fault: &Fault{Condition: strings.Repeat("C", maxName), Reason: strings.Repeat("R", maxWord), ECC: strings.Repeat("E", 100) + fmt.Sprintf("%03d", i)}}
}

func bigIndex(e Entry) string { return e.Fault.ECC[100:] }

func TestAdd(t *testing.T) {
	full := History{Version: Version}
	for i := range MaxEntries {
		full.Entries = append(full.Entries, fault(at(time.Duration(i)*time.Second), "", "", i+1))
	}
	for _, tc := range []struct {
		desc string
		h    History
		e    Entry
		now  time.Time
		// want is the entries' Xids (faults) in order, or check it all.
		wantXids []int
		check    func(t *testing.T, got History)
	}{
		{desc: "to the zero history", h: History{}, e: fault(t0, "", "", 1), now: t0, wantXids: []int{1}},
		{desc: "appended after older", h: hist(fault(t0, "", "", 1)), e: fault(at(time.Second), "", "", 2), now: t0, wantXids: []int{1, 2}},
		{desc: "inserted before newer", h: hist(fault(t0, "", "", 1), fault(at(2*time.Second), "", "", 3)), e: fault(at(time.Second), "", "", 2), now: t0, wantXids: []int{1, 2, 3}},
		{desc: "same time goes after", h: hist(fault(t0, "", "", 1)), e: fault(t0, "", "", 2), now: t0, wantXids: []int{1, 2}},
		{desc: "zero time is now", h: History{}, e: fault(time.Time{}, "", "", 1), now: at(90 * time.Minute), check: func(t *testing.T, got History) {
			require.Equal(t, at(90*time.Minute), got.Entries[0].Time)
		}},
		{desc: "time is UTC whole seconds", h: History{}, e: fault(at(1500*time.Millisecond).In(time.FixedZone("CET", 3600)), "", "", 1), now: t0, check: func(t *testing.T, got History) {
			require.Equal(t, at(time.Second), got.Entries[0].Time)
			require.Equal(t, time.UTC, got.Entries[0].Time.Location())
		}},
		{desc: "bus and UUID normalised", h: History{}, e: fault(t0, "00000000:3B:00.0", "GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B", 1), now: t0, check: func(t *testing.T, got History) {
			require.Equal(t, GPUKey{UUID: uuidA, Bus: "0000:3b:00.0"}, got.Entries[0].Key())
		}},
		{desc: "invalid entry leaves the history alone", h: hist(fault(t0, "", "", 1)), e: Entry{Time: t0}, now: t0, wantXids: []int{1}},
		{desc: "invalid bus leaves the history alone", h: hist(fault(t0, "", "", 1)), e: fault(t0, "3b:00.0", "", 2), now: t0, wantXids: []int{1}},
		{desc: "count cap drops the oldest", h: full, e: fault(at(time.Hour), "", "", 99), now: t0, check: func(t *testing.T, got History) {
			require.Len(t, got.Entries, MaxEntries)
			require.Equal(t, 2, got.Entries[0].Fault.Xid)
			require.Equal(t, 99, got.Entries[MaxEntries-1].Fault.Xid)
		}},
		{desc: "an entry older than a full history is dropped at once", h: full, e: fault(at(-time.Hour), "", "", 99), now: t0, check: func(t *testing.T, got History) {
			require.Equal(t, full, got)
		}},
		{
			desc: "byte cap drops the oldest",
			h: func() History {
				var h History
				for i := range 40 {
					h = Add(h, big(at(time.Duration(i)*time.Second), i), t0)
				}
				require.Less(t, len(h.Entries), 40, "the byte cap did not bind")
				return h
			}(),
			e: big(at(time.Hour), 99), now: t0,
			check: func(t *testing.T, got History) {
				n := len(got.Entries)
				require.Equal(t, "099", bigIndex(got.Entries[n-1]))
				require.Equal(t, fmt.Sprintf("%03d", 40-(n-1)), bigIndex(got.Entries[0]), "the oldest went first")
				one := got
				one.Entries = append([]Entry{big(t0, 40-n)}, got.Entries...)
				_, err := one.Encode()
				require.ErrorContains(t, err, "more than 16384", "Add dropped more than it had to")
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before, err := tc.h.Encode()
			require.NoError(t, err)
			got := Add(tc.h, tc.e, tc.now)
			after, err := tc.h.Encode()
			require.NoError(t, err)
			require.Equal(t, before, after, "Add changed its argument")
			s, err := got.Encode()
			require.NoError(t, err, "Add returned a history that does not encode")
			require.LessOrEqual(t, len(s), MaxBytes)
			if tc.check != nil {
				tc.check(t, got)
				return
			}
			var xids []int
			for _, e := range got.Entries {
				xids = append(xids, e.Fault.Xid)
			}
			require.Equal(t, tc.wantXids, xids)
		})
	}
}

func TestFailuresInWindow(t *testing.T) {
	const bus, other = "0000:3b:00.0", "0000:86:00.0"
	now := at(24 * time.Hour)
	window := 24 * time.Hour
	for _, tc := range []struct {
		desc string
		h    History
		gpu  GPUKey
		want int
	}{
		{desc: "empty history", h: History{}, gpu: GPUKey{Bus: bus}, want: 0},
		{desc: "failed operation and fault count", h: hist(fault(at(time.Hour), bus, "", 48), opEntry(at(2*time.Hour), bus, "", "op-1", Failed)), gpu: GPUKey{Bus: bus}, want: 2},
		{desc: "succeeded and skipped do not count", h: hist(opEntry(at(time.Hour), bus, "", "a", Succeeded), opEntry(at(2*time.Hour), bus, "", "b", Skipped)), gpu: GPUKey{Bus: bus}, want: 0},
		{desc: "entry exactly at the window's start has left it", h: hist(fault(t0, bus, "", 48)), gpu: GPUKey{Bus: bus}, want: 0},
		{desc: "entry a second after the window's start counts", h: hist(fault(at(time.Second), bus, "", 48)), gpu: GPUKey{Bus: bus}, want: 1},
		{desc: "entry at now counts", h: hist(fault(now, bus, "", 48)), gpu: GPUKey{Bus: bus}, want: 1},
		{desc: "entry after now counts (a writer's clock ahead)", h: hist(fault(now.Add(time.Minute), bus, "", 48)), gpu: GPUKey{Bus: bus}, want: 1},
		{desc: "other GPU does not count", h: hist(fault(at(time.Hour), other, "", 48)), gpu: GPUKey{Bus: bus}, want: 0},
		{desc: "node-wide entry does not count", h: hist(opEntry(at(time.Hour), "", "", "reboot-1", Failed)), gpu: GPUKey{Bus: bus}, want: 0},
		{desc: "UUID follows the card to another bus", h: hist(fault(at(time.Hour), other, uuidA, 48)), gpu: GPUKey{UUID: uuidA, Bus: bus}, want: 1},
		{desc: "another card at the same bus does not count", h: hist(fault(at(time.Hour), bus, uuidB, 48)), gpu: GPUKey{UUID: uuidA, Bus: bus}, want: 0},
		{desc: "bus-only entry counts for the card at that bus", h: hist(fault(at(time.Hour), bus, "", 48)), gpu: GPUKey{UUID: uuidA, Bus: bus}, want: 1},
		{desc: "UUID-only key ignores bus-only entries", h: hist(fault(at(time.Hour), bus, "", 48)), gpu: GPUKey{UUID: uuidA}, want: 0},
		{desc: "empty key matches nothing", h: hist(fault(at(time.Hour), "", "", 48)), gpu: GPUKey{}, want: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, FailuresInWindow(tc.h, tc.gpu, window, now))
		})
	}
}

func TestSummary(t *testing.T) {
	const bus, other = "0000:3b:00.0", "0000:86:00.0"
	ptr := func(e Entry) *Entry { return &e }
	for _, tc := range []struct {
		desc string
		h    History
		want []GPUSummary
	}{
		{desc: "empty", h: History{}, want: []GPUSummary{}},
		{
			desc: "bus-only GPU: faults, last fault, last operation",
			h:    hist(fault(t0, bus, "", 48), opEntry(at(time.Minute), bus, "", "op-1", Failed), fault(at(time.Hour), bus, "", 79)),
			want: []GPUSummary{{GPU: GPUKey{Bus: bus}, Faults: 2, LastFault: ptr(fault(at(time.Hour), bus, "", 79)), LastOperation: ptr(opEntry(at(time.Minute), bus, "", "op-1", Failed))}},
		},
		{
			desc: "bus-only entries join the one UUID seen at the bus",
			h:    hist(fault(t0, bus, "", 48), opEntry(at(time.Minute), bus, uuidA, "op-1", Succeeded)),
			want: []GPUSummary{{GPU: GPUKey{UUID: uuidA, Bus: bus}, Faults: 1, LastFault: ptr(fault(t0, bus, "", 48)), LastOperation: ptr(opEntry(at(time.Minute), bus, uuidA, "op-1", Succeeded))}},
		},
		{
			desc: "two cards at one bus: bus-only entries stay apart",
			h:    hist(fault(t0, bus, uuidA, 48), fault(at(time.Minute), bus, "", 48), fault(at(time.Hour), bus, uuidB, 79)),
			want: []GPUSummary{
				{GPU: GPUKey{Bus: bus}, Faults: 1, LastFault: ptr(fault(at(time.Minute), bus, "", 48))},
				{GPU: GPUKey{UUID: uuidA, Bus: bus}, Faults: 1, LastFault: ptr(fault(t0, bus, uuidA, 48))},
				{GPU: GPUKey{UUID: uuidB, Bus: bus}, Faults: 1, LastFault: ptr(fault(at(time.Hour), bus, uuidB, 79))},
			},
		},
		{
			desc: "a moved card shows its last bus; node-wide entries first",
			h:    hist(fault(t0, bus, uuidA, 48), opEntry(at(time.Minute), "", "", "reboot-1", Succeeded), fault(at(time.Hour), other, uuidA, 79)),
			want: []GPUSummary{
				{GPU: GPUKey{}, LastOperation: ptr(opEntry(at(time.Minute), "", "", "reboot-1", Succeeded))},
				{GPU: GPUKey{UUID: uuidA, Bus: other}, Faults: 2, LastFault: ptr(fault(at(time.Hour), other, uuidA, 79))},
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, Summary(tc.h))
		})
	}
}

func TestGPUKeyString(t *testing.T) {
	require.Equal(t, "node", GPUKey{}.String())
	require.Equal(t, "0000:3b:00.0", GPUKey{Bus: "0000:3b:00.0"}.String())
	require.Equal(t, uuidA, GPUKey{UUID: uuidA}.String())
	require.Equal(t, uuidA+" (0000:3b:00.0)", GPUKey{UUID: uuidA, Bus: "0000:3b:00.0"}.String())
}
