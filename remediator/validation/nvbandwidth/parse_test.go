package nvbandwidth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/validationtest"
)

var read = validationtest.Read

// a100Bus are the bus IDs of issue 34's HGX A100.
var a100Bus = []string{"34", "35", "36", "37", "9b", "9c", "9d", "9e"}

// node is n GPUs of a model as nvidia-smi lists them, with issue 34's bus
// IDs when there are 8.
func node(n int, name string) []validation.GPU {
	gpus := validationtest.Node(n, name)
	for i := range gpus {
		gpus[i].BusID = ""
		if n == 8 {
			gpus[i].BusID = "0000:" + a100Bus[i] + ":00.0"
		}
	}
	return gpus
}

const a100 = "NVIDIA A100-SXM4-80GB"

// hgx is the real header and device list of issue 34 followed by the
// three tests, hand-cut: host to device and back at h2d[i] and d2h[i],
// device to device at 250 GB/s except the links of slow, at 120.
func hgx(t testing.TB, h2d, d2h []float64, slow int) string {
	head := read(t, "issue34-a100-sxm4-80gb-8gpu-v0.7-assert.txt")
	head = head[:strings.Index(head, "Running")]
	var b strings.Builder
	b.WriteString(head)
	host := func(name, desc string, v []float64) {
		fmt.Fprintf(&b, "Running %s.\n%s\n", name, desc)
		for i := range v {
			fmt.Fprintf(&b, "%10d", i)
		}
		b.WriteString("\n 0")
		sum := 0.0
		for _, x := range v {
			fmt.Fprintf(&b, "%10.2f", x)
			sum += x
		}
		fmt.Fprintf(&b, "\n\nSUM %s %.2f\n\n", name, sum)
	}
	host("host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", h2d)
	host("device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", d2h)
	b.WriteString("Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n")
	for i := range 8 {
		fmt.Fprintf(&b, "%10d", i)
	}
	b.WriteString("\n")
	for i := range 8 {
		fmt.Fprintf(&b, "%2d", i)
		for j := range 8 {
			switch {
			case i == j:
				fmt.Fprintf(&b, "%10s", "N/A")
			case i == slow || j == slow:
				fmt.Fprintf(&b, "%10.2f", 120.0)
			default:
				fmt.Fprintf(&b, "%10.2f", 250.0)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nSUM device_to_device_memcpy_read_ce 12345.00\n\nNOTE: The reported results may not reflect the full capabilities of the platform.\n")
	return b.String()
}

func same(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestParseReal(t *testing.T) {
	run, err := Parse([]byte(read(t, "issue34-a100-sxm4-80gb-8gpu-v0.7-assert.txt")))
	require.NoError(t, err)
	require.Equal(t, "nvbandwidth v0.7, driver 550.127.08", run.Versions())
	require.Len(t, run.Devices, 8)
	require.Equal(t, Device{Index: 4, Name: a100, BusID: "0000:9b:00.0"}, run.Devices[4])
	d2d := run.Test("device_to_device_memcpy_read_ce")
	require.Equal(t, Failed, d2d.Status)
	require.Contains(t, d2d.Error, "Invalid value when checking the pattern at 0x70a640000000; Current offset : 11136; ASSERT in expression h_errorFlag == 0")

	run, err = Parse([]byte(read(t, "issue50-a6000-6gpu-v0.8-d2d.txt")))
	require.NoError(t, err)
	d2d = run.Test("device_to_device_memcpy_read_ce")
	require.NotNil(t, d2d, "the SUM line names the matrix")
	require.Equal(t, Passed, d2d.Status)
	require.Len(t, d2d.Matrix, 6)
	require.Equal(t, Cell{}, d2d.Matrix[3][3])
	require.Equal(t, Cell{GBps: 21.95, OK: true}, d2d.Matrix[0][3])

	run, err = Parse([]byte(read(t, "issue15-rtx4090-8gpu-v0.2-head.txt")))
	require.NoError(t, err)
	require.Len(t, run.Devices, 8)
	require.Empty(t, run.Devices[0].BusID)
	h2d := run.Test("host_to_device_memcpy_ce")
	require.Equal(t, Passed, h2d.Status)
	require.Equal(t, Cell{GBps: 23.90, OK: true}, h2d.Matrix[0][2])

	run, err = Parse([]byte(read(t, "dcgm-tests-v0.5-1gpu.json")))
	require.NoError(t, err)
	require.Equal(t, "nvbandwidth v0.5, driver 565.02", run.Versions())
	require.Len(t, run.Tests, 32)
	require.Equal(t, &Test{Name: "host_to_device_memcpy_ce", Status: Passed, Description: "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", Matrix: [][]Cell{{{GBps: 12.3964, OK: true}}}}, run.Test("host_to_device_memcpy_ce"))
	require.Equal(t, Waived, run.Test("device_to_device_memcpy_read_ce").Status)
}

func TestJudge(t *testing.T) {
	healthy := hgx(t, same(8, 24.5), same(8, 25.1), -1)
	for _, tc := range []struct {
		desc      string
		out       string
		gpus      []validation.GPU
		overrides validation.Floors
		verdict   validation.Verdict
		reason    string
		// per GPU index: verdict and failed floors; unlisted: others.
		want   map[int]validation.GPUResult
		others validation.Verdict
	}{
		{desc: "a healthy HGX A100 (real device list, hand-cut matrices)", out: healthy, gpus: node(8, a100), verdict: validation.VerdictPass, others: validation.VerdictPass,
			reason: "8 GPUs at or above: h2d floor 20.5 (A100 SXM4 80GB: 80% of 25.6 GB/s); d2h floor 20.5"},
		{desc: "GPU 5's PCIe link is slow: it alone fails h2d", out: hgx(t, []float64{24.5, 24.5, 24.5, 24.5, 24.5, 12.1, 24.5, 24.5}, same(8, 25.1), -1), gpus: node(8, a100),
			verdict: validation.VerdictFail, reason: "1 of 8 GPUs below a floor: GPU 5 (h2d 12.1 GB/s < floor 20.5)", others: validation.VerdictPass,
			want: map[int]validation.GPUResult{5: {Verdict: validation.VerdictFail, Failed: []string{"h2d"}}}},
		{desc: "GPU 3's NVLink is slow: it alone fails d2d, not its peers", out: hgx(t, same(8, 24.5), same(8, 25.1), 3), gpus: node(8, a100),
			verdict: validation.VerdictFail, reason: "GPU 3 (d2d median 120.0 GB/s over 14 links, 14 below floor 192.0: d2d 0->3 120.0 GB/s < floor 192.0 and 13 more)", others: validation.VerdictPass,
			want: map[int]validation.GPUResult{3: {Verdict: validation.VerdictFail, Failed: []string{"d2d"}}}},
		{desc: "bus IDs map the matrix to the pod's GPUs in any order", out: hgx(t, []float64{24.5, 24.5, 24.5, 24.5, 24.5, 12.1, 24.5, 24.5}, same(8, 25.1), -1),
			gpus:    func() []validation.GPU { g := node(8, a100); g[5], g[6] = g[6], g[5]; return g }(),
			verdict: validation.VerdictFail, others: validation.VerdictPass,
			want: map[int]validation.GPUResult{6: {Verdict: validation.VerdictFail, Failed: []string{"h2d"}}}},
		{desc: "d2d aborted (real, issue 34): no answer, and the host tests are missing", out: read(t, "issue34-a100-sxm4-80gb-8gpu-v0.7-assert.txt"), gpus: node(8, a100),
			verdict: validation.VerdictNoAnswer, reason: "d2d: device_to_device_memcpy_read_ce aborted: Invalid value when checking the pattern", others: validation.VerdictNoAnswer},
		{desc: "no GPU in the pod gives no answer", out: read(t, "issue15-rtx4090-8gpu-v0.2-head.txt"), gpus: nil,
			verdict: validation.VerdictNoAnswer, reason: "no GPU visible"},
		{desc: "an unknown model without floors gives no answer", out: read(t, "issue15-rtx4090-8gpu-v0.2-head.txt"), gpus: node(8, "NVIDIA GeForce RTX 4090"),
			verdict: validation.VerdictNoAnswer, reason: `nothing to judge: no h2d floor for "NVIDIA GeForce RTX 4090"`, others: validation.VerdictNoAnswer},
		{desc: "a template's floors judge it (real RTX 4090, v0.2: no bus IDs, PCI order)", out: read(t, "issue15-rtx4090-8gpu-v0.2-head.txt"), gpus: node(8, "NVIDIA GeForce RTX 4090"),
			overrides: validation.Floors{validation.FloorH2D: 24.5, validation.FloorD2H: 20},
			verdict:   validation.VerdictFail, reason: "2 of 8 GPUs below a floor: GPU 1 (h2d 24.3 GB/s < floor 24.5), GPU 2 (h2d 23.9 GB/s < floor 24.5)", others: validation.VerdictPass,
			want: map[int]validation.GPUResult{1: {Verdict: validation.VerdictFail, Failed: []string{"h2d"}}, 2: {Verdict: validation.VerdictFail, Failed: []string{"h2d"}}}},
		{desc: "cross-socket PCIe links below a template's floor fail every GPU (real A6000 d2d)", out: read(t, "issue50-a6000-6gpu-v0.8-d2d.txt"), gpus: node(6, "NVIDIA RTX A6000"),
			overrides: validation.Floors{validation.FloorD2D: 25},
			verdict:   validation.VerdictFail, others: validation.VerdictFail, reason: "6 of 6 GPUs below a floor"},
		{desc: "the same links above a lower floor pass (real A6000 d2d)", out: read(t, "issue50-a6000-6gpu-v0.8-d2d.txt"), gpus: node(6, "NVIDIA RTX A6000"),
			overrides: validation.Floors{validation.FloorD2D: 20},
			verdict:   validation.VerdictPass, others: validation.VerdictPass, reason: "6 GPUs at or above: d2d floor 20.0 (--floor d2d=20); not judged: no h2d floor"},
		{desc: "-j of one L40S-like GPU at 12 GB/s fails h2d and d2h (real DCGM test input)", out: read(t, "dcgm-tests-v0.5-1gpu.json"), gpus: node(1, "NVIDIA L40S"),
			verdict: validation.VerdictFail, reason: "GPU 0 (h2d 12.4 GB/s < floor 20.5; d2h 13.2 GB/s < floor 20.5)",
			want: map[int]validation.GPUResult{0: {Verdict: validation.VerdictFail, Failed: []string{"h2d", "d2h"}}}},
		{desc: "a waived d2d is no answer (real DCGM test input, judged as an H100)", out: read(t, "dcgm-tests-v0.5-1gpu.json"), gpus: node(1, "NVIDIA H100 80GB HBM3"),
			overrides: validation.Floors{validation.FloorH2D: 10, validation.FloorD2H: 10},
			verdict:   validation.VerdictNoAnswer, reason: "d2d: device_to_device_memcpy_read_ce was waived",
			want: map[int]validation.GPUResult{0: {Verdict: validation.VerdictNoAnswer}}},
		{desc: "a matrix for fewer GPUs than the pod's is no answer", out: read(t, "dcgm-tests-v0.5-1gpu.json"), gpus: node(2, "NVIDIA L40S"),
			verdict: validation.VerdictNoAnswer, reason: "h2d: host_to_device_memcpy_ce measured 1 GPUs, the pod has 2", others: validation.VerdictNoAnswer},
		{desc: "a device nvidia-smi does not list is no answer", out: healthy, gpus: func() []validation.GPU { g := node(8, a100); g[0].BusID = "0000:18:00.0"; return g }(),
			verdict: validation.VerdictNoAnswer, reason: "nvbandwidth's device 0 (0000:34:00.0) is no GPU nvidia-smi lists in the pod", others: validation.VerdictNoAnswer},
		{desc: "a matrix cut before its blank line is no answer", out: strings.TrimRight(hgx(t, same(8, 24.5), same(8, 25.1), -1)[:strings.Index(healthy, "\n\nSUM device_to_device")], "\n"), gpus: node(8, a100),
			verdict: validation.VerdictNoAnswer, reason: "d2d: device_to_device_memcpy_read_ce was cut short (the output ends inside it, line 31)", others: validation.VerdictNoAnswer},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			run, err := Parse([]byte(tc.out))
			require.NoError(t, err)
			r := Judge(run, tc.gpus, tc.overrides)
			require.Equal(t, tc.verdict, r.Verdict, r.Reason)
			require.Contains(t, r.Reason, tc.reason)
			require.Len(t, r.GPUs, len(tc.gpus))
			for i, g := range r.GPUs {
				require.Equal(t, tc.gpus[i].UUID, g.UUID)
				want, ok := tc.want[i]
				if !ok {
					require.Equal(t, tc.others, g.Verdict, "GPU %d: %s", i, g.Detail)
					continue
				}
				require.Equal(t, want.Verdict, g.Verdict, "GPU %d: %s", i, g.Detail)
				require.Equal(t, want.Failed, g.Failed, "GPU %d", i)
			}
			_, err = validation.Encode(r)
			require.NoError(t, err)
		})
	}
}

// TestParseRefuses: malformed and truncated output is an error naming the
// line, never a pass.
func TestParseRefuses(t *testing.T) {
	v02 := read(t, "issue15-rtx4090-8gpu-v0.2-head.txt")
	js := read(t, "dcgm-tests-v0.5-1gpu.json")
	for _, tc := range []struct{ desc, out, err string }{
		{"a row cut in the middle (the real v0.2 run)", v02[:strings.Index(v02, "26.63     27.10")], "line 30: device_to_host_memcpy_ce's row 0 has 3 values, the header 8"},
		{"a value that is not a bandwidth", strings.Replace(v02, "26.38", "26,38", 1), `line 23: host_to_device_memcpy_ce row 0 column 5: "26,38" is not a bandwidth`},
		{"a column header out of order", strings.Replace(v02, "0         1         2", "0         2         1", 1), "line 22: host_to_device_memcpy_ce's column header"},
		{"a row with the wrong index", strings.Replace(v02, "\n0     26.77", "\n1     26.77", 1), "line 30: device_to_host_memcpy_ce's row 0 starts with index 1"},
		{"a SUM of another test", strings.Replace(v02, "SUM device_to_host_memcpy_ce", "SUM host_to_device_memcpy_ce", 1), "line 32: SUM of host_to_device_memcpy_ce inside device_to_host_memcpy_ce"},
		{"devices out of order", strings.Replace(v02, "Device 1:", "Device 2:", 1), "line 12: device 2 listed after 1 devices"},
		{"nothing ran", "nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n\nCUDA Runtime Version: 13000\n", `no test ran (the output's last line: "CUDA Runtime Version: 13000")`},
		{"empty", "", "no test ran"},
		{"a -j document cut short (the real DCGM input)", js[:len(js)/2], "the -j document ends early, after 150 lines: the output is truncated"},
		{"a -j document without its object", `{"testcases": []}`, `no "nvbandwidth" object`},
		{"a -j matrix with a word in it", strings.Replace(js, `"12.3964"`, `"fast"`, 1), `testcases[0] (host_to_device_memcpy_ce) bandwidth_matrix[0][0]: "fast" is not a bandwidth`},
		{"a -j pass without a matrix", `{"nvbandwidth": {"testcases": [{"name": "host_to_device_memcpy_ce", "status": "Passed"}]}}`, "passed without a bandwidth_matrix"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.out))
			require.ErrorContains(t, err, tc.err)
		})
	}
	// The -j document with nvbandwidth's warnings around it, as DCGM's
	// own test feeds it (verboseFullOutputWithErrors): the document is
	// still read.
	run, err := Parse([]byte("WARNING: Failed to acquire log file lock. File is in use by a different instance\nWARNING: garbage messages {\n" + js + "\nWARNING: suffix warning messages here\n"))
	require.NoError(t, err)
	require.Len(t, run.Tests, 32)
}

// FuzzParse: Parse never panics, and what it accepts judges into a report
// that encodes.
func FuzzParse(f *testing.F) {
	f.Add(read(f, "issue34-a100-sxm4-80gb-8gpu-v0.7-assert.txt"))
	f.Add(read(f, "issue50-a6000-6gpu-v0.8-d2d.txt"))
	f.Add(read(f, "issue15-rtx4090-8gpu-v0.2-head.txt"))
	f.Add(read(f, "dcgm-tests-v0.5-1gpu.json"))
	f.Add(hgx(f, same(8, 24.5), same(8, 25.1), 2))
	f.Fuzz(func(t *testing.T, in string) {
		run, err := Parse([]byte(in))
		if err != nil {
			return
		}
		for _, n := range []int{1, 8} {
			r := Judge(run, node(n, a100), validation.Floors{validation.FloorD2D: 100})
			_, err := validation.Encode(r)
			require.NoError(t, err)
		}
	})
}
