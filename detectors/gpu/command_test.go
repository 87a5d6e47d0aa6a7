package gpu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

type fakeBackend struct {
	name  string
	devs  []Device
	err   error
	calls int
}

func (f *fakeBackend) Name() string { return f.name }
func (f *fakeBackend) Devices(context.Context, Read) ([]Device, error) {
	f.calls++
	return f.devs, f.err
}

func testEnv(t *testing.T, root string) *plugin.Env {
	return &plugin.Env{Root: host.Root(root), Node: "gpu-1", Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func driverRoot(t *testing.T, ids ...string) string {
	root := t.TempDir()
	for _, id := range ids {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/driver/nvidia/gpus", id), 0o755))
	}
	return root
}

func TestListDevicesFallback(t *testing.T) {
	env := testEnv(t, "")
	nv := &fakeBackend{name: "nvml", err: libraryNotFoundError("nvml: libnvidia-ml.so.1 not found")}
	smi := &fakeBackend{name: "nvidia-smi", devs: healthy(8)}
	devs, name, err := listDevices(context.Background(), env, []Backend{nv, smi}, ReadList)
	require.NoError(t, err)
	require.Equal(t, "nvidia-smi", name)
	require.Len(t, devs, 8)

	// Any other NVML failure is reported, not papered over by nvidia-smi.
	nv = &fakeBackend{name: "nvml", err: errors.New("nvml: init: NVIDIA driver not loaded")}
	smi = &fakeBackend{name: "nvidia-smi", devs: healthy(8)}
	_, _, err = listDevices(context.Background(), env, []Backend{nv, smi}, ReadList)
	require.EqualError(t, err, "nvml: init: NVIDIA driver not loaded")
	require.Zero(t, smi.calls)

	nv = &fakeBackend{name: "nvml", err: libraryNotFoundError("nvml: libnvidia-ml.so.1 not found")}
	smi = &fakeBackend{name: "nvidia-smi", err: errors.New("nvidia-smi: not found on PATH or under /")}
	_, _, err = listDevices(context.Background(), env, []Backend{nv, smi}, ReadList)
	require.EqualError(t, err, "nvml: libnvidia-ml.so.1 not found; nvidia-smi: not found on PATH or under /")
}

func TestBackendSelection(t *testing.T) {
	env := testEnv(t, "")
	names := func(o backendOptions) ([]string, error) {
		bs, err := o.backends(env)
		var out []string
		for _, b := range bs {
			out = append(out, b.Name())
		}
		return out, err
	}
	for _, tc := range []struct {
		o       backendOptions
		want    []string
		wantErr string
	}{
		{o: backendOptions{backend: "auto"}, want: []string{"nvml", "nvidia-smi"}},
		{o: backendOptions{backend: "auto", dcgmAddr: "localhost:5555"}, want: []string{"dcgm"}},
		{o: backendOptions{backend: "nvml"}, want: []string{"nvml"}},
		{o: backendOptions{backend: "nvidia-smi"}, want: []string{"nvidia-smi"}},
		{o: backendOptions{backend: "dcgm", dcgmAddr: "h:1"}, want: []string{"dcgm"}},
		{o: backendOptions{backend: "dcgm"}, wantErr: "--backend=dcgm needs --dcgm-address"},
		{o: backendOptions{backend: "rocm"}, wantErr: `--backend: "rocm" is not auto, nvml, dcgm or nvidia-smi`},
	} {
		got, err := names(tc.o)
		if tc.wantErr != "" {
			require.EqualError(t, err, tc.wantErr)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

func TestCheckLost(t *testing.T) {
	labels := func(l map[string]string, err error) labelsFunc {
		return func(context.Context, string) (map[string]string, error) { return l, err }
	}
	noCall := func(context.Context, string) (map[string]string, error) {
		t.Fatal("labels read although --expected-gpus is set")
		return nil, nil
	}
	for _, tc := range []struct {
		desc     string
		root     string
		backend  *fakeBackend
		expected int
		labels   labelsFunc
		want     string
		status   plugin.Status
	}{
		{desc: "flag", backend: &fakeBackend{name: "nvml", devs: healthy(8)}, expected: 8, labels: noCall,
			want: "8 of 8 GPUs healthy (nvml)", status: plugin.StatusOK},
		{desc: "label", backend: &fakeBackend{name: "nvml", devs: healthy(8)}, labels: labels(map[string]string{GPUCountLabel: "8"}, nil),
			want: "8 of 8 GPUs healthy (nvml)", status: plugin.StatusOK},
		{desc: "label says more", backend: &fakeBackend{name: "nvml", devs: healthy(7)}, labels: labels(map[string]string{GPUCountLabel: "8"}, nil),
			want: "GPUCountMismatch: 7 of 8 GPUs visible", status: plugin.StatusNonOK},
		{desc: "driver dir names the missing GPU", root: "driver", backend: &fakeBackend{name: "nvml", devs: healthy(8)[1:]}, expected: 8, labels: noCall,
			want: "GPUCountMismatch: 7 of 8 GPUs visible; missing 0000:18:00.0", status: plugin.StatusNonOK},
		{desc: "no label", backend: &fakeBackend{name: "nvml", devs: healthy(8)}, labels: labels(map[string]string{}, nil),
			want: "no expected GPU count (8 visible): node gpu-1 has no nvidia.com/gpu.count label", status: plugin.StatusUnknown},
		{desc: "bad label", backend: &fakeBackend{name: "nvml", devs: healthy(8)}, labels: labels(map[string]string{GPUCountLabel: "eight"}, nil),
			want: `no expected GPU count (8 visible): node gpu-1 label nvidia.com/gpu.count="eight" is not a positive number`, status: plugin.StatusUnknown},
		{desc: "labels unreadable", backend: &fakeBackend{name: "nvml", devs: healthy(8)}, labels: labels(nil, errors.New("HTTP 403: forbidden")),
			want: "no expected GPU count (8 visible): read node labels: HTTP 403: forbidden", status: plugin.StatusUnknown},
		{desc: "backend fails", backend: &fakeBackend{name: "nvml", err: errors.New("nvml: init: ERROR_UNKNOWN")}, expected: 8, labels: noCall,
			want: "gpu: nvml: init: ERROR_UNKNOWN", status: plugin.StatusUnknown},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			if tc.root == "driver" {
				root = driverRoot(t, busIDs...)
			}
			r := checkLost(context.Background(), testEnv(t, root), []Backend{tc.backend}, tc.expected, tc.labels)
			require.Equal(t, tc.status, r.Status)
			require.Equal(t, tc.want, r.Line())
		})
	}
}

func TestCheckMemory(t *testing.T) {
	env := testEnv(t, "")
	r := checkMemory(context.Background(), env, []Backend{&fakeBackend{name: "nvml", err: errors.New("nvml: init: ERROR_UNKNOWN")}}, Thresholds{DBE: 1})
	require.Equal(t, plugin.Unknown("gpu-memory: nvml: init: ERROR_UNKNOWN"), r)
	r = checkMemory(context.Background(), env, []Backend{&fakeBackend{name: "nvml", devs: healthy(8)}}, Thresholds{DBE: 1})
	require.Equal(t, plugin.StatusOK, r.Status)
}

func TestDriverBusIDs(t *testing.T) {
	ids, present, err := DriverBusIDs(host.Root(t.TempDir()))
	require.NoError(t, err)
	require.False(t, present)
	require.Nil(t, ids)

	root := driverRoot(t, "0000:3b:00.0", "0000:18:00.0", "not-a-bus-id")
	ids, present, err = DriverBusIDs(host.Root(root))
	require.NoError(t, err)
	require.True(t, present)
	require.Equal(t, []string{"0000:18:00.0", "0000:3b:00.0"}, ids)
}

// The commands end to end through plugin.Main with nvidia-smi scripts:
// exit codes and lines as NPD sees them.
func TestCommandsEndToEnd(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "gpu"))
	require.NoError(t, err)
	lost := writeScript(t, "cat '"+filepath.Join(dir, "query-gpu-h100x8-one-lost.txt")+"'; exit 15")
	pending := writeScript(t, "case \"$1\" in --query-gpu=*) cat '"+filepath.Join(dir, "query-gpu-a100x8-healthy.txt")+"';; *) cat '"+filepath.Join(dir, "remapped-rows-a100x8-pending.txt")+"';; esac")
	fieldLost := writeScript(t, "cat '"+filepath.Join(dir, "query-gpu-a100-field-lost.txt")+"'")
	hang := writeScript(t, "sleep 30")
	cmds := []*plugin.Command{Command(), MemoryCommand()}
	for _, tc := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"gpu", "--backend=nvidia-smi", "--nvidia-smi=" + lost, "--expected-gpus=8"}, 1, "GPUFellOffBus: GPU 0000:3a:00.0 is lost (fell off the bus); reboot required"},
		{[]string{"gpu", "--backend=nvidia-smi", "--nvidia-smi=" + fieldLost, "--expected-gpus=2"}, 1, "GPUFellOffBus: GPU 0000:0f:00.0 (GPU-a7abe1c2-9e1a-8ef4-f341-e07a83f73f16) is lost (fell off the bus); reboot required"},
		{[]string{"gpu-memory", "--backend=nvidia-smi", "--nvidia-smi=" + pending}, 1, "RowRemapPending: row remap pending on 0000:4e:00.0 (GPU-4f426dcb-b394-fb36-bb2d-420f0f88080b); reset GPU"},
		{[]string{"gpu-memory", "--backend=nvidia-smi", "--nvidia-smi=" + hang, "--nvidia-smi-timeout=200ms"}, 2, "gpu-memory: nvidia-smi: no answer in 200ms"},
		{[]string{"gpu", "--backend=nvidia-smi", "--nvidia-smi=/nonexistent/nvidia-smi", "--expected-gpus=8"}, 2, "gpu: nvidia-smi: stat /nonexistent/nvidia-smi: no such file or directory"},
		{[]string{"gpu", "--backend=dcgm", "--expected-gpus=8"}, 2, "gpu: --backend=dcgm needs --dcgm-address"},
	} {
		t.Run(tc.args[0]+" "+tc.args[1], func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := plugin.Main(cmds, append(tc.args, "--root="+t.TempDir()), &out, &errOut)
			require.Equal(t, tc.code, code, "stderr: %s", errOut.String())
			require.Equal(t, tc.line+"\n", out.String())
		})
	}
}

