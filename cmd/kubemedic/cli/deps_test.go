package cli_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestShippedBinariesImportNoTestCode keeps test code out of what ships:
// no package under cmd/ (every binary and this CLI) may depend on a package
// under test/. `kubemedic demo` gets its local cluster from
// internal/localcluster and its whole loop from internal/demo, not from
// test/harness.
func TestShippedBinariesImportNoTestCode(t *testing.T) {
	const module = "github.com/kubemedic/kubemedic"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/cmd/...").Output()
	if err != nil {
		t.Fatalf("go list -deps %s/cmd/...: %v", module, err)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}

	// The listing must cover the binaries and read real dependencies, or
	// the check below passes by checking nothing.
	for _, bin := range []string{"kubemedic", "kubemedic-detect", "kubemedic-remediator", "kubemedic-alertbridge", "kubemedic-janitor", "kubemedic-diag"} {
		if _, ok := deps[module+"/cmd/"+bin]; !ok {
			t.Errorf("go list did not list %s/cmd/%s", module, bin)
		}
	}
	for _, want := range []string{"/internal/localcluster", "/internal/demo"} {
		if !slices.Contains(deps[module+"/cmd/kubemedic/cli"], module+want) {
			t.Errorf("cmd/kubemedic/cli does not depend on %s%s; the dependency listing is wrong", module, want)
		}
	}

	for pkg, ds := range deps {
		for _, d := range ds {
			if strings.HasPrefix(d, module+"/test/") || d == module+"/test" {
				t.Errorf("%s depends on test code: %s", pkg, d)
			}
		}
	}
}
