package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// promqlMetricNames returns the metric names an expression selects: every
// vector selector's name, and the value of a __name__="..." matcher.
//
// It is a lexer, not a parser (the PromQL parser lives in the Prometheus
// module, which kubemedic does not depend on), so it assumes a valid
// expression: callers check the same expression with the real promtool
// first. What it must tell apart from a metric name: function names (an
// identifier followed by "("), aggregations with a by/without clause,
// keywords, label names inside {...} and in by/without/on/ignoring/
// group_left/group_right lists, strings, durations, and ranges.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	i := 0
	n := len(expr)
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
			j++
		}
		return j
	}
	// skipString returns the index after the string literal at j.
	skipString := func(j int) (int, error) {
		q := expr[j]
		for k := j + 1; k < n; k++ {
			if expr[k] == '\\' && q != '`' {
				k++
				continue
			}
			if expr[k] == q {
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", j, expr)
	}
	// skipGroup returns the index after the bracket that closes the one
	// at j, skipping strings inside.
	skipGroup := func(j int, open, close byte) (int, error) {
		depth := 0
		for k := j; k < n; k++ {
			switch expr[k] {
			case '"', '\'', '`':
				e, err := skipString(k)
				if err != nil {
					return 0, err
				}
				k = e - 1
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, j, expr)
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }
	nameMatcher := regexp.MustCompile(`__name__\s*(=~|!=|!~|=)\s*"([^"]*)"`)

	for i < n {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			e, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = e
		case c == '{':
			e, err := skipGroup(i, '{', '}')
			if err != nil {
				return nil, err
			}
			for _, m := range nameMatcher.FindAllStringSubmatch(expr[i:e], -1) {
				if m[1] != "=" {
					return nil, fmt.Errorf("__name__%s%q selects metric names by pattern: name them", m[1], m[2])
				}
				names = append(names, m[2])
			}
			i = e
		case c == '[':
			e, err := skipGroup(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = e
		case '0' <= c && c <= '9' || c == '.':
			// A number or a duration (5m, 1h30m, 0x1f, 1e3).
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < n && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			i = j
			switch {
			case promqlGrouping[strings.ToLower(word)]:
				// by (a, b), on(...), group_left(...): label names.
				if next < n && expr[next] == '(' {
					e, err := skipGroup(next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = e
				}
			case promqlKeywords[strings.ToLower(word)]:
			case next < n && expr[next] == '(':
				// A function or an aggregation: sum(...), rate(...).
			case promqlAggregations[strings.ToLower(word)]:
				// sum by (x) (...), written with the clause first.
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

var (
	promqlGrouping = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	}
	promqlKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"inf": true, "nan": true, "start": true, "end": true,
	}
	promqlAggregations = map[string]bool{
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
		"limitk": true, "limit_ratio": true,
	}
)

// TestPromQLMetricNames pins the lexer on the constructs the dashboard and
// the rules use, and on the ones it must not take for metric names.
func TestPromQLMetricNames(t *testing.T) {
	for _, tc := range []struct {
		desc, expr string
		want       []string
	}{
		{"bare selector", `up`, []string{"up"}},
		{"matchers are label names", `kube_node_status_condition{condition="GPULost",status="true"}`, []string{"kube_node_status_condition"}},
		{"aggregation with a clause first", `sum by (reason) (increase(x_total[15m])) > 0`, []string{"x_total"}},
		{"aggregation with a clause last", `max(a) by (node, condition) == 1`, []string{"a"}},
		{"histogram quantile", `histogram_quantile(0.9, sum by (le) (rate(h_bucket[$__rate_interval])))`, []string{"h_bucket"}},
		{"offset and arithmetic", `max by (policy, step) (ops{phase="Failed"}) - max by (policy, step) (ops{phase="Failed"} offset 30m)`, []string{"ops"}},
		{"set operators", `a unless b offset 15m or c`, []string{"a", "b", "c"}},
		{"vector matching", `a * on (pod) group_left (node) b`, []string{"a", "b"}},
		{"strings are not names", `label_replace(a, "dst", "$1", "src", "(up|down)")`, []string{"a"}},
		{"__name__ matcher", `{__name__="a", job="x"}`, []string{"a"}},
		{"time and scalars", `time() - max(last_seen)`, []string{"last_seen"}},
		{"subquery", `max_over_time(rate(c_total[5m])[1h:1m])`, []string{"c_total"}},
		{"bool modifier", `a > bool 1`, []string{"a"}},
		{"absent of a comparison", `absent(up{job="x"} == 1)`, []string{"up"}},
		{"colons in recording rule names", `job:requests:rate5m`, []string{"job:requests:rate5m"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := promqlMetricNames(tc.expr)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := promqlMetricNames(`{__name__=~"kubemedic_.+"}`)
	require.ErrorContains(t, err, "by pattern")
	_, err = promqlMetricNames(`a{b="c}`)
	require.Error(t, err)
}
