package policies

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// shapeProblem is a located mismatch between a YAML tree and a Go type.
type shapeProblem struct {
	line   int
	field  string
	detail string
}

var (
	durationType = reflect.TypeFor[metav1.Duration]()
	intOrStrType = reflect.TypeFor[intstr.IntOrString]()
	timeType     = reflect.TypeFor[metav1.Time]()
	quantityType = reflect.TypeFor[resource.Quantity]()
)

// checkShape walks a YAML mapping alongside the Go type of obj, the way a
// strict JSON decode would, and reports every unknown field, duplicate key,
// wrong type and malformed scalar (durations, counts-or-percentages,
// quantities, times) with its line. It reports all of them, not just the first.
func checkShape(top *yaml.Node, obj any) []shapeProblem {
	var out []shapeProblem
	walk(top, reflect.TypeOf(obj), nil, &out)
	return out
}

func walk(n *yaml.Node, t reflect.Type, path *field.Path, out *[]shapeProblem) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null decodes to the zero value
	}
	report := func(format string, args ...any) {
		*out = append(*out, shapeProblem{line: n.Line, field: path.String(), detail: fmt.Sprintf(format, args...)})
	}
	switch t {
	case durationType:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			report("must be a duration like \"90s\", \"10m\" or \"1h30m\", got %s", describe(n))
			return
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			report("must be a duration like \"90s\", \"10m\" or \"1h30m\" (units ns, us, ms, s, m, h; no days), got %q", n.Value)
		}
		return
	case intOrStrType:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
			report("must be a count or a percentage like \"20%%\", got %s", describe(n))
		}
		return
	case quantityType:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			report("must be a quantity like \"500m\" or \"1Gi\", got %s", describe(n))
			return
		}
		if _, err := resource.ParseQuantity(n.Value); err != nil {
			report("must be a quantity like \"500m\" or \"1Gi\", got %q", n.Value)
		}
		return
	case timeType:
		if n.Kind != yaml.ScalarNode {
			report("must be an RFC 3339 time like \"2026-01-02T15:04:05Z\", got %s", describe(n))
			return
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			report("must be an RFC 3339 time like \"2026-01-02T15:04:05Z\", got %q", n.Value)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			report("must be an object, got %s", describe(n))
			return
		}
		fields := jsonFields(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if seen[k.Value] {
				*out = append(*out, shapeProblem{line: k.Line, field: path.Child(k.Value).String(), detail: "duplicate field"})
				continue
			}
			seen[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				*out = append(*out, shapeProblem{line: k.Line, field: path.Child(k.Value).String(), detail: fmt.Sprintf("unknown field %q%s", k.Value, suggest(k.Value, fields))})
				continue
			}
			walk(v, ft, path.Child(k.Value), out)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			report("must be a map, got %s", describe(n))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if seen[k.Value] {
				*out = append(*out, shapeProblem{line: k.Line, field: path.Key(k.Value).String(), detail: "duplicate key"})
				continue
			}
			seen[k.Value] = true
			walk(v, t.Elem(), path.Key(k.Value), out)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte is a base64 string
			if n.Kind != yaml.ScalarNode {
				report("must be a base64 string, got %s", describe(n))
			}
			return
		}
		if n.Kind != yaml.SequenceNode {
			report("must be a list, got %s", describe(n))
			return
		}
		for i, item := range n.Content {
			walk(item, t.Elem(), path.Index(i), out)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!binary") {
			report("must be a string, got %s (quote it)", describe(n))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			report("must be true or false, got %s", describe(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			report("must be an integer, got %s", describe(n))
			return
		}
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); err != nil {
			report("integer %s out of range", n.Value)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			report("must be a non-negative integer, got %s", describe(n))
			return
		}
		if _, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); err != nil {
			report("must be a non-negative integer, got %s", n.Value)
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			report("must be a number, got %s", describe(n))
		}
	case reflect.Interface:
		// Free-form; anything goes.
	}
}

// jsonFields maps the JSON names of a struct's fields (inline and embedded
// structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	}
	return strconv.Quote(n.Value)
}

// suggest names a known field that differs only in case or by a small edit.
func suggest(name string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for f := range fields {
		if strings.EqualFold(f, name) {
			return fmt.Sprintf(" (did you mean %q?)", f)
		}
		if d := levenshtein(strings.ToLower(name), strings.ToLower(f)); d < bestDist || (d == bestDist && best != "" && f < best) {
			best, bestDist = f, d
		}
	}
	if best == "" || bestDist > 2 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
