package harness

import (
	"context"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// Start starts a local cluster for a test and stops it in t.Cleanup. It
// fails the test when the binaries are missing or anything does not start,
// and skips it in -short mode. Progress goes to t.Logf unless opts.Logf is
// set.
func Start(t testing.TB, opts localcluster.Options) *localcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs kube-apiserver and etcd; skipped in -short mode")
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := localcluster.New(ctx, opts)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("harness: stop: %v", err)
		}
	})
	return c
}
