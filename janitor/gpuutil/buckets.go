package gpuutil

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// The recorded buckets: deploy/prometheus/prometheusrule.yaml's group
// kubemedic-janitor-gpu-buckets condenses each metric into BucketSize
// buckets per GPU of a pod, and Expr reads them for long windows.
const (
	// BucketGroup is the rule group that records the buckets.
	BucketGroup = "kubemedic-janitor-gpu-buckets"
	// BucketSize is the group's interval: the span of one bucket.
	BucketSize = 5 * time.Minute
	// MinBucketWindow is the shortest window read from the buckets (six of
	// them); a shorter one reads the raw series, as cheap there.
	MinBucketWindow = 30 * time.Minute
	// BucketTail is how far back the raw series are read on top of the
	// buckets, and how old the newest bucket may be: a bucket is recorded a
	// query_offset (1m) after it ends, so the newest one is at most 6
	// minutes old, plus the evaluation's own time and a margin. A group
	// whose newest bucket is older failed or lags, and every pod is Unknown.
	BucketTail = 8 * time.Minute
)

// BucketKind is one of the series the group records per metric.
type BucketKind string

// The series of the group, per metric.
const (
	// BucketMax is the highest sample of a GPU in the bucket, in percent.
	BucketMax BucketKind = "max_percent"
	// BucketSamples is the number of samples of a GPU in the bucket.
	BucketSamples BucketKind = "samples"
	// BucketNaN is 1 when a sample of a GPU in the bucket was NaN or
	// infinite, else 0.
	BucketNaN BucketKind = "nan"
	// BucketEvidence is what the janitor reads: the bucket's maximum in
	// percent when the bucket is evidence, else NotEvidence. A bucket is
	// evidence when it holds no NaN or infinite sample and at least
	// minFillRatio of the samples of the bucket before it, which must have
	// some.
	BucketEvidence BucketKind = "evidence"
	// BucketEnd has no labels, one sample per evaluation of the group, with
	// GPUs or none: the bucket's end, in Unix seconds.
	BucketEnd BucketKind = "bucket_end"
)

// BucketKinds are the series the group records per metric, in the order
// of the rules.
var BucketKinds = []BucketKind{BucketMax, BucketSamples, BucketNaN, BucketEvidence, BucketEnd}

// NotEvidence is BucketEvidence's value for a bucket that is not evidence:
// above any utilisation, so that the maximum over a window that holds one
// is at least this.
const NotEvidence = 1000

// BucketSeries is the name of the recorded series of kind for metric m,
// kubemedic:<metric in lower case>:<kind>_5m.
func BucketSeries(m Metric, kind BucketKind) string {
	return "kubemedic:" + strings.ToLower(string(m)) + ":" + string(kind) + "_" + promShortDuration(BucketSize)
}

// UsesBuckets reports whether a query for window reads the recorded
// buckets (and the raw tail) rather than the raw series: windows of
// MinBucketWindow or more. The rule is automatic, so that a policy's window
// alone decides, the same in every janitor and in `kubemedic janitor plan`.
func UsesBuckets(window time.Duration) bool { return window >= MinBucketWindow }

// Reach is how long before the query's time its evidence begins: the
// window, and one bucket more for a bucket read, since the oldest bucket in
// the window began up to a bucket before it. A pod that has run for less
// than Reach is not idle yet: part of its evidence would predate it.
func Reach(window time.Duration) time.Duration {
	if UsesBuckets(window) {
		return window + BucketSize
	}
	return window
}

// groupLabel marks the answer's three series about the group itself, with
// the values below; the GPUs' series never carry it.
const groupLabel = "kubemedic_buckets"

const (
	groupCount  = "count"
	groupOldest = "oldest"
	groupNewest = "newest"
)

