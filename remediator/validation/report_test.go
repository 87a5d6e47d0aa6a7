package validation

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	uuidA = "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced"
	uuidB = "GPU-66666666-7777-8888-9999-000000000000"
)

// TestReportFields: the fields an SRE reads come back as they were
// written, and are checked.
func TestReportFields(t *testing.T) {
	nccl := Report{Schema: Schema, Test: TestNCCL, Model: "NVIDIA H100 80GB HBM3", Verdict: VerdictFail,
		Reason:   "all_reduce_perf: busbw 280.4 GB/s at 8 GiB < floor 296 (H100 SXM 80GB: 80% of 370 GB/s)",
		Tool:     "all_reduce_perf -b 8 -e 8G -f 2 -g 8 (NCCL 2.19.3+cuda12.2)",
		Seconds:  93,
		Measured: []Measurement{{Name: FloorNCCLBusBW, Value: 280.4, Floor: 296}},
		GPUs: []GPUResult{{UUID: uuidA, Verdict: VerdictNoAnswer, Detail: "all-reduce measures the node: it names no GPU"},
			{UUID: uuidB, Verdict: VerdictNoAnswer}}}
	s, err := Encode(nccl)
	require.NoError(t, err)
	require.Contains(t, s, `"measured":[{"name":"nccl-busbw","value":280.4,"floor":296}]`)
	got, err := Decode(s)
	require.NoError(t, err)
	require.Equal(t, nccl, got)
	require.Empty(t, Failing(got), "an all-reduce below its floor blames the node, no GPU")
	require.True(t, got.Measured[0].Below())
	require.Equal(t, "nccl-busbw 280.4 GB/s < floor 296.0", got.Measured[0].String())
	require.Equal(t, "h2d 52.0 GB/s >= floor 41.0", Measurement{Name: FloorH2D, Value: 52, Floor: 41}.String())

	nvbw := Report{Schema: Schema, Test: TestNVBandwidth, Verdict: VerdictFail, GPUs: []GPUResult{
		{UUID: uuidA, Verdict: VerdictFail, Failed: []string{FloorH2D}, Measured: []Measurement{{Name: FloorH2D, Value: 25.1, Floor: 41}, {Name: FloorD2H, Value: 52, Floor: 41}}},
		{UUID: uuidB, Verdict: VerdictPass, Measured: []Measurement{{Name: FloorH2D, Value: 55, Floor: 41}}}}}
	s, err = Encode(nvbw)
	require.NoError(t, err)
	got, err = Decode(s)
	require.NoError(t, err)
	require.Equal(t, nvbw, got)
	require.Equal(t, []string{uuidA}, Failing(got))
}

