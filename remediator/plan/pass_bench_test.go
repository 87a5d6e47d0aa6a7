package plan

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// BenchmarkPass10000Nodes is one policy pass over 10,000 GPU nodes, 50 of
// them with the policy's condition held past its for.
func BenchmarkPass10000Nodes(b *testing.B) {
	t := &testing.T{}
	pol := policy(t, "gpu-lost")
	nodes := make([]*corev1.Node, 10000)
	for i := range nodes {
		opts := []nodeOpt{labeled("nvidia.com/gpu.present", "true")}
		if i%200 == 0 {
			opts = append(opts, xid(ago(time.Minute)))
		}
		nodes[i] = node(fmt.Sprintf("gpu-%05d", i), opts...)
	}
	in := PassInput{Evaluate: []*v1alpha1.RemediationPolicy{pol.Obj}, Policies: []*Policy{pol}, Nodes: nodes,
		Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now}
	b.ReportAllocs()
	for b.Loop() {
		Pass(in)
	}
}
