package gpuutil

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

const (
	// DefaultTimeout bounds one query when Options.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultStaleness is Options.Staleness when zero: Prometheus' own
	// lookback delta.
	DefaultStaleness = 5 * time.Minute
	// maxConcurrentQueries bounds the queries of one Fetch in flight at once:
	// a handful of windows must not load Prometheus with a burst.
	maxConcurrentQueries = 4
)

// Options configures a Prometheus source.
type Options struct {
	// Timeout bounds each query, on the client and (as the query's timeout
	// parameter) on the server. Zero means DefaultTimeout.
	Timeout time.Duration
	// Staleness is the age beyond which a series' latest sample makes it
	// stale, and how late after the window's start its first sample may be.
	// It must be a few scrape intervals at least, or healthy series look
	// stale. Zero means DefaultStaleness.
	Staleness time.Duration
	// RawSeries reads every window from the raw series (RawExpr), never
	// from the recorded buckets: for a Prometheus without kubemedic's
	// recording rules, where the windows are short or the pods few enough
	// for it. At fleet size a long window's raw query times out, and every
	// pod is Unknown.
	RawSeries bool
	// Observe, when set, is called once per query after it finished, with
	// its duration and error (for a query-duration metric); a query refused
	// before it was sent reports a zero duration. It is called from several
	// goroutines at once.
	Observe func(q Query, d time.Duration, err error)
}

// Prometheus answers queries from a Prometheus server's HTTP API. It is safe
// for concurrent use.
type Prometheus struct {
	api  promv1.API
	opts Options
}

var _ Source = (*Prometheus)(nil)

// NewPrometheus returns a Source that queries api, with o's zero fields set
// to their defaults.
func NewPrometheus(api promv1.API, o Options) *Prometheus {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Staleness <= 0 {
		o.Staleness = DefaultStaleness
	}
	return &Prometheus{api: api, opts: o}
}

// Fetch runs one instant query per distinct query in qs, at most four at a
// time, evaluated at now, and returns a Result for each distinct query. A
// query that fails, times out or returns anything but a vector has Err set;
// the others are not affected.
func (p *Prometheus) Fetch(ctx context.Context, qs []Query, now time.Time) map[Query]Result {
	distinct := make([]Query, 0, len(qs))
	seen := make(map[Query]bool, len(qs))
	for _, q := range qs {
		if !seen[q] {
			seen[q] = true
			distinct = append(distinct, q)
		}
	}

	results := make([]Result, len(distinct))
	sem := make(chan struct{}, maxConcurrentQueries)
	var wg sync.WaitGroup
	for i, q := range distinct {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				results[i] = p.fetch(ctx, q, now)
			case <-ctx.Done():
				results[i] = Result{Err: fmt.Errorf("query %s: %w", q, ctx.Err())}
				p.observe(q, 0, results[i].Err)
			}
		}()
	}
	wg.Wait()

	out := make(map[Query]Result, len(distinct))
	for i, q := range distinct {
		out[q] = results[i]
	}
	return out
}

// fetch runs one query and decodes its answer.
func (p *Prometheus) fetch(ctx context.Context, q Query, now time.Time) Result {
	if err := q.validate(); err != nil {
		res := Result{Err: fmt.Errorf("query %s: %w", q, err)}
		p.observe(q, 0, res.Err)
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	start := time.Now()
	buckets := !p.opts.RawSeries && UsesBuckets(q.Window)
	expr := RawExpr(q, p.opts.Staleness)
	if buckets {
		expr = bucketExpr(q, p.opts.Staleness)
	}
	val, warnings, err := p.api.Query(ctx, expr, now, promv1.WithTimeout(p.opts.Timeout))
	var res Result
	if err == nil {
		vec, ok := val.(model.Vector)
		if !ok {
			err = fmt.Errorf("answer is a %s, not a vector", valueType(val))
		} else if res = decode(q, vec, now, buckets); res.Err != nil {
			err = res.Err
		}
	}
	if err != nil {
		res = Result{Err: fmt.Errorf("query %s: %w", q, redactURL(err))}
	}
	if len(warnings) > 0 {
		res.Warnings = warnings
	}
	p.observe(q, time.Since(start), res.Err)
	return res
}

func (p *Prometheus) observe(q Query, d time.Duration, err error) {
	if p.opts.Observe != nil {
		p.opts.Observe(q, d, err)
	}
}

func valueType(v model.Value) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().String()
}

