package strictyaml_test

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kubemedic/kubemedic/internal/strictyaml"
)

// lines formats the decoder's problems as the CLIs print them.
func lines(d *strictyaml.Decoder) []string {
	var out []string
	for _, e := range d.Errors() {
		out = append(out, e.Error())
	}
	return out
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		desc string
		err  strictyaml.Error
		want string
	}{
		{desc: "line and field", err: strictyaml.Error{File: "a.yaml", Line: 12, Field: "routes[1].repo", Msg: "required"}, want: "a.yaml:12: routes[1].repo: required"},
		{desc: "no field: the document", err: strictyaml.Error{File: "a.yaml", Line: 2, Msg: "a second YAML document"}, want: "a.yaml:2: a second YAML document"},
		{desc: "no line: the whole file", err: strictyaml.Error{File: "a.yaml", Msg: "file holds no YAML documents"}, want: "a.yaml: file holds no YAML documents"},
		{desc: "a field without a line", err: strictyaml.Error{File: "a.yaml", Field: "kind", Msg: "required"}, want: "a.yaml: kind: required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.err.Error())
		})
	}
}

func TestDocuments(t *testing.T) {
	type doc struct {
		line int
		root string // the root's kind and line, "" for none
	}
	rootOf := func(d strictyaml.Document) string {
		switch {
		case d.Root == nil:
			return ""
		case strictyaml.IsNull(d.Root):
			return fmt.Sprintf("null@%d", d.Root.Line)
		}
		return fmt.Sprintf("%v@%d", d.Root.Kind, d.Root.Line)
	}
	for _, tc := range []struct {
		desc     string
		data     string
		want     []doc
		wantErrs []string
	}{
		{desc: "empty", data: ""},
		{desc: "only a comment", data: "# nothing\n"},
		{desc: "one mapping", data: "a: 1\n", want: []doc{{1, fmt.Sprintf("%v@1", yaml.MappingNode)}}},
		{desc: "documents keep their lines, empty and null ones included",
			data: "a: 1\n---\n---\n~\n---\n- x\n",
			want: []doc{{1, fmt.Sprintf("%v@1", yaml.MappingNode)}, {2, "null@3"}, {3, "null@4"}, {5, fmt.Sprintf("%v@6", yaml.SequenceNode)}}},
		{desc: "an alias at the top is followed", data: "&a [1]\n", want: []doc{{1, fmt.Sprintf("%v@1", yaml.SequenceNode)}}},
		{desc: "a syntax error on line 1 has its line", data: "a: b: c\n",
			wantErrs: []string{"f.yaml:1: not valid YAML: mapping values are not allowed in this context"}},
		{desc: "a syntax error later has its line", data: "a: 1\nb: [\n",
			wantErrs: []string{"f.yaml:2: not valid YAML: did not find expected node content"}},
		{desc: "a control character is found on its line", data: "a: 1\nb: x\x01y\n",
			wantErrs: []string{"f.yaml:2: not valid YAML: control characters are not allowed"}},
		{desc: "invalid UTF-8 is found on its line", data: "a: 1\n\nb: \xff\n",
			wantErrs: []string{"f.yaml:3: not valid YAML: invalid leading UTF-8 octet"}},
		{desc: "the documents before a syntax error are kept", data: "a: 1\n---\nb: [\n",
			want:     []doc{{1, fmt.Sprintf("%v@1", yaml.MappingNode)}},
			wantErrs: []string{"f.yaml:3: not valid YAML: did not find expected node content"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := strictyaml.New("f.yaml")
			var got []doc
			for _, dd := range d.Documents([]byte(tc.data)) {
				got = append(got, doc{dd.Line, rootOf(dd)})
			}
			assert.Equal(t, tc.want, got)
			errs := lines(d)
			require.Len(t, errs, len(tc.wantErrs), "%q", errs)
			for i, w := range tc.wantErrs {
				assert.True(t, strings.HasPrefix(errs[i], w), "got  %s\nwant %s...", errs[i], w)
			}
		})
	}
}

// root parses one document and returns its root mapping.
func root(t *testing.T, data string) *yaml.Node {
	t.Helper()
	d := strictyaml.New("f.yaml")
	docs := d.Documents([]byte(data))
	require.Empty(t, lines(d))
	require.Len(t, docs, 1)
	return docs[0].Root
}

