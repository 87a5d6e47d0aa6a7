package gpuhistory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSpareRowsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		banks uint64
		gpu   string
		more  int
		want  SpareRows
	}{
		{"with UUID", 3, "0000:3b:00.0 (GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)", 0, SpareRows{Banks: 3, Bus: "0000:3b:00.0", UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}},
		{"bus only, more GPUs", 1, "00000000:86:00.0", 2, SpareRows{Banks: 1, Bus: "0000:86:00.0", More: 2}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			msg := "8 GPUs without memory faults (nvml); " + FormatSpareRows(tc.banks, tc.gpu, tc.more)
			got, ok := ParseSpareRows(msg)
			require.True(t, ok, msg)
			require.Equal(t, tc.want, got)
		})
	}
	_, ok := ParseSpareRows("8 GPUs without memory faults (nvml)")
	require.False(t, ok)
}

func TestFaultsInWindowIncidents(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	gpu := GPUKey{UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}
	fault := func(ago time.Duration, cond string) Entry {
		return Entry{Time: now.Add(-ago), UUID: gpu.UUID, Fault: &Fault{Condition: cond}}
	}
	for _, tc := range []struct {
		desc   string
		faults []Entry
		want   int
	}{
		{"three conditions of one Xid within seconds: one incident", []Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-2*time.Second, "GPULost"), fault(time.Hour-5*time.Second, "GPURecoveryRequired")}, 1},
		{"the same condition again 20 s later: two incidents", []Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-20*time.Second, "GPUXidError")}, 2},
		{"another condition two minutes later: two incidents", []Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-2*time.Minute, "GPULost")}, 2},
		{"an incident, then the first condition again within the minute: two", []Entry{fault(time.Hour, "GPUXidError"), fault(time.Hour-time.Second, "GPULost"), fault(time.Hour-10*time.Second, "GPUXidError")}, 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var h History
			for _, e := range tc.faults {
				h = Add(h, e, now)
			}
			require.Equal(t, tc.want, FaultsInWindow(h, gpu, 24*time.Hour, now))
		})
	}
}
