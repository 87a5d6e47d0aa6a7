package gpuhistory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/gpuwire/gpuwiretest"
)

// big is an entry of about 580 bytes encoded; its index i is the ECC
// field's last 3 characters.
func big(when time.Time, i int) gpuwire.Entry {
	return gpuwire.Entry{Time: when, Fault: &gpuwire.Fault{Condition: strings.Repeat("C", gpuwire.MaxName), Reason: strings.Repeat("R", gpuwire.MaxWord), ECC: strings.Repeat("E", 100) + fmt.Sprintf("%03d", i)}}
}

func bigIndex(e gpuwire.Entry) string { return e.Fault.ECC[100:] }

func TestAdd(t *testing.T) {
	full := gpuwire.History{Version: gpuwire.Version}
	for i := range gpuwire.MaxEntries {
		full.Entries = append(full.Entries, gpuwiretest.Fault(gpuwiretest.At(time.Duration(i)*time.Second), "", "", i+1))
	}
	for _, tc := range []struct {
		desc string
		h    gpuwire.History
		e    gpuwire.Entry
		now  time.Time
		// want is the entries' Xids (faults) in order, or check it all.
		wantXids []int
		check    func(t *testing.T, got gpuwire.History)
	}{
		{desc: "to the zero history", h: gpuwire.History{}, e: gpuwiretest.Fault(gpuwiretest.T0, "", "", 1), now: gpuwiretest.T0, wantXids: []int{1}},
		{desc: "appended after older", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "", "", 1)), e: gpuwiretest.Fault(gpuwiretest.At(time.Second), "", "", 2), now: gpuwiretest.T0, wantXids: []int{1, 2}},
		{desc: "inserted before newer", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "", "", 1), gpuwiretest.Fault(gpuwiretest.At(2*time.Second), "", "", 3)), e: gpuwiretest.Fault(gpuwiretest.At(time.Second), "", "", 2), now: gpuwiretest.T0, wantXids: []int{1, 2, 3}},
		{desc: "same time goes after", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "", "", 1)), e: gpuwiretest.Fault(gpuwiretest.T0, "", "", 2), now: gpuwiretest.T0, wantXids: []int{1, 2}},
		{desc: "zero time is now", h: gpuwire.History{}, e: gpuwiretest.Fault(time.Time{}, "", "", 1), now: gpuwiretest.At(90 * time.Minute), check: func(t *testing.T, got gpuwire.History) {
			require.Equal(t, gpuwiretest.At(90*time.Minute), got.Entries[0].Time)
		}},
		{desc: "time is UTC whole seconds", h: gpuwire.History{}, e: gpuwiretest.Fault(gpuwiretest.At(1500*time.Millisecond).In(time.FixedZone("CET", 3600)), "", "", 1), now: gpuwiretest.T0, check: func(t *testing.T, got gpuwire.History) {
			require.Equal(t, gpuwiretest.At(time.Second), got.Entries[0].Time)
			require.Equal(t, time.UTC, got.Entries[0].Time.Location())
		}},
		{desc: "bus and UUID normalised", h: gpuwire.History{}, e: gpuwiretest.Fault(gpuwiretest.T0, "00000000:3B:00.0", "GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B", 1), now: gpuwiretest.T0, check: func(t *testing.T, got gpuwire.History) {
			require.Equal(t, gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: "0000:3b:00.0"}, got.Entries[0].Key())
		}},
		{desc: "invalid entry leaves the history alone", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "", "", 1)), e: gpuwire.Entry{Time: gpuwiretest.T0}, now: gpuwiretest.T0, wantXids: []int{1}},
		{desc: "invalid bus leaves the history alone", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "", "", 1)), e: gpuwiretest.Fault(gpuwiretest.T0, "3b:00.0", "", 2), now: gpuwiretest.T0, wantXids: []int{1}},
		{desc: "count cap drops the oldest", h: full, e: gpuwiretest.Fault(gpuwiretest.At(time.Hour), "", "", 99), now: gpuwiretest.T0, check: func(t *testing.T, got gpuwire.History) {
			require.Len(t, got.Entries, gpuwire.MaxEntries)
			require.Equal(t, 2, got.Entries[0].Fault.Xid)
			require.Equal(t, 99, got.Entries[gpuwire.MaxEntries-1].Fault.Xid)
		}},
		{desc: "an entry older than a full history is dropped at once", h: full, e: gpuwiretest.Fault(gpuwiretest.At(-time.Hour), "", "", 99), now: gpuwiretest.T0, check: func(t *testing.T, got gpuwire.History) {
			require.Equal(t, full, got)
		}},
		{
			desc: "byte cap drops the oldest",
			h: func() gpuwire.History {
				var h gpuwire.History
				for i := range 40 {
					h = Add(h, big(gpuwiretest.At(time.Duration(i)*time.Second), i), gpuwiretest.T0)
				}
				require.Less(t, len(h.Entries), 40, "the byte cap did not bind")
				return h
			}(),
			e: big(gpuwiretest.At(time.Hour), 99), now: gpuwiretest.T0,
			check: func(t *testing.T, got gpuwire.History) {
				n := len(got.Entries)
				require.Equal(t, "099", bigIndex(got.Entries[n-1]))
				require.Equal(t, fmt.Sprintf("%03d", 40-(n-1)), bigIndex(got.Entries[0]), "the oldest went first")
				one := got
				one.Entries = append([]gpuwire.Entry{big(gpuwiretest.T0, 40-n)}, got.Entries...)
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
			require.LessOrEqual(t, len(s), gpuwire.MaxBytes)
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
	now := gpuwiretest.At(24 * time.Hour)
	window := 24 * time.Hour
	for _, tc := range []struct {
		desc string
		h    gpuwire.History
		gpu  gpuwire.GPUKey
		want int
	}{
		{desc: "empty history", h: gpuwire.History{}, gpu: gpuwire.GPUKey{Bus: bus}, want: 0},
		{desc: "failed operation and fault count", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, "", 48), gpuwiretest.Op(gpuwiretest.At(2*time.Hour), bus, "", "op-1", gpuwire.Failed)), gpu: gpuwire.GPUKey{Bus: bus}, want: 2},
		{desc: "succeeded and skipped do not count", h: gpuwiretest.Hist(gpuwiretest.Op(gpuwiretest.At(time.Hour), bus, "", "a", gpuwire.Succeeded), gpuwiretest.Op(gpuwiretest.At(2*time.Hour), bus, "", "b", gpuwire.Skipped)), gpu: gpuwire.GPUKey{Bus: bus}, want: 0},
		{desc: "entry exactly at the window's start has left it", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, bus, "", 48)), gpu: gpuwire.GPUKey{Bus: bus}, want: 0},
		{desc: "entry a second after the window's start counts", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Second), bus, "", 48)), gpu: gpuwire.GPUKey{Bus: bus}, want: 1},
		{desc: "entry at now counts", h: gpuwiretest.Hist(gpuwiretest.Fault(now, bus, "", 48)), gpu: gpuwire.GPUKey{Bus: bus}, want: 1},
		{desc: "entry after now counts (a writer's clock ahead)", h: gpuwiretest.Hist(gpuwiretest.Fault(now.Add(time.Minute), bus, "", 48)), gpu: gpuwire.GPUKey{Bus: bus}, want: 1},
		{desc: "other GPU does not count", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), other, "", 48)), gpu: gpuwire.GPUKey{Bus: bus}, want: 0},
		{desc: "node-wide entry does not count", h: gpuwiretest.Hist(gpuwiretest.Op(gpuwiretest.At(time.Hour), "", "", "reboot-1", gpuwire.Failed)), gpu: gpuwire.GPUKey{Bus: bus}, want: 0},
		{desc: "UUID follows the card to another bus", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), other, gpuwiretest.UUIDA, 48)), gpu: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: bus}, want: 1},
		{desc: "another card at the same bus does not count", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, gpuwiretest.UUIDB, 48)), gpu: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: bus}, want: 0},
		{desc: "bus-only entry counts for the card at that bus", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, "", 48)), gpu: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: bus}, want: 1},
		{desc: "UUID-only key ignores bus-only entries", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, "", 48)), gpu: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA}, want: 0},
		{desc: "empty key matches nothing", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Hour), "", "", 48)), gpu: gpuwire.GPUKey{}, want: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, FailuresInWindow(tc.h, tc.gpu, window, now))
		})
	}
}