func TestFields(t *testing.T) {
	known := []string{"name", "window", "labels"}
	for _, tc := range []struct {
		desc string
		data string
		want map[string]int // field → the line of its key
		errs []string
	}{
		{desc: "known fields with their lines", data: "name: a\nwindow: 1m\n", want: map[string]int{"name": 1, "window": 2}},
		{desc: "a null value counts as absent", data: "name: a\nwindow: ~\nlabels:\n", want: map[string]int{"name": 1}},
		{desc: "an unknown field near a known one", data: "name: a\nwindw: 1m\n", want: map[string]int{"name": 1},
			errs: []string{`f.yaml:2: top.windw: unknown field "windw" (did you mean "window"?)`}},
		{desc: "an unknown field that differs only in case", data: "NAME: a\n", want: map[string]int{},
			errs: []string{`f.yaml:1: top.NAME: unknown field "NAME" (did you mean "name"?)`}},
		{desc: "an unknown field far from any lists the known ones, in their order", data: "slack: '#x'\n", want: map[string]int{},
			errs: []string{`f.yaml:1: top.slack: unknown field "slack"; known fields: name, window, labels`}},
		{desc: "a duplicate key: the first one stands", data: "name: a\nwindow: 1m\nname: b\n", want: map[string]int{"name": 1, "window": 2},
			errs: []string{"f.yaml:3: top.name: duplicate field; first set on line 1"}},
		{desc: "unknown fields are left out, whatever their values", data: "x: &x {name: a}\ny:\n  <<: *x\n", want: map[string]int{},
			errs: []string{`f.yaml:1: top.x: unknown field "x"; known fields: name, window, labels`, `f.yaml:2: top.y: unknown field "y"; known fields: name, window, labels`}},
		{desc: "a key that is not a name", data: "? [a]\n: 1\nname: a\n", want: map[string]int{"name": 3},
			errs: []string{"f.yaml:1: top: key a list is not a field name"}},
		{desc: "a duplicate and a typo", data: "name: a\nname: b\nnam: c\n", want: map[string]int{"name": 1},
			errs: []string{"f.yaml:2: top.name: duplicate field; first set on line 1", `f.yaml:3: top.nam: unknown field "nam" (did you mean "name"?)`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := strictyaml.New("f.yaml")
			got := map[string]int{}
			for k, e := range d.Fields(root(t, tc.data), "top", known) {
				got[k] = e.Line
				assert.False(t, strictyaml.IsNull(e.Value))
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.errs, lines(d))
		})
	}
}

func TestFieldsMergeKeyInside(t *testing.T) {
	d := strictyaml.New("f.yaml")
	n := root(t, "x: &x {name: a}\ny:\n  <<: *x\n  window: 1m\n")
	y := strictyaml.Resolve(n.Content[3])
	got := d.Fields(y, "y", []string{"name", "window"})
	assert.Contains(t, got, "window")
	assert.NotContains(t, got, "name", "the merged field is not taken")
	assert.Equal(t, []string{"f.yaml:3: y: " + strictyaml.MergeKeyMsg}, lines(d))
}

func TestFieldsFollowsAliases(t *testing.T) {
	d := strictyaml.New("f.yaml")
	n := root(t, "labels: &l [a, b]\nname: *l\n")
	got := d.Fields(n, "", []string{"name", "labels"})
	require.Contains(t, got, "name")
	assert.Equal(t, yaml.SequenceNode, got["name"].Value.Kind, "the alias is resolved to the list")
	assert.Empty(t, lines(d))
}

func TestScalars(t *testing.T) {
	value := func(t *testing.T, s string) *yaml.Node {
		return root(t, "v: "+s+"\n").Content[1]
	}
	for _, tc := range []struct {
		desc    string
		value   string
		check   func(d *strictyaml.Decoder, n *yaml.Node) (any, bool)
		want    any
		wantErr string
	}{
		{desc: "a string", value: "abc", check: str, want: "abc"},
		{desc: "a quoted number is a string", value: `"42"`, check: str, want: "42"},
		{desc: "a number is not a string", value: "42", check: str, wantErr: `must be a string, got the number 42 (quote it)`},
		{desc: "a boolean is not a string", value: "true", check: str, wantErr: `must be a string, got the boolean true (quote it)`},
		{desc: "a list is not a string", value: "[a]", check: str, wantErr: `must be a string, got a list`},
		{desc: "true", value: "true", check: boolean, want: true},
		{desc: "yes is not a boolean", value: "yes", check: boolean, wantErr: `must be true or false, got "yes"`},
		{desc: "1 is not a boolean", value: "1", check: boolean, wantErr: `must be true or false, got the number 1`},
		{desc: "an integer", value: "-12", check: integer, want: -12},
		{desc: "a hex integer", value: "0x10", check: integer, want: 16},
		{desc: "a float is not an integer", value: "2.5", check: integer, wantErr: `must be an integer, got the number 2.5`},
		{desc: "an integer out of range", value: "10000000000000000000", check: integer, wantErr: `integer 10000000000000000000 out of range`},
		{desc: "an integer too large for YAML", value: "99999999999999999999", check: integer, wantErr: `integer 99999999999999999999 out of range`},
		{desc: "a date is not a string, unless quoted", value: "2026-01-02", check: str, wantErr: `must be a string, got the time 2026-01-02 (quote it)`},
		{desc: "null is not a string", value: "~", check: str, wantErr: `must be a string, got null`},
		{desc: "a list", value: "[a, b]", check: seq, want: 2},
		{desc: "a mapping is not a list", value: "{a: b}", check: seq, wantErr: `must be a list, got a mapping`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := strictyaml.New("f.yaml")
			got, ok := tc.check(d, value(t, tc.value))
			if tc.wantErr != "" {
				assert.False(t, ok)
				assert.Equal(t, []string{"f.yaml:1: v: " + tc.wantErr}, lines(d))
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tc.want, got)
			assert.Empty(t, lines(d))
		})
	}
}

