package policies

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/strictyaml"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Document is one decoded YAML document of a policy file.
type Document struct {
	// File is the path the document was read from.
	File string
	// Line is the line of the document's first key.
	Line int
	// Kind is the document's kind, e.g. RemediationPolicy.
	Kind string
	// Object is the typed object (*v1alpha1.RemediationPolicy, ...), defaulted.
	Object runtime.Object

	root *yaml.Node
}

// Problem is one thing wrong with a policy file, located.
type Problem struct {
	File  string
	Line  int    // 0 when the problem concerns the whole file
	Field string // field path such as spec.steps[1].name; empty for document-level problems
	// Detail says what is wrong and, where it helps, what was found.
	Detail string
}

// String formats the problem as FILE:LINE: FIELD: DETAIL, leaving out the
// line or the field when there is none.
func (p Problem) String() string {
	return (&strictyaml.Error{File: p.File, Line: p.Line, Field: p.Field, Msg: p.Detail}).Error()
}

// problemsOf turns a decoder's errors into problems.
func problemsOf(errs []*strictyaml.Error) []Problem {
	var out []Problem
	for _, e := range errs {
		out = append(out, Problem{File: e.File, Line: e.Line, Field: e.Field, Detail: e.Msg})
	}
	return out
}

// kinds maps each kubemedic kind to a constructor of its typed object.
var kinds = map[string]func() runtime.Object{
	"RemediationPolicy":     func() runtime.Object { return &v1alpha1.RemediationPolicy{} },
	"ValidationPolicy":      func() runtime.Object { return &v1alpha1.ValidationPolicy{} },
	"NodeOperationTemplate": func() runtime.Object { return &v1alpha1.NodeOperationTemplate{} },
	"NodeOperation":         func() runtime.Object { return &v1alpha1.NodeOperation{} },
	"ClusterReclaimPolicy":  func() runtime.Object { return &v1alpha1.ClusterReclaimPolicy{} },
	"ReclaimPolicy":         func() runtime.Object { return &v1alpha1.ReclaimPolicy{} },
}

// Kinds lists the kinds a policy file may hold, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LoadFiles reads every path: a file, or a directory whose *.yaml and *.yml
// files are read recursively in lexical order. A missing path, an unreadable
// file, a file without documents and a directory without policy files are
// problems. Documents that decode are returned even when others do not.
func LoadFiles(paths ...string) ([]*Document, []Problem) {
	var docs []*Document
	var problems []Problem
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			problems = append(problems, Problem{File: p, Detail: err.Error()})
			continue
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				problems = append(problems, Problem{File: f, Detail: fmt.Sprintf("cannot read: %v", unwrapPathError(err))})
				continue
			}
			d, ps := Load(f, data)
			docs = append(docs, d...)
			problems = append(problems, ps...)
		}
	}
	return docs, problems
}

func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("no such file or directory")
		}
		return nil, unwrapPathError(err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory: %w", unwrapPathError(err))
	}
	if len(files) == 0 {
		return nil, errors.New("directory holds no *.yaml or *.yml files")
	}
	return files, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Load decodes every document of one file strictly, applies defaults, and
// reports what is malformed. Name is used in problems only.
func Load(name string, data []byte) ([]*Document, []Problem) {
	var docs []*Document
	var problems []Problem
	dec := strictyaml.New(name)
	seen := 0
	for _, d := range dec.Documents(data) {
		if d.Root == nil || strictyaml.IsNull(d.Root) {
			continue // an empty document between separators
		}
		seen++
		doc, ps := decodeDocument(name, d.Root)
		problems = append(problems, ps...)
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	// A syntax error ends the file: its problem comes after those of the
	// documents before it.
	problems = append(problems, problemsOf(dec.Errors())...)
	if seen == 0 && len(problems) == 0 {
		problems = append(problems, Problem{File: name, Detail: "file holds no YAML documents; expected kubemedic.io/v1alpha1 objects (" + strings.Join(Kinds(), ", ") + ")"})
	}
	return docs, problems
}

func decodeDocument(name string, top *yaml.Node) (*Document, []Problem) {
	if top.Kind != yaml.MappingNode {
		return nil, []Problem{{File: name, Line: top.Line, Detail: "document is not a mapping; expected a kubemedic.io/v1alpha1 object"}}
	}
	apiVersion, avLine := scalarField(top, "apiVersion")
	kind, kindLine := scalarField(top, "kind")
	switch {
	case kind == "":
		return nil, []Problem{{File: name, Line: top.Line, Field: "kind", Detail: "Required value: every document needs apiVersion and kind"}}
	case apiVersion != v1alpha1.GroupVersion.String():
		line := avLine
		if line == 0 {
			line = top.Line
		}
		return nil, []Problem{{File: name, Line: line, Field: "apiVersion", Detail: fmt.Sprintf("%s %q is not a kubemedic kind: expected apiVersion %s and one of %s", kind, apiVersion, v1alpha1.GroupVersion, strings.Join(Kinds(), ", "))}}
	}
	newObj, ok := kinds[kind]
	if !ok {
		return nil, []Problem{{File: name, Line: kindLine, Field: "kind", Detail: fmt.Sprintf("%q is not a kubemedic kind: expected one of %s", kind, strings.Join(Kinds(), ", "))}}
	}
	obj := newObj()
	shape := strictyaml.New(name)
	shape.Shape(top, reflect.TypeOf(obj), "", apiScalars)
	if errs := shape.Errors(); len(errs) > 0 {
		return nil, problemsOf(errs)
	}
	// The shape check passed, so a strict decode can only fail on something
	// it does not model; report that at the document.
	raw, err := yaml.Marshal(top)
	if err == nil {
		err = sigsyaml.UnmarshalStrict(raw, obj)
	}
	if err != nil {
		return nil, []Problem{{File: name, Line: top.Line, Detail: fmt.Sprintf("cannot decode %s: %v", kind, err)}}
	}
	SetDefaults(obj)
	return &Document{File: name, Line: top.Line, Kind: kind, Object: obj, root: top}, nil
}

func scalarField(m *yaml.Node, key string) (string, int) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value, m.Content[i+1].Line
		}
	}
	return "", 0
}

// Locate returns the line of the field at path in the document, or of its
// nearest ancestor that is present (a Required field points at its parent).
func (d *Document) Locate(path string) int {
	if d.root == nil {
		return d.Line
	}
	return locate(d.root, path)
}