// TestCapturedH100 runs gpu-memory on nvidia-smi output captured on a real
// H100 (detectors/testdata/gpu/*-h100x1-captured.*): healthy as captured,
// then with the remapped-rows failure flag set to Yes, then with -q -d ECC
// saying a repair is pending or the memory unrepairable, then with
// -q -d ECC failing. The reset-gpu template's GPU_BUS_ID regex takes the
// bus ID from the line, and gpuwire.GPUFromMessage the bus ID and the
// UUID nvidia-smi printed. Each run makes exactly the three invocations.
func TestCapturedH100(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "gpu"))
	require.NoError(t, err)
	fx := func(name string) string { return filepath.Join(dir, name) }
	gpu := fx("query-gpu-h100x1-captured.txt")
	rows, err := os.ReadFile(fx("remapped-rows-h100x1-captured.txt"))
	require.NoError(t, err)
	require.Equal(t, "00000000:00:06.0, No, No, 0\n", string(rows))
	failed := filepath.Join(t.TempDir(), "remapped-rows-failed.txt")
	require.NoError(t, os.WriteFile(failed, []byte("00000000:00:06.0, No, Yes, 1\n"), 0o644))
	const (
		bus  = "0000:00:06.0"
		uuid = "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced"
	)
	busRe := templateBusRegex(t)
	captured := fx("remapped-rows-h100x1-captured.txt")
	eccCaptured := "cat '" + fx("nvidia-smi-q-d-ecc-h100x1-captured.txt") + "'"
	for _, tc := range []struct {
		desc string
		rows string
		ecc  string // the shell answer to -q -d ECC
		code int
		line string
	}{
		{"as captured", captured, eccCaptured, 0, "1 GPU without memory faults (nvidia-smi)"},
		{"row remap failed", failed, eccCaptured, 1, "RowRemapFailed: row remap failed on " + bus + " (" + uuid + "); replace GPU"},
		{"unrepairable memory", captured, "cat '" + fx("nvidia-smi-q-d-ecc-h100x1-unrepairable.txt") + "'", 1,
			"UnrepairableMemory: memory unrepairable on " + bus + " (" + uuid + "); replace GPU"},
		{"channel repair pending", captured, "cat '" + fx("nvidia-smi-q-d-ecc-h100x1-channel-repair.txt") + "'", 1,
			"RepairPending: channel or TPC repair pending on " + bus + " (" + uuid + "); reset GPU"},
		{"TPC repair pending", captured, "cat '" + fx("nvidia-smi-q-d-ecc-h100x1-tpc-repair.txt") + "'", 1,
			"RepairPending: channel or TPC repair pending on " + bus + " (" + uuid + "); reset GPU"},
		{"-q -d ECC fails", captured, "echo 'Segmentation fault'; exit 139", 2,
			"cannot read " + bus + ": nvidia-smi -q -d ECC: exit status 139: Segmentation fault"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "invocations")
			smi := writeScript(t, "echo \"$*\" >> '"+log+"'\ncase \"$1\" in --query-gpu=*) cat '"+gpu+"';; --query-remapped-rows=*) cat '"+tc.rows+"';; -q) "+tc.ecc+";; *) exit 2;; esac")
			var out, errOut bytes.Buffer
			code := plugin.Main([]*plugin.Command{MemoryCommand()}, []string{"gpu-memory", "--backend=nvidia-smi", "--nvidia-smi=" + smi, "--root=" + t.TempDir()}, &out, &errOut)
			require.Equal(t, tc.code, code, "stderr: %s", errOut.String())
			line := strings.TrimSuffix(out.String(), "\n")
			require.Equal(t, tc.line, line)
			require.Equal(t, []string{smiQueryAll, smiQueryRows, "-q -d ECC"}, invocations(t, log))
			if tc.code != 1 {
				return
			}
			require.Equal(t, []string{bus, bus}, busRe.FindStringSubmatch(line))
			gotBus, gotUUID := gpuwire.GPUFromMessage(line)
			require.Equal(t, bus, gotBus)
			require.Equal(t, uuid, gotUUID)
		})
	}
}

