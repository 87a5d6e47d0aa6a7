package gpuwire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

func TestSpareRowsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		banks uint64
		gpu   string
		more  int
		want  gpuwire.SpareRows
	}{
		{"with UUID", 3, "0000:3b:00.0 (GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)", 0, gpuwire.SpareRows{Banks: 3, Bus: "0000:3b:00.0", UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"}},
		{"bus only, more GPUs", 1, "00000000:86:00.0", 2, gpuwire.SpareRows{Banks: 1, Bus: "0000:86:00.0", More: 2}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			msg := "8 GPUs without memory faults (nvml); " + gpuwire.FormatSpareRows(tc.banks, tc.gpu, tc.more)
			got, ok := gpuwire.ParseSpareRows(msg)
			require.True(t, ok, msg)
			require.Equal(t, tc.want, got)
		})
	}
	_, ok := gpuwire.ParseSpareRows("8 GPUs without memory faults (nvml)")
	require.False(t, ok)
}
