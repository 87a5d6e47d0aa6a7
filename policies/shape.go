package policies

import (
	"reflect"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/internal/strictyaml"
)

// apiScalars checks the API's types that YAML writes as scalars but Go
// decodes from text: durations, counts-or-percentages, quantities and
// times. strictyaml.Shape checks everything else of a document's shape.
var apiScalars = map[reflect.Type]strictyaml.ScalarCheck{
	reflect.TypeFor[metav1.Duration](): func(n *yaml.Node) string {
		const want = `must be a duration like "90s", "10m" or "1h30m"`
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return want + ", got " + strictyaml.Describe(n)
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			return want + ` (units ns, us, ms, s, m, h; no days), got ` + strconv.Quote(n.Value)
		}
		return ""
	},
	reflect.TypeFor[intstr.IntOrString](): func(n *yaml.Node) string {
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
			return `must be a count or a percentage like "20%", got ` + strictyaml.Describe(n)
		}
		return ""
	},
	reflect.TypeFor[resource.Quantity](): func(n *yaml.Node) string {
		const want = `must be a quantity like "500m" or "1Gi", got `
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			return want + strictyaml.Describe(n)
		}
		if _, err := resource.ParseQuantity(n.Value); err != nil {
			return want + strconv.Quote(n.Value)
		}
		return ""
	},
	reflect.TypeFor[metav1.Time](): func(n *yaml.Node) string {
		const want = `must be an RFC 3339 time like "2026-01-02T15:04:05Z", got `
		if n.Kind != yaml.ScalarNode {
			return want + strictyaml.Describe(n)
		}
		if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
			return want + strconv.Quote(n.Value)
		}
		return ""
	},
}