func TestDecodeNamesTheField(t *testing.T) {
	good := Report{Schema: Schema, Test: TestDCGM, Verdict: VerdictFail, GPUs: []GPUResult{{UUID: uuidA, Verdict: VerdictFail, Failed: []string{"memory"}}}}
	for _, tc := range []struct {
		desc string
		edit func(map[string]any)
		err  string
	}{
		{"an upper-case UUID", func(m map[string]any) { gpu(m)["uuid"] = strings.ToUpper(uuidA) }, `gpus[0].uuid "GPU-179B83E0-C021-1D8E-A043-C3B3ABB37CED" is not a GPU UUID`},
		{"a MIG UUID", func(m map[string]any) { gpu(m)["uuid"] = "MIG-179b83e0-c021-1d8e-a043-c3b3abb37ced" }, "gpus[0].uuid"},
		{"a missing UUID", func(m map[string]any) { delete(gpu(m), "uuid") }, "gpus[0].uuid is empty"},
		{"a repeated UUID", func(m map[string]any) {
			m["gpus"] = append(m["gpus"].([]any), map[string]any{"uuid": uuidA, "verdict": "Pass"})
		}, "gpus[1].uuid GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced is gpus[0]'s too"},
		{"an unknown GPU verdict", func(m map[string]any) { gpu(m)["verdict"] = "Passed" }, `gpus[0].verdict "Passed" is not Pass, Fail or NoAnswer`},
		{"an unknown verdict", func(m map[string]any) { m["verdict"] = "OK" }, `verdict "OK"`},
		{"an unknown schema", func(m map[string]any) { m["schema"] = "kubemedic.io/validation/v2" }, `schema "kubemedic.io/validation/v2"`},
		{"an unknown field", func(m map[string]any) { gpu(m)["serial"] = "1654922008385" }, `unknown field "serial"`},
		{"a test that is no name", func(m map[string]any) { m["test"] = "DCGM diag" }, `test "DCGM diag" is not a test name`},
		{"an empty failed check", func(m map[string]any) { gpu(m)["failed"] = []any{""} }, "gpus[0].failed[0] is empty"},
		{"a negative bandwidth", func(m map[string]any) {
			gpu(m)["measured"] = []any{map[string]any{"name": "h2d", "value": -1, "floor": 41}}
		}, "gpus[0].measured[0].value -1 is not a bandwidth"},
		{"a measurement without name", func(m map[string]any) {
			m["measured"] = []any{map[string]any{"value": 1, "floor": 41}}
		}, "measured[0].name is empty"},
		{"a detail over its bound", func(m map[string]any) { gpu(m)["detail"] = strings.Repeat("x", 257) }, "gpus[0].detail has 257 bytes, more than 256"},
		{"negative seconds", func(m map[string]any) { m["seconds"] = -5 }, "seconds -5 is negative"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := Encode(good)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(s), &m))
			tc.edit(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			_, err = Decode(string(b))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func gpu(m map[string]any) map[string]any { return m["gpus"].([]any)[0].(map[string]any) }

// TestEncodeShortens: what is over a bound, or over 4096 bytes in all, is
// cut the same way every time; UUIDs and verdicts stay.
func TestEncodeShortens(t *testing.T) {
	long := strings.Repeat("Memory test failed at 0x3f00: 12 errors. ", 40)
	var many []GPUResult
	for i := range 16 {
		u := []byte(uuidA)
		u[len(u)-2], u[len(u)-1] = "0123456789abcdef"[i/16], "0123456789abcdef"[i%16]
		many = append(many, GPUResult{UUID: string(u), Verdict: VerdictFail, Detail: long,
			Failed:   []string{"memory", "pcie", "diagnostic", "targeted_stress", strings.Repeat("t", 80)},
			Measured: []Measurement{{Name: FloorH2D, Value: 30, Floor: 41}, {Name: FloorD2H, Value: 30, Floor: 41}, {Name: FloorD2D, Value: 30, Floor: 288}}})
	}
	r := Report{Schema: Schema, Test: TestNVBandwidth, Model: strings.Repeat("m", 200), Verdict: VerdictFail, Reason: long, Tool: "nvbandwidth \xff", GPUs: many}
	s1, err := Encode(r)
	require.NoError(t, err)
	s2, err := Encode(r)
	require.NoError(t, err)
	require.Equal(t, s1, s2, "deterministic")
	require.LessOrEqual(t, len(s1), MaxReport)
	got, err := Decode(s1)
	require.NoError(t, err)
	require.Len(t, got.GPUs, 16)
	for i, g := range got.GPUs {
		require.Equal(t, many[i].UUID, g.UUID)
		require.Equal(t, VerdictFail, g.Verdict)
		require.NotEmpty(t, g.Failed)
	}
	require.Equal(t, "nvbandwidth \uFFFD", got.Tool, "bytes that are not UTF-8 are replaced, not refused")
	require.Len(t, got.Model, maxModel)
	require.True(t, strings.HasSuffix(got.Reason, "..."))

	_, err = Encode(Report{Schema: Schema, Test: TestNCCL, Verdict: VerdictFail, Measured: []Measurement{{Name: FloorNCCLBusBW, Value: math.NaN(), Floor: 296}}})
	require.ErrorContains(t, err, "measured[0].value NaN is not a bandwidth")
}
