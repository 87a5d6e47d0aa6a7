package gpuutil

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func TestBucketSeries(t *testing.T) {
	require.Equal(t, "kubemedic:dcgm_fi_dev_gpu_util:max_percent_5m", BucketSeries(MetricGPUUtil, BucketMax))
	require.Equal(t, "kubemedic:dcgm_fi_prof_gr_engine_active:bucket_end_5m", BucketSeries(MetricGREngineActive, BucketEnd))
}

func TestUsesBucketsAndReach(t *testing.T) {
	for _, tt := range []struct {
		window  time.Duration
		buckets bool
		reach   time.Duration
	}{
		{2 * time.Minute, false, 2 * time.Minute},
		{MinBucketWindow - time.Millisecond, false, MinBucketWindow - time.Millisecond},
		{MinBucketWindow, true, MinBucketWindow + BucketSize},
		{4 * time.Hour, true, 4*time.Hour + 5*time.Minute},
	} {
		require.Equal(t, tt.buckets, UsesBuckets(tt.window), "%s", tt.window)
		require.Equal(t, tt.reach, Reach(tt.window), "%s", tt.window)
	}
}

func TestBucketExpr(t *testing.T) {
	// The query for a 4h window of MIG instances with the default
	// staleness, as the package documentation and the CLI show it.
	want := `max by (namespace, pod, UUID, GPU_I_ID) (
    label_replace(max by (namespace, pod, UUID, GPU_I_ID) (max_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:evidence_5m[14400s])), "kubemedic_part", "buckets", "", "")
  or label_replace(100 * max by (namespace, pod, UUID, GPU_I_ID) (max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",pod!="",GPU_I_ID!=""}[480s])), "kubemedic_part", "tail", "", "")
)
+ 0 * sum by (namespace, pod, UUID, GPU_I_ID) (sum_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",pod!="",GPU_I_ID!=""}[480s]))
and max by (namespace, pod, UUID, GPU_I_ID) (last_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:evidence_5m[480s]))
and sum by (namespace, pod, UUID, GPU_I_ID) (count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace!="",pod!="",GPU_I_ID!=""}[300s]))
or -1 * group by (namespace, pod, UUID, GPU_I_ID) (last_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:evidence_5m[480s]))
or label_replace(count_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:bucket_end_5m[14400s]), "kubemedic_buckets", "count", "", "")
or label_replace(min_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:bucket_end_5m[14400s]), "kubemedic_buckets", "oldest", "", "")
or label_replace(max_over_time(kubemedic:dcgm_fi_prof_gr_engine_active:bucket_end_5m[14400s]), "kubemedic_buckets", "newest", "", "")`
	require.Equal(t, want, Expr(Query{Metric: MetricGREngineActive, Window: 4 * time.Hour}, 0))

	// Whole GPUs are in percent already; the raw query is the short
	// windows' one.
	util := Expr(Query{Metric: MetricGPUUtil, Window: time.Hour}, time.Minute)
	require.Contains(t, util, `or label_replace(max by (namespace, pod, UUID, GPU_I_ID) (max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[480s])), "kubemedic_part", "tail", "", "")`)
	require.Equal(t, 1, strings.Count(util, "[3600s]))"), "one read of the evidence over the window")
	require.Contains(t, util, `(count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[60s]))`)
	require.NotContains(t, util, "100 *")
	require.Equal(t, strings.Count(util, "("), strings.Count(util, ")"))
	require.NotContains(t, Expr(Query{Metric: MetricGPUUtil, Window: 29 * time.Minute}, 0), "kubemedic:")
	// A staleness beyond the tail checks freshness over the tail.
	require.Contains(t, Expr(Query{Metric: MetricGPUUtil, Window: time.Hour}, time.Hour), `(count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace!="",pod!=""}[480s]))
or -1`)
}

