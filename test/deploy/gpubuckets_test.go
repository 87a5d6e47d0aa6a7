package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

// perGPUBy is the grouping of every per-GPU bucket: the janitor's key
// (janitor/gpuutil), so that the container, instance and Hostname labels
// fall away and a series split by an exporter restart is one GPU.
const perGPUBy = "by (namespace, pod, UUID, GPU_I_ID)"

// TestJanitorGPUBucketRules checks what promtool cannot about the recording
// rules the janitor will read its long windows from: they are the only
// recording rules and are alone in their group; the buckets tile time (every
// range is the group's interval, which the names carry, and the unit tests
// evaluate at that interval); a query_offset shorter than a bucket; for each
// metric the janitor reads, the four series under the names it will ask
// for, per GPU of a pod (the janitor's grouping, the janitor's selector, a
// UUID), the MIG metric for MIG instances only; and every series pinned by
// gpu_buckets_test.yaml.
func TestJanitorGPUBucketRules(t *testing.T) {
	pr := readPrometheusRule(t)
	var group *prometheusRuleGroup
	for i, g := range pr.Spec.Groups {
		records := slices.ContainsFunc(g.Rules, func(r prometheusRuleRule) bool { return r.Record != "" })
		if g.Name != bucketGroup {
			require.False(t, records, "group %s: recording rules belong in %s", g.Name, bucketGroup)
			continue
		}
		require.Nil(t, group, "group %s twice", bucketGroup)
		group = &pr.Spec.Groups[i]
	}
	require.NotNil(t, group, "no group %s", bucketGroup)

	iv := group.Interval
	interval, err := time.ParseDuration(iv)
	require.NoError(t, err, "group %s needs an interval: the bucket size", bucketGroup)
	require.Equal(t, gpuutil.BucketSize, interval, "the janitor reads buckets of gpuutil.BucketSize")
	offset, err := time.ParseDuration(group.QueryOffset)
	require.NoError(t, err, "group %s needs a query_offset, so that a scrape in flight at a bucket's end is in it", bucketGroup)
	require.Positive(t, offset)
	require.Less(t, offset, interval, "the newest bucket should not lag more than a bucket behind")

	// yaml.v3, not sigs.k8s.io/yaml: the file expects an infinity (.inf),
	// which JSON cannot hold.
	var tests struct {
		EvaluationInterval string `yaml:"evaluation_interval"`
		Tests              []struct {
			PromQLExprTest []struct {
				Expr string `yaml:"expr"`
			} `yaml:"promql_expr_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, bucketsUnitTestFile), &tests))
	require.Equal(t, iv, tests.EvaluationInterval,
		"%s must evaluate at the group's interval: promtool ignores a group's own", bucketsUnitTestFile)
	tested := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, e := range tc.PromQLExprTest {
			names, err := promqlMetricNames(e.Expr)
			require.NoError(t, err, e.Expr)
			for _, n := range names {
				tested[n] = true
			}
		}
	}

	order := map[string]int{}
	for i, r := range group.Rules {
		require.Empty(t, r.Alert, "group %s: recording rules only", bucketGroup)
		require.NotContains(t, order, r.Record, "%s twice", r.Record)
		order[r.Record] = i
	}
	rangeRef := regexp.MustCompile(`\[([^\]]*)\]`)
	for _, m := range []gpuutil.Metric{gpuutil.MetricGPUUtil, gpuutil.MetricGREngineActive} {
		for _, kind := range gpuutil.BucketKinds {
			name := gpuutil.BucketSeries(m, kind)
			t.Run(name, func(t *testing.T) {
				i, ok := order[name]
				require.True(t, ok, "group %s does not record %s", bucketGroup, name)
				r := group.Rules[i]
				require.True(t, tested[name], "%s has no promql_expr_test in %s", name, bucketsUnitTestFile)
				for _, rg := range rangeRef.FindAllStringSubmatch(r.Expr, -1) {
					require.Equal(t, iv, rg[1], "a bucket covers the interval between two evaluations, no more, no less")
				}
				names, err := promqlMetricNames(r.Expr)
				require.NoError(t, err)
				if kind == gpuutil.BucketEnd {
					require.Empty(t, names)
					require.Equal(t, "vector(time())", r.Expr, "one sample per evaluation, GPUs or none: the bucket's end")
					return
				}
				require.Equal(t, []string{string(m)}, names)
				if kind == gpuutil.BucketEvidence {
					// The bucket's maximum, its count against the bucket
					// before's, its NaN test; the marker where it fails.
					require.Contains(t, r.Expr, "[5m] offset 5m", "the bucket before")
					require.Contains(t, r.Expr, fmt.Sprintf("or %d * group by (namespace, pod, UUID, GPU_I_ID)", gpuutil.NotEvidence),
						"a bucket that is not evidence is gpuutil.NotEvidence")
					require.Contains(t, r.Expr, ">= 0.8 * sum by", "80 % of the bucket before's samples")
				} else {
					require.Len(t, rangeRef.FindAllString(r.Expr, -1), 1, "one read of the raw series")
				}
				require.Contains(t, r.Expr, perGPUBy)
				sel := regexp.MustCompile(string(m) + `\{([^}]*)\}`).FindStringSubmatch(r.Expr)
				require.NotNil(t, sel, "%s without matchers", m)
				want := []string{`namespace!=""`, `pod!=""`, `UUID!=""`}
				if m == gpuutil.MetricGREngineActive {
					want = append(want, `GPU_I_ID!=""`)
				}
				require.ElementsMatch(t, want, strings.Split(sel[1], ","),
					"the series of pods as the janitor selects them, with a UUID; GR_ENGINE_ACTIVE of MIG instances only")
			})
		}
	}
	require.Len(t, group.Rules, 2*len(gpuutil.BucketKinds), "group %s records only the series above", bucketGroup)
}
