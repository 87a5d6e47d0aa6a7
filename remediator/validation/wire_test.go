package validation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func gpus(n int, v Verdict, detail string) []GPUResult {
	out := make([]GPUResult, n)
	for i := range out {
		out[i] = GPUResult{UUID: fmt.Sprintf("GPU-%08d-1111-2222-3333-444444444444", i), Verdict: v, Failed: []string{"memory", "pcie", "sm_stress"}, Detail: detail}
	}
	return out
}

func TestEncodeDecode(t *testing.T) {
	long := strings.Repeat("Memory test failed at 0x3f00: 12 errors. ", 40)
	for _, tc := range []struct {
		desc    string
		r       Report
		err     string
		shorter bool
	}{
		{desc: "a pass of 8 GPUs", r: Report{Schema: Schema, Test: "dcgm", Model: "NVIDIA H100 80GB HBM3", Verdict: VerdictPass, GPUs: gpus(8, VerdictPass, "")}},
		{desc: "a failure with long details is cut, every GPU kept", r: Report{Schema: Schema, Test: "dcgm", Verdict: VerdictFail, Reason: long, GPUs: gpus(8, VerdictFail, long)}, shorter: true},
		{desc: "no answer names no GPU", r: Report{Schema: Schema, Test: "nccl", Verdict: VerdictNoAnswer, Reason: "all_reduce_perf: timed out after 10m0s"}},
		{desc: "64 GPUs cannot fit", r: Report{Schema: Schema, Test: "dcgm", Verdict: VerdictFail, GPUs: gpus(64, VerdictFail, long)}, err: "more than the 4096 a termination message keeps"},
		{desc: "a pass without GPUs", r: Report{Schema: Schema, Test: "dcgm", Verdict: VerdictPass}, err: "verdict Pass names no GPU"},
		{desc: "a pass with a failed GPU", r: Report{Schema: Schema, Test: "dcgm", Verdict: VerdictPass, GPUs: gpus(1, VerdictFail, "")}, err: "verdict Pass but gpus[0]"},
		{desc: "an unknown verdict", r: Report{Schema: Schema, Test: "dcgm", Verdict: "Ok"}, err: `verdict "Ok" is not Pass, Fail or NoAnswer`},
		{desc: "a GPU without UUID", r: Report{Schema: Schema, Test: "dcgm", Verdict: VerdictFail, GPUs: []GPUResult{{Verdict: VerdictFail}}}, err: "gpus[0].uuid is empty"},
		{desc: "another schema", r: Report{Schema: "v0", Test: "dcgm", Verdict: VerdictFail}, err: `schema "v0"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := Encode(tc.r)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.LessOrEqual(t, len(s), MaxReport)
			got, err := Decode(s)
			require.NoError(t, err)
			require.Len(t, got.GPUs, len(tc.r.GPUs))
			for i := range got.GPUs {
				require.Equal(t, tc.r.GPUs[i].UUID, got.GPUs[i].UUID)
				require.Equal(t, tc.r.GPUs[i].Verdict, got.GPUs[i].Verdict)
			}
			require.Equal(t, Failing(tc.r), Failing(got))
			if tc.shorter {
				require.Less(t, len(got.GPUs[0].Detail), len(tc.r.GPUs[0].Detail))
			} else {
				require.Equal(t, tc.r, got)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"schema":"kubemedic.io/validation/v1","test":"dcgm","verdict":"Pa`, "unexpected EOF"},
		{`{"schema":"kubemedic.io/validation/v1","test":"dcgm","verdict":"Fail","extra":1}`, `unknown field "extra"`},
		{`{"schema":"kubemedic.io/validation/v1","test":"dcgm","verdict":"Fail"} {}`, "text after the report"},
		{"tail of a log\n", "validation report: invalid character"},
		{strings.Repeat(" ", MaxReport+1), "more than 4096"},
	} {
		_, err := Decode(tc.in)
		require.ErrorContains(t, err, tc.err, tc.in)
	}
}

// FuzzDecode: Decode never panics, and what it accepts encodes and decodes
// back: equal when it fits as it is, with every GPU's UUID and verdict kept
// when Encode had to shorten it.
func FuzzDecode(f *testing.F) {
	s, _ := Encode(Report{Schema: Schema, Test: "dcgm", Verdict: VerdictPass, GPUs: gpus(2, VerdictPass, "ok")})
	f.Add(s)
	f.Add(`{"schema":"kubemedic.io/validation/v1"}`)
	f.Add(`{"schema":"kubemedic.io/validation/v1","test":"dcgm","verdict":"NoAnswer","gpus":[],"measured":[]}`)
	f.Add(`{"schema":"kubemedic.io/validation/v1","test":"nccl","verdict":"Fail","measured":[{"name":"nccl-busbw","value":280.5,"floor":296}],"gpus":[{"uuid":"GPU-11111111-2222-3333-4444-555555555555","verdict":"NoAnswer","detail":"all-reduce names no GPU"}]}`)
	f.Add(`{"schema":"kubemedic.io/validation/v1","test":"nvbandwidth","verdict":"Fail","gpus":[{"uuid":"GPU-11111111-2222-3333-4444-555555555555","verdict":"Fail","failed":["h2d"],"measured":[{"name":"h2d","value":-1e400,"floor":41}]}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		r, err := Decode(in)
		if err != nil {
			return
		}
		out, err := Encode(r)
		require.NoError(t, err, "a report that decodes encodes")
		again, err := Decode(out)
		require.NoError(t, err)
		if b, _ := json.Marshal(r); len(b) <= MaxReport {
			require.Equal(t, r, again)
			return
		}
		require.Len(t, again.GPUs, len(r.GPUs))
		for i := range r.GPUs {
			require.Equal(t, r.GPUs[i].UUID, again.GPUs[i].UUID)
			require.Equal(t, r.GPUs[i].Verdict, again.GPUs[i].Verdict)
		}
		require.Equal(t, r.Verdict, again.Verdict)
	})
}
