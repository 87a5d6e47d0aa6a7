package run

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/validationtest"
)

// tool writes an executable shell script named name into dir.
func tool(t *testing.T, dir, name, script string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	return p
}

// q quotes a path for the shell: test directories have parentheses.
func q(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }

func fixture(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", rel))
	require.NoError(t, err)
	_, err = os.Stat(p)
	require.NoError(t, err)
	return p
}

// smiList is nvidia-smi's answer to smiQuery on a node of n GPUs of a
// model, in the form the real H100 of shared/fixtures answered -q with
// (UUID, name, 8-digit domain, serial).
func smiList(n int, name string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d, %s, %s, 00000000:%02X:00.0, 16549220083%02d\n", i, strings.ToUpper(uuid(i)), name, 0x18+i, i)
	}
	return b.String()
}

var uuid = validationtest.UUID

type result struct {
	exit   int
	report validation.Report
	stdout string
	stderr string
}

// run runs Main with a fake nvidia-smi listing gpus and reads the report
// it wrote.
func runMain(t *testing.T, dir, smiOut string, args ...string) result {
	t.Helper()
	smi := tool(t, dir, "nvidia-smi", "cat <<'EOF'\n"+smiOut+"EOF")
	log := filepath.Join(dir, "termination-log")
	_ = os.Remove(log)
	var stdout, stderr bytes.Buffer
	exit := Main(append(args, "--nvidia-smi", smi, "--termination-log", log), &stdout, &stderr, func(string) string { return "" })
	b, err := os.ReadFile(log)
	require.NoError(t, err, "no report written; stderr: %s", stderr.String())
	require.LessOrEqual(t, len(b), validation.MaxReport)
	r, err := validation.Decode(string(b))
	require.NoError(t, err, "the report the gate reads: %s", b)
	return result{exit: exit, report: r, stdout: stdout.String(), stderr: stderr.String()}
}

const h100 = "NVIDIA H100 80GB HBM3"

func TestDCGM(t *testing.T) {
	dcgm3 := fixture(t, "dcgmdiag/testdata/dcgm-3.1.0-8gpu-pass.txt")
	t.Run("8 GPUs pass (DCGM 3.1.0's real output)", func(t *testing.T) {
		dir := t.TempDir()
		dcgmi := tool(t, dir, "dcgmi", `echo "$@" > `+q(dir+"/args")+`; cat `+q(dcgm3))
		res := runMain(t, dir, smiList(8, h100), "dcgm", "--tool-path", dcgmi)
		require.Equal(t, ExitPass, res.exit, res.stdout)
		require.Equal(t, validation.VerdictPass, res.report.Verdict)
		require.Equal(t, "dcgmi diag -r 2 -j (DCGM 3.1.0)", res.report.Tool)
		require.Equal(t, h100, res.report.Model)
		require.Len(t, res.report.GPUs, 8)
		require.Equal(t, uuid(7), res.report.GPUs[7].UUID)
		args, _ := os.ReadFile(filepath.Join(dir, "args"))
		require.Equal(t, "diag -r 2 -j\n", string(args))
		require.Contains(t, res.stdout, "kubemedic-validate dcgm: Pass (NVIDIA H100 80GB HBM3; dcgmi diag -r 2 -j (DCGM 3.1.0))")
		require.Contains(t, res.stdout, "  "+uuid(0)+"  Pass")
	})
	t.Run("GPU 3 fails, dcgmi exits 226", func(t *testing.T) {
		dir := t.TempDir()
		// The real output with GPU 3's software result set to FAIL.
		dcgmi := tool(t, dir, "dcgmi", `sed '/"gpu_ids" : 3,/{n;s/PASS/FAIL/}' `+q(dcgm3)+`; exit 226`)
		res := runMain(t, dir, smiList(8, h100), "dcgm", "--tool-path", dcgmi, "--dcgm-level", "3")
		require.Equal(t, ExitFail, res.exit, res.stdout)
		require.Equal(t, []string{uuid(3)}, validation.Failing(res.report))
		require.Equal(t, []string{"software"}, res.report.GPUs[3].Failed)
		require.Equal(t, "dcgmi diag -r 3 -j (DCGM 3.1.0)", res.report.Tool)
		require.Contains(t, res.stdout, uuid(3)+"  Fail      failed: software")
	})
	t.Run("truncated JSON is no answer", func(t *testing.T) {
		dir := t.TempDir()
		dcgmi := tool(t, dir, "dcgmi", `head -c 1500 `+q(dcgm3))
		res := runMain(t, dir, smiList(8, h100), "dcgm", "--tool-path", dcgmi)
		require.Equal(t, ExitNoAnswer, res.exit)
		require.Equal(t, validation.VerdictNoAnswer, res.report.Verdict)
		require.Contains(t, res.report.Reason, "dcgmi diag -r 2 -j (exit status 0): the JSON document ends early, at line 94: the output is truncated")
		require.Empty(t, res.report.GPUs)
	})
	t.Run("a pass from a tool that failed is no answer", func(t *testing.T) {
		dir := t.TempDir()
		dcgmi := tool(t, dir, "dcgmi", `cat `+q(dcgm3)+`; echo "Error: lost connection to the host engine" >&2; exit 1`)
		res := runMain(t, dir, smiList(8, h100), "dcgm", "--tool-path", dcgmi)
		require.Equal(t, ExitNoAnswer, res.exit)
		require.Contains(t, res.report.Reason, `exited with status 1 after output that passes; its last line: "Error: lost connection to the host engine"`)
		for _, g := range res.report.GPUs {
			require.Equal(t, validation.VerdictNoAnswer, g.Verdict)
		}
	})
}

