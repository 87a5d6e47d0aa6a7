package gpuutil_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/test/harness"
)

// The integration test runs a real Prometheus scraping stand-in
// dcgm-exporters every second and reads a 30s window with 3s staleness,
// so that a whole janitor window plays out in about forty seconds.
const (
	itScrape    = time.Second
	itWindow    = 30 * time.Second
	itStaleness = 3 * time.Second
)

// TestPrometheusIntegration plays one timeline of dcgm-exporter series
// against a real Prometheus and reads it back through Fetch, as the janitor
// does. Times are offsets from t0, the moment every initial series is in
// Prometheus; the query is evaluated at tq = t0+34s, so the window is
// (t0+4s, t0+34s]. Sleeping is the point here: Prometheus scrapes on the
// wall clock.
func TestPrometheusIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the Prometheus binary; skipped in -short mode")
	}
	main := harness.StartDCGMExporter(t)
	flaky := harness.StartDCGMExporter(t) // down for 2s in the middle of the window
	dead := harness.StartDCGMExporter(t)  // down from the middle of the window on
	prom := harness.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: 800ms
scrape_configs:
  - job_name: dcgm-exporter
    honor_labels: true
    static_configs:
      - targets: [%q, %q, %q]
`, model.Duration(itScrape), main.URL, flaky.URL, dead.URL))
	promAPI := newAPI(t, prom.URL)

	node := "dcgm-exporter-x7k2p" // dcgm-exporter's Hostname label is its pod's name
	gpu := func(pod string, i int) harness.DCGMSeries {
		return harness.DCGMSeries{Namespace: "ml", Pod: pod, Container: "main", Hostname: node, UUID: uuid(pod, i), GPU: i}
	}
	mig := func(pod, gi string) harness.DCGMSeries {
		return harness.DCGMSeries{Namespace: "ml", Pod: pod, Container: "main", Hostname: node, UUID: uuid("mig", 0), GPU: 0, MIGInstance: gi}
	}
	var (
		idle0, idle1 = gpu("idle", 0), gpu("idle", 1)
		busy         = gpu("busy", 2)
		peak         = gpu("peak", 3)
		blip         = gpu("blip", 4)
		gap          = gpu("gap", 5)
		stale        = gpu("stale", 6)
		late         = gpu("late", 7)
		nan          = gpu("nan", 8)
		unallocated  = harness.DCGMSeries{Hostname: node, UUID: uuid("free", 9), GPU: 9}
		rolloutOld   = gpu("rollout", 10)
		rolloutNew   = rolloutOld
		flakyGPU     = gpu("flaky", 11)
		deadGPU      = gpu("dead", 12)
		migIdle      = mig("mig-idle", "7")
		migBusy      = mig("mig-busy", "13")
	)
	rolloutNew.Hostname = "dcgm-exporter-9qzvd" // the exporter's DaemonSet rolled: same GPU, new Hostname label
	main.Set(idle0, 1)
	main.Set(idle1, 3)
	main.Set(busy, 95)
	main.Set(peak, 1)
	main.Set(blip, 2)
	main.Set(gap, 2)
	main.Set(stale, 0)
	main.Set(nan, 2)
	main.Set(unallocated, 0)
	main.Set(rolloutOld, 4)
	main.Set(migIdle, 0.02)
	main.Set(migBusy, 0.6)
	flaky.Set(flakyGPU, 1)
	dead.Set(deadGPU, 0)

	ctx := context.Background()
	require.Eventually(t, func() bool {
		v, _, err := promAPI.Query(ctx, `count(DCGM_FI_DEV_GPU_UTIL) + count(DCGM_FI_PROF_GR_ENGINE_ACTIVE)`, time.Now())
		vec, ok := v.(model.Vector)
		return err == nil && ok && len(vec) == 1 && vec[0].Value == 14
	}, 30*time.Second, 100*time.Millisecond, "Prometheus never had every series")
	t0 := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }

	at(8 * time.Second)
	main.Delete(gap) // back at t0+26s: 18s missing of the 30s window
	at(12 * time.Second)
	main.Set(nan, math.NaN())
	main.Set(peak, 7)
	at(14 * time.Second)
	main.Set(nan, 2)
	main.Set(peak, 1)
	main.Delete(stale) // for good
	at(15 * time.Second)
	main.Delete(blip) // back at t0+17s: a Prometheus staleness marker, not a NaN sample
	main.Set(late, 0)
	at(16 * time.Second)
	flaky.SetDown(true) // failed scrapes: staleness markers for all of flaky's series
	at(17 * time.Second)
	main.Set(blip, 2)
	at(18 * time.Second)
	flaky.SetDown(false)
	at(20 * time.Second)
	dead.SetDown(true)
	main.Delete(rolloutOld)
	main.Set(rolloutNew, 5)
	at(26 * time.Second)
	main.Set(gap, 2)
	tq := t0.Add(34 * time.Second)
	at(34*time.Second + 2*itScrape) // the samples up to tq are in

	var (
		mu       sync.Mutex
		observed []gpuutil.Query
	)
	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{
		Staleness: itStaleness,
		Timeout:   10 * time.Second,
		Observe: func(q gpuutil.Query, _ time.Duration, _ error) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, q)
		},
	})
	util := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: itWindow}
	engine := gpuutil.Query{Metric: gpuutil.MetricGREngineActive, Window: itWindow}
	results := p.Fetch(ctx, []gpuutil.Query{util, engine, util}, tq)
	require.Len(t, results, 2)
	mu.Lock()
	require.ElementsMatch(t, []gpuutil.Query{util, engine}, observed)
	mu.Unlock()

	pod := func(name string) gpuutil.PodKey { return gpuutil.PodKey{Namespace: "ml", Name: name} }
	one := func(s harness.DCGMSeries, percent float64) []gpuutil.GPU {
		return []gpuutil.GPU{{ID: s.UUID, MaxPercent: percent}}
	}

	t.Run("GPU_UTIL", func(t *testing.T) {
		res := results[util]
		require.NoError(t, res.Err)
		require.Empty(t, res.Warnings)
		require.Equal(t, map[gpuutil.PodKey][]gpuutil.GPU{
			// idle: every GPU below the threshold, each with its own maximum.
			pod("idle"): {{ID: idle0.UUID, MaxPercent: 1}, {ID: idle1.UUID, MaxPercent: 3}},
			pod("busy"): one(busy, 95),
			// A short spike is the maximum.
			pod("peak"): one(peak, 7),
			// A series gone for 2s (a staleness marker) is still whole: the
			// marker is not a NaN sample and the rate held.
			pod("blip"): one(blip, 2),
			// Two failed scrapes of the exporter: the same.
			pod("flaky"): one(flakyGPU, 1),
			// The exporter restarted under another Hostname: one GPU, one
			// continuous record, the maximum of both halves.
			pod("rollout"): one(rolloutNew, 5),
		}, res.Pods)
		require.Equal(t, map[gpuutil.PodKey]int{
			pod("gap"):   1, // 18s of 30s missing in the middle
			pod("stale"): 1, // stopped at t0+14s: nothing within 3s of tq
			pod("late"):  1, // started at t0+15s, after the window began
			pod("nan"):   1, // a NaN sample in the window
			pod("dead"):  1, // its exporter stopped answering at t0+20s
		}, res.Dropped)
	})

	t.Run("GR_ENGINE_ACTIVE on MIG instances is read in percent", func(t *testing.T) {
		res := results[engine]
		require.NoError(t, res.Err)
		require.Empty(t, res.Dropped)
		require.Len(t, res.Pods, 2)
		require.Len(t, res.Pods[pod("mig-idle")], 1)
		require.Equal(t, migIdle.UUID+"/7", res.Pods[pod("mig-idle")][0].ID)
		require.InDelta(t, 2, res.Pods[pod("mig-idle")][0].MaxPercent, 1e-9)
		require.Equal(t, migBusy.UUID+"/13", res.Pods[pod("mig-busy")][0].ID)
		require.InDelta(t, 60, res.Pods[pod("mig-busy")][0].MaxPercent, 1e-9)
	})

	// What the query relies on, checked against this Prometheus.
	t.Run("Prometheus semantics the query relies on", func(t *testing.T) {
		instant := func(expr string, ts time.Time) model.Vector {
			t.Helper()
			v, warnings, err := promAPI.Query(ctx, expr, ts)
			require.NoError(t, err, expr)
			require.Empty(t, warnings, expr)
			vec, ok := v.(model.Vector)
			require.True(t, ok, "%s: %T", expr, v)
			return vec
		}
		scalar := func(expr string, ts time.Time) float64 {
			t.Helper()
			vec := instant(expr, ts)
			require.Len(t, vec, 1, expr)
			return float64(vec[0].Value)
		}
		w := "[" + model.Duration(itWindow).String() + "]"
		// max_over_time skips a NaN sample; sum_over_time does not.
		require.Equal(t, 2.0, scalar(`max_over_time(DCGM_FI_DEV_GPU_UTIL{pod="nan"}`+w+`)`, tq))
		require.True(t, math.IsNaN(scalar(`sum_over_time(DCGM_FI_DEV_GPU_UTIL{pod="nan"}`+w+`)`, tq)))
		// Staleness markers — from a vanished series and from failed scrapes —
		// are not samples of a range: no NaN, and they are not counted.
		for _, name := range []string{"blip", "flaky", "stale", "dead"} {
			require.False(t, math.IsNaN(scalar(`sum_over_time(DCGM_FI_DEV_GPU_UTIL{pod="`+name+`"}`+w+`)`, tq)), name)
		}
		blipCount := scalar(`count_over_time(DCGM_FI_DEV_GPU_UTIL{pod="blip"}`+w+`)`, tq)
		require.InDelta(t, 28, blipCount, 2, "about two of thirty samples missing")
		// ... but they do end the series for an instant selector at once,
		// long before the 5m lookback.
		require.Empty(t, instant(`DCGM_FI_DEV_GPU_UTIL{pod="stale"}`, t0.Add(16*time.Second)))
		require.Empty(t, instant(`DCGM_FI_DEV_GPU_UTIL{pod="dead"}`, t0.Add(23*time.Second)))
		// A series whose pod label is empty (a free GPU) has no pod label at all.
		require.Len(t, instant(`DCGM_FI_DEV_GPU_UTIL{UUID="`+unallocated.UUID+`"}`, tq), 1)
		require.Empty(t, instant(`DCGM_FI_DEV_GPU_UTIL{UUID="`+unallocated.UUID+`",pod!=""}`, tq))
		// Expr parses and runs on this Prometheus for odd windows too.
		for _, win := range []time.Duration{1500 * time.Millisecond, 7 * time.Second, 4 * time.Hour} {
			instant(gpuutil.Expr(gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: win}, itStaleness), tq)
		}
	})

	t.Run("the answer is small", func(t *testing.T) {
		// One series per GPU with only the four key labels: the answer for
		// 50,000 pods stays a few megabytes.
		vec := func() model.Vector {
			v, _, err := promAPI.Query(ctx, gpuutil.Expr(util, itStaleness), tq)
			require.NoError(t, err)
			return v.(model.Vector)
		}()
		require.Len(t, vec, 12)
		for _, s := range vec {
			for name := range s.Metric {
				require.Contains(t, []model.LabelName{"namespace", "pod", "UUID", "GPU_I_ID"}, name)
			}
		}
	})

	t.Run("Prometheus down is an error for every query, not an empty answer", func(t *testing.T) {
		require.NoError(t, prom.Stop())
		res := p.Fetch(ctx, []gpuutil.Query{util, engine}, tq)
		for _, q := range []gpuutil.Query{util, engine} {
			require.Error(t, res[q].Err, "%s", q)
			require.Nil(t, res[q].Pods)
			require.True(t, strings.Contains(res[q].Err.Error(), "connection refused"), "%v", res[q].Err)
		}
	})
}

// uuid makes a stable, distinct GPU UUID for a pod's i-th GPU.
func uuid(pod string, i int) string {
	var h uint32 = 2166136261
	for _, c := range pod {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("GPU-%08x-1d90-4c2e-9b7a-%012x", h, i)
}

// BenchmarkPrometheusFetch measures one Fetch of a 20s window against a real
// Prometheus holding 50,000 GPU pods (one GPU each, a tenth on MIG), scraped
// every second: the query's cost in Prometheus plus the answer's transfer
// and decoding. Run it alone: it takes about a minute to fill the window.
func BenchmarkPrometheusFetch(b *testing.B) {
	const pods, window = 50_000, 20 * time.Second
	d := harness.StartDCGMExporter(b)
	for i := range pods {
		s := harness.DCGMSeries{
			Namespace: fmt.Sprintf("team-%d", i%100), Pod: fmt.Sprintf("job-%d-worker-0", i), Container: "main",
			Hostname: fmt.Sprintf("dcgm-exporter-%05d", i/8), UUID: uuid("bench", i), GPU: i % 8,
		}
		if i%10 == 0 {
			s.MIGInstance = "1"
			d.Set(s, 0.01)
		} else {
			d.Set(s, float64(i%100))
		}
	}
	prom := harness.StartPrometheus(b, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: dcgm-exporter
    honor_labels: true
    static_configs:
      - targets: [%q]
`, d.URL))
	promAPI := newAPI(b, prom.URL)
	time.Sleep(window + 5*time.Second) // fill the window
	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{Staleness: 5 * time.Second})
	qs := []gpuutil.Query{{Metric: gpuutil.MetricGPUUtil, Window: window}, {Metric: gpuutil.MetricGREngineActive, Window: window}}
	var got int
	for b.Loop() {
		got = 0
		for q, res := range p.Fetch(context.Background(), qs, time.Now().Add(-2*time.Second)) {
			if res.Err != nil {
				b.Fatalf("%s: %v", q, res.Err)
			}
			got += len(res.Pods)
		}
	}
	b.ReportMetric(float64(got), "pods/op")
	if got < pods*9/10 {
		b.Fatalf("only %d of %d pods had evidence", got, pods)
	}
}
