package dcgmdiag

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/validationtest"
)

var read = validationtest.Read

// node is an HGX of n H100s as nvidia-smi lists them in the test pod.
func node(n int) []validation.GPU { return validationtest.Node(n, "NVIDIA H100 80GB HBM3") }

// dcgm4 is the DCGM 4 fragment of issue 215 in the envelope of DCGM's
// schema, with the tests of extra (each "{...}" ending in a comma) before
// it, and the given entity_groups' entities.
func dcgm4(t testing.TB, extra, entities string) string {
	frag := strings.TrimRight(strings.TrimSpace(read(t, "dcgm-4-issue215-diagnostic-fragment.txt")), ",")
	return "Successfully ran diagnostic for group.\n{\n\t\"DCGM Diagnostic\" :\n\t{\n\t\t\"test_categories\" :\n\t\t[\n\t\t\t{\n\t\t\t\t\"category\" : \"Hardware\",\n\t\t\t\t\"tests\" :\n\t\t\t\t[\n" +
		extra + frag + "\n\t\t\t\t]\n\t\t\t}\n\t\t]\n\t},\n\t\"entity_groups\" :\n\t[\n\t\t{\n\t\t\t\"entities\" :\n\t\t\t[\n" + entities +
		"\t\t\t],\n\t\t\t\"entity_group\" : \"GPU\",\n\t\t\t\"entity_group_id\" : 1\n\t\t}\n\t],\n\t\"metadata\" :\n\t{\n\t\t\"Driver Version Detected\" : \"570.86.15\",\n\t\t\"version\" : \"4.1.1\"\n\t}\n}\n"
}

// entities lists DCGM's GPUs 0..n-1 with serials (the pod's serial of
// the GPU whose index is perm[i] for DCGM GPU i), or none.
func entities(n int, perm []int) string {
	var b strings.Builder
	for i := range n {
		serial := "<<<NOT_SUPPORTED>>>"
		if perm != nil {
			serial = fmt.Sprintf("16549220083%02d", perm[i])
		}
		sep := ","
		if i == n-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "\t\t\t\t{\n\t\t\t\t\t\"device_id\" : \"2330\",\n\t\t\t\t\t\"entity_id\" : %d,\n\t\t\t\t\t\"serial_num\" : %q\n\t\t\t\t}%s\n", i, serial, sep)
	}
	return b.String()
}

// memoryFail is a DCGM 4 memory test (as DCGM's schema writes it) that
// fails DCGM GPU gpu and passes the others of 8.
func memoryFail(gpu int) string {
	var b strings.Builder
	b.WriteString("\t\t\t\t\t{\n\t\t\t\t\t\t\"name\" : \"memory\",\n\t\t\t\t\t\t\"results\" :\n\t\t\t\t\t\t[\n")
	for i := range 8 {
		st := `"status" : "Pass"`
		if i == gpu {
			st = `"status" : "Fail",
							"warnings" :
							[
								{
									"error_category" : 10,
									"error_id" : 4,
									"error_severity" : 2,
									"warning" : "A memory mismatch was detected on GPU 2, but no error was reported by CUDA or NVML."
								}
							]`
		}
		sep := ","
		if i == 7 {
			sep = ""
		}
		fmt.Fprintf(&b, "\t\t\t\t\t\t\t{\n\t\t\t\t\t\t\t\t\"entity_group\" : \"GPU\",\n\t\t\t\t\t\t\t\t\"entity_group_id\" : 1,\n\t\t\t\t\t\t\t\t\"entity_id\" : %d,\n\t\t\t\t\t\t\t\t%s\n\t\t\t\t\t\t\t}%s\n", i, st, sep)
	}
	b.WriteString("\t\t\t\t\t\t],\n\t\t\t\t\t\t\"test_summary\" :\n\t\t\t\t\t\t{\n\t\t\t\t\t\t\t\"status\" : \"Fail\"\n\t\t\t\t\t\t}\n\t\t\t\t\t},\n")
	return b.String()
}

