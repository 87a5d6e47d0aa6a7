package nccltests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/validationtest"
)

var (
	read = validationtest.Read
	node = validationtest.Node
)

const (
	a100 = "NVIDIA A100-SXM4-40GB"
	h100 = "NVIDIA H100 80GB HBM3"
)

func TestParseReal(t *testing.T) {
	run, err := Parse([]byte(read(t, "superbenchmark-a100-40gb-8gpu.log")))
	require.NoError(t, err)
	require.Len(t, run.Devices, 8)
	require.Equal(t, Device{Rank: 7, Host: "localhost", Index: 7, Name: "A100-SXM4-40GB"}, run.Devices[7])
	require.Len(t, run.Rows, 34)
	big, busbw := run.Largest()
	require.Equal(t, int64(8589934592), big.Size)
	require.Equal(t, 235.03, busbw, "the smaller of out of place 235.26 and in place 235.03")
	require.False(t, big.OutOfPlace.WrongKnown, "the old table's error column is no count")
	require.Equal(t, 68.4048, run.AvgBusBW)
	require.True(t, run.OutOfBoundsOK)

	run, err = Parse([]byte(read(t, "ocitutorials-a100-40gb-8gpu-10g.log")))
	require.NoError(t, err)
	require.Equal(t, Device{Rank: 0, Host: "inst-lscuv-ao-ub24", Index: 0, BusID: "0000:0f:00.0", Name: "NVIDIA A100-SXM4-40GB"}, run.Devices[0])
	require.Equal(t, []Row{{Size: 10737418240, Count: 2684354560, Type: "float", Op: "sum", Line: 17,
		OutOfPlace: Side{TimeUS: 80922, AlgBW: 132.69, BusBW: 232.20, WrongKnown: true},
		InPlace:    Side{TimeUS: 80948, AlgBW: 132.65, BusBW: 232.13, WrongKnown: true}}}, run.Rows)

	run, err = Parse([]byte(read(t, "a3mega-h100-16gpu-2nodes.log")))
	require.NoError(t, err)
	require.Len(t, run.Devices, 16)
	require.Len(t, run.Rows, 31)
	_, busbw = run.Largest()
	require.Equal(t, 337.35, busbw)
	require.Equal(t, 70.742, run.AvgBusBW, "the average, which kubemedic does not judge by")
}

func TestJudge(t *testing.T) {
	oci := read(t, "ocitutorials-a100-40gb-8gpu-10g.log")
	for _, tc := range []struct {
		desc      string
		out       string
		gpus      []validation.GPU
		overrides validation.Floors
		verdict   validation.Verdict
		reason    string
		measured  []validation.Measurement
	}{
		{desc: "A100 40GB, 8 GPUs, 232 GB/s: pass (real)", out: oci, gpus: node(8, a100), verdict: validation.VerdictPass,
			reason:   "busbw 232.1 GB/s at 10 GiB (out of place 232.20, in place 232.13) >= floor 196.8 (A100 SXM4 40GB: 80% of 246 GB/s)",
			measured: []validation.Measurement{{Name: validation.FloorNCCLBusBW, Value: 232.13, Floor: 196.8}}},
		{desc: "the old table, A100 40GB, 8 GPUs, 235 GB/s: pass (real)", out: read(t, "superbenchmark-a100-40gb-8gpu.log"), gpus: node(8, a100), verdict: validation.VerdictPass,
			reason: "busbw 235.0 GB/s at 8 GiB"},
		{desc: "an override above what it reached fails the node", out: oci, gpus: node(8, a100), overrides: validation.Floors{validation.FloorNCCLBusBW: 240},
			verdict: validation.VerdictFail, reason: "busbw 232.1 GB/s at 10 GiB (out of place 232.20, in place 232.13) < floor 240.0 (--floor nccl-busbw=240)",
			measured: []validation.Measurement{{Name: validation.FloorNCCLBusBW, Value: 232.13, Floor: 240}}},
		{desc: "an H100 node at A100 speed fails (the real A100 run, judged as H100s)", out: oci, gpus: node(8, h100), verdict: validation.VerdictFail,
			reason: "< floor 296.0 (H100 SXM 80GB: 80% of 370 GB/s)"},
		{desc: "an unknown model gives no answer", out: oci, gpus: node(8, "NVIDIA H800"), verdict: validation.VerdictNoAnswer,
			reason: `busbw 232.1 GB/s at 10 GiB (out of place 232.20, in place 232.13); no nccl-busbw floor for "NVIDIA H800": kubemedic knows no such GPU model; set --floor nccl-busbw=<GB/s> in the template`},
		{desc: "L40S has no all-reduce floor", out: oci, gpus: node(8, "NVIDIA L40S"), verdict: validation.VerdictNoAnswer, reason: "no nccl-busbw floor for L40S"},
		{desc: "mixed models give no answer", out: oci, gpus: append(node(7, a100), validation.GPU{Index: 7, UUID: "GPU-179b83e0-c021-1d8e-a043-c3b3abb37cff", Name: h100}), verdict: validation.VerdictNoAnswer,
			reason: "not of one model (mixed: NVIDIA A100-SXM4-40GB, NVIDIA H100 80GB HBM3)"},
		{desc: "fewer ranks than GPUs gives no answer", out: oci, gpus: node(4, a100), verdict: validation.VerdictNoAnswer,
			reason: "all_reduce_perf ran on 8 GPUs, the pod has 4"},
		{desc: "wrong sums fail whatever the bandwidth (the real run, #wrong cut to 3)",
			out:  strings.Replace(oci, "232.20      0    80948", "232.20      3    80948", 1),
			gpus: node(8, a100), verdict: validation.VerdictFail, reason: "all_reduce_perf found 3 wrong values at 10 GiB (line 17): the GPUs summed wrong"},
		{desc: "out-of-bounds values fail (cut to 2 FAILED)", out: strings.Replace(oci, "# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED", 1),
			gpus: node(8, a100), verdict: validation.VerdictFail, reason: "found 2 out-of-bounds values"},
		{desc: "no GPU", out: oci, verdict: validation.VerdictNoAnswer, reason: "no GPU visible in the test pod"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			run, err := Parse([]byte(tc.out))
			require.NoError(t, err)
			r := Judge(run, tc.gpus, tc.overrides)
			require.Equal(t, tc.verdict, r.Verdict, r.Reason)
			require.Contains(t, r.Reason, tc.reason)
			if tc.measured != nil {
				require.Equal(t, tc.measured, r.Measured)
			}
			require.Len(t, r.GPUs, len(tc.gpus))
			for i, g := range r.GPUs {
				require.Equal(t, tc.gpus[i].UUID, g.UUID)
				if tc.verdict == validation.VerdictPass {
					require.Equal(t, validation.VerdictPass, g.Verdict)
				} else {
					require.Equal(t, validation.VerdictNoAnswer, g.Verdict, "an all-reduce blames no GPU")
				}
			}
			require.Empty(t, validation.Failing(r))
			_, err = validation.Encode(r)
			require.NoError(t, err)
		})
	}
}