// TestTimeoutKillsTheGroup: a tool that hangs, with a child of its own, is
// killed at the timeout, child included, and the test gives no answer.
func TestTimeoutKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	hang := tool(t, dir, "dcgmi", `sleep 300 & echo $! > `+q(dir+"/child")+`; echo '{"DCGM Diagnostic" :'; sleep 300`)
	start := time.Now()
	res := runMain(t, dir, smiList(8, h100), "dcgm", "--tool-path", hang, "--timeout", "2s")
	require.Less(t, time.Since(start), 15*time.Second)
	require.Equal(t, ExitNoAnswer, res.exit)
	require.Contains(t, res.report.Reason, `dcgmi diag -r 2 -j: timed out; its process group was killed; its last line: "{\"DCGM Diagnostic\" :"`)
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 20*time.Millisecond, "the tool's child %d outlived the timeout", child)
}

// alive: the process exists and is no zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}

func TestNCCL(t *testing.T) {
	oci := fixture(t, "nccltests/testdata/ocitutorials-a100-40gb-8gpu-10g.log")
	const a100 = "NVIDIA A100-SXM4-40GB"
	t.Run("8 A100s at 232 GB/s pass (a real run)", func(t *testing.T) {
		dir := t.TempDir()
		perf := tool(t, dir, "all_reduce_perf", `echo "$@ $CUDA_DEVICE_ORDER" > `+q(dir+"/args")+`; cat `+q(oci))
		res := runMain(t, dir, smiList(8, a100), "nccl", "--tool-path", perf)
		require.Equal(t, ExitPass, res.exit, res.stdout)
		require.Equal(t, []validation.Measurement{{Name: validation.FloorNCCLBusBW, Value: 232.13, Floor: 196.8}}, res.report.Measured)
		require.Equal(t, "all_reduce_perf -b 8 -e 8G -f 2 -g 8", res.report.Tool)
		args, _ := os.ReadFile(filepath.Join(dir, "args"))
		require.Equal(t, "-b 8 -e 8G -f 2 -g 8 PCI_BUS_ID\n", string(args))
		require.Contains(t, res.stdout, "nccl-busbw 232.1 GB/s >= floor 196.8")
	})
	t.Run("a template's floor above it fails the node, no GPU", func(t *testing.T) {
		dir := t.TempDir()
		perf := tool(t, dir, "all_reduce_perf", `cat `+q(oci))
		res := runMain(t, dir, smiList(8, a100), "nccl", "--tool-path", perf, "--floor", "nccl-busbw=240")
		require.Equal(t, ExitFail, res.exit)
		require.Equal(t, validation.VerdictFail, res.report.Verdict)
		require.Empty(t, validation.Failing(res.report))
		require.Contains(t, res.report.Reason, "< floor 240.0 (--floor nccl-busbw=240)")
	})
	t.Run("an unknown model is no answer", func(t *testing.T) {
		dir := t.TempDir()
		perf := tool(t, dir, "all_reduce_perf", `cat `+q(oci))
		res := runMain(t, dir, smiList(8, "NVIDIA H800"), "nccl", "--tool-path", perf)
		require.Equal(t, ExitNoAnswer, res.exit)
		require.Contains(t, res.report.Reason, `no nccl-busbw floor for "NVIDIA H800"`)
	})
}