func TestParseReal(t *testing.T) {
	d, err := Parse([]byte(read(t, "dcgm-3.1.0-8gpu-pass.txt")))
	require.NoError(t, err)
	require.Equal(t, "3.1.0", d.Version)
	require.Equal(t, "DCGM 3.1.0", d.Versions())
	// 9 deployment tests of 8 GPUs each, and the software test's 8.
	require.Len(t, d.Results, 9*8+8)
	require.Equal(t, Result{Test: "Denylist", Category: "Deployment", GPU: 0, Entity: "GPU", Status: StatusPass, RawStatus: "PASS"}, d.Results[0])
	require.Equal(t, 7, d.Results[len(d.Results)-1].GPU)

	d, err = Parse([]byte(dcgm4(t, "", entities(8, nil))))
	require.NoError(t, err)
	require.Equal(t, "DCGM 4.1.1, driver 570.86.15", d.Versions())
	require.Len(t, d.Results, 8)
	require.Equal(t, []string{
		"Allocated space for 138 output matricies from 76077622886 bytes available.",
		"Running with precisions: FP64 1, FP32 1, FP16 1",
		"GPU 0 calculated at approximately 859.08 gigaflops during this test",
	}, d.Results[0].Info)
	require.Empty(t, d.Serials, "<<<NOT_SUPPORTED>>> is no serial")
}

