package gpu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
)

func TestParseQueryGPU(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		fixture  string
		exit     int
		wantErr  string
		wantN    int
		wantLost []string // bus IDs
		wantErrd []string // unusable, not lost
		check    func(t *testing.T, devs []Device)
	}{
		{desc: "healthy 8xH100", fixture: "query-gpu-h100x8-healthy.txt", wantN: 8, check: func(t *testing.T, devs []Device) {
			require.Equal(t, Device{Index: 0, BusID: "0000:18:00.0", UUID: devs[0].UUID, VolatileDBE: Count{0, true}}, devs[0])
			require.True(t, strings.HasPrefix(devs[0].UUID, "GPU-"))
			require.Equal(t, "0000:db:00.0", devs[7].BusID)
		}},
		{desc: "CRLF", fixture: "query-gpu-h100x8-healthy-crlf.txt", wantN: 8, check: func(t *testing.T, devs []Device) {
			require.Equal(t, "0000:18:00.0", devs[0].BusID)
			require.False(t, strings.ContainsAny(devs[7].UUID, "\r\n"))
		}},
		{desc: "one lost among valid rows", fixture: "query-gpu-h100x8-one-lost.txt", exit: 15, wantN: 8, wantLost: []string{"0000:3a:00.0"}},
		{desc: "Unknown Error with the space", fixture: "query-gpu-unknown-error.txt", exit: 255, wantN: 8, wantErrd: []string{"0000:bd:00.0"}},
		{desc: "Unknown Error without the space", fixture: "query-gpu-unknown-error-nospace.txt", exit: 255, wantN: 1, wantErrd: []string{"0000:0b:00.0"}},
		{desc: "no devices", fixture: "query-gpu-no-devices.txt", exit: 6, wantN: 0},
		{desc: "driver failure", fixture: "query-gpu-driver-failure.txt", exit: 9, wantErr: "couldn't communicate with the NVIDIA driver"},
		{desc: "V100 has retired pages", fixture: "query-gpu-v100x8-retired-pending.txt", wantN: 8, check: func(t *testing.T, devs []Device) {
			require.Equal(t, Flag{true, true}, devs[1].RetiredPagesPending)
			require.Equal(t, Count{3, true}, devs[1].RetiredPages)
			require.Equal(t, Flag{false, true}, devs[0].RetiredPagesPending)
		}},
		{desc: "A100 retired pages are N/A", fixture: "query-gpu-a100x8-healthy.txt", wantN: 8, check: func(t *testing.T, devs []Device) {
			require.Equal(t, Flag{}, devs[0].RetiredPagesPending)
			require.Equal(t, Count{}, devs[0].RetiredPages)
			require.Empty(t, devs[0].ReadErr)
		}},
		{desc: "fields say GPU is lost", fixture: "query-gpu-a100-field-lost.txt", wantN: 2, wantLost: []string{"0000:0f:00.0"}},
		{desc: "field Unknown Error is a read error", fixture: "query-gpu-a100-field-unknown-error.txt", wantN: 2, check: func(t *testing.T, devs []Device) {
			require.True(t, devs[1].Usable())
			require.Contains(t, devs[1].ReadErr, "[Unknown Error]")
			require.False(t, devs[1].VolatileDBE.Known)
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			devs, err := ParseQueryGPU(fixture(t, tc.fixture), tc.exit)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, devs, tc.wantN)
			var lost, errd []string
			for _, d := range devs {
				if d.Lost {
					lost = append(lost, d.BusID)
				} else if !d.Usable() {
					errd = append(errd, d.BusID)
				}
			}
			require.Equal(t, tc.wantLost, lost)
			require.Equal(t, tc.wantErrd, errd)
			if tc.check != nil {
				tc.check(t, devs)
			}
		})
	}
}

func TestParseQueryGPUMalformed(t *testing.T) {
	for _, tc := range []struct {
		desc, out string
		exit      int
		wantErr   string
	}{
		{"empty", "", 0, "no output"},
		{"empty with exit status", "\n\n", 3, "exit status 3 and no output"},
		{"too few fields", "0, 00000000:18:00.0, GPU-x\n", 0, "unexpected output line"},
		{"bad index", "x, 00000000:18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]\n", 0, "bad index"},
		{"bad bus ID", "0, 18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]\n", 0, "bad PCI bus ID"},
		{"bad number", "0, 00000000:18:00.0, GPU-x, lots, [N/A], [N/A], [N/A]\n", 0, "bad number"},
		{"bad flag", "0, 00000000:18:00.0, GPU-x, 0, Maybe, 0, 0\n", 0, "bad value"},
		{"valid rows but unexplained exit status", "0, 00000000:18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]\n", 4, "exit status 4"},
		{"garbage", "Segmentation fault\n", 139, "unexpected output line"},
		{"handle error without bus ID", "Unable to determine the device handle for GPU: Unknown Error\n", 255, "unexpected output line"},
		{"NVML init failure", "Failed to initialize NVML: Driver/library version mismatch\n", 18, "Failed to initialize NVML"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			devs, err := ParseQueryGPU([]byte(tc.out), tc.exit)
			require.ErrorContains(t, err, tc.wantErr)
			require.Nil(t, devs)
		})
	}
	// A warning line is not the check's business.
	devs, err := ParseQueryGPU([]byte("WARNING: infoROM is corrupted at gpu 0000:18:00.0\n0, 00000000:18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]\n"), 0)
	require.NoError(t, err)
	require.Len(t, devs, 1)
}

func TestParseQueryGPUVerdictColumns(t *testing.T) {
	// The memory query's ten fields are told from the gpu check's seven.
	devs, err := ParseQueryGPU(fixture(t, "query-gpu-h100x1-captured.txt"), 0)
	require.NoError(t, err)
	require.Equal(t, Recovery{gpuaction.None, true}, devs[0].RecoveryAction)
	// An unexpected verdict value is this GPU's read error, not a failure
	// of the whole output.
	devs, err = ParseQueryGPU([]byte("0, 00000000:00:06.0, GPU-x, 0, [N/A], [N/A], [N/A], Reticulate, Maybe, many\n"), 0)
	require.NoError(t, err)
	require.Equal(t, `gpu_recovery_action: unexpected value "Reticulate"; ecc.errors.uncorrected.aggregate.sram.thresholdExceeded: unexpected value "Maybe"; remapped_rows.histogram.none: unexpected value "many"`, devs[0].ReadErr)
	require.Equal(t, Count{0, true}, devs[0].VolatileDBE)
}

func TestSMIRejectedFields(t *testing.T) {
	for _, tc := range []struct {
		desc, out string
		want      []string
	}{
		// The form the H100 fixtures' README records (driver 580, exit 2),
		// also in CoHDI/composable-resource-operator#37.
		{"fixture", string(fixture(t, "query-gpu-rejected-recovery-action.txt")), []string{"gpu_recovery_action"}},
		{"CRLF", "Field \"remapped_rows.histogram.none\" is not a valid field to query.\r\n\r\n", []string{"remapped_rows.histogram.none"}},
		// Windows builds print curly quotes (influxdata/telegraf#6573).
		{"curly quotes", "Field \u201cencoder.stats.sessionCount\u201d is not a valid field to query.\n", []string{"encoder.stats.sessionCount"}},
		{"two lines", "Field \"a\" is not a valid field to query.\nField \"b\" is not a valid field to query.\n", []string{"a", "b"}},
		{"CSV", "0, 00000000:00:06.0, GPU-x, 0, [N/A], [N/A], [N/A], None, No, 0\n", nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, smiRejectedFields([]byte(tc.out)))
		})
	}
}
