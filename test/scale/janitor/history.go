package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

// A window read from the recorded buckets (gpuutil.UsesBuckets) cannot be
// waited for: 4 hours of series are backfilled instead, and the shipped
// recording rules are evaluated over them, as they would have been:
//
//  1. the series' past, [start, ts), is written as OpenMetrics and turned
//     into TSDB blocks with promtool, where ts lies a -history-lead ahead;
//  2. Prometheus starts at ts on those blocks, scraping the stand-in
//     exporter from then on and evaluating the bucket group live, so the
//     past ends where the scrapes begin (no gap, no overlap) and the live
//     group's first bucket sees the whole past;
//  3. promtool's rule backfill evaluates the group over the past, from the
//     same rules file (the same phase), and its blocks are moved into the
//     data directory, which Prometheus loads within a minute.
//
// promtool stamps a bucket with its evaluation's time, the live group a
// query_offset (1m) earlier: the live buckets begin a minute inside the
// last backfilled one, two samples read twice (12 of 10, within the 80 %
// fill check), and the bucket ends are 4 minutes apart once (the
// skipped-evaluation check rounds to whole buckets).

// history is what the backfill left for the rest of the run.
type history struct {
	start, end time.Time // the backfilled past, [start, end)
	rules      string    // the bucket group's rules file, also in Prometheus' rule_files
	took       struct{ write, blocks, rules time.Duration }
	size       int64 // the OpenMetrics file's size
}