func TestJudge(t *testing.T) {
	dcgm3 := read(t, "dcgm-3.1.0-8gpu-pass.txt")
	for _, tc := range []struct {
		desc    string
		out     string
		gpus    []validation.GPU
		verdict validation.Verdict
		reason  string
		// per GPU index: its verdict, failed tests and a part of its
		// detail; unlisted GPUs pass.
		want map[int]validation.GPUResult
		// others is the verdict of the GPUs not in want: Pass unless set.
		others validation.Verdict
	}{
		{desc: "DCGM 3.1.0, 8 GPUs pass (real)", out: dcgm3, gpus: node(8), verdict: validation.VerdictPass},
		{desc: "DCGM 4, 8 GPUs pass (real fragment)", out: dcgm4(t, "", entities(8, nil)), gpus: node(8), verdict: validation.VerdictPass},
		{desc: "DCGM 4: the memory test fails GPU 2 (the silent GPU)", out: dcgm4(t, memoryFail(2), entities(8, nil)), gpus: node(8),
			verdict: validation.VerdictFail, reason: "1 of 8 GPUs failed: GPU 2 (memory)",
			want: map[int]validation.GPUResult{2: {Verdict: validation.VerdictFail, Failed: []string{"memory"}, Detail: "memory: A memory mismatch was detected on GPU 2"}}},
		{desc: "DCGM 4: serial numbers map DCGM's GPU 2 to the pod's GPU 5", out: dcgm4(t, memoryFail(2), entities(8, []int{0, 1, 5, 3, 4, 2, 6, 7})), gpus: node(8),
			verdict: validation.VerdictFail, reason: "GPU 5 (memory)",
			want: map[int]validation.GPUResult{5: {Verdict: validation.VerdictFail, Failed: []string{"memory"}}}},
		{desc: "DCGM 3: the software test fails GPU 3 (real, status cut to FAIL with a warning)",
			out:  strings.Replace(dcgm3, "\"gpu_ids\" : 3,\n\t\t\t\t\t\t\t\t\"status\" : \"PASS\"", "\"gpu_ids\" : 3,\n\t\t\t\t\t\t\t\t\"status\" : \"FAIL\",\n\t\t\t\t\t\t\t\t\"warnings\" : [\"Persistence mode for GPU 3 is disabled.\"]", 1),
			gpus: node(8), verdict: validation.VerdictFail, reason: "GPU 3 (software)",
			want: map[int]validation.GPUResult{3: {Verdict: validation.VerdictFail, Failed: []string{"software"}, Detail: "software: Persistence mode for GPU 3 is disabled."}}},
		{desc: "DCGM 3: a deployment test fails every GPU it lists",
			out:  strings.Replace(dcgm3, "\"name\" : \"Inforom\",\n\t\t\t\t\t\t\"results\" :\n\t\t\t\t\t\t[\n\t\t\t\t\t\t\t{\n\t\t\t\t\t\t\t\t\"gpu_ids\" : \"0,1,2,3,4,5,6,7\",\n\t\t\t\t\t\t\t\t\"status\" : \"PASS\"", "\"name\" : \"Inforom\",\n\t\t\t\t\t\t\"results\" :\n\t\t\t\t\t\t[\n\t\t\t\t\t\t\t{\n\t\t\t\t\t\t\t\t\"gpu_ids\" : \"6,7\",\n\t\t\t\t\t\t\t\t\"status\" : \"FAIL\"", 1),
			gpus: node(8), verdict: validation.VerdictFail, reason: "2 of 8 GPUs failed: GPU 6 (Inforom), GPU 7 (Inforom)",
			want: map[int]validation.GPUResult{6: {Verdict: validation.VerdictFail, Failed: []string{"Inforom"}, Detail: "Inforom: failed"}, 7: {Verdict: validation.VerdictFail, Failed: []string{"Inforom"}}}},
		{desc: "a status kubemedic does not know is no answer", out: strings.Replace(dcgm4(t, "", entities(8, nil)), `"entity_id" : 4,
                                                                "status" : "Pass"`, `"entity_id" : 4,
                                                                "status" : "Inconclusive"`, 1), gpus: node(8),
			verdict: validation.VerdictNoAnswer, reason: "no answer for GPU 4",
			want: map[int]validation.GPUResult{4: {Verdict: validation.VerdictNoAnswer, Detail: `kubemedic does not know diagnostic: status "Inconclusive"`}}},
		{desc: "a GPU that every test skipped is no answer", out: strings.Replace(dcgm4(t, "", entities(8, nil)), `"entity_id" : 5,
                                                                "status" : "Pass"`, `"entity_id" : 5,
                                                                "status" : "Skip"`, 1), gpus: node(8),
			verdict: validation.VerdictNoAnswer,
			want:    map[int]validation.GPUResult{5: {Verdict: validation.VerdictNoAnswer, Detail: "every test skipped it: diagnostic"}}},
		{desc: "a GPU that DCGM did not test is no answer", out: dcgm4(t, "", entities(8, nil)), gpus: node(9),
			verdict: validation.VerdictNoAnswer, reason: "no answer for GPU 8",
			want: map[int]validation.GPUResult{8: {Verdict: validation.VerdictNoAnswer, Detail: "DCGM reported no test on this GPU"}}},
		{desc: "DCGM tested GPUs the pod does not see", out: dcgm4(t, "", entities(8, nil)), gpus: node(4),
			verdict: validation.VerdictNoAnswer, reason: "DCGM tested GPU 4, GPU 5, GPU 6, GPU 7, which nvidia-smi in the test pod does not list"},
		{desc: "a failure on a GPU the pod does not see still fails the node", out: dcgm4(t, memoryFail(6), entities(8, nil)), gpus: node(4),
			verdict: validation.VerdictFail, reason: "memory on DCGM's GPU 6, which this pod does not see"},
		{desc: "a runtime error is no answer",
			out:  "{\"DCGM Diagnostic\" : {\"runtime_error\" : \"Unable to run diagnostic: the NVVS binary could not be found.\"}}\n",
			gpus: node(8), verdict: validation.VerdictNoAnswer, reason: "DCGM could not run the diagnostic: Unable to run diagnostic: the NVVS binary could not be found.",
			others: validation.VerdictNoAnswer},
		{desc: "a summary that failed with no GPU's result failing fails the node",
			out: strings.Replace(dcgm4(t, "", entities(8, nil)), "\"test_summary\" :\n                                                {\n                                                        \"status\" : \"Pass\"",
				"\"test_summary\" :\n                                                {\n                                                        \"status\" : \"Fail\"", 1),
			gpus: node(8), verdict: validation.VerdictFail, reason: "diagnostic (its summary failed, no GPU's result did)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := Parse([]byte(tc.out))
			require.NoError(t, err)
			r := Judge(d, tc.gpus)
			require.Equal(t, tc.verdict, r.Verdict, r.Reason)
			require.Contains(t, r.Reason, tc.reason)
			require.Equal(t, validation.TestDCGM, r.Test)
			require.Equal(t, "NVIDIA H100 80GB HBM3", r.Model)
			require.Len(t, r.GPUs, len(tc.gpus))
			for i, g := range r.GPUs {
				require.Equal(t, tc.gpus[i].UUID, g.UUID)
				want, ok := tc.want[i]
				if !ok {
					others := tc.others
					if others == "" {
						others = validation.VerdictPass
					}
					require.Equal(t, others, g.Verdict, "GPU %d: %s", i, g.Detail)
					continue
				}
				require.Equal(t, want.Verdict, g.Verdict, "GPU %d", i)
				require.Equal(t, want.Failed, g.Failed, "GPU %d", i)
				require.Contains(t, g.Detail, want.Detail, "GPU %d", i)
			}
			_, err = validation.Encode(r)
			require.NoError(t, err)
		})
	}
}

