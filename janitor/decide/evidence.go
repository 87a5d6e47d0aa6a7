package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

// IdleState is what the GPU metrics say about a pod over a window.
type IdleState string

const (
	// IdleIdle: every GPU the pod holds has a complete series; MaxPercent
	// is the highest utilisation of any of them. Judge compares it with the
	// threshold.
	IdleIdle IdleState = "Measured"
	// IdleUnknown: some GPU lacks a fresh, complete, NaN-free series, or
	// the query failed. Never idle.
	IdleUnknown IdleState = "Unknown"
)

// Idle is the GPU evidence for one pod.
type Idle struct {
	State      IdleState
	MaxPercent float64
	GPUs       int
	// Detail says why the state is Unknown.
	Detail string
}

// Queries are the (metric, window) pairs the pod's idle rule needs: GPU_UTIL
// for whole GPUs, GR_ENGINE_ACTIVE for MIG instances, which have no
// GPU_UTIL.
func Queries(p *Pod, window time.Duration) []gpuutil.Query {
	var qs []gpuutil.Query
	if p.WholeGPUs > 0 {
		qs = append(qs, gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: window})
	}
	if p.MIGInstances > 0 {
		qs = append(qs, gpuutil.Query{Metric: gpuutil.MetricGREngineActive, Window: window})
	}
	return qs
}

// IdleFromMetrics maps the query results to the pod's evidence. The pod is
// measured only when, for each kind of device it holds, the query
// succeeded and returned at least as many complete series as it holds
// devices; anything less is Unknown, with what was missing.
func IdleFromMetrics(p *Pod, window time.Duration, results map[gpuutil.Query]gpuutil.Result) Idle {
	key := gpuutil.PodKey{Namespace: p.Namespace, Name: p.Name}
	out := Idle{State: IdleIdle}
	var missing []string
	for _, q := range Queries(p, window) {
		want := p.WholeGPUs
		if q.Metric == gpuutil.MetricGREngineActive {
			want = p.MIGInstances
		}
		res, ok := results[q]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s was not queried", q.Metric))
			continue
		case res.Err != nil:
			missing = append(missing, fmt.Sprintf("the Prometheus query for %s failed: %v", q.Metric, res.Err))
			continue
		}
		gpus := res.Pods[key]
		if len(gpus) < want {
			why := fmt.Sprintf("%s has complete series for %d of %d devices over the last %s", q.Metric, len(gpus), want, Human(window))
			if n := res.Dropped[key]; n > 0 {
				why += fmt.Sprintf(" (%d stale, gapped, started late or NaN)", n)
			}
			missing = append(missing, why)
			continue
		}
		for _, g := range gpus {
			out.MaxPercent = max(out.MaxPercent, g.MaxPercent)
		}
		out.GPUs += len(gpus)
	}
	if len(missing) > 0 {
		return Idle{State: IdleUnknown, Detail: strings.Join(missing, "; ")}
	}
	return out
}

// EvidenceTooOld reports whether evidence read at readAt is too old at now
// to reclaim a pod on: older than the cycle's interval, and than a minute
// however short the interval. A cycle slowed down (by Slack, say) must not
// act on evidence read long ago; the next cycle reads it again. Evidence
// exactly that old is still used. age is how old the evidence is.
func EvidenceTooOld(readAt, now time.Time, interval time.Duration) (age time.Duration, tooOld bool) {
	age = now.Sub(readAt)
	return age, age > max(interval, time.Minute)
}
