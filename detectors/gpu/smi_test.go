package gpu

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/host"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "gpu", name))
	require.NoError(t, err)
	return b
}

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

// writeScript writes an executable shell script standing in for nvidia-smi.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

func TestSMIRunner(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "gpu"))
	require.NoError(t, err)
	// The script answers each query from a fixture, by its first argument.
	answer := func(gpu, remap string, exit int) string {
		return "case \"$1\" in --query-gpu=*) cat '" + filepath.Join(dir, gpu) + "';; --query-remapped-rows=*) cat '" + filepath.Join(dir, remap) + "';; esac\nexit " + strconv.Itoa(exit)
	}
	for _, tc := range []struct {
		desc    string
		script  string
		memory  Read
		wantErr string
		check   func(t *testing.T, devs []Device)
	}{
		{desc: "healthy", script: answer("query-gpu-a100x8-healthy.txt", "remapped-rows-a100x8-pending.txt", 0), memory: ReadMemory, check: func(t *testing.T, devs []Device) {
			require.Len(t, devs, 8)
			require.Equal(t, Flag{true, true}, devs[3].RowRemapPending)
		}},
		{desc: "lost GPU, exit 15", script: answer("query-gpu-h100x8-one-lost.txt", "remapped-rows-h100x8-healthy.txt", 15), check: func(t *testing.T, devs []Device) {
			require.Len(t, devs, 8)
			require.True(t, devs[7].Lost)
		}},
		{desc: "driver failure", script: answer("query-gpu-driver-failure.txt", "query-gpu-driver-failure.txt", 9), wantErr: "nvidia-smi: NVIDIA-SMI has failed"},
		{desc: "stderr only", script: "echo 'Failed to initialize NVML: Unknown Error' >&2; exit 255", wantErr: "Failed to initialize NVML"},
		{desc: "non-zero exit, no output", script: "exit 1", wantErr: "exit status 1 and no output"},
		{desc: "remap query fails: read error, not a failure", script: "case \"$1\" in --query-gpu=*) cat '" + filepath.Join(dir, "query-gpu-a100x8-healthy.txt") + "';; *) echo 'Segmentation fault'; exit 139;; esac", memory: ReadMemory, check: func(t *testing.T, devs []Device) {
			require.Len(t, devs, 8)
			require.Contains(t, devs[0].ReadErr, "remapped rows")
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &SMI{Path: writeScript(t, tc.script), Timeout: 5 * time.Second}
			devs, err := s.Devices(context.Background(), tc.memory)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, devs)
		})
	}
}

func TestSMIRunnerTimeout(t *testing.T) {
	for _, tc := range []struct{ desc, script string }{
		{"hangs", "sleep 30"},
		// A grandchild holds the pipes after the shell is killed; the
		// process-group kill and WaitDelay must still return.
		{"child holds the pipes", "sleep 30 & sleep 30"},
		{"prints then hangs", "echo '0, 00000000:18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]'; sleep 30"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &SMI{Path: writeScript(t, tc.script), Timeout: 300 * time.Millisecond}
			start := time.Now()
			devs, err := s.Devices(context.Background(), ReadList)
			elapsed := time.Since(start)
			require.ErrorContains(t, err, "nvidia-smi: no answer in")
			require.Nil(t, devs)
			require.Less(t, elapsed, 300*time.Millisecond+smiWaitDelay+500*time.Millisecond)
		})
	}
}

func TestSMIExitedChildHoldsPipes(t *testing.T) {
	// nvidia-smi exits 0 but leaves a child holding stdout: the output is
	// used once WaitDelay gives up on the pipe.
	s := &SMI{Path: writeScript(t, "echo 'No devices were found'; (sleep 30) &"), Timeout: 10 * time.Second}
	start := time.Now()
	devs, err := s.Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.Empty(t, devs)
	require.Less(t, time.Since(start), smiWaitDelay+2*time.Second)
}