func str(d *strictyaml.Decoder, n *yaml.Node) (any, bool)     { return d.String(n, "v") }
func boolean(d *strictyaml.Decoder, n *yaml.Node) (any, bool) { return d.Bool(n, "v") }
func integer(d *strictyaml.Decoder, n *yaml.Node) (any, bool) { return d.Int(n, "v") }
func seq(d *strictyaml.Decoder, n *yaml.Node) (any, bool) {
	items, ok := d.Seq(n, "v")
	return len(items), ok
}

func TestSuggest(t *testing.T) {
	known := []string{"maxUnhealthy", "maxConcurrent", "timeout", "window"}
	for _, tc := range []struct {
		desc, name, want string
	}{
		{desc: "one letter missing", name: "maxUnhealty", want: "maxUnhealthy"},
		{desc: "case only", name: "timeOut", want: "timeout"},
		{desc: "two edits", name: "windw_", want: "window"},
		{desc: "three edits is too far", name: "wndw_x", want: ""},
		{desc: "nothing near", name: "slack", want: ""},
		{desc: "of equally near names, the first known", name: "xindox", want: "window"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, strictyaml.Suggest(tc.name, known))
		})
	}
	assert.Equal(t, "ab", strictyaml.Suggest("a", []string{"ab", "ac"}), "ties go to the first known")
}

func TestErrJoinsProblemsByLine(t *testing.T) {
	d := strictyaml.New("f.yaml")
	require.NoError(t, d.Err(), "no problem, no error")
	d.Errorf(5, "b", "second")
	d.Errorf(2, "a", "first")
	d.Errorf(5, "c", "third, same line as second")
	d.Errorf(0, "", "the whole file")
	err := d.Err()
	require.Error(t, err)
	assert.Equal(t, "f.yaml: the whole file\nf.yaml:2: a: first\nf.yaml:5: b: second\nf.yaml:5: c: third, same line as second", err.Error())
	var e *strictyaml.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "f.yaml", e.File)
}

