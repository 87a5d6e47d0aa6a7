package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a YAML file.
type Error struct {
	File string
	// Line is 1-based; 0 when the problem concerns the whole file.
	Line int
	// Field is the path of the field, such as routes[1].matchers[0] or
	// spec.steps[0].name; "" for the document.
	Field string
	Msg   string
}

// Error formats the problem as FILE:LINE: FIELD: MSG, leaving out the line
// or the field when there is none.
func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

// Describe names what a node holds, for the "got ..." of a message: a
// mapping, a list, an alias, null, the number 42, the boolean true, the
// time 2026-01-02, or the quoted text. A long value is cut, so that a block
// of text in the wrong place does not flood the error.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := cut(n.Value)
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return "the boolean " + v
	case "!!timestamp":
		return "the time " + v
	}
	return strconv.Quote(v)
}

// maxDescribed bounds the characters of a value that Describe repeats.
const maxDescribed = 40

// cut shortens s to maxDescribed characters, marking the cut with "…".
func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxDescribed {
		return s
	}
	return string([]rune(s)[:maxDescribed-1]) + "…"
}

// wrongType is the problem of a value of the wrong kind; want is what
// belongs there, such as "a string", "true or false", "an integer" or "a
// list". A scalar that YAML read as another type (42, true, 2026-01-02) is
// a string once quoted, and the message says so.
func wrongType(want string, got *yaml.Node) string {
	msg := fmt.Sprintf("must be %s, got %s", want, Describe(got))
	if want == "a string" && got.Kind == yaml.ScalarNode && got.Tag != "!!null" {
		msg += " (quote it)"
	}
	return msg
}

// maxKnownListed bounds the known fields an unknown field's problem lists.
const maxKnownListed = 12

// unknownField is the problem of key, which is none of known: the known
// field it is most likely a typo of, else the known fields (at most
// maxKnownListed of them, in the order given).
func unknownField(key string, known []string) string {
	if s := Suggest(key, known); s != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", key, s)
	}
	switch {
	case len(known) == 0:
		return fmt.Sprintf("unknown field %q; this mapping has no fields", key)
	case len(known) > maxKnownListed:
		return fmt.Sprintf("unknown field %q; known fields: %s and %d more", key, strings.Join(known[:maxKnownListed], ", "), len(known)-maxKnownListed)
	}
	return fmt.Sprintf("unknown field %q; known fields: %s", key, strings.Join(known, ", "))
}

// duplicate is the problem of a key set a second time in one mapping; what
// is "field" for the fields of an object, "key" for the keys of a map.
func duplicate(what string, firstLine int) string {
	return fmt.Sprintf("duplicate %s; first set on line %d", what, firstLine)
}

// MergeKeyMsg is the problem of a merge key: it would take fields from
// elsewhere in the file, where no line of the error could point.
const MergeKeyMsg = "merge keys (<<) are not supported; write the fields out"

// Decoder collects the problems of one file. It is not safe for concurrent
// use.
type Decoder struct {
	file string
	errs []*Error
}

// New returns a decoder for the file named file (used in errors only).
func New(file string) *Decoder { return &Decoder{file: file} }

