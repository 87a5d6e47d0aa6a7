package harness

import (
	"context"
	"testing"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// AlertmanagerBinary is localcluster.AlertmanagerBinary.
const AlertmanagerBinary = localcluster.AlertmanagerBinary

// Alertmanager is localcluster.Alertmanager: a real Alertmanager process.
type Alertmanager = localcluster.Alertmanager

// PostableAlert is localcluster.PostableAlert, an alert as /api/v2/alerts
// takes it.
type PostableAlert = localcluster.PostableAlert

// StartAlertmanager runs the testbin Alertmanager
// (localcluster.NewAlertmanager) with configYAML as its alertmanager.yml in
// a temporary directory, waits until it answers /-/ready, and stops it when
// the test ends, logging the end of its log if the test failed. It fails the
// test, saying to run `make testbin`, when the binary is missing, and skips
// it in -short mode (see Tool).
func StartAlertmanager(tb testing.TB, configYAML string, extraArgs ...string) *Alertmanager {
	tb.Helper()
	Tool(tb, AlertmanagerBinary)
	am, err := localcluster.NewAlertmanager(context.Background(), tb.TempDir(), configYAML, extraArgs...)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	// Registered after TempDir's cleanup, so it runs first.
	tb.Cleanup(func() {
		if err := am.Stop(); err != nil {
			tb.Errorf("harness: %v", err)
		}
		if tb.Failed() {
			tb.Logf("alertmanager log:%s", am.LogTail())
		}
	})
	return am
}
