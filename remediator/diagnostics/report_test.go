package diagnostics

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestReportEncodeAndParse(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	many := make([]string, 500)
	for i := range many {
		many[i] = strings.Repeat("f", 20) + strconv.Itoa(i)
	}
	r := Report{Result: v1alpha1.DiagnosticsCaptured, Key: "n/op.tar.gz", Size: 1, SHA256: sum, Files: many, Message: "all parts."}
	b := r.Encode()
	require.LessOrEqual(t, len(b), MaxReport)
	got, err := ParseReport(b)
	require.NoError(t, err)
	require.Less(t, len(got.Files), 500)
	require.Contains(t, got.Message, "more files in manifest.json")

	for _, tc := range []struct{ in, err string }{
		{`{"result":"Captured","key":"k","size":1,"sha256":"` + sum + `","extra":1}`, `unknown field "extra"`},
		{`{"result":"Done"}`, `result "Done" is not Captured, Partial or Failed`},
		{`{"result":"Captured","key":"k","size":1,"sha256":"xyz"}`, "not 64 hex digits"},
		{`{"result":"Captured","key":"k","size":0,"sha256":"` + sum + `"}`, "with size 0"},
		{`{"result":"Partial","key":"k","size":1,"sha256":"` + sum + `"}`, "names no failed part"},
		{`{"result":"Failed","key":"k"}`, "result Failed with a bundle"},
		{`{"result":"Failed"} {"result":"Failed"}`, "more than one JSON document"},
		{`not json`, "report: invalid character"},
	} {
		_, err := ParseReport([]byte(tc.in))
		require.ErrorContains(t, err, tc.err, tc.in)
	}
}
