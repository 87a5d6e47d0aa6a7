package localcluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// BenchmarkCreateGPUNodes is the harness's scale run: it creates batches of
// simulated GPU nodes and waits until kwok reports every one Ready. Run with
// `make bench` or
//
//	go test -run '^$' -bench CreateGPUNodes -benchtime 3x ./test/harness/
//
// and read nodes/s; the other packages' scale tests build on this rate.
func BenchmarkCreateGPUNodes(b *testing.B) {
	const batch = 250
	env := harness.Start(b, localcluster.Options{Kwok: true})
	ctx := b.Context()
	i := 0
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		nodes, err := env.CreateGPUNodes(ctx, batch, localcluster.NodeSpec{NamePrefix: fmt.Sprintf("scale-%d", i), MIGEvery: 4})
		if err != nil {
			b.Fatal(err)
		}
		if len(nodes) != batch {
			b.Fatalf("created %d nodes, want %d", len(nodes), batch)
		}
		names := make([]string, len(nodes))
		for j := range nodes {
			names[j] = nodes[j].Name
		}
		if err := env.WaitNodesReady(ctx, names...); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		i++
	}
	b.ReportMetric(float64(batch*i)/total.Seconds(), "nodes/s")
}