func TestUnknownFieldListsAtMostTwelveKnownFields(t *testing.T) {
	var known []string
	for c := 'a'; c <= 'n'; c++ {
		known = append(known, string(c)+"field")
	}
	d := strictyaml.New("f.yaml")
	d.Fields(root(t, "zzzzzz: 1\n"), "", known)
	assert.Equal(t, []string{`f.yaml:1: zzzzzz: unknown field "zzzzzz"; known fields: afield, bfield, cfield, dfield, efield, ffield, gfield, hfield, ifield, jfield, kfield, lfield and 2 more`}, lines(d))

	d = strictyaml.New("f.yaml")
	d.Fields(root(t, "a: 1\n"), "", nil)
	assert.Equal(t, []string{`f.yaml:1: a: unknown field "a"; this mapping has no fields`}, lines(d))
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		desc, value, want string
	}{
		{desc: "a mapping", value: "{a: b}", want: "a mapping"},
		{desc: "a list", value: "[a]", want: "a list"},
		{desc: "null", value: "~", want: "null"},
		{desc: "nothing is null", value: "", want: "null"},
		{desc: "an integer", value: "0x10", want: "the number 0x10"},
		{desc: "a float", value: "2.5", want: "the number 2.5"},
		{desc: "a boolean", value: "true", want: "the boolean true"},
		{desc: "a date", value: "2026-01-02", want: "the time 2026-01-02"},
		{desc: "plain text is quoted", value: "yes", want: `"yes"`},
		{desc: "quoted text", value: `"42"`, want: `"42"`},
		{desc: "a long value is cut", value: strings.Repeat("x", 100), want: `"` + strings.Repeat("x", 39) + `…"`},
		{desc: "a value of exactly 40 characters is whole", value: strings.Repeat("é", 40), want: `"` + strings.Repeat("é", 40) + `"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, strictyaml.Describe(root(t, "v: "+tc.value+"\n").Content[1]))
		})
	}
}

// stamp stands for an API type written as text, checked by a ScalarCheck.
type stamp struct{ time.Time }

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type meta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

type widgetSpec struct {
	Replicas int32    `json:"replicas"`
	Ratio    float64  `json:"ratio"`
	Enabled  *bool    `json:"enabled,omitempty"`
	Tags     []string `json:"tags"`
	Small    int8     `json:"small"`
	Count    uint     `json:"count"`
	Percent  uint8    `json:"percent"`
	Data     []byte   `json:"data"`
	Extra    any      `json:"extra"`
	Since    *stamp   `json:"since"`
	Skipped  string   `json:"-"`
	hidden   string
}

type widget struct {
	typeMeta `json:",inline"`
	Metadata meta        `json:"metadata"`
	Spec     *widgetSpec `json:"spec"`
}

var _ = widgetSpec{}.hidden // it only has to exist, unexported

var stampCheck = map[reflect.Type]strictyaml.ScalarCheck{
	reflect.TypeFor[stamp](): func(n *yaml.Node) string {
		if n.Kind != yaml.ScalarNode {
			return "must be a time, got " + strictyaml.Describe(n)
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			return fmt.Sprintf("must be an RFC 3339 time, got %q", n.Value)
		}
		return ""
	},
}

// shape checks every document of a testdata file against widget.
func shape(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	d := strictyaml.New("f.yaml")
	for _, doc := range d.Documents(data) {
		if doc.Root != nil {
			d.Shape(doc.Root, reflect.TypeFor[widget](), "", stampCheck)
		}
	}
	return lines(d)
}

func TestShapeAcceptsWellFormedObjects(t *testing.T) {
	assert.Empty(t, shape(t, "testdata/objects.yaml"))
}

func TestShapeReportsEveryMistakeWithItsLine(t *testing.T) {
	assert.Equal(t, []string{
		`f.yaml:6: metadata.name: duplicate field; first set on line 5`,
		`f.yaml:7: metadata.nmae: unknown field "nmae" (did you mean "name"?)`,
		`f.yaml:9: spec.replicas: must be an integer, got "3"`,
		`f.yaml:10: spec.enabled: must be true or false, got "yes"`,
		`f.yaml:11: spec.tags: must be a list, got "a"`,
		`f.yaml:12: spec.ratio: must be a number, got a list`,
		`f.yaml:13: spec.small: integer 300 out of range`,
		`f.yaml:14: spec.count: must be a non-negative integer, got the number -1`,
		`f.yaml:15: spec: ` + strictyaml.MergeKeyMsg,
		`f.yaml:16: spec: key a list is not a field name`,
	}, shape(t, "testdata/mistakes.yaml"))
}

func TestShape(t *testing.T) {
	for _, tc := range []struct {
		desc string
		data string
		want []string
	}{
		{desc: "null anywhere is the zero value", data: "metadata: ~\nspec:\n  tags: ~\n  since: ~\n"},
		{desc: "inline fields are fields of the object", data: "apiVersion: x/v1\nkind: Widget\n"},
		{desc: "a field tagged - is unknown", data: "spec:\n  Skipped: x\n",
			want: []string{`f.yaml:2: spec.Skipped: unknown field "Skipped"; known fields: count, data, enabled, extra, percent, ratio, replicas, since, small, tags`}},
		{desc: "an unexported field is unknown", data: "spec:\n  hidden: x\n",
			want: []string{`f.yaml:2: spec.hidden: unknown field "hidden"; known fields: count, data, enabled, extra, percent, ratio, replicas, since, small, tags`}},
		{desc: "map keys are paths in brackets", data: "metadata:\n  labels:\n    app: 5\n    app: x\n",
			want: []string{`f.yaml:3: metadata.labels[app]: must be a string, got the number 5 (quote it)`, `f.yaml:4: metadata.labels[app]: duplicate key; first set on line 3`}},
		{desc: "list items are paths with indexes", data: "spec:\n  tags: [a, [b]]\n",
			want: []string{`f.yaml:2: spec.tags[1]: must be a string, got a list`}},
		{desc: "bytes are a base64 string", data: "spec:\n  data: [1]\n",
			want: []string{`f.yaml:2: spec.data: must be a base64 string, got a list`}},
		{desc: "anything goes in a free-form field", data: "spec:\n  extra: {a: [1, {b: c}]}\n"},
		{desc: "a scalar check decides for its type", data: "spec:\n  since: yesterday\n",
			want: []string{`f.yaml:2: spec.since: must be an RFC 3339 time, got "yesterday"`}},
		{desc: "a mapping where a list belongs", data: "spec:\n  tags: {a: b}\n",
			want: []string{`f.yaml:2: spec.tags: must be a list, got a mapping`}},
		{desc: "a list where a mapping belongs", data: "spec: [1]\n",
			want: []string{`f.yaml:1: spec: must be a mapping, got a list`}},
		{desc: "aliases are checked where they are used", data: "metadata: &m {name: 5}\nspec: *m\n",
			want: []string{`f.yaml:1: metadata.name: must be a string, got the number 5 (quote it)`, `f.yaml:1: spec.name: unknown field "name"; known fields: count, data, enabled, extra, percent, ratio, replicas, since, small, tags`}},
		{desc: "the int32 range", data: "spec:\n  replicas: 2147483648\n",
			want: []string{`f.yaml:2: spec.replicas: integer 2147483648 out of range`}},
		{desc: "the uint8 range", data: "spec:\n  percent: 256\n",
			want: []string{`f.yaml:2: spec.percent: integer 256 out of range`}},
		{desc: "integers too large for YAML's 64 bits are out of range too", data: "spec:\n  count: 0x1ffffffffffffffff\n  replicas: -99999999999999999999\n",
			want: []string{`f.yaml:2: spec.count: integer 0x1ffffffffffffffff out of range`, `f.yaml:3: spec.replicas: integer -99999999999999999999 out of range`}},
		{desc: "a sign is allowed, a negative count is not", data: "spec:\n  percent: +5\n  count: -99999999999999999999\n",
			want: []string{`f.yaml:3: spec.count: must be a non-negative integer, got the number -99999999999999999999`}},
		{desc: "a quoted integer is a string", data: "spec:\n  replicas: '99999999999999999999'\n",
			want: []string{`f.yaml:2: spec.replicas: must be an integer, got "99999999999999999999"`}},
		{desc: "a long wrong value is cut", data: "spec:\n  ratio: '" + strings.Repeat("9", 50) + "'\n",
			want: []string{`f.yaml:2: spec.ratio: must be a number, got "` + strings.Repeat("9", 39) + `…"`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := strictyaml.New("f.yaml")
			d.Shape(root(t, tc.data), reflect.TypeFor[widget](), "", stampCheck)
			assert.Equal(t, tc.want, lines(d))
		})
	}
}

// TestFieldsAndShapeWordMistakesAlike: a mistake reads the same whichever
// way the file is walked, so the alertbridge config and the policy files
// say it alike.
func TestFieldsAndShapeWordMistakesAlike(t *testing.T) {
	const data = "spec:\n  enabled: maybe\n  enabled: true\n  tag: [a]\n  replicas: 3.5\n  small: 99999999999999999999\n"
	viaShape := strictyaml.New("f.yaml")
	viaShape.Shape(root(t, data), reflect.TypeFor[widget](), "", stampCheck)

	viaFields := strictyaml.New("f.yaml")
	top := viaFields.Fields(root(t, data), "", []string{"apiVersion", "data", "kind", "metadata", "spec"})
	known := []string{"count", "data", "enabled", "extra", "percent", "ratio", "replicas", "since", "small", "tags"}
	f := viaFields.Fields(top["spec"].Value, "spec", known)
	viaFields.Bool(f["enabled"].Value, "spec.enabled")
	viaFields.Int(f["replicas"].Value, "spec.replicas")
	viaFields.Int(f["small"].Value, "spec.small")

	want := []string{
		`f.yaml:2: spec.enabled: must be true or false, got "maybe"`,
		`f.yaml:3: spec.enabled: duplicate field; first set on line 2`,
		`f.yaml:4: spec.tag: unknown field "tag" (did you mean "tags"?)`,
		`f.yaml:5: spec.replicas: must be an integer, got the number 3.5`,
		`f.yaml:6: spec.small: integer 99999999999999999999 out of range`,
	}
	assert.Equal(t, want, lines(viaShape))
	assert.Equal(t, want, lines(viaFields))
}

func TestErrorsAreErrors(t *testing.T) {
	var err error = &strictyaml.Error{File: "f", Line: 1, Msg: "m"}
	var e *strictyaml.Error
	assert.True(t, errors.As(err, &e))
}
