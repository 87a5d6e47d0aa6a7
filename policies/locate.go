package policies

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// locate follows a field path as printed by field.Path (spec.steps[1].name,
// metadata.labels[a.b/c]) through a YAML tree and returns the line of the
// deepest node it reaches.
func locate(n *yaml.Node, path string) int {
	line := n.Line
	for _, seg := range splitPath(path) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					next, line = n.Content[i+1], n.Content[i].Line
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				next, line = n.Content[i], n.Content[i].Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// splitPath turns "spec.steps[1].name" into [spec steps 1 name].
func splitPath(path string) []string {
	var segs []string
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(segs, path[1:])
			}
			segs = append(segs, path[1:end])
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				return append(segs, path)
			}
			segs = append(segs, path[:end])
			path = path[end:]
		}
	}
	return segs
}
