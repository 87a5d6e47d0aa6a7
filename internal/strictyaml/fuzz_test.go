package strictyaml_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kubemedic/kubemedic/internal/strictyaml"
)

// FuzzDecode feeds arbitrary bytes through both ways of walking a document:
// they must never panic, every problem must be located in the file (a line
// and a message) and worded in one of the package's forms, and the same
// input must give the same problems (no map order leaks into the
// suggestions). The seed corpus is testdata/*.yaml plus the inputs that
// once broke YAML decoders.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
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
	for _, seed := range []string{
		"",
		"~",
		"---\n---\n",
		"a: &a [*a, *a]\n",
		"a: &a {b: *a}\n",
		"<<: {a: 1}\n",
		"? {a: b}\n: c\n",
		"spec: !!binary aGVsbG8=\n",
		"spec: {replicas: 0x7fffffffffffffffff, small: -0b1}\n",
		"metadata:\n  labels: {? [a] : b}\n",
		"a: \x00\n",
		"\xef\xbb\xbfa: 1\n",
		"a: [\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first := decodeAll(data)
		for _, p := range first {
			if p.File != "f.yaml" || p.Line < 1 || p.Msg == "" {
				t.Fatalf("problem not located: %#v", p)
			}
			if !strings.HasPrefix(p.Error(), "f.yaml:") {
				t.Fatalf("problem not printed as FILE:LINE: %q", p.Error())
			}
			if !slices.ContainsFunc(forms, func(f string) bool { return strings.HasPrefix(p.Msg, f) }) {
				t.Fatalf("problem not in one of the package's forms: %q", p.Error())
			}
			var first int
			if _, err := fmt.Sscanf(p.Msg[strings.LastIndex(p.Msg, ";")+1:], " first set on line %d", &first); err == nil && (first < 1 || first > p.Line) {
				t.Fatalf("a duplicate first set on line %d, after it: %q", first, p.Error())
			}
		}
		again := decodeAll(data)
		if !slices.EqualFunc(first, again, func(a, b *strictyaml.Error) bool { return *a == *b }) {
			t.Fatalf("two runs disagree:\n%v\n%v", first, again)
		}
	})
}

// forms are how every problem of the decoder (and of stampCheck, worded
// like it) begins.
var forms = []string{
	"not valid YAML: ",
	"unknown field ",
	"duplicate field; first set on line ",
	"duplicate key; first set on line ",
	"must be ",
	"integer ",
	"key ",
	strictyaml.MergeKeyMsg,
}

// decodeAll walks every document with Fields (as the alertbridge config
// does) and with Shape (as the policy files do).
func decodeAll(data []byte) []*strictyaml.Error {
	d := strictyaml.New("f.yaml")
	for _, doc := range d.Documents(data) {
		if doc.Root == nil || strictyaml.IsNull(doc.Root) {
			continue
		}
		d.Shape(doc.Root, reflect.TypeFor[widget](), "", stampCheck)
		if doc.Root.Kind == yaml.MappingNode {
			fields := d.Fields(doc.Root, "", []string{"apiVersion", "kind", "metadata", "spec"})
			if e, ok := fields["spec"]; ok && e.Value.Kind == yaml.MappingNode {
				for name, f := range d.Fields(e.Value, "spec", []string{"replicas", "tags", "enabled"}) {
					switch name {
					case "replicas":
						d.Int(f.Value, "spec.replicas")
					case "tags":
						if items, ok := d.Seq(f.Value, "spec.tags"); ok {
							for _, it := range items {
								d.String(it, "spec.tags[]")
							}
						}
					case "enabled":
						d.Bool(f.Value, "spec.enabled")
					}
				}
			}
		}
	}
	return d.Errors()
}
