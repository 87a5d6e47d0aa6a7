package strictyaml

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ScalarCheck checks a value of a type that is written as a scalar but is
// not one of Go's (a duration, a quantity, a time) and returns the problem,
// "" when there is none.
type ScalarCheck func(n *yaml.Node) string

// Shape checks n, at path, against Go type t the way a strict JSON decode
// into t would (JSON field names, inline and embedded structs flattened)
// and records every unknown field, duplicate key, merge key and value of
// the wrong type with its line. A type in scalars is checked by its
// function instead. A null value is the zero value and always fits.
func (d *Decoder) Shape(n *yaml.Node, t reflect.Type, path string, scalars map[reflect.Type]ScalarCheck) {
	n = Resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if IsNull(n) {
		return
	}
	if check, ok := scalars[t]; ok {
		if msg := check(n); msg != "" {
			d.Errorf(n.Line, path, "%s", msg)
		}
		return
	}
	wrong := func(want string) { d.Errorf(n.Line, path, "%s", wrongType(want, n)) }
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			wrong("a mapping")
			return
		}
		fields := jsonFields(t)
		known := make([]string, 0, len(fields))
		for name := range fields {
			known = append(known, name)
		}
		slices.Sort(known)
		d.mapping(n, path, "field", Child, func(k, v *yaml.Node, field string) {
			ft, ok := fields[k.Value]
			if !ok {
				d.Errorf(k.Line, field, "%s", unknownField(k.Value, known))
				return
			}
			d.Shape(v, ft, field, scalars)
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong("a mapping")
			return
		}
		d.mapping(n, path, "key", Key, func(_, v *yaml.Node, key string) {
			d.Shape(v, t.Elem(), key, scalars)
		})
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte is a base64 string
			if n.Kind != yaml.ScalarNode {
				wrong("a base64 string")
			}
			return
		}
		if n.Kind != yaml.SequenceNode {
			wrong("a list")
			return
		}
		for i, item := range n.Content {
			d.Shape(item, t.Elem(), Index(path, i), scalars)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!binary") {
			wrong("a string")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			wrong("true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !writtenAsInteger(n) {
			wrong("an integer")
		} else if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, t.Bits()); err != nil {
			d.Errorf(n.Line, path, "integer %s out of range", cut(n.Value))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !writtenAsInteger(n) || strings.HasPrefix(n.Value, "-") {
			wrong("a non-negative integer")
		} else if _, err := strconv.ParseUint(strings.ReplaceAll(strings.TrimPrefix(n.Value, "+"), "_", ""), 0, t.Bits()); err != nil {
			d.Errorf(n.Line, path, "integer %s out of range", cut(n.Value))
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			wrong("a number")
		}
	case reflect.Interface:
		// Free-form: anything goes.
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
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