// writeHistory writes the series' past into promDir/data and returns it;
// the caller starts Prometheus at h.end. Pod i is idle (0 %) over the whole
// past when idle(i), else busy.
// instance is the exporter's scrape target (host:port), which Prometheus
// will label the scraped series with, as the past's are.
func writeHistory(ctx context.Context, c config, w *world, promDir, instance string, idle func(i int) bool) (*history, error) {
	h := &history{rules: filepath.Join(promDir, "kubemedic-janitor-gpu-buckets.yaml")}
	if err := harness.WriteJanitorBucketRules(h.rules); err != nil {
		return nil, err
	}
	// The past reaches a bucket and a quarter hour beyond the window: the
	// oldest bucket of the janitor's first window, and its start.
	steps := int64((c.window + gpuutil.BucketSize + 15*time.Minute) / c.scrape)
	h.end = time.Now().Add(c.historyLead).Truncate(c.scrape)
	h.start = h.end.Add(-time.Duration(steps) * c.scrape)
	series := make([]harness.DCGMSeries, c.pods)
	for i := range series {
		series[i] = w.series(i)
	}
	past := harness.DCGMHistory{Series: series, Start: h.start, End: h.end, Step: c.scrape,
		Value: func(i int, _ time.Time) (float64, bool) {
			if idle(i) {
				return 0, true
			}
			return busyPercent, true
		}}
	t0 := time.Now()
	scaleutil.Logf("history: %d series x %d samples (%s at %s), to end at %s", c.pods, steps, c.window+gpuutil.BucketSize+15*time.Minute, c.scrape, h.end.Format(time.TimeOnly))
	om := filepath.Join(promDir, "history.om")
	f, err := os.Create(om)
	if err != nil {
		return nil, err
	}
	defer os.Remove(om)
	if err := past.WriteOpenMetrics(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if st, err := os.Stat(om); err == nil {
		h.size = st.Size()
	}
	h.took.write = time.Since(t0)
	t0 = time.Now()
	if err := harness.BackfillFile(ctx, om, filepath.Join(promDir, "data"), "job=dcgm-exporter", "instance="+instance); err != nil {
		return nil, err
	}
	h.took.blocks = time.Since(t0)
	scaleutil.Logf("history: %s of OpenMetrics written in %s, TSDB blocks in %s", scaleutil.MiB(h.size), h.took.write.Round(time.Second), h.took.blocks.Round(time.Second))
	if wait := time.Until(h.end); wait < 0 {
		return nil, fmt.Errorf("history: the backfill ended %s after the past's end: raise -history-lead (now %s)", -wait.Round(time.Second), c.historyLead)
	} else {
		scaleutil.Logf("history: starting Prometheus in %s, where the past ends", wait.Round(time.Second))
		if err := scaleutil.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// backfillRules evaluates the bucket group over the past against prom and
// waits until prom serves the buckets of a whole window.
func (h *history) backfillRules(ctx context.Context, c config, prom *harness.Prometheus) error {
	t0 := time.Now()
	if err := harness.BackfillRules(ctx, prom.URL, h.rules, filepath.Join(prom.Dir, "data"), h.start.Add(gpuutil.BucketSize), h.end); err != nil {
		return err
	}
	h.took.rules = time.Since(t0)
	end := gpuutil.BucketSeries(gpuutil.MetricGPUUtil, gpuutil.BucketEnd)
	want := float64(c.window / gpuutil.BucketSize)
	for deadline := time.Now().Add(3 * time.Minute); ; {
		n, err := promQuery(ctx, prom.URL, fmt.Sprintf("count_over_time(%s[%ds])", end, int(c.window/time.Second)))
		if err == nil && n >= want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("history: Prometheus serves %.0f of the %.0f buckets of a %s window 3 minutes after the rule backfill (%v)", n, want, c.window, err)
		}
		if err := scaleutil.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
	scaleutil.Logf("history: the recording rules backfilled in %s and loaded", h.took.rules.Round(time.Second))
	return nil
}

// backdatePods sets every pod's status.startTime to the past's start (kwok
// starts them now): the idle rule judges only pods that ran for the whole
// window and a bucket.
func backdatePods(ctx context.Context, c config, cs kubernetes.Interface, w *world, since time.Time) error {
	patch := fmt.Appendf(nil, `{"status":{"startTime":%q}}`, since.UTC().Format(time.RFC3339))
	return parallel(ctx, "backdate pods", c.pods, c.workers, func(ctx context.Context, i int) error {
		pod := w.pod(i)
		_, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
}

// compareRaw answers the janitor's bucket query and the raw series' query
// over the same window at the same instant, and reports whether they give
// every pod the same evidence. The raw query reads every sample of the
// window (about 3.4 reads of 480 per GPU at 4 h): it is the query the
// buckets replace, given a generous timeout and sample limit here.
func compareRaw(ctx context.Context, c config, promURL string, rep *report) error {
	client, err := promapi.NewClient(promapi.Config{Address: promURL})
	if err != nil {
		return err
	}
	api := promv1.NewAPI(client)
	q := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: c.window}
	at := time.Now()
	t0 := time.Now()
	buckets := gpuutil.NewPrometheus(api, gpuutil.Options{Staleness: c.staleness, Timeout: time.Minute}).Fetch(ctx, []gpuutil.Query{q}, at)[q]
	bTook := time.Since(t0)
	t0 = time.Now()
	raw := gpuutil.NewPrometheus(api, gpuutil.Options{Staleness: c.staleness, Timeout: 5 * time.Minute, RawSeries: true}).Fetch(ctx, []gpuutil.Query{q}, at)[q]
	rTook := time.Since(t0)
	if buckets.Err != nil {
		return fmt.Errorf("compare: the bucket query: %w", buckets.Err)
	}
	if raw.Err != nil {
		rep.add("raw series", "the raw query of the same %s window failed after %s: %v", c.window, ms(rTook), raw.Err)
		rep.verdict(false, "verdicts the same as with the raw series: the raw query failed")
		return nil
	}
	differ := 0
	for key, gpus := range raw.Pods {
		if !reflect.DeepEqual(gpus, buckets.Pods[key]) {
			differ++
		}
	}
	for key := range buckets.Pods {
		if _, ok := raw.Pods[key]; !ok {
			differ++
		}
	}
	if !reflect.DeepEqual(raw.Dropped, buckets.Dropped) {
		differ += max(len(raw.Dropped), len(buckets.Dropped))
	}
	rep.add("raw series", "at one instant: the bucket query %s (%d pods measured, %d dropped), the raw query of the same window %s (%d measured, %d dropped)",
		ms(bTook), len(buckets.Pods), len(buckets.Dropped), ms(rTook), len(raw.Pods), len(raw.Dropped))
	rep.verdict(differ == 0 && len(raw.Pods) == c.pods, "verdicts the same as with the raw series: %d of %d pods differ", differ, c.pods)
	return nil
}

// startTimes checks, on one pod, that the backdating took.
func startTimes(ctx context.Context, cs kubernetes.Interface, w *world, since time.Time) error {
	pod := w.pod(0)
	got, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.Status.StartTime == nil || !got.Status.StartTime.Time.Equal(since.Truncate(time.Second)) || got.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("backdate: pod %s/%s has startTime %v, phase %s", got.Namespace, got.Name, got.Status.StartTime, got.Status.Phase)
	}
	return nil
}
