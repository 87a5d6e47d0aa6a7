package controller

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

// Metrics are the janitor's Prometheus metrics. Names are API: the
// PrometheusRules in deploy/janitor alert on them.
type Metrics struct {
	pods            *prometheus.GaugeVec
	reclaimedPods   *prometheus.CounterVec
	reclaimedGPUs   *prometheus.CounterVec
	noticeFailures  *prometheus.CounterVec
	queryDuration   *prometheus.HistogramVec
	queryErrors     *prometheus.CounterVec
	metricsReadable prometheus.Gauge
	cycleDuration   prometheus.Histogram
	lastCycle       prometheus.Gauge
	writes          *prometheus.CounterVec
	interactions    *prometheus.CounterVec
}

// NewMetrics makes the metrics; Register adds them to a registry.
func NewMetrics() *Metrics {
	return &Metrics{
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubemedic_janitor_pods",
			Help: "GPU pods by rule and state (candidate, noticed, snoozed, reclaimed, unknown) at the end of the last cycle. unknown: a rule could not be judged (missing, stale or partial metrics, Prometheus down): never reclaimed."}, []string{"rule", "state"}),
		reclaimedPods: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_reclaimed_pods_total",
			Help: "Pods reclaimed, by rule and what was stopped (Pod, Job, Deployment, StatefulSet, Notebook)."}, []string{"rule", "target"}),
		reclaimedGPUs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_reclaimed_gpus_total",
			Help: "GPUs (whole GPUs and MIG instances) freed by reclaims, by rule."}, []string{"rule"}),
		noticeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_notice_failures_total",
			Help: "Slack messages that could not be sent, by reason (not_configured, no_recipient, permanent, transient)."}, []string{"reason"}),
		queryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kubemedic_janitor_prometheus_query_duration_seconds",
			Help: "Duration of the janitor's Prometheus queries, one per distinct (metric, window) per cycle.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}, []string{"metric"}),
		queryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_prometheus_query_errors_total",
			Help: "Prometheus queries that failed; the pods depending on them are Unknown."}, []string{"metric"}),
		metricsReadable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubemedic_janitor_gpu_metrics_readable",
			Help: "1 when every Prometheus query of the last cycle answered, 0 when one failed (the idle rule is blind)."}),
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubemedic_janitor_cycle_duration_seconds",
			Help: "Duration of a janitor cycle: list, query, decide, act.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		lastCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubemedic_janitor_last_cycle_timestamp_seconds",
			Help: "When the last janitor cycle ended (Unix time)."}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_api_writes_total",
			Help: "Writes to the API server by the janitor, by verb (patch, delete, event)."}, []string{"verb"}),
		interactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubemedic_janitor_slack_interactions_total",
			Help: "Requests to the Slack interactivity endpoint, by action (keep, reclaim, restore; unknown before the signature is checked) and result (done, not_owner, recreated, gone, already_reclaimed, no_notice, not_allowed, conflict, failed; refused: forged, stale, replayed, busy, bad_request)."}, []string{"action", "result"}),
	}
}

// Register adds the metrics to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.pods, m.reclaimedPods, m.reclaimedGPUs, m.noticeFailures, m.queryDuration, m.queryErrors,
		m.metricsReadable, m.cycleDuration, m.lastCycle, m.writes, m.interactions} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// observeQuery is gpuutil's Observe hook.
func (m *Metrics) observeQuery(q gpuutil.Query, d time.Duration, err error) {
	m.queryDuration.WithLabelValues(string(q.Metric)).Observe(d.Seconds())
	if err != nil {
		m.queryErrors.WithLabelValues(string(q.Metric)).Inc()
	}
}

// ObserveQuery returns the hook for gpuutil.Options.Observe.
func (m *Metrics) ObserveQuery() func(gpuutil.Query, time.Duration, error) { return m.observeQuery }

func (m *Metrics) noticeFailed(err error) {
	reason := "transient"
	switch {
	case errors.Is(err, notify.ErrNotConfigured):
		reason = "not_configured"
	case errors.Is(err, notify.ErrNoRecipient):
		reason = "no_recipient"
	case notify.IsPermanent(err):
		reason = "permanent"
	}
	m.noticeFailures.WithLabelValues(reason).Inc()
}

// setStates publishes the per-rule states of one cycle.
func (m *Metrics) setStates(plan *Plan) {
	m.pods.Reset()
	for _, r := range decide.Rules {
		for _, s := range []decide.State{decide.StateCandidate, decide.StateNoticed, decide.StateSnoozed, decide.StateReclaimed, decide.StateUnknown} {
			m.pods.WithLabelValues(string(r), string(s)).Set(0)
		}
	}
	for i := range plan.Pods {
		d := plan.Pods[i].Decision
		if d.State != decide.StateNone && d.Rule != "" {
			m.pods.WithLabelValues(string(d.Rule), string(d.State)).Inc()
		}
	}
	readable := 1.0
	for _, r := range plan.Results {
		if r.Err != nil {
			readable = 0
		}
	}
	m.metricsReadable.Set(readable)
}
