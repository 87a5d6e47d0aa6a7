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
		memory  bool
		wantErr string
		check   func(t *testing.T, devs []Device)
	}{
		{desc: "healthy", script: answer("query-gpu-a100x8-healthy.txt", "remapped-rows-a100x8-pending.txt", 0), memory: true, check: func(t *testing.T, devs []Device) {
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
		{desc: "remap query fails: read error, not a failure", script: "case \"$1\" in --query-gpu=*) cat '" + filepath.Join(dir, "query-gpu-a100x8-healthy.txt") + "';; *) echo 'Segmentation fault'; exit 139;; esac", memory: true, check: func(t *testing.T, devs []Device) {
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
			devs, err := s.Devices(context.Background(), false)
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
	devs, err := s.Devices(context.Background(), false)
	require.NoError(t, err)
	require.Empty(t, devs)
	require.Less(t, time.Since(start), smiWaitDelay+2*time.Second)
}

func TestFindSMI(t *testing.T) {
	_, err := (&SMI{Path: "/nonexistent/nvidia-smi", Timeout: time.Second}).Devices(context.Background(), false)
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
