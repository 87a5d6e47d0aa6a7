package harness_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestPrometheusScrapesAndAnswersQueries starts the real Prometheus with a
// scrape job of a local endpoint and reads the gauge it serves back through
// the query API, twice, so that the second value can only come from a later
// scrape.
func TestPrometheusScrapesAndAnswersQueries(t *testing.T) {
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubemedic_harness_test_gauge", Help: "A value the test sets."})
	reg.MustRegister(gauge)
	gauge.Set(42)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(target.Close)

	prom := harness.StartPrometheus(t, fmt.Sprintf(`
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: harness-test
    scrape_interval: 1s
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(target.URL, "http://")))
	require.True(t, strings.HasPrefix(prom.URL, "http://127.0.0.1:"), prom.URL)

	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	api := promv1.NewAPI(client)
	query := `kubemedic_harness_test_gauge{job="harness-test"}`
	waitValue := func(want float64) {
		t.Helper()
		var last string
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			v, _, err := api.Query(ctx, query, time.Now())
			if err != nil {
				last = err.Error()
				return false
			}
			last = v.String()
			vec, ok := v.(model.Vector)
			return ok && len(vec) == 1 && float64(vec[0].Value) == want
		}, 30*time.Second, 100*time.Millisecond, "query %s never returned %v; last answer: %s%s", query, want, last, prom.LogTail())
	}
	waitValue(42)
	gauge.Set(7)
	waitValue(7)

	// The target is healthy in Prometheus' own view too.
	targets, err := api.Targets(t.Context())
	require.NoError(t, err)
	require.Len(t, targets.Active, 1)
	require.Equal(t, promv1.HealthGood, targets.Active[0].Health)
}

// TestToolFailsClearlyWhenMissing checks that a missing test binary fails
// the test and says how to build it instead of skipping.
func TestToolFailsClearlyWhenMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("Tool skips in -short mode")
	}
	t.Setenv(localcluster.EnvTestBin, t.TempDir())
	rec := &recordingTB{TB: t}
	done := make(chan string)
	go func() {
		path := "not reached"
		defer func() { done <- path }()
		path = harness.Tool(rec, "promtool")
	}()
	path := <-done
	require.Equal(t, "not reached", path, "Tool must not return after failing")
	require.False(t, rec.skipped, "Tool must fail, not skip")
	require.Contains(t, rec.fatal, "promtool")
	require.Contains(t, rec.fatal, "run `make testbin`")
}

// recordingTB records Fatalf and Skipf and ends the goroutine as the real
// ones do.
type recordingTB struct {
	testing.TB
	fatal   string
	skipped bool
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped = true
	runtime.Goexit()
}
