package gpuutil

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExpr(t *testing.T) {
	// The query on the raw series for a 20m window (shorter than
	// MinBucketWindow) with the default staleness, as the package
	// documentation and the CLI show it.
	want := `(
    max by (namespace, pod, UUID, GPU_I_ID) (max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[1200s]))
  + 0 * sum by (namespace, pod, UUID, GPU_I_ID) (sum_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[1200s]))
)
and (
    sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[1200s]))
  >= 8 * (sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[120s])) - 1)
  >= 8 * (sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[120s] offset 1080s)) - 1)
)
and sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[300s]))
and sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[300s] offset 900s))
or -1 * group by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[120s]))
or -1 * group by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[120s] offset 1080s))`
	require.Equal(t, want, Expr(Query{Metric: MetricGPUUtil, Window: 20 * time.Minute}, 0))
	require.Equal(t, want, Expr(Query{Metric: MetricGPUUtil, Window: 20 * time.Minute}, DefaultStaleness))
}

func TestExprDurations(t *testing.T) {
	tests := []struct {
		desc      string
		q         Query
		staleness time.Duration
		want      []string // substrings of the expression
		notWant   []string
	}{
		{
			desc:      "a tenth that is not whole seconds is written in milliseconds",
			q:         Query{Metric: MetricGREngineActive, Window: 25 * time.Second},
			staleness: 3 * time.Second,
			want: []string{
				`max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",pod!="",GPU_I_ID!=""}[25s])`,
				`[2500ms]))`, `[2500ms] offset 22500ms))`,
				`[3s]))`, `[3s] offset 22s))`,
			},
		},
		{
			desc:      "sub-millisecond parts of the window are dropped",
			q:         Query{Metric: MetricGPUUtil, Window: 20*time.Minute + 1500*time.Microsecond},
			staleness: 90 * time.Second,
			want:      []string{`[1200001ms]`, `[120s]`, `offset 1080001ms`, `[90s] offset 1110001ms`},
		},
		{
			desc:      "staleness longer than the window checks the whole window, without a zero offset",
			q:         Query{Metric: MetricGPUUtil, Window: 2 * time.Second},
			staleness: time.Minute,
			want:      []string{`[200ms] offset 1800ms`, `and sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[2s]))`},
			notWant:   []string{"offset 0", "[60s]", "[1m]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := Expr(tt.q, tt.staleness)
			for _, w := range tt.want {
				require.Contains(t, got, w)
			}
			for _, w := range tt.notWant {
				require.NotContains(t, got, w)
			}
			require.Equal(t, strings.Count(got, "("), strings.Count(got, ")"), "unbalanced parentheses")
		})
	}
}

func TestPromDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond:        "1ms",
		999 * time.Millisecond:  "999ms",
		time.Second:             "1s",
		1500 * time.Millisecond: "1500ms",
		4 * time.Hour:           "14400s",
		24 * time.Hour:          "86400s",
	} {
		require.Equal(t, want, promDuration(d), "%s", d)
	}
}
