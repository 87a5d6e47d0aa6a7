package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkCachedNodeBytes reports the heap 10,000 nodes hold as decoded
// ("decoded") and as the cache keeps them after its transform ("cached").
// testdata/kwok-gpu-node.json is a GPU node of the local cluster as the API
// server served it: kwok's status, GPU feature discovery's labels, 14
// conditions (the kubelet's, the detectors' and the stack health's) and a
// detector's GPU history annotation. Each copy gets its own name, UID and
// hostname label, as real nodes have.
func BenchmarkCachedNodeBytes(b *testing.B) {
	data, err := os.ReadFile("testdata/kwok-gpu-node.json")
	if err != nil {
		b.Fatal(err)
	}
	const nodes = 10000
	for _, bc := range []struct {
		name  string
		strip func(*corev1.Node) any
	}{
		{"decoded", func(n *corev1.Node) any { return n }},
		{"cached", func() func(*corev1.Node) any {
			in := newInterner()
			return func(n *corev1.Node) any { return in.node(n) }
		}()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				keep := make([]any, nodes)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range keep {
					n := &corev1.Node{}
					if err := json.Unmarshal(data, n); err != nil {
						b.Fatal(err)
					}
					n.Name = fmt.Sprintf("gpu-node-%05d", i)
					n.UID = types.UID(fmt.Sprintf("6f1c2a4e-0000-4000-8000-%012d", i))
					n.Labels["kubernetes.io/hostname"] = n.Name
					keep[i] = bc.strip(n)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/nodes, "B/node")
				runtime.KeepAlive(keep)
			}
		})
	}
}
