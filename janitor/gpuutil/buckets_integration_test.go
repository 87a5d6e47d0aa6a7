package gpuutil_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestBucketsIntegration proves each rule of evidence on the recorded
// buckets with a real Prometheus: three hours of dcgm-exporter history at
// a 30 s scrape are backfilled with promtool, the shipped recording rules
// (deploy/prometheus, group kubemedic-janitor-gpu-buckets) are evaluated
// over them with promtool's rule backfill, and Fetch reads a 1-hour
// window (a bucket read) at the history's end, tq.
func TestBucketsIntegration(t *testing.T) {
	harness.Tool(t, "promtool") // skips in -short mode
	harness.Tool(t, harness.PrometheusBinary)
	ctx := context.Background()
	const (
		scrape = 30 * time.Second
		window = time.Hour
	)
	tq := time.Now().Add(-time.Hour).Truncate(time.Second)
	start := tq.Add(-3 * time.Hour)
	ago := func(d time.Duration) time.Time { return tq.Add(-d) }

	type scenario struct {
		series harness.DCGMSeries
		value  func(t time.Time) (float64, bool)
	}
	flat := func(v float64) func(time.Time) (float64, bool) {
		return func(time.Time) (float64, bool) { return v, true }
	}
	except := func(v float64, from, to time.Time, other float64, ok bool) func(time.Time) (float64, bool) {
		return func(t time.Time) (float64, bool) {
			if !t.Before(from) && t.Before(to) {
				return other, ok
			}
			return v, true
		}
	}
	node := "dcgm-exporter-x7k2p"
	gpu := func(pod string, i int) harness.DCGMSeries {
		return harness.DCGMSeries{Namespace: "ml", Pod: pod, Container: "main", Hostname: node, UUID: uuid(pod, i), GPU: i}
	}
	mig := func(pod, gi string) harness.DCGMSeries {
		return harness.DCGMSeries{Namespace: "ml", Pod: pod, Container: "main", Hostname: node, UUID: uuid("mig", 0), GPU: 0, MIGInstance: gi}
	}
	rolloutNew := gpu("rollout", 0)
	rolloutNew.Hostname = "dcgm-exporter-9qzvd" // the exporter's DaemonSet rolled: same GPU, new Hostname label
	scenarios := []scenario{
		{gpu("idle", 0), flat(2)},
		{gpu("busy", 0), flat(50)},
		// A spike of one sample 40 minutes ago: in a bucket.
		{gpu("peak", 0), except(2, ago(40*time.Minute), ago(40*time.Minute).Add(scrape), 90, true)},
		// A spike a minute ago: in no bucket yet, in the raw tail.
		{gpu("tailpeak", 0), except(2, ago(time.Minute), ago(time.Minute).Add(scrape), 70, true)},
		// Stopped half an hour ago: stale.
		{gpu("stale", 0), except(2, ago(30*time.Minute), tq, 0, false)},
		// A NaN sample 40 minutes ago (in a bucket) and 2 minutes ago (in
		// the tail).
		{gpu("nan", 0), except(2, ago(40*time.Minute), ago(40*time.Minute).Add(scrape), math.NaN(), true)},
		{gpu("nantail", 0), except(2, ago(2*time.Minute), ago(2*time.Minute).Add(scrape), math.NaN(), true)},
		// Ten minutes missing in the middle: two buckets missing.
		{gpu("gap", 0), except(2, ago(35*time.Minute), ago(25*time.Minute), 0, false)},
		// Three minutes missing: a bucket with too few samples (at least
		// 3 of its 10 missing), but every bucket present.
		{gpu("sparse", 0), except(2, ago(40*time.Minute), ago(37*time.Minute), 0, false)},
		// Two GPUs, one of which stopped half an hour ago.
		{gpu("pair", 0), flat(1)},
		{gpu("pair", 1), except(1, ago(30*time.Minute), tq, 0, false)},
		// Series began 50 minutes ago: the window began before them.
		{gpu("young", 0), except(2, start, ago(50*time.Minute), 0, false)},
		// The exporter rolled half an hour ago: one GPU, two series.
		{gpu("rollout", 0), except(3, ago(30*time.Minute), tq, 0, false)},
		{rolloutNew, except(4, start, ago(30*time.Minute), 0, false)},
		// MIG instances: GR_ENGINE_ACTIVE is a ratio.
		{mig("mig-idle", "7"), flat(0.02)},
		{mig("mig-busy", "13"), flat(0.6)},
	}
	history := harness.DCGMHistory{Start: start, End: tq.Add(time.Millisecond), Step: scrape}
	for _, s := range scenarios {
		history.Series = append(history.Series, s.series)
	}
	history.Value = func(i int, t time.Time) (float64, bool) { return scenarios[i].value(t) }

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	require.NoError(t, harness.Backfill(ctx, history, data))
	rules := filepath.Join(dir, "buckets.yaml")
	require.NoError(t, harness.WriteJanitorBucketRules(rules))
	prom := startPrometheusOn(t, dir)
	require.NoError(t, harness.BackfillRules(ctx, prom.URL, rules, data, start.Add(10*time.Minute), tq))
	require.NoError(t, prom.Stop())
	prom = startPrometheusOn(t, dir) // loads the rules' blocks
	promAPI := newAPI(t, prom.URL)

	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{Timeout: 30 * time.Second})
	util := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: window}
	engine := gpuutil.Query{Metric: gpuutil.MetricGREngineActive, Window: window}
	results := p.Fetch(ctx, []gpuutil.Query{util, engine}, tq)
	pod := func(name string) gpuutil.PodKey { return gpuutil.PodKey{Namespace: "ml", Name: name} }
	one := func(name string, percent float64) []gpuutil.GPU {
		return []gpuutil.GPU{{ID: uuid(name, 0), MaxPercent: percent}}
	}

	t.Run("GPU_UTIL", func(t *testing.T) {
		res := results[util]
		require.NoError(t, res.Err)
		require.Empty(t, res.Warnings)
		require.Equal(t, map[gpuutil.PodKey][]gpuutil.GPU{
			pod("idle"):     one("idle", 2),
			pod("busy"):     one("busy", 50),
			pod("peak"):     one("peak", 90),     // from a bucket
			pod("tailpeak"): one("tailpeak", 70), // from the raw tail
			pod("pair"):     {{ID: uuid("pair", 0), MaxPercent: 1}},
			pod("rollout"):  one("rollout", 4), // both halves, one GPU
		}, res.Pods)
		require.Equal(t, map[gpuutil.PodKey]int{
			pod("nan"):     1, // a bucket says NaN
			pod("nantail"): 1, // the tail holds a NaN
			pod("gap"):     1, // buckets missing
			pod("sparse"):  1, // a bucket with too few samples
			pod("young"):   1, // its first bucket, in the window, had none before it
		}, res.Dropped)
		// A series that stopped half an hour ago has neither a recent
		// bucket nor a raw tail: in neither map, which is Unknown too (the
		// pair's second GPU, below).
		require.NotContains(t, res.Pods, pod("stale"))
	})

	t.Run("a pod missing one of its GPUs is Unknown", func(t *testing.T) {
		p := &decide.Pod{Namespace: "ml", Name: "pair", WholeGPUs: 2}
		idle := decide.IdleFromMetrics(p, window, results)
		require.Equal(t, decide.IdleUnknown, idle.State, "%+v", idle)
		require.Contains(t, idle.Detail, "complete series for 1 of 2 devices")
	})

	t.Run("MIG engine activity is read in percent, MIG instances only", func(t *testing.T) {
		res := results[engine]
		require.NoError(t, res.Err)
		require.Empty(t, res.Dropped)
		require.Len(t, res.Pods, 2)
		require.Equal(t, uuid("mig", 0)+"/7", res.Pods[pod("mig-idle")][0].ID)
		require.InDelta(t, 2, res.Pods[pod("mig-idle")][0].MaxPercent, 1e-9)
		require.InDelta(t, 60, res.Pods[pod("mig-busy")][0].MaxPercent, 1e-9)
	})

	t.Run("never more lenient than the raw series", func(t *testing.T) {
		// The raw query over the same window of the same data: every GPU
		// the buckets measure, it measures the same. The buckets are
		// stricter on holes: the raw query accepts a series that held 80 %
		// of its rate over the whole window, the buckets want every bucket
		// present and full.
		raw := gpuutil.NewPrometheus(promAPI, gpuutil.Options{RawSeries: true}).Fetch(ctx, []gpuutil.Query{util}, tq)[util]
		require.NoError(t, raw.Err)
		buckets := results[util]
		for key, gpus := range buckets.Pods {
			require.Equal(t, gpus, raw.Pods[key], "%s", key)
		}
		stricter := map[gpuutil.PodKey][]gpuutil.GPU{}
		for key, gpus := range raw.Pods {
			if _, ok := buckets.Pods[key]; !ok {
				stricter[key] = gpus
			}
		}
		require.Equal(t, map[gpuutil.PodKey][]gpuutil.GPU{pod("gap"): one("gap", 2), pod("sparse"): one("sparse", 2)}, stricter)
	})

	t.Run("a group that did not evaluate the whole window is no evidence", func(t *testing.T) {
		for _, tt := range []struct {
			desc    string
			q       gpuutil.Query
			at      time.Time
			wantErr string
		}{
			{"the rules stopped 20 minutes ago", util, tq.Add(20 * time.Minute), "the group fails, lags or is no longer evaluated"},
			{"the rules began inside a 3h window", gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: 3 * time.Hour}, tq, "it has recorded only since"},
		} {
			t.Run(tt.desc, func(t *testing.T) {
				res := p.Fetch(ctx, []gpuutil.Query{tt.q}, tt.at)[tt.q]
				require.ErrorContains(t, res.Err, tt.wantErr)
				require.Nil(t, res.Pods)
			})
		}
		// An evaluation skipped 30 minutes ago: delete that bucket's end.
		end := gpuutil.BucketSeries(gpuutil.MetricGPUUtil, gpuutil.BucketEnd)
		deleteSeries(t, prom.URL, end, ago(32*time.Minute), ago(27*time.Minute))
		res := p.Fetch(ctx, []gpuutil.Query{util}, tq)[util]
		require.ErrorContains(t, res.Err, "1 evaluation(s) skipped")
		require.Nil(t, res.Pods)
	})
}

// startPrometheusOn runs a Prometheus on dir's data directory (dir/data),
// with the admin API for deleteSeries, and stops it when the test ends.
func startPrometheusOn(t *testing.T, dir string) *harness.Prometheus {
	t.Helper()
	prom, err := localcluster.NewPrometheus(context.Background(), dir, "global:\n  scrape_interval: 30s\n", "--web.enable-admin-api")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = prom.Stop()
		if t.Failed() {
			t.Logf("prometheus log:%s", prom.LogTail())
		}
	})
	return prom
}

// deleteSeries deletes name's samples in [from, to] through the TSDB admin
// API: an evaluation of the group that never happened.
func deleteSeries(t *testing.T, base, name string, from, to time.Time) {
	t.Helper()
	v := url.Values{"match[]": {name}, "start": {strconv.FormatInt(from.Unix(), 10)}, "end": {strconv.FormatInt(to.Unix(), 10)}}
	resp, err := http.Post(base+"/api/v1/admin/tsdb/delete_series?"+v.Encode(), "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, fmt.Sprintf("delete_series %s", name))
}