// The backends() the checks build, and what each check runs: gpu-memory
// reads the remapped rows and the -q -d ECC section too; gpu-recovery
// needs only the recovery action, which the verdict --query-gpu holds; the
// gpu check, which asks no signal, runs the base --query-gpu.
func TestCommandsSMIInvocations(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "gpu"))
	require.NoError(t, err)
	fx := func(name string) string { return "'" + filepath.Join(dir, name) + "'" }
	bs, err := (&backendOptions{backend: "nvidia-smi"}).backends(testEnv(t, ""))
	require.NoError(t, err)
	require.True(t, bs[0].(*SMI).ECCSection)
	for _, tc := range []struct {
		cmd     *plugin.Command
		args    []string
		line    string
		invoked []string
	}{
		{Command(), []string{"--expected-gpus=8"}, "8 of 8 GPUs healthy (nvidia-smi)", []string{smiQueryBase}},
		{MemoryCommand(), nil, "1 GPU without memory faults (nvidia-smi)", []string{smiQueryAll, smiQueryRows, "-q -d ECC"}},
		{RecoveryCommand(), nil, "1 GPUs, the driver asks no recovery (nvidia-smi)", []string{smiQueryAll}},
	} {
		t.Run(tc.cmd.Name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "invocations")
			smi := writeScript(t, "echo \"$*\" >> '"+log+"'\ncase \"$1\" in "+
				smiQueryBase[:strings.Index(smiQueryBase, " ")]+") cat "+fx("query-gpu-h100x8-healthy.txt")+";; "+
				"--query-gpu=*) cat "+fx("query-gpu-h100x1-captured.txt")+";; "+
				"--query-remapped-rows=*) cat "+fx("remapped-rows-h100x1-captured.txt")+";; "+
				"-q) cat "+fx("nvidia-smi-q-d-ecc-h100x1-captured.txt")+";; *) exit 2;; esac")
			var out, errOut bytes.Buffer
			args := append([]string{tc.cmd.Name, "--backend=nvidia-smi", "--nvidia-smi=" + smi, "--root=" + t.TempDir()}, tc.args...)
			code := plugin.Main([]*plugin.Command{tc.cmd}, args, &out, &errOut)
			require.Equal(t, 0, code, "stderr: %s", errOut.String())
			require.Equal(t, tc.line+"\n", out.String())
			require.Equal(t, tc.invoked, invocations(t, log))
		})
	}
}