func TestSummary(t *testing.T) {
	const bus, other = "0000:3b:00.0", "0000:86:00.0"
	ptr := func(e gpuwire.Entry) *gpuwire.Entry { return &e }
	for _, tc := range []struct {
		desc string
		h    gpuwire.History
		want []GPUSummary
	}{
		{desc: "empty", h: gpuwire.History{}, want: []GPUSummary{}},
		{
			desc: "bus-only GPU: faults, last fault, last operation",
			h:    gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, bus, "", 48), gpuwiretest.Op(gpuwiretest.At(time.Minute), bus, "", "op-1", gpuwire.Failed), gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, "", 79)),
			want: []GPUSummary{{GPU: gpuwire.GPUKey{Bus: bus}, Faults: 2, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, "", 79)), LastOperation: ptr(gpuwiretest.Op(gpuwiretest.At(time.Minute), bus, "", "op-1", gpuwire.Failed))}},
		},
		{
			desc: "bus-only entries join the one UUID seen at the bus",
			h:    gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, bus, "", 48), gpuwiretest.Op(gpuwiretest.At(time.Minute), bus, gpuwiretest.UUIDA, "op-1", gpuwire.Succeeded)),
			want: []GPUSummary{{GPU: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: bus}, Faults: 1, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.T0, bus, "", 48)), LastOperation: ptr(gpuwiretest.Op(gpuwiretest.At(time.Minute), bus, gpuwiretest.UUIDA, "op-1", gpuwire.Succeeded))}},
		},
		{
			desc: "two cards at one bus: bus-only entries stay apart",
			h:    gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, bus, gpuwiretest.UUIDA, 48), gpuwiretest.Fault(gpuwiretest.At(time.Minute), bus, "", 48), gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, gpuwiretest.UUIDB, 79)),
			want: []GPUSummary{
				{GPU: gpuwire.GPUKey{Bus: bus}, Faults: 1, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.At(time.Minute), bus, "", 48))},
				{GPU: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: bus}, Faults: 1, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.T0, bus, gpuwiretest.UUIDA, 48))},
				{GPU: gpuwire.GPUKey{UUID: gpuwiretest.UUIDB, Bus: bus}, Faults: 1, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.At(time.Hour), bus, gpuwiretest.UUIDB, 79))},
			},
		},
		{
			desc: "a moved card shows its last bus; node-wide entries first",
			h:    gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, bus, gpuwiretest.UUIDA, 48), gpuwiretest.Op(gpuwiretest.At(time.Minute), "", "", "reboot-1", gpuwire.Succeeded), gpuwiretest.Fault(gpuwiretest.At(time.Hour), other, gpuwiretest.UUIDA, 79)),
			want: []GPUSummary{
				{GPU: gpuwire.GPUKey{}, LastOperation: ptr(gpuwiretest.Op(gpuwiretest.At(time.Minute), "", "", "reboot-1", gpuwire.Succeeded))},
				{GPU: gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: other}, Faults: 2, LastFault: ptr(gpuwiretest.Fault(gpuwiretest.At(time.Hour), other, gpuwiretest.UUIDA, 79))},
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, Summary(tc.h))
		})
	}
}

func TestFaultsInWindowIncidents(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	gpu := gpuwire.GPUKey{UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}
	fault := func(ago time.Duration, cond string) gpuwire.Entry {
		return gpuwire.Entry{Time: now.Add(-ago), UUID: gpu.UUID, Fault: &gpuwire.Fault{Condition: cond}}
	}
	for _, tc := range []struct {
		desc   string
		faults []gpuwire.Entry
		want   int
	}{
		{"three conditions of one Xid within seconds: one incident", []gpuwire.Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-2*time.Second, "GPULost"), fault(time.Hour-5*time.Second, "GPURecoveryRequired")}, 1},
		{"the same condition again 20 s later: two incidents", []gpuwire.Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-20*time.Second, "GPUXidError")}, 2},
		{"another condition two minutes later: two incidents", []gpuwire.Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-2*time.Minute, "GPULost")}, 2},
		{"an incident, then the first condition again within the minute: two", []gpuwire.Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-time.Second, "GPULost"), fault(time.Hour-10*time.Second, "GPUXidError")}, 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var h gpuwire.History
			for _, e := range tc.faults {
				h = Add(h, e, now)
			}
			require.Equal(t, tc.want, FaultsInWindow(h, gpu, 24*time.Hour, now))
		})
	}
}
