package localcluster_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
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
)

// skipShort skips an integration test, one that runs a testbin binary, in
// -short mode. A missing binary is not a reason to skip: the test fails
// and says to run `make testbin`.
func skipShort(t *testing.T, binary string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: needs %s from `make testbin`; skipped in -short mode", binary)
	}
}

// TestPrometheusScrapesAndAnswersQueries starts the real Prometheus with a
// scrape job of a local endpoint and reads the gauge it serves back through
// the query API, twice, so that the second value can only come from a later
// scrape.
func TestPrometheusScrapesAndAnswersQueries(t *testing.T) {
	skipShort(t, localcluster.PrometheusBinary)
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubemedic_localcluster_test_gauge", Help: "A value the test sets."})
	reg.MustRegister(gauge)
	gauge.Set(42)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(target.Close)

	dir := t.TempDir()
	prom, err := localcluster.NewPrometheus(t.Context(), dir, fmt.Sprintf(`
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: localcluster-test
    scrape_interval: 1s
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(target.URL, "http://")))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, prom.Stop())
		if t.Failed() {
			t.Logf("prometheus log:%s", prom.LogTail())
		}
	})
	require.True(t, strings.HasPrefix(prom.URL, "http://127.0.0.1:"), prom.URL)
	require.Equal(t, dir, prom.Dir)
	require.FileExists(t, filepath.Join(dir, "prometheus.yml"))
	require.FileExists(t, filepath.Join(dir, "prometheus.log"))

	client, err := promapi.NewClient(promapi.Config{Address: prom.URL})
	require.NoError(t, err)
	api := promv1.NewAPI(client)
	query := `kubemedic_localcluster_test_gauge{job="localcluster-test"}`
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

	// Stop ends the process: the API no longer answers, and stopping again
	// is harmless.
	pid := prom.PID()
	require.NoError(t, prom.Stop())
	require.False(t, alive(pid), "prometheus (pid %d) still runs after Stop", pid)
	_, _, err = api.Query(t.Context(), "up", time.Now())
	require.Error(t, err)
}

// TestPrometheusRefusesABadConfig checks that a config Prometheus rejects
// is an error with the end of its log, not a hang, and leaves no process.
func TestPrometheusRefusesABadConfig(t *testing.T) {
	skipShort(t, localcluster.PrometheusBinary)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prom, err := localcluster.NewPrometheus(ctx, t.TempDir(), "scrape_configs: [{job_name: 1, bogus_field: true}]\n")
	require.Nil(t, prom)
	require.ErrorContains(t, err, "prometheus exited before serving")
	require.ErrorContains(t, err, "bogus_field")
}

// TestNewPrometheusAndAlertmanagerFailClearlyWithoutBinaries checks that a
// missing binary is an error saying to run `make testbin`, before anything
// is written or started.
func TestNewPrometheusAndAlertmanagerFailClearlyWithoutBinaries(t *testing.T) {
	t.Setenv(localcluster.EnvTestBin, t.TempDir())
	dir := t.TempDir()
	prom, err := localcluster.NewPrometheus(t.Context(), dir, "")
	require.Nil(t, prom)
	require.ErrorContains(t, err, localcluster.PrometheusBinary)
	require.ErrorContains(t, err, "run `make testbin`")
	am, err := localcluster.NewAlertmanager(t.Context(), dir, "")
	require.Nil(t, am)
	require.ErrorContains(t, err, localcluster.AlertmanagerBinary)
	require.ErrorContains(t, err, "run `make testbin`")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
