package ghclient

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts GitHub requests. A nil *Metrics counts nothing.
type Metrics struct {
	requests  *prometheus.CounterVec
	remaining prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (when non-nil);
// it panics if they are already registered there.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubemedic_alertbridge_github_requests_total",
			Help: "HTTP requests sent to GitHub, retries included, by endpoint and HTTP status (\"error\" when no answer came back).",
		}, []string{"endpoint", "status"}),
		remaining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubemedic_alertbridge_github_rate_limit_remaining",
			Help: "X-RateLimit-Remaining of the latest GitHub response that carried it.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.remaining)
	}
	return m
}

func (m *Metrics) observe(endpoint string, resp *http.Response) {
	if m == nil {
		return
	}
	status := "error"
	if resp != nil {
		status = strconv.Itoa(resp.StatusCode)
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				m.remaining.Set(n)
			}
		}
	}
	m.requests.WithLabelValues(endpoint, status).Inc()
}

// meteredTransport counts every HTTP attempt, which only the transport
// sees exactly: go-github may refuse a call without sending it.
type meteredTransport struct {
	next    http.RoundTripper
	metrics *Metrics
}

func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	endpoint, _ := req.Context().Value(endpointKey{}).(string)
	if endpoint == "" {
		endpoint = endpointUnknown
	}
	var observed *http.Response
	if err == nil {
		observed = resp
	}
	t.metrics.observe(endpoint, observed)
	return resp, err
}