// redactURL hides a password in the URL that net/http puts in its errors.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			ue.URL = u.Redacted()
		} else {
			ue.URL = "<unparsable URL>"
		}
	}
	return err
}

// decode maps the answer to the query for q, evaluated at now, to a
// Result: bucketExpr's when buckets, else RawExpr's. It is a pure function
// of its input: every rule that makes a GPU doubtful is here or in the
// query, and none makes one idle.
func decode(q Query, vec model.Vector, now time.Time, buckets bool) Result {
	scale, ok := q.Metric.percentPerUnit()
	if !ok {
		return Result{Err: fmt.Errorf("unsupported metric %q", q.Metric)}
	}
	if buckets {
		scale = 1 // the query answers in percent already
	}
	var group groupHealth
	type row struct {
		pod int // index in keys
		gpu GPU
	}
	rows := make([]row, 0, len(vec))
	index := make(map[PodKey]int)
	var keys []PodKey
	var counts []int
	var dropped map[PodKey]int
	for _, s := range vec {
		if buckets {
			if isGroup, err := group.take(s); err != nil {
				return Result{Err: err}
			} else if isGroup {
				continue
			}
		}
		ns, name := s.Metric[labelNamespace], s.Metric[labelPod]
		if ns == "" || name == "" {
			// Not attributable to a pod; the query never returns these.
			continue
		}
		pod := PodKey{Namespace: string(ns), Name: string(name)}
		v := float64(s.Value)
		uuid := s.Metric[labelUUID]
		// A bucket that is not evidence in the window makes the maximum
		// NotEvidence or more.
		notEvidence := buckets && v >= NotEvidence
		if uuid == "" || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || notEvidence {
			if dropped == nil {
				dropped = make(map[PodKey]int)
			}
			dropped[pod]++
			continue
		}
		id := string(uuid)
		if mig := s.Metric[labelMIGInstance]; mig != "" {
			id += "/" + string(mig)
		}
		i, ok := index[pod]
		if !ok {
			i = len(keys)
			index[pod] = i
			keys = append(keys, pod)
			counts = append(counts, 0)
		}
		counts[i]++
		rows = append(rows, row{pod: i, gpu: GPU{ID: id, MaxPercent: v * scale}})
	}

	if buckets {
		// A group that did not record the whole window makes every pod
		// Unknown, as a failed query does: the buckets' holes are its own,
		// not the GPUs'.
		if err := group.check(q, now); err != nil {
			return Result{Err: err}
		}
	}

	// One backing array for every pod's GPUs, each pod a capped sub-slice
	// of it: two allocations instead of one per pod.
	next := make([]int, len(keys)) // where the pod's next GPU goes
	off := 0
	for i, n := range counts {
		next[i] = off
		off += n
	}
	gpus := make([]GPU, len(rows))
	for _, r := range rows {
		gpus[next[r.pod]] = r.gpu
		next[r.pod]++
	}
	pods := make(map[PodKey][]GPU, len(keys))
	for i, key := range keys {
		end := next[i]
		g := gpus[end-counts[i] : end : end]
		slices.SortFunc(g, func(a, b GPU) int { return cmp.Compare(a.ID, b.ID) })
		for k := 1; k < len(g); k++ {
			if g[k].ID == g[k-1].ID {
				// Prometheus never returns two series with one label set;
				// two answers for one GPU mean the answer is not ours.
				return Result{Err: fmt.Errorf("answer holds GPU %s of pod %s twice", g[k].ID, key)}
			}
		}
		pods[key] = g
	}
	return Result{Pods: pods, Dropped: dropped}
}