func TestFindSMI(t *testing.T) {
	_, err := (&SMI{Path: "/nonexistent/nvidia-smi", Timeout: time.Second}).Devices(context.Background(), ReadList)
	require.ErrorContains(t, err, "nvidia-smi: stat /nonexistent/nvidia-smi")

	root := t.TempDir()
	_, err = findSMI("kubemedic-test-no-such-smi", host.Root(root))
	require.ErrorContains(t, err, "not found on PATH or under "+root)

	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/local/nvidia/bin"), 0o755))
	want := filepath.Join(root, "usr/local/nvidia/bin/kubemedic-test-no-such-smi")
	require.NoError(t, os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755))
	got, err := findSMI("kubemedic-test-no-such-smi", host.Root(root))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// smiFake is an nvidia-smi standing in for a real one, answering from
// fixtures: --query-gpu from gpu (or, when the query names a field in
// reject, that field's rejection as an older nvidia-smi prints it, exit
// status 2), --query-remapped-rows from rows, -q -d ECC from ecc (""
// prints "Segmentation fault" and exits 139; a name starting with "exit
// N " prints the rest of the name's fixture and exits N; "hang" sleeps). It logs each invocation's arguments, one
// line each, to the file that log returns.
type smiFake struct {
	gpu, rows, ecc string
	reject         []string
}

// smiRejection is the fixture with nvidia-smi's answer to a --query-gpu
// naming field, which it does not know.
var smiRejection = map[string]string{
	"gpu_recovery_action": "query-gpu-rejected-recovery-action.txt",
	"ecc.errors.uncorrected.aggregate.sram.thresholdExceeded": "query-gpu-rejected-sram-threshold.txt",
	"remapped_rows.histogram.none":                            "query-gpu-rejected-histogram-none.txt",
}

func (f smiFake) script(t *testing.T) (path, log string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "gpu"))
	require.NoError(t, err)
	fx := func(name string) string { return "'" + filepath.Join(dir, name) + "'" }
	log = filepath.Join(t.TempDir(), "invocations")
	var b strings.Builder
	b.WriteString("echo \"$*\" >> '" + log + "'\ncase \"$1\" in\n--query-gpu=*)\n")
	for _, name := range f.reject {
		b.WriteString("\tcase \"$1\" in *" + name + "*) cat " + fx(smiRejection[name]) + "; exit 2;; esac\n")
	}
	b.WriteString("\tcat " + fx(f.gpu) + ";;\n--query-remapped-rows=*) cat " + fx(f.rows) + ";;\n")
	switch code, name, _ := strings.Cut(strings.TrimPrefix(f.ecc, "exit "), " "); {
	case f.ecc == "":
		b.WriteString("-q) echo 'Segmentation fault'; exit 139;;\n")
	case f.ecc == "hang":
		b.WriteString("-q) exec sleep 30;;\n")
	case strings.HasPrefix(f.ecc, "exit "):
		b.WriteString("-q) cat " + fx(name) + "; exit " + code + ";;\n")
	default:
		b.WriteString("-q) cat " + fx(f.ecc) + ";;\n")
	}
	b.WriteString("*) exit 1;;\nesac\n")
	return writeScript(t, b.String()), log
}

