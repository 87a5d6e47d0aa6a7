package bridge

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// metrics are the bridge's own; the GitHub call metrics live in ghclient.
type metrics struct {
	webhooks    *prometheus.CounterVec
	latency     prometheus.Histogram
	transitions *prometheus.CounterVec
	storm       *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	// rejected counts GitHub writes that failed for good.
	rejected *prometheus.CounterVec
	// historyReads counts reads of the nodes' operation history.
	historyReads *prometheus.CounterVec
	// diagnostics counts diagnostics comments, by result.
	diagnostics *prometheus.CounterVec
	// validations counts comments about a NodeOperation's GPU validation,
	// by result.
	validations *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, depth, age func() float64) *metrics {
	m := &metrics{
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_webhooks_total",
			Help: "Webhook requests by HTTP status code.",
		}, []string{"code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubemedic_alertbridge_webhook_duration_seconds",
			Help:    "Time from a webhook request to its answer, the durable journal write included.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5},
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_transitions_total",
			Help: "Alert group transitions applied to GitHub, by kind (fired, resolved, refired, alerts_changed, rollup).",
		}, []string{"kind"}),
		storm: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_storm_guard_activations_total",
			Help: "Alert groups the storm guard sent to a roll-up issue instead of a new issue, by repository.",
		}, []string{"repo"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_dropped_total",
			Help: "Transitions given up, by reason (a permanent GitHub error such as github_404 or github_422, render, payload).",
		}, []string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_github_rejected_total",
			Help: "GitHub writes (issue, edit, comment, transition) refused for good, by reason (body_too_long after every shorter retry, validation_failed, not_found, forbidden, gone, ...). Each is a transition, roll-up or comment that did not reach GitHub.",
		}, []string{"reason"}),
		historyReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_node_history_reads_total",
			Help: "Reads of the NodeOperations of the nodes an alert group names, for its issue, by result: ok, or error (the issue says the history is unknown).",
		}, []string{"result"}),
	}
	m.diagnostics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubemedic_alertbridge_diagnostics_comments_total",
		Help: "Comments about a NodeOperation's diagnostics bundle on the issues of its node, by result: posted, found (posted before, seen on GitHub after a restart), error.",
	}, []string{"result"})
	m.validations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubemedic_alertbridge_validation_comments_total",
		Help: "Comments about how a NodeOperation's active GPU test (the validation gate) ended, on the issues of its node, by result: posted, found (posted before, seen on GitHub after a restart), error.",
	}, []string{"result"})
	// Series from the start, so that an alert on their increase sees the
	// first one.
	for _, r := range []string{"github_403", "github_404", "github_410", "github_422", "render", "payload", "key_template", "journal_corrupt"} {
		m.dropped.WithLabelValues(r)
	}
	for _, r := range []string{ghclient.RejectBodyTooLong, ghclient.ReasonValidationFailed, ghclient.ReasonNotFound, ghclient.ReasonForbidden,
		ghclient.ReasonGone, ghclient.ReasonBadRequest, ghclient.ReasonClientError} {
		m.rejected.WithLabelValues(r)
	}
	m.historyReads.WithLabelValues("ok")
	m.historyReads.WithLabelValues("error")
	for _, r := range []string{"posted", "found", "error"} {
		m.diagnostics.WithLabelValues(r)
		m.validations.WithLabelValues(r)
	}
	reg.MustRegister(m.webhooks, m.latency, m.transitions, m.storm, m.dropped, m.rejected, m.historyReads, m.diagnostics, m.validations,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kubemedic_alertbridge_queue_depth",
			Help: "Webhooks recorded in the journal and not yet applied to GitHub.",
		}, depth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kubemedic_alertbridge_queue_oldest_age_seconds",
			Help: "Age of the oldest webhook not yet applied to GitHub; 0 when the queue is empty.",
		}, age),
	)
	return m
}