func TestNVBandwidth(t *testing.T) {
	v02 := fixture(t, "nvbandwidth/testdata/issue15-rtx4090-8gpu-v0.2-head.txt")
	dir := t.TempDir()
	nvbw := tool(t, dir, "nvbandwidth", `echo "$@" > `+q(dir+"/args")+`; cat `+q(v02))
	res := runMain(t, dir, smiList(8, "NVIDIA GeForce RTX 4090"), "nvbandwidth", "--tool-path", nvbw, "--floor", "h2d=20", "--floor", "d2h=20")
	require.Equal(t, ExitPass, res.exit, res.stdout)
	require.Equal(t, "nvbandwidth -t host_to_device_memcpy_ce -t device_to_host_memcpy_ce -t device_to_device_memcpy_read_ce (nvbandwidth v0.2, driver 545.29.06)", res.report.Tool)
	require.Contains(t, res.report.Reason, `not judged: no d2d floor for "NVIDIA GeForce RTX 4090"`)
	require.Equal(t, []validation.Measurement{{Name: "h2d", Value: 23.9, Floor: 20}, {Name: "d2h", Value: 26.25, Floor: 20}}, res.report.GPUs[2].Measured)
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	require.Equal(t, "-t host_to_device_memcpy_ce -t device_to_host_memcpy_ce -t device_to_device_memcpy_read_ce\n", string(args))
}

// TestNoAnswer: what keeps the test from running or being read.
func TestNoAnswer(t *testing.T) {
	dcgm3 := fixture(t, "dcgmdiag/testdata/dcgm-3.1.0-8gpu-pass.txt")
	for _, tc := range []struct {
		desc, smi string
		args      []string
		reason    string
	}{
		{"no GPU visible", "No devices were found\n", []string{"dcgm", "--tool-path", "/bin/true"}, "no GPU visible in the test pod (nvidia-smi lists none)"},
		{"a lost GPU", smiList(7, h100) + "Unable to determine the device handle for GPU 0000:9E:00.0: GPU is lost. Reboot the system to recover this GPU\n",
			[]string{"dcgm", "--tool-path", "/bin/true"}, "nvidia-smi cannot open the GPU at 0000:9e:00.0: GPU is lost. Reboot the system to recover this GPU"},
		{"the tool is missing", smiList(8, h100), []string{"dcgm", "--tool-path", "/nonexistent/dcgmi"}, "dcgmi diag -r 2 -j: fork/exec /nonexistent/dcgmi: no such file or directory"},
		{"a bad floor", smiList(8, h100), []string{"nccl", "--floor", "busbw=300"}, `kubemedic-validate: --floor: floor "busbw=300": unknown name "busbw"`},
		{"a bad flag", smiList(8, h100), []string{"nvbandwidth", "--level", "2"}, "kubemedic-validate: unknown flag: --level"},
		{"an extra argument", smiList(8, h100), []string{"dcgm", dcgm3}, "unexpected arguments"},
		{"an unknown test", smiList(8, h100), []string{"burn"}, "usage: kubemedic-validate dcgm|nccl|nvbandwidth"},
		{"no test", smiList(8, h100), nil, "usage: kubemedic-validate dcgm|nccl|nvbandwidth"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res := runMain(t, t.TempDir(), tc.smi, tc.args...)
			require.Equal(t, ExitNoAnswer, res.exit)
			require.Equal(t, validation.VerdictNoAnswer, res.report.Verdict)
			require.Contains(t, res.report.Reason, tc.reason)
		})
	}
}

func TestParseGPUs(t *testing.T) {
	gpus, err := parseGPUs([]byte("0, GPU-179B83E0-C021-1D8E-A043-C3B3ABB37CED, NVIDIA H100 80GB HBM3, 00000000:00:06.0, [N/A]\n"), 0)
	require.NoError(t, err)
	require.Equal(t, []validation.GPU{{Index: 0, UUID: "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced", Name: h100, BusID: "0000:00:06.0"}}, gpus)
	_, err = parseGPUs([]byte("0, [N/A], NVIDIA H100 80GB HBM3, 00000000:00:06.0, 1\n"), 0)
	require.ErrorContains(t, err, `GPU 0's UUID "[N/A]" is not a GPU UUID`)
	_, err = parseGPUs([]byte("0, GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced, NVIDIA H100 80GB HBM3\n"), 0)
	require.ErrorContains(t, err, "unexpected output line")
}
