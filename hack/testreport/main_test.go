package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// sampleJSON runs the real `go test -json` on the module in
// testdata/sample: a package that passes with two skips, one with a failing
// subtest and a skip for no good reason, and one that does not build.
func sampleJSON(t *testing.T, pkgs ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, pkgs...)...)
	cmd.Dir = "testdata/sample"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if len(out) == 0 {
		t.Fatalf("go test -json %v printed nothing: %v", pkgs, err)
	}
	return out
}

func rules(t *testing.T, text string) []rule {
	t.Helper()
	r, err := parseRules(strings.NewReader(text), "skips", "example.com/sample")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const allowed = `
# capability skips
pass TestSkipsAllowed     needs root
pass TestSubtests/allow.* needs /dev/fuse
`

func TestReportShowsFailuresBuildErrorsAndSkips(t *testing.T) {
	var out bytes.Buffer
	if report(bytes.NewReader(sampleJSON(t, "./...")), &out, rules(t, allowed)) {
		t.Errorf("report passed a run with failures")
	}
	got := out.String()
	for _, want := range []string{
		"undefined: undefinedFunction",                   // the build error
		"FAIL\texample.com/sample/broken [build failed]", // and its package line
		"what the test saw before failing",               // a failing test's log
		"the subtest's failure message",                  // and its subtest's
		"ok  \texample.com/sample/pass",                  // a passing package's line
		"SKIP example.com/sample/fail TestSkipsForNoGoodReason: fail_test.go:5: flaky, skipped for now",
		"NOT ALLOWED",
		"SKIP example.com/sample/pass TestSkipsAllowed: pass_test.go:7: needs root: not root",
		"allowed: needs root",
		"allowed: needs /dev/fuse",
		"3 packages, 2 failed; 2 tests failed; 3 skipped, 1 of them not allowed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "passing output is not shown") {
		t.Errorf("report shows a passing test's output:\n%s", got)
	}
}

func TestReportPassesWithOnlyAllowedSkips(t *testing.T) {
	json := sampleJSON(t, "./pass")
	var out bytes.Buffer
	if !report(bytes.NewReader(json), &out, rules(t, allowed)) {
		t.Errorf("report failed a passing run whose skips are allowed:\n%s", out.String())
	}
	out.Reset()
	if report(bytes.NewReader(json), &out, nil) {
		t.Errorf("report passed skips without an allow-list:\n%s", out.String())
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"pkg TestX", "skips:1: want <package> <test regexp> <why>"},
		{"\n# ok\npkg Test( why", "skips:3: test regexp"},
	} {
		if _, err := parseRules(strings.NewReader(tc.text), "skips", "m"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRules(%q) = %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}
