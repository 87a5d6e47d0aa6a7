package gpu

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRemappedRows(t *testing.T) {
	devs, err := ParseRemappedRows(fixture(t, "remapped-rows-a100x8-failed.txt"), 0)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, Device{Index: -1, BusID: "0000:90:00.0", RowRemapPending: Flag{true, true}, RowRemapFailed: Flag{true, true}, RemappedUncorrectable: Count{9, true}}, devs[5])
	require.Equal(t, Flag{true, true}, devs[3].RowRemapPending)
	require.Equal(t, Flag{false, true}, devs[3].RowRemapFailed)

	devs, err = ParseRemappedRows(fixture(t, "remapped-rows-v100x8-na.txt"), 0)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, Device{Index: -1, BusID: "0000:15:00.0"}, devs[0])

	devs, err = ParseRemappedRows(nil, 0)
	require.NoError(t, err, "no rows: GPUs without row remapping")
	require.Empty(t, devs)

	devs, err = ParseRemappedRows([]byte("00000000:07:00.0, Yes, No, 0\r\n"), 0)
	require.NoError(t, err)
	require.Equal(t, Flag{true, true}, devs[0].RowRemapPending)
}

func TestMergeRemap(t *testing.T) {
	gpus, err := ParseQueryGPU(fixture(t, "query-gpu-a100x8-healthy.txt"), 0)
	require.NoError(t, err)
	rows, err := ParseRemappedRows(fixture(t, "remapped-rows-a100x8-pending.txt"), 0)
	require.NoError(t, err)
	got := mergeRemap(gpus, rows, nil)
	require.Equal(t, Flag{true, true}, got[3].RowRemapPending)
	require.Equal(t, Flag{false, true}, got[0].RowRemapPending)
	require.Equal(t, 3, got[3].Index)
	require.Equal(t, Flag{}, gpus[3].RowRemapPending, "input not modified")

	got = mergeRemap(gpus, nil, os.ErrDeadlineExceeded)
	for _, d := range got {
		require.Contains(t, d.ReadErr, "remapped rows:")
	}
}
