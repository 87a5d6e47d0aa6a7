package policies_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/policies"
)

// invalidCase is one file under testdata/invalid: a policy that must be
// rejected, with the problem line the CLI prints and what the API server says.
type invalidCase struct {
	name      string
	path      string
	cli       string // substring of one problem line, from ":LINE:" on
	apiserver string // substring of the API server's error, or "" when it accepts
}

func invalidCases(t *testing.T) []invalidCase {
	t.Helper()
	paths, err := filepath.Glob("testdata/invalid/*.yaml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(paths), 15, "the acceptance table needs at least 15 invalid policies")
	var cases []invalidCase
	for _, p := range paths {
		f, err := os.Open(p)
		require.NoError(t, err)
		c := invalidCase{name: strings.TrimSuffix(filepath.Base(p), ".yaml"), path: p}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "# cli: "); ok {
				c.cli = v
			}
			if v, ok := strings.CutPrefix(line, "# apiserver: "); ok && !strings.HasPrefix(v, "accepts") {
				c.apiserver = v
			}
		}
		require.NoError(t, f.Close())
		require.NotEmpty(t, c.cli, "%s: needs a '# cli:' header", p)
		cases = append(cases, c)
	}
	return cases
}

// TestInvalidPoliciesRejectedByValidate loads each invalid policy together
// with the test templates and expects the exact problem line.
func TestInvalidPoliciesRejectedByValidate(t *testing.T) {
	for _, c := range invalidCases(t) {
		t.Run(c.name, func(t *testing.T) {
			docs, problems := policies.LoadFiles("testdata/templates.yaml", c.path)
			problems = append(problems, policies.ValidateSet(docs)...)
			var lines []string
			for _, p := range problems {
				lines = append(lines, p.String())
			}
			want := c.path + c.cli
			for _, l := range lines {
				if strings.HasPrefix(l, want) || strings.Contains(l, want) {
					return
				}
			}
			t.Fatalf("no problem line contains\n  %s\ngot:\n  %s", want, strings.Join(lines, "\n  "))
		})
	}
}
