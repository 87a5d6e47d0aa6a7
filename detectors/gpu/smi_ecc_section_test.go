package gpu

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseQueryECC reads `nvidia-smi -q -d ECC` (the real H100 section
// and variants derived from it, detectors/testdata/gpu/README.md) into
// exactly these devices, or fails as a whole.
func TestParseQueryECC(t *testing.T) {
	captured := string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-captured.txt"))
	const bus = "0000:00:06.0"
	no := Flag{false, true}
	h100 := func(edit func(d *Device)) []Device {
		d := Device{Index: -1, BusID: bus, ChannelRepairPending: no, TPCRepairPending: no, UnrepairableMemory: no}
		if edit != nil {
			edit(&d)
		}
		return []Device{d}
	}
	notRead := func(bus string) []Device {
		return []Device{{Index: -1, BusID: bus, Unsupported: []string{SignalRepairStatus, SignalUnrepairableMemory}}}
	}
	lostLine := "Unable to determine the device handle for GPU 0000:3A:00.0: GPU is lost. Reboot the system to recover this GPU\n"
	for _, tc := range []struct {
		desc    string
		out     string
		exit    int
		want    []Device
		wantErr string
	}{
		{desc: "H100 as captured", out: captured, want: h100(nil)},
		// `nvidia-smi -q -d ECC` itself, captured on a real H200 (driver
		// 580.159.04) on 2026-11-26: the section parses as the cut H100
		// capture does.
		{desc: "H200 -q -d ECC as captured", out: string(fixture(t, "nvidia-smi-q-d-ecc-h200x1-captured.txt")), want: h100(nil)},
		{desc: "CRLF", out: strings.ReplaceAll(captured, "\n", "\r\n"), want: h100(nil)},
		{desc: "channel repair pending", out: string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-channel-repair.txt")),
			want: h100(func(d *Device) { d.ChannelRepairPending = Flag{true, true} })},
		{desc: "TPC repair pending", out: string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-tpc-repair.txt")),
			want: h100(func(d *Device) { d.TPCRepairPending = Flag{true, true} })},
		{desc: "unrepairable memory", out: string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-unrepairable.txt")),
			want: h100(func(d *Device) { d.UnrepairableMemory = Flag{true, true} })},
		{desc: "Unknown Error is a read error", out: string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-unrepairable-unknown-error.txt")),
			want: h100(func(d *Device) { d.UnrepairableMemory, d.ReadErr = Flag{}, "Unrepairable Memory: [Unknown Error]" })},
		{desc: "GPU is lost as a value", out: strings.Replace(captured, "TPC Repair Pending                             : No", "TPC Repair Pending                             : GPU is lost", 1),
			want: h100(func(d *Device) { d.TPCRepairPending, d.Lost, d.Err = Flag{}, true, "GPU is lost" })},
		{desc: "an older nvidia-smi prints no repair lines", out: string(fixture(t, "nvidia-smi-q-d-ecc-h100x1-no-repair-lines.txt")), want: notRead(bus)},
		{desc: "A100: N/A", out: string(fixture(t, "nvidia-smi-q-d-ecc-a100x1-na.txt")), want: notRead("0000:07:00.0")},
		{desc: "V100: N/A", out: string(fixture(t, "nvidia-smi-q-d-ecc-v100x1-na.txt")), want: notRead("0000:15:00.0")},
		{desc: "a lost GPU beside a healthy one", out: lostLine + captured, exit: 15,
			want: append([]Device{{Index: -1, BusID: "0000:3a:00.0", Lost: true, Err: "GPU is lost. Reboot the system to recover this GPU"}}, h100(nil)...)},
		{desc: "no devices", out: "No devices were found\n", exit: 6, want: nil},
		{desc: "-d refused with -x (driver 580.159.04)", out: string(fixture(t, "nvidia-smi-q-x-d-ecc-rejected.txt")), exit: 2,
			wantErr: "exit status 2: Invalid combination of input arguments: --display/-d flags can not be combined with -x/--xml-format flags."},
		{desc: "healthy log but exit status 3", out: captured, exit: 3, wantErr: "exit status 3: ==============NVSMI LOG=============="},
		{desc: "driver failure", out: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", exit: 9,
			wantErr: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."},
		{desc: "CSV", out: "00000000:00:06.0, No, No, 0\n", wantErr: "not nvidia-smi's -q log: 00000000:00:06.0, No, No, 0"},
		{desc: "empty", out: "", wantErr: "no output"},
		{desc: "empty, exit status 1", out: "", exit: 1, wantErr: "exit status 1 and no output"},
		{desc: "bad bus ID", out: "==============NVSMI LOG==============\nGPU nonsense\n", wantErr: `bad PCI bus ID in "GPU nonsense"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			devs, err := ParseQueryECC([]byte(tc.out), tc.exit)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				require.Nil(t, devs)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, devs)
		})
	}
}