// TestParseRefuses: malformed and truncated output is an error that says
// which line or what is missing.
func TestParseRefuses(t *testing.T) {
	sb := read(t, "superbenchmark-a100-40gb-8gpu.log")
	a3 := read(t, "a3mega-h100-16gpu-2nodes.log")
	cutAt := func(s, marker string) string { return s[:strings.Index(s, marker)] }
	for _, tc := range []struct{ desc, out, err string }{
		{"NCCL init failed before the table (real, NVIDIA/nccl-tests#294)", read(t, "nccl-tests-issue294-h100-init-failure.log"),
			`no table: the run ended before it measured anything (its last line: "h100-2:895547:895547 [3] NCCL INFO Bootstrap : Using ens7:172.27.37.143<0>")`},
		{"killed after the 2 GiB row (the real H100 run, cut)", cutAt(a3, "  4294967296"),
			"no \"# Avg bus bandwidth\" line after 29 rows, the last at line 52 (2 GiB): the output is truncated, or the run died"},
		{"cut in the middle of the last row", cutAt(a3, "47743"),
			`line 54: 9 fields, want 13: "8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0"`},
		{"a row of the old table in the new header", strings.Replace(a3, "       8192          2048     float     sum      -1", "       8192          2048     float     sum", 1),
			"line 34: 12 fields, want 13"},
		{"a busbw that is not a number", strings.Replace(sb, "235.26", "2x5.26", 1), `line 50: out of place: busbw "2x5.26" is not a number`},
		{"a #wrong that is not a count", strings.Replace(a3, "338.82      0", "338.82     -1", 1), `line 54: out of place: #wrong "-1" is not a count`},
		{"rows without the header (real rows, NVIDIA/nccl-tests#294)", "   134217728      33554432     float     sum      -1    738.7  181.69  340.67      0    739.9  181.40  340.12      0\n# Avg bus bandwidth    : 406.034\n",
			"line 1: a table row before the table's header"},
		{"no device list", withoutLines(sb, "Rank"), `no "# Using devices" list`},
		{"an average that is not a number", strings.Replace(sb, "68.4048", "-nan", 1), `average bus bandwidth "-nan" is not a number`},
		{"empty", "", `no table: the run ended before it measured anything (its last line: "")`},
		{"only the header", cutAt(sb, "hostname:3442"), "the table has no rows"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.out))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// withoutLines is s without its lines that contain sub.
func withoutLines(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, sub) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestSize(t *testing.T) {
	require.Equal(t, "8 GiB", Size(8589934592))
	require.Equal(t, "10 GiB", Size(10737418240))
	require.Equal(t, "128 MiB", Size(134217728))
	require.Equal(t, "8 B", Size(8))
	require.Equal(t, "1000 B", Size(1000))
}

// FuzzParse: Parse never panics, and what it accepts judges into a report
// that encodes and never blames a GPU.
func FuzzParse(f *testing.F) {
	f.Add(read(f, "superbenchmark-a100-40gb-8gpu.log"))
	f.Add(read(f, "ocitutorials-a100-40gb-8gpu-10g.log"))
	f.Add(read(f, "nccl-tests-issue294-h100-init-failure.log"))
	f.Fuzz(func(t *testing.T, in string) {
		run, err := Parse([]byte(in))
		if err != nil {
			return
		}
		r := Judge(run, node(len(run.Devices), h100), nil)
		_, err = validation.Encode(r)
		require.NoError(t, err)
		require.Empty(t, validation.Failing(r))
	})
}