// TestParseRefuses: malformed and truncated output, cut by hand from the
// real samples, is an error that says where, never results.
func TestParseRefuses(t *testing.T) {
	dcgm3 := read(t, "dcgm-3.1.0-8gpu-pass.txt")
	for _, tc := range []struct {
		desc, out, err string
	}{
		{"truncated in the middle (the real 3.1.0 sample, cut at 1500 bytes)", dcgm3[:1500], "the JSON document ends early, at line 94: the output is truncated"},
		{"truncated after the last result", dcgm3[:strings.LastIndex(dcgm3, "]")], "ends early"},
		{"no JSON at all: dcgmi could not reach the host engine", "Error: unable to establish a connection to the specified host: localhost\nError: Unable to connect to host engine. Host engine connection invalid/disconnected.\n", `no JSON document in the output (it begins "Error: unable to establish a connection to the specified host: localhost")`},
		{"empty", "", "no JSON document in the output (the output is empty)"},
		{"malformed", strings.Replace(dcgm3, `"status" : "PASS"`, `"status" "PASS"`, 1), "the JSON document is malformed at line 18"},
		{"a result without status", strings.Replace(dcgm3, ",\n\t\t\t\t\t\t\t\t\"status\" : \"PASS\"", "", 1), "test_categories[0].tests[0] (Denylist) results[0]: no status"},
		{"a result that names no GPU", strings.Replace(dcgm3, "\"gpu_ids\" : \"0,1,2,3,4,5,6,7\",", "", 1), "results[0]: no entity_id, gpu_ids or gpu_id"},
		{"gpu_ids that are not ids", strings.Replace(dcgm3, `"gpu_ids" : "0,1,2,3,4,5,6,7"`, `"gpu_ids" : "0,one"`, 1), `gpu_ids "0,one": "one" is not a GPU id`},
		{"another document", `{"nvbandwidth": {}}`, `neither "DCGM Diagnostic" (DCGM 4) nor "DCGM GPU Diagnostic" (DCGM 3)`},
		{"a document without results", `{"DCGM Diagnostic": {"test_categories": []}}`, "no test results and no runtime_error"},
		{"a test without a name", strings.Replace(dcgm3, `"name" : "Denylist",`, "", 1), "test_categories[0].tests[0] has no name"},
		{"warnings of another shape", strings.Replace(dcgm3, `"status" : "PASS"`, `"status" : "PASS", "warnings" : 7`, 1), "warnings: 7 is neither text nor a list"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.out))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts judges into a report
// that encodes, and is no pass unless every GPU passed.
func FuzzParse(f *testing.F) {
	f.Add(read(f, "dcgm-3.1.0-8gpu-pass.txt"))
	f.Add(dcgm4(f, memoryFail(1), entities(8, []int{7, 6, 5, 4, 3, 2, 1, 0})))
	f.Add(`{"DCGM Diagnostic":{"runtime_error":"x"}}`)
	f.Add("{\"DCGM GPU Diagnostic\":{\"test_categories\":[{\"tests\":[null,{\"name\":\"a\",\"results\":[{\"gpu_ids\":\"1,2\",\"status\":\"Warn\",\"warnings\":[\"w\"]}]}]}]}}")
	f.Fuzz(func(t *testing.T, in string) {
		d, err := Parse([]byte(in))
		if err != nil {
			return
		}
		r := Judge(d, node(4))
		if _, err := validation.Encode(r); err != nil {
			t.Fatalf("the report does not encode: %v", err)
		}
		if r.Verdict == validation.VerdictPass {
			for _, g := range r.GPUs {
				require.Equal(t, validation.VerdictPass, g.Verdict)
			}
		}
	})
}
