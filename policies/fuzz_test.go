package policies_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubemedic/kubemedic/policies"
)

// FuzzLoad feeds arbitrary bytes to the loader and the validator: they must
// never panic, and every problem must name the file and say something.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"examples/*.yaml", "testdata/invalid/*.yaml", "testdata/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("a: &a [*a, *a]\nkind: RemediationPolicy\n"))
	f.Add([]byte("apiVersion: kubemedic.io/v1alpha1\nkind: RemediationPolicy\nspec: &s\n  steps:\n  - *s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, problems := policies.Load("f.yaml", data)
		problems = append(problems, policies.ValidateSet(docs)...)
		for _, p := range problems {
			if !strings.HasPrefix(p.String(), "f.yaml") || p.Detail == "" {
				t.Fatalf("problem without file or detail: %q", p.String())
			}
		}
		if len(docs) == 0 && len(problems) == 0 {
			t.Fatalf("no documents and no problems for %q", data)
		}
	})
}