// bucketExpr reads q's window from the recorded evidence plus the raw
// tail: one read of the window (the evidence's maximum, which is
// NotEvidence or more when a bucket in it is not evidence), short reads of
// the last BucketTail, and three numbers about the group. The package
// documentation explains each term.
func bucketExpr(q Query, staleness time.Duration) string {
	scale, _ := q.Metric.percentPerUnit()
	w := promDuration(max(q.Window.Truncate(time.Millisecond), time.Millisecond))
	tail := promDuration(BucketTail)
	fresh := promDuration(max(min(staleness, BucketTail).Truncate(time.Millisecond), time.Millisecond))
	raw := rawSelector(q.Metric)
	evidence := BucketSeries(q.Metric, BucketEvidence)

	term := func(op, fn, sel, rng string) string {
		return op + " by (" + byKey + ") (" + fn + "(" + sel + "[" + rng + "]))"
	}
	tailMax := term("max", "max_over_time", raw, tail)
	if scale != 1 {
		tailMax = formatFloat(scale) + " * " + tailMax
	}
	part := func(expr, name string) string {
		return `label_replace(` + expr + `, "` + partLabel + `", "` + name + `", "", "")`
	}
	group := func(fn, name string) string {
		return `label_replace(` + fn + `(` + BucketSeries(q.Metric, BucketEnd) + `[` + w + `]), "` + groupLabel + `", "` + name + `", "", "")`
	}

	var b strings.Builder
	b.WriteString("max by (" + byKey + ") (\n")
	b.WriteString("    " + part(term("max", "max_over_time", evidence, w), "buckets") + "\n")
	b.WriteString("  or " + part(tailMax, "tail") + "\n")
	b.WriteString(")\n")
	b.WriteString("+ 0 * " + term("sum", "sum_over_time", raw, tail) + "\n")
	b.WriteString("and " + term("max", "last_over_time", evidence, tail) + "\n")
	b.WriteString("and " + term("sum", "count_over_time", raw, fresh) + "\n")
	b.WriteString("or " + formatFloat(invalidValue) + " * " + term("group", "last_over_time", evidence, tail) + "\n")
	b.WriteString("or " + group("count_over_time", groupCount) + "\n")
	b.WriteString("or " + group("min_over_time", groupOldest) + "\n")
	b.WriteString("or " + group("max_over_time", groupNewest))
	return b.String()
}

// partLabel tells the two parts of the maximum apart until they are
// aggregated: the window's buckets and the raw tail.
const partLabel = "kubemedic_part"

// groupHealth is what the answer says about the group's evaluations in the
// window.
type groupHealth struct {
	count, oldest, newest float64
	seen                  int // how many of the three series were there
}

// take records s if it is one of the group's series, and reports whether
// it was.
func (g *groupHealth) take(s *model.Sample) (bool, error) {
	name, ok := s.Metric[groupLabel]
	if !ok {
		return false, nil
	}
	v := float64(s.Value)
	switch name {
	case groupCount:
		g.count = v
	case groupOldest:
		g.oldest = v
	case groupNewest:
		g.newest = v
	default:
		return true, fmt.Errorf("answer holds %s=%q", groupLabel, name)
	}
	g.seen++
	return true, nil
}

// check returns why the buckets of q's window at now cannot be trusted, or
// nil: the group never ran in the window (not installed, or not in this
// Prometheus), its newest bucket is older than BucketTail (it lags, fails,
// or Prometheus stopped evaluating), its oldest one begins after the
// window's start (it began recording lately), or an evaluation in between
// was skipped (fewer bucket ends than the span from the oldest to the
// newest holds).
func (g groupHealth) check(q Query, now time.Time) error {
	series := BucketSeries(q.Metric, BucketEnd)
	if g.seen == 0 || g.count == 0 {
		return fmt.Errorf("no bucket of the recording rules (%s, group %s) in the last %s: they are not installed in this Prometheus, or it has not evaluated them", series, BucketGroup, q.Window)
	}
	if g.seen != 3 {
		return fmt.Errorf("answer holds %d of the 3 series about the group %s", g.seen, BucketGroup)
	}
	unix := func(sec float64) time.Time { return time.UnixMilli(int64(math.Round(sec * 1000))) }
	newest, oldest := unix(g.newest), unix(g.oldest)
	if age := now.Sub(newest); age > BucketTail {
		return fmt.Errorf("the newest bucket of group %s ended %s ago (at most %s expected): the group fails, lags or is no longer evaluated", BucketGroup, age.Round(time.Second), BucketTail)
	}
	if late := oldest.Sub(now.Add(-q.Window)); late > BucketSize {
		return fmt.Errorf("the buckets of group %s begin %s after the window's start (%s ago): it has recorded only since %s", BucketGroup, late.Round(time.Second), q.Window, oldest.UTC().Format(time.RFC3339))
	}
	// The ends lie on the group's grid, BucketSize apart; a skipped
	// evaluation leaves one out. Half a bucket absorbs millisecond rounding.
	want := math.Floor(newest.Sub(oldest).Seconds()/BucketSize.Seconds()+0.5) + 1
	if g.count < want {
		return fmt.Errorf("group %s made %.0f of the %.0f buckets between %s and %s: %.0f evaluation(s) skipped (Prometheus down, restarting, or the group slower than its interval)",
			BucketGroup, g.count, want, oldest.UTC().Format(time.RFC3339), newest.UTC().Format(time.RFC3339), want-g.count)
	}
	return nil
}

// promShortDuration formats a whole number of minutes as PromQL's "5m".
func promShortDuration(d time.Duration) string { return fmt.Sprintf("%dm", d/time.Minute) }