// Errorf records a problem at line (0 for the whole file) and field.
func (d *Decoder) Errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: max(line, 0), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Errors returns the problems recorded so far, ordered by line (problems on
// one line in the order they were found).
func (d *Decoder) Errors() []*Error {
	out := slices.Clone(d.errs)
	slices.SortStableFunc(out, func(a, b *Error) int { return a.Line - b.Line })
	return out
}

// Err joins Errors into one error, one problem per line of its text; nil
// when there is none. errors.As finds each *Error.
func (d *Decoder) Err() error {
	errs := d.Errors()
	if len(errs) == 0 {
		return nil
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

// Document is one YAML document of a file.
type Document struct {
	// Line is the line where the document starts (its --- when it has one).
	Line int
	// Root is the document's top node, aliases followed; nil for a document
	// without content. A document holding only ~ has a null Root (IsNull).
	Root *yaml.Node
}

// Documents reads every document of data. A syntax error is recorded at its
// line and ends the reading: the documents before it are returned.
func (d *Decoder) Documents(data []byte) []Document {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			line, reason := syntaxError(data, err)
			d.Errorf(line, "", "not valid YAML: %s", reason)
			return docs
		}
		doc := Document{Line: n.Line}
		if len(n.Content) > 0 {
			doc.Root = Resolve(n.Content[0])
		}
		docs = append(docs, doc)
	}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (?s)(.*)$`)

// syntaxError locates a YAML syntax error. The parser leaves the line out
// on the first line and for characters YAML does not allow; those are found
// here.
func syntaxError(data []byte, err error) (line int, reason string) {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = "yaml: " + te.Errors[0]
	}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if line, err := strconv.Atoi(m[1]); err == nil && line > 0 {
			return line, m[2]
		}
	}
	return badCharLine(data), strings.TrimPrefix(msg, "yaml: ")
}

// badCharLine returns the line of the first character YAML does not allow,
// else 1.
func badCharLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		bad := r == utf8.RuneError && size == 1 ||
			r < 0x20 && r != '\t' && r != '\n' && r != '\r' ||
			r >= 0x7f && r < 0xa0 && r != 0x85 ||
			r == 0xfffe || r == 0xffff
		if bad {
			return line
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	return 1
}

// maxAliasDepth bounds following an alias to an alias: the parser refuses
// cycles, but a bound costs nothing.
const maxAliasDepth = 100

// Resolve follows aliases to the node they stand for.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is a null scalar (~, null or nothing).
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// Child is the path of field name below path.
func Child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Index is the path of item i of the list at path.
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Key is the path of key k of the map at path.
func Key(path, k string) string { return path + "[" + k + "]" }

// Entry is one field of a mapping.
type Entry struct {
	// Line is the line of the field's key.
	Line  int
	Value *yaml.Node
}

// Fields returns the fields of mapping n (at path) that are in known, with
// their values, aliases followed; a null value counts as absent. Unknown
// fields, duplicate keys, merge keys and keys that are not names are
// recorded as problems and left out.
func (d *Decoder) Fields(n *yaml.Node, path string, known []string) map[string]Entry {
	out := map[string]Entry{}
	d.mapping(n, path, "field", Child, func(k, v *yaml.Node, field string) {
		if !slices.Contains(known, k.Value) {
			d.Errorf(k.Line, field, "%s", unknownField(k.Value, known))
			return
		}
		if v = Resolve(v); !IsNull(v) {
			out[k.Value] = Entry{Line: k.Line, Value: v}
		}
	})
	return out
}

// mapping calls visit once for each key of mapping n, in order, with the
// key's path (sub(path, key)). Merge keys, keys that are not names, and a
// key set a second time (what: "field" for an object, "key" for a map) are
// recorded as problems and not visited. It is the one walk of a mapping's
// keys, for Fields and Shape alike.
func (d *Decoder) mapping(n *yaml.Node, path, what string, sub func(path, k string) string, visit func(k, v *yaml.Node, at string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), n.Content[i+1]
		if !d.fieldName(k, path) {
			continue
		}
		at := sub(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.Errorf(k.Line, at, "%s", duplicate(what, first))
			continue
		}
		seen[k.Value] = k.Line
		visit(k, v, at)
	}
}

// fieldName records a problem for a key that cannot name a field: a merge
// key or one that is not a scalar.
func (d *Decoder) fieldName(k *yaml.Node, path string) bool {
	switch {
	case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
		d.Errorf(k.Line, path, "%s", MergeKeyMsg)
		return false
	case k.Kind != yaml.ScalarNode:
		d.Errorf(k.Line, path, "key %s is not a field name", Describe(k))
		return false
	}
	return true
}

// String returns the string n holds. Anything else, a number or a boolean
// included, is a problem at field: YAML reads yes, 1 and 1.0 as other types.
func (d *Decoder) String(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		d.Errorf(n.Line, field, "%s", wrongType("a string", n))
		return "", false
	}
	return n.Value, true
}

// Bool returns the boolean n holds (true or false, not yes or 1).
func (d *Decoder) Bool(n *yaml.Node, field string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		d.Errorf(n.Line, field, "%s", wrongType("true or false", n))
		return false, false
	}
	return b, true
}

// Int returns the integer n holds; a float or one out of range is a problem.
func (d *Decoder) Int(n *yaml.Node, field string) (int, bool) {
	var i int
	switch {
	case !writtenAsInteger(n):
		d.Errorf(n.Line, field, "%s", wrongType("an integer", n))
	case n.Tag != "!!int" || n.Decode(&i) != nil:
		d.Errorf(n.Line, field, "integer %s out of range", cut(n.Value))
	default:
		return i, true
	}
	return 0, false
}

// integerRE matches an integer as YAML writes it: decimal, 0x, 0o or 0b,
// with _ between digits.
var integerRE = regexp.MustCompile(`^[-+]?(0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+|[0-9][0-9_]*)$`)

// writtenAsInteger reports whether n is written as an integer, whatever
// YAML read it as: one too large for 64 bits is read as a float or a
// string, and is out of range rather than of the wrong type.
func writtenAsInteger(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Style == 0 && integerRE.MatchString(n.Value))
}

// Seq returns the items of the list n holds, aliases followed.
func (d *Decoder) Seq(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n.Line, field, "%s", wrongType("a list", n))
		return nil, false
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = Resolve(c)
	}
	return items, true
}

// Suggest returns the known name that name is most likely a typo of: one
// that differs only in case, else the nearest within two edits (the first
// in known of equally near ones); "" when none is near.
func Suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
		if dist := editDistance(strings.ToLower(name), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance in characters.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
