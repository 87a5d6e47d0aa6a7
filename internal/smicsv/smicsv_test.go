package smicsv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeBusID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"00000000:3B:00.0", "0000:3b:00.0", true},
		{"0000:3b:00.0", "0000:3b:00.0", true},
		{" 00000001:3B:1F.7 ", "0001:3b:1f.7", true},
		{"00010000:3B:00.0", "00010000:3b:00.0", true},
		{"3b:00.0", "3b:00.0", false},
		{"0000:3b:00", "0000:3b:00", false},
		{"0000:3b:00.8", "0000:3b:00.8", false},
		{"0000:3b:20.0", "0000:3b:20.0", false},
		{"0000:3g:00.0", "0000:3g:00.0", false},
		{"000000000:3b:00.0", "000000000:3b:00.0", false},
		{"", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := NormalizeBusID(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.ok, ok)
		})
	}
}

func TestParse(t *testing.T) {
	// The real answer of an H100 (driver 580.159.04) to the detectors'
	// --query-gpu: shared/fixtures/nvidia-h100-580.159.04/query-gpu.txt.
	const h100 = "0, 00000000:00:06.0, GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced, 0, [N/A], [N/A], [N/A]\n"
	for _, tc := range []struct {
		desc    string
		out     string
		exit    int
		emptyOK bool
		want    []Row
		wantErr string
		nfields int
	}{
		{desc: "a real H100 row", out: h100, nfields: 7, want: []Row{{
			Fields: []string{"0", "00000000:00:06.0", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0", "[N/A]", "[N/A]", "[N/A]"},
			Line:   strings.TrimSpace(h100)}}},
		{desc: "a lost GPU explains the exit status", nfields: 7, exit: 15,
			out: h100 + "Unable to determine the device handle for GPU0000:02:00.0: GPU is lost. Reboot the system to recover this GPU\r\n",
			want: []Row{{Fields: []string{"0", "00000000:00:06.0", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0", "[N/A]", "[N/A]", "[N/A]"}, Line: strings.TrimSpace(h100)},
				{Line: "Unable to determine the device handle for GPU0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
					HandleErr: &HandleErr{BusID: "0000:02:00.0", Err: "GPU is lost. Reboot the system to recover this GPU", Lost: true}}}},
		{desc: "no devices", out: "No devices were found\n", exit: 6, nfields: 7},
		{desc: "warnings are skipped", out: "WARNING: infoROM is corrupted at gpu 0000:00:06.0\n" + h100, nfields: 7, want: []Row{{
			Fields: []string{"0", "00000000:00:06.0", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0", "[N/A]", "[N/A]", "[N/A]"},
			Line:   strings.TrimSpace(h100)}}},
		{desc: "empty is allowed", out: "\n", emptyOK: true, nfields: 4},
		{desc: "empty", out: "", nfields: 7, wantErr: "no output"},
		{desc: "empty, exit status", out: "", exit: 9, nfields: 7, wantErr: "exit status 9 and no output"},
		{desc: "driver failure", out: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", exit: 9, nfields: 7,
			wantErr: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."},
		{desc: "wrong field count", out: h100, nfields: 3, wantErr: "unexpected output line"},
		{desc: "unexplained exit status", out: h100, exit: 4, nfields: 7, wantErr: "exit status 4: 0, 00000000:00:06.0"},
		{desc: "handle error without a bus ID", out: "Unable to determine the device handle for GPU: Unknown Error\n", exit: 255, nfields: 7, wantErr: "unexpected output line"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Parse([]byte(tc.out), tc.exit, tc.nfields, tc.emptyOK)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
