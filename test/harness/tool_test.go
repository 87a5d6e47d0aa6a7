package harness_test

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestStartersStopWithTheTest checks that the testing.TB wrappers stop
// what they start when the (sub)test ends.
func TestStartersStopWithTheTest(t *testing.T) {
	var d *harness.DCGMExporter
	var prom *harness.Prometheus
	var am *harness.Alertmanager
	t.Run("start", func(t *testing.T) {
		d = harness.StartDCGMExporter(t)
		prom = harness.StartPrometheus(t, "global:\n  scrape_interval: 1m\n")
		am = harness.StartAlertmanager(t, "route: {receiver: nowhere}\nreceivers: [{name: nowhere}]\n")
		for _, url := range []string{"http://" + d.URL + "/metrics", prom.URL + "/-/ready", am.URL + "/-/ready"} {
			resp, err := http.Get(url)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, url)
		}
	})
	if prom == nil {
		return // skipped in -short mode
	}
	for _, url := range []string{"http://" + d.URL + "/metrics", prom.URL + "/-/ready", am.URL + "/-/ready"} {
		_, err := http.Get(url)
		require.Error(t, err, "%s still answers after its test ended", url)
	}
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
