package gpuutil

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Metric is a dcgm-exporter metric name.
type Metric string

const (
	// MetricGPUUtil is a whole GPU's utilisation, a gauge in percent (0–100).
	MetricGPUUtil Metric = "DCGM_FI_DEV_GPU_UTIL"
	// MetricGREngineActive is the fraction of time the graphics/compute engine
	// was active, a gauge ratio (0–1). MIG instances have no GPU_UTIL, so it is
	// the utilisation of a MIG instance.
	MetricGREngineActive Metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
)

// percentPerUnit is what one unit of m is in percent, and false for a metric
// this package does not know how to read.
func (m Metric) percentPerUnit() (float64, bool) {
	switch m {
	case MetricGPUUtil:
		return 1, true
	case MetricGREngineActive:
		return 100, true
	}
	return 0, false
}

// MinWindow is the shortest window a Query may ask for. Windows are used to
// millisecond precision; a window should span about fifty scrapes or more
// for the gap check to mean something.
const MinWindow = time.Second

// Query is one (metric, window) pair; the janitor dedupes them per cycle.
type Query struct {
	Metric Metric
	Window time.Duration
}

func (q Query) String() string { return fmt.Sprintf("%s over %s", q.Metric, q.Window) }

// validate returns why q cannot be asked, or nil.
func (q Query) validate() error {
	if _, ok := q.Metric.percentPerUnit(); !ok {
		return fmt.Errorf("unsupported metric %q (want %s or %s)", q.Metric, MetricGPUUtil, MetricGREngineActive)
	}
	if q.Window < MinWindow {
		return fmt.Errorf("window %s is shorter than %s", q.Window, MinWindow)
	}
	return nil
}

// PodKey names a pod.
type PodKey struct {
	Namespace, Name string
}

func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// GPU is one device's evidence for a pod over the window.
type GPU struct {
	// ID is the GPU's UUID, plus "/" + GPU_I_ID for a MIG instance.
	ID string
	// MaxPercent is the highest utilisation over the window, in percent
	// (GR_ENGINE_ACTIVE ×100).
	MaxPercent float64
}

// Result answers one Query.
type Result struct {
	// Err is set when the query failed (Prometheus down, bad answer,
	// timeout): every pod is Unknown for it, and Pods and Dropped are nil.
	Err error
	// Pods holds, per pod, only the GPUs whose series were fresh, covered the
	// whole window and had no NaN; each slice is sorted by ID.
	Pods map[PodKey][]GPU
	// Dropped counts, per pod, the GPUs seen for the pod whose series failed
	// a check (stale, gapped, started late, NaN, no UUID), so the caller can
	// say why the pod is Unknown. A pod may be in both maps.
	Dropped map[PodKey]int
	// Warnings are Prometheus' warnings about the query. They do not make the
	// answer wrong, but they are worth a log line.
	Warnings []string
}

// Source answers queries. Prometheus is the real one.
type Source interface {
	// Fetch answers every distinct query in qs as of now. It returns one
	// Result per distinct query, always; failures are in Result.Err.
	Fetch(ctx context.Context, qs []Query, now time.Time) map[Query]Result
}

// Labels of dcgm-exporter's Kubernetes pod mapping that the query keeps.
const (
	labelNamespace   = "namespace"
	labelPod         = "pod"
	labelUUID        = "UUID"
	labelMIGInstance = "GPU_I_ID"
)

const (
	// coverageParts is how many parts of the window the sample rate is
	// measured on: the last and the first tenth.
	coverageParts = 10
	// minCoverage is the share of the rate seen in those tenths that the
	// whole window must hold.
	minCoverage = 0.8
	// invalidValue marks, in the answer, a GPU that was seen but failed a
	// check. Real values are never negative.
	invalidValue = -1
)

// Expr returns the PromQL that answers q, with staleness the age beyond
// which a series' latest sample makes it stale (DefaultStaleness when zero or
// negative): the recorded buckets' query for a window of MinBucketWindow or
// more, else the raw series' query. It is exported so that docs, tests and
// the CLI can show it; the package documentation explains each term.
func Expr(q Query, staleness time.Duration) string {
	if staleness <= 0 {
		staleness = DefaultStaleness
	}
	if UsesBuckets(q.Window) {
		return bucketExpr(q, staleness)
	}
	return RawExpr(q, staleness)
}

// rawSelector selects m's series of pods; GR_ENGINE_ACTIVE only for MIG
// instances, as the recording rules do, so that a whole GPU's series cannot
// stand in for a MIG instance that has none.
func rawSelector(m Metric) string {
	sel := string(m) + `{` + labelNamespace + `!="",` + labelPod + `!=""`
	if m == MetricGREngineActive {
		sel += `,` + labelMIGInstance + `!=""`
	}
	return sel + `}`
}

// byKey is the grouping of every term: one result per GPU of a pod.
var byKey = strings.Join([]string{labelNamespace, labelPod, labelUUID, labelMIGInstance}, ", ")

// RawExpr is the query on the raw series, whatever the window: Expr's for
// windows shorter than MinBucketWindow, and every window's with
// Options.RawSeries.
func RawExpr(q Query, staleness time.Duration) string {
	if staleness <= 0 {
		staleness = DefaultStaleness
	}
	w := max(q.Window.Truncate(time.Millisecond), time.Millisecond)
	part := max((w / coverageParts).Truncate(time.Millisecond), time.Millisecond)
	edge := min(staleness.Truncate(time.Millisecond), w)
	if edge <= 0 {
		edge = time.Millisecond
	}

	sel := rawSelector(q.Metric)
	by := byKey
	// term is `op by (k) (fn(sel[rng] offset off))`.
	term := func(op, fn string, rng, off time.Duration) string {
		s := op + " by (" + by + ") (" + fn + "(" + sel + "[" + promDuration(rng) + "]"
		if off > 0 {
			s += " offset " + promDuration(off)
		}
		return s + "))"
	}
	factor := formatFloat(coverageParts * minCoverage)

	var b strings.Builder
	b.WriteString("(\n")
	b.WriteString("    " + term("max", "max_over_time", w, 0) + "\n")
	b.WriteString("  + 0 * " + term("sum", "sum_over_time", w, 0) + "\n")
	b.WriteString(")\n")
	b.WriteString("and (\n")
	b.WriteString("    " + term("sum", "count_over_time", w, 0) + "\n")
	b.WriteString("  >= " + factor + " * (" + term("sum", "count_over_time", part, 0) + " - 1)\n")
	b.WriteString("  >= " + factor + " * (" + term("sum", "count_over_time", part, w-part) + " - 1)\n")
	b.WriteString(")\n")
	b.WriteString("and " + term("sum", "count_over_time", edge, 0) + "\n")
	b.WriteString("and " + term("sum", "count_over_time", edge, w-edge) + "\n")
	b.WriteString("or " + formatFloat(invalidValue) + " * " + term("group", "count_over_time", part, 0) + "\n")
	b.WriteString("or " + formatFloat(invalidValue) + " * " + term("group", "count_over_time", part, w-part))
	return b.String()
}

// promDuration formats d (at least 1ms, whole milliseconds) as a PromQL
// duration every Prometheus version parses: whole seconds as "14400s",
// anything else as milliseconds.
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

func formatFloat(f float64) string { return fmt.Sprintf("%g", f) }
