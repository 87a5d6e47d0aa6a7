package harness

import (
	"context"
	"testing"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// PrometheusBinary is localcluster.PrometheusBinary.
const PrometheusBinary = localcluster.PrometheusBinary

// Prometheus is localcluster.Prometheus: a real Prometheus process.
type Prometheus = localcluster.Prometheus

// StartPrometheus runs the testbin Prometheus (localcluster.NewPrometheus)
// with configYAML as its prometheus.yml in a temporary directory, waits
// until it answers /-/ready, and stops it when the test ends, logging the
// end of its log if the test failed. extraArgs are added after
// localcluster's own flags, e.g. "--web.enable-remote-write-receiver". It
// fails the test, saying to run `make testbin`, when the binary is missing,
// and skips it in -short mode (see Tool).
func StartPrometheus(tb testing.TB, configYAML string, extraArgs ...string) *Prometheus {
	tb.Helper()
	Tool(tb, PrometheusBinary)
	prom, err := localcluster.NewPrometheus(context.Background(), tb.TempDir(), configYAML, extraArgs...)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	// Registered after TempDir's cleanup, so it runs first: Prometheus stops
	// before its data directory is removed.
	tb.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			tb.Errorf("harness: %v", err)
		}
		if tb.Failed() {
			tb.Logf("prometheus log:%s", prom.LogTail())
		}
	})
	return prom
}

// NewPrometheus is localcluster.NewPrometheus, kept for the programs under
// test/scale.
func NewPrometheus(ctx context.Context, dir, configYAML string, extraArgs ...string) (*Prometheus, error) {
	return localcluster.NewPrometheus(ctx, dir, configYAML, extraArgs...)
}