func invocations(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// verdict is the part of a Device the driver's verdict fills.
type verdict struct {
	Recovery                                     Recovery
	Unrepairable, SRAM, ChannelRepair, TPCRepair Flag
	BanksWithoutSpareRows                        Count
	Unsupported                                  []string
	ReadErr                                      string
}

func verdictOf(d Device) verdict {
	return verdict{d.RecoveryAction, d.UnrepairableMemory, d.SRAMThresholdExceeded, d.ChannelRepairPending, d.TPCRepairPending, d.BanksWithoutSpareRows, d.Unsupported, d.ReadErr}
}

// withoutVerdict is d with the verdict fields (and ReadErr) zeroed: the
// evidence the checks had before issue 19.
func withoutVerdict(d Device) Device {
	d.RecoveryAction, d.UnrepairableMemory, d.SRAMThresholdExceeded = Recovery{}, Flag{}, Flag{}
	d.ChannelRepairPending, d.TPCRepairPending, d.BanksWithoutSpareRows = Flag{}, Flag{}, Count{}
	d.Unsupported, d.ReadErr = nil, ""
	return d
}

const (
	smiQueryAll       = "--query-gpu=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe,gpu_recovery_action,ecc.errors.uncorrected.aggregate.sram.thresholdExceeded,remapped_rows.histogram.none --format=csv,noheader"
	smiQueryNoRecover = "--query-gpu=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe,ecc.errors.uncorrected.aggregate.sram.thresholdExceeded,remapped_rows.histogram.none --format=csv,noheader"
	smiQueryNoSRAM    = "--query-gpu=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe,remapped_rows.histogram.none --format=csv,noheader"
	smiQueryBase      = "--query-gpu=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe --format=csv,noheader"
	smiQueryRows      = "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable --format=csv,noheader"
)

// TestSMIVerdict reads the driver's verdict (issue 19) through a fake
// nvidia-smi answering from the real H100 outputs and variants derived
// from them (detectors/testdata/gpu/README.md): every verdict field of the
// first GPU exactly, the invocations, and that the evidence read before
// issue 19 is the same as the baseline's, whatever the verdict fields say
// or an older nvidia-smi rejects.
func TestSMIVerdict(t *testing.T) {
	h100 := Device{Index: 0, BusID: "0000:00:06.0", UUID: "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced",
		VolatileDBE: Count{0, true}, RowRemapPending: Flag{false, true}, RowRemapFailed: Flag{false, true}, RemappedUncorrectable: Count{0, true}}
	healthy := verdict{Recovery: Recovery{gpuaction.None, true}, Unrepairable: Flag{false, true}, SRAM: Flag{false, true},
		ChannelRepair: Flag{false, true}, TPCRepair: Flag{false, true}, BanksWithoutSpareRows: Count{0, true}}
	with := func(edit func(v *verdict)) verdict {
		v := healthy
		edit(&v)
		return v
	}
	h100Fake := func(gpu, ecc string) smiFake {
		return smiFake{gpu: gpu, rows: "remapped-rows-h100x1-captured.txt", ecc: ecc}
	}
	// The baselines: what the same fixtures gave before issue 19, read
	// with the queries of then.
	parse := func(gpu, rows string) []Device {
		devs, err := ParseQueryGPU(fixture(t, gpu), 0)
		require.NoError(t, err)
		r, err := ParseRemappedRows(fixture(t, rows), 0)
		require.NoError(t, err)
		out := mergeRemap(devs, r, nil)
		for i := range out {
			out[i] = withoutVerdict(out[i])
		}
		return out
	}
	a100x8 := parse("query-gpu-a100x8-healthy.txt", "remapped-rows-a100x8-healthy.txt")
	v100x8 := parse("query-gpu-v100x8-healthy.txt", "remapped-rows-v100x8-na.txt")
	a100x1 := parse("query-gpu-a100x1-verdict-na.txt", "remapped-rows-a100x1-healthy.txt")
	v100x1 := parse("query-gpu-v100x1-verdict-na.txt", "remapped-rows-v100x1-na.txt")
	eccOn := []string{smiQueryAll, smiQueryRows, "-q -d ECC"}

	for _, tc := range []struct {
		desc    string
		fake    smiFake
		noECC   bool
		timeout time.Duration
		want    verdict
		old     []Device // the evidence read before issue 19, every GPU
		invoked []string
	}{
		{desc: "H100 as captured", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: healthy, old: []Device{h100}, invoked: eccOn},
		{desc: "H100 without -q -d ECC (ECCSection off)", fake: h100Fake("query-gpu-h100x1-captured.txt", ""), noECC: true,
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.Unsupported = []string{"repair status", "unrepairable memory"}
			}), old: []Device{h100}, invoked: []string{smiQueryAll, smiQueryRows}},
		{desc: "recovery action Reset", fake: h100Fake("query-gpu-h100x1-recovery-reset.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.Recovery = Recovery{gpuaction.GPUReset, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "recovery action Reboot", fake: h100Fake("query-gpu-h100x1-recovery-reboot.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.Recovery = Recovery{gpuaction.NodeReboot, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "recovery action Drain P2P", fake: h100Fake("query-gpu-h100x1-recovery-drain-p2p.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.Recovery = Recovery{gpuaction.DrainP2P, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "recovery action Drain and Reset", fake: h100Fake("query-gpu-h100x1-recovery-drain-and-reset.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.Recovery = Recovery{gpuaction.DrainAndReset, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "recovery action Unknown Error is a read error", fake: h100Fake("query-gpu-h100x1-recovery-unknown-error.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) {
				v.Recovery = Recovery{}
				v.ReadErr = "gpu_recovery_action: [Unknown Error]"
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "SRAM threshold exceeded", fake: h100Fake("query-gpu-h100x1-sram-threshold.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.SRAM = Flag{true, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "banks without spare rows", fake: h100Fake("query-gpu-h100x1-banks-none.txt", "nvidia-smi-q-d-ecc-h100x1-captured.txt"),
			want: with(func(v *verdict) { v.BanksWithoutSpareRows = Count{3, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "channel repair pending", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-channel-repair.txt"),
			want: with(func(v *verdict) { v.ChannelRepair = Flag{true, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "TPC repair pending", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-tpc-repair.txt"),
			want: with(func(v *verdict) { v.TPCRepair = Flag{true, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "unrepairable memory", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-unrepairable.txt"),
			want: with(func(v *verdict) { v.Unrepairable = Flag{true, true} }), old: []Device{h100}, invoked: eccOn},
		{desc: "unrepairable memory Unknown Error is a read error", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-unrepairable-unknown-error.txt"),
			want: with(func(v *verdict) {
				v.Unrepairable = Flag{}
				v.ReadErr = "Unrepairable Memory: [Unknown Error]"
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "-q -d ECC without the repair lines: an older nvidia-smi", fake: h100Fake("query-gpu-h100x1-captured.txt", "nvidia-smi-q-d-ecc-h100x1-no-repair-lines.txt"),
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.Unsupported = []string{"repair status", "unrepairable memory"}
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "-q -d ECC crashes: read error, the rest kept", fake: h100Fake("query-gpu-h100x1-captured.txt", ""),
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.ReadErr = "nvidia-smi -q -d ECC: exit status 139: Segmentation fault"
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "-q -d ECC refused (as driver 580 refuses -q -x -d ECC): read error, the rest kept",
			fake: h100Fake("query-gpu-h100x1-captured.txt", "exit 2 nvidia-smi-q-x-d-ecc-rejected.txt"),
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.ReadErr = "nvidia-smi -q -d ECC: exit status 2: Invalid combination of input arguments: --display/-d flags can not be combined with -x/--xml-format flags."
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "-q -d ECC answers something else: read error, the rest kept",
			fake: h100Fake("query-gpu-h100x1-captured.txt", "remapped-rows-h100x1-captured.txt"),
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.ReadErr = "nvidia-smi -q -d ECC: not nvidia-smi's -q log: 00000000:00:06.0, No, No, 0"
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "-q -d ECC times out: read error, the rest kept", fake: h100Fake("query-gpu-h100x1-captured.txt", "hang"), timeout: time.Second,
			want: with(func(v *verdict) {
				v.ChannelRepair, v.TPCRepair, v.Unrepairable = Flag{}, Flag{}, Flag{}
				v.ReadErr = "nvidia-smi -q -d ECC: nvidia-smi: no answer in 1s"
			}), old: []Device{h100}, invoked: eccOn},
		{desc: "A100 whose nvidia-smi rejects gpu_recovery_action",
			fake: smiFake{gpu: "query-gpu-a100x8-no-recovery-action.txt", rows: "remapped-rows-a100x8-healthy.txt", ecc: "nvidia-smi-q-d-ecc-h100x1-captured.txt", reject: []string{"gpu_recovery_action"}},
			want: verdict{SRAM: Flag{false, true}, BanksWithoutSpareRows: Count{0, true}, Unsupported: []string{"recovery action", "repair status", "unrepairable memory"}},
			old:  a100x8, invoked: []string{smiQueryAll, smiQueryNoRecover, smiQueryRows}},
		{desc: "V100 whose nvidia-smi rejects every verdict field",
			fake: smiFake{gpu: "query-gpu-v100x8-healthy.txt", rows: "remapped-rows-v100x8-na.txt", reject: []string{"gpu_recovery_action", "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", "remapped_rows.histogram.none"}},
			want: verdict{Unsupported: []string{"recovery action", "SRAM threshold", "row remapper histogram", "repair status", "unrepairable memory"}},
			old:  v100x8, invoked: []string{smiQueryAll, smiQueryNoRecover, smiQueryNoSRAM, smiQueryBase, smiQueryRows}},
		{desc: "A100: recovery action and the -q -d ECC verdict N/A",
			fake: smiFake{gpu: "query-gpu-a100x1-verdict-na.txt", rows: "remapped-rows-a100x1-healthy.txt", ecc: "nvidia-smi-q-d-ecc-a100x1-na.txt"},
			want: verdict{SRAM: Flag{false, true}, BanksWithoutSpareRows: Count{0, true}, Unsupported: []string{"recovery action", "repair status", "unrepairable memory"}},
			old:  a100x1, invoked: eccOn},
		{desc: "V100 on a new driver: no row remapping, no SRAM status",
			fake: smiFake{gpu: "query-gpu-v100x1-verdict-na.txt", rows: "remapped-rows-v100x1-na.txt", ecc: "nvidia-smi-q-d-ecc-v100x1-na.txt"},
			want: verdict{Recovery: Recovery{gpuaction.None, true}, Unsupported: []string{"SRAM threshold", "row remapper histogram", "repair status", "unrepairable memory"}},
			old:  v100x1, invoked: eccOn},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path, log := tc.fake.script(t)
			timeout := 5 * time.Second
			if tc.timeout != 0 {
				timeout = tc.timeout
			}
			s := &SMI{Path: path, Timeout: timeout, ECCSection: !tc.noECC}
			devs, err := s.Devices(context.Background(), ReadMemory)
			require.NoError(t, err)
			require.Equal(t, tc.want, verdictOf(devs[0]))
			for i := 1; i < len(devs); i++ {
				require.Equal(t, verdictOf(devs[0]).Unsupported, devs[i].Unsupported, "GPU %d", i)
			}
			old := make([]Device, len(devs))
			for i, d := range devs {
				old[i] = withoutVerdict(d)
			}
			require.Equal(t, tc.old, old)
			require.Equal(t, tc.invoked, invocations(t, log))
		})
	}
}

// Without memory the gpu check runs the query of before issue 19 alone,
// and reads no verdict field.
func TestSMIVerdictNotForGPUCheck(t *testing.T) {
	path, log := smiFake{gpu: "query-gpu-h100x8-healthy.txt"}.script(t)
	devs, err := (&SMI{Path: path, Timeout: 5 * time.Second, ECCSection: true}).Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, verdict{}, verdictOf(devs[0]))
	require.Equal(t, []string{smiQueryBase}, invocations(t, log))
}

// A base field rejected is not a verdict field to drop: the output is
// unexplained, and the backend fails as before.
func TestSMIBaseFieldRejected(t *testing.T) {
	s := &SMI{Path: writeScript(t, `echo 'Field "retired_pages.sbe" is not a valid field to query.'; echo; exit 2`), Timeout: 5 * time.Second}
	_, err := s.Devices(context.Background(), ReadMemory)
	require.ErrorContains(t, err, `unexpected output line "Field \"retired_pages.sbe\" is not a valid field to query."`)
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
