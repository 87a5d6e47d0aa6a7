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
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "gpu", name))
	require.NoError(t, err)
	return b
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
