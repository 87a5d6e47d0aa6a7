package policies_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubemedic/kubemedic/policies"
)

// BenchmarkLoadAndValidateExamples measures what `kubemedic policy validate
// -f policies/examples` does per run: read, shape-check, decode, default and
// validate every example document.
func BenchmarkLoadAndValidateExamples(b *testing.B) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		b.Fatalf("no examples: %v", err)
	}
	data := map[string][]byte{}
	for _, f := range files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data[f] = d
	}
	b.ReportAllocs()
	for b.Loop() {
		var all []*policies.Document
		for f, d := range data {
			docs, ps := policies.Load(f, d)
			if len(ps) > 0 {
				b.Fatal(ps)
			}
			all = append(all, docs...)
		}
		if ps := policies.ValidateSet(all); len(ps) > 0 {
			b.Fatal(ps)
		}
	}
	b.ReportMetric(float64(len(files)), "files/op")
}
