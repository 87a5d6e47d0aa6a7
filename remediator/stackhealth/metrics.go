package stackhealth

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the stack health checks' Prometheus metrics. The remediator
// registers them with its own (remediator/controller.Metrics), so that they
// exist, without series, when the checks are off.
type Metrics struct {
	detectorsMissing *prometheus.GaugeVec

	// mu guards reasons: the reason each node's series has now, so that a
	// new reason replaces the old series and a node that reports again, is
	// deleted or loses its GPUs has none.
	mu      sync.Mutex
	reasons map[string]string
}

// NewMetrics creates the metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		detectorsMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubemedic_remediation_node_detectors_missing",
			Help: "1 for each GPU node whose kubemedic detectors do not report, by the first reason that holds: no-detector-pod (no Ready pod of node-problem-detector's DaemonSet on the node), no-conditions (none of the detectors' node conditions), stale-heartbeat (a detector condition's lastHeartbeatTime older than --stack-detector-stale-after). Other nodes have no series. Set by the stack health checks, on the leader only.",
		}, []string{"node", "reason"}),
		reasons: map[string]string{},
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.detectorsMissing}
}

// setDetectors records node's detector verdict ("" when they report) and
// returns the reason it had before and whether it changed.
func (m *Metrics) setDetectors(node, reason string) (old string, changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old = m.reasons[node]
	if old == reason {
		return old, false
	}
	if old != "" {
		m.detectorsMissing.DeleteLabelValues(node, old)
	}
	if reason == "" {
		delete(m.reasons, node)
	} else {
		m.detectorsMissing.WithLabelValues(node, reason).Set(1)
		m.reasons[node] = reason
	}
	return old, true
}