func TestDecodeBuckets(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	q := Query{Metric: MetricGPUUtil, Window: time.Hour}
	unix := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) / 1000 }
	group := func(count float64, oldest, newest time.Duration) model.Vector {
		return model.Vector{
			sample(count, groupLabel, groupCount),
			sample(unix(oldest), groupLabel, groupOldest),
			sample(unix(newest), groupLabel, groupNewest),
		}
	}
	// A healthy hour: ends every 5 minutes from 58m to 3m ago (12 of them).
	healthy := group(12, -58*time.Minute, -3*time.Minute)
	gpus := model.Vector{gpuRow("ml", "nb", "GPU-a", 2), gpuRow("ml", "nb2", "GPU-b", -1), gpuRow("ml", "nb3", "GPU-c", NotEvidence)}

	tests := []struct {
		desc    string
		q       Query
		vec     model.Vector
		wantErr string
	}{
		{desc: "a healthy group", vec: append(append(model.Vector{}, healthy...), gpus...)},
		{desc: "the newest bucket not yet recorded (inside its offset) is no hole", vec: append(group(11, -58*time.Minute, -8*time.Minute), gpus...)},
		{desc: "the rules are not installed", vec: gpus,
			wantErr: "no bucket of the recording rules (kubemedic:dcgm_fi_dev_gpu_util:bucket_end_5m, group kubemedic-janitor-gpu-buckets) in the last 1h0m0s: they are not installed in this Prometheus, or it has not evaluated them"},
		{desc: "the group lags", vec: group(10, -58*time.Minute, -8*time.Minute-time.Second),
			wantErr: "the newest bucket of group kubemedic-janitor-gpu-buckets ended 8m1s ago (at most 8m0s expected): the group fails, lags or is no longer evaluated"},
		{desc: "the group began recording inside the window", vec: group(6, -28*time.Minute, -3*time.Minute),
			wantErr: "the buckets of group kubemedic-janitor-gpu-buckets begin 32m0s after the window's start (1h0m0s ago): it has recorded only since 2026-11-29T11:32:00Z"},
		{desc: "an evaluation skipped", vec: group(11, -58*time.Minute, -3*time.Minute),
			wantErr: "group kubemedic-janitor-gpu-buckets made 11 of the 12 buckets between 2026-11-29T11:02:00Z and 2026-11-29T11:57:00Z: 1 evaluation(s) skipped (Prometheus down, restarting, or the group slower than its interval)"},
		{desc: "one of the group's series missing", vec: healthy[:2],
			wantErr: "answer holds 2 of the 3 series about the group kubemedic-janitor-gpu-buckets"},
		{desc: "an unknown group series", vec: append(model.Vector{sample(1, groupLabel, "median")}, healthy...),
			wantErr: `answer holds kubemedic_buckets="median"`},
		{desc: "a short window reads no group", q: Query{Metric: MetricGPUUtil, Window: time.Minute}, vec: gpus},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if tt.q.Window == 0 {
				tt.q = q
			}
			got := decode(tt.q, tt.vec, now, UsesBuckets(tt.q.Window))
			if tt.wantErr != "" {
				require.EqualError(t, got.Err, tt.wantErr)
				require.Nil(t, got.Pods)
				return
			}
			require.NoError(t, got.Err)
			wantPods := map[PodKey][]GPU{{"ml", "nb"}: {{ID: "GPU-a", MaxPercent: 2}}}
			wantDropped := map[PodKey]int{{"ml", "nb2"}: 1, {"ml", "nb3"}: 1} // a bucket not evidence
			if !UsesBuckets(tt.q.Window) {
				// The raw query never answers NotEvidence: a value, busy.
				wantPods[PodKey{"ml", "nb3"}] = []GPU{{ID: "GPU-c", MaxPercent: NotEvidence}}
				wantDropped = map[PodKey]int{{"ml", "nb2"}: 1}
			}
			require.Equal(t, wantPods, got.Pods)
			require.Equal(t, wantDropped, got.Dropped)
		})
	}

	// In bucket mode the answer is in percent already: a MIG instance's
	// value is not multiplied again.
	mig := decode(Query{Metric: MetricGREngineActive, Window: time.Hour}, append(append(model.Vector{}, healthy...), migRow("ml", "m", "GPU-m", "3", 40)), now, true)
	require.NoError(t, mig.Err)
	require.Equal(t, []GPU{{ID: "GPU-m/3", MaxPercent: 40}}, mig.Pods[PodKey{"ml", "m"}])
}
