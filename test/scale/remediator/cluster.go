package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

const (
	// labelWorkload marks the workload pods, which kwok leaves Pending
	// unless -run-workload.
	labelWorkload = "kubemedic.io/bench-workload"
)

// kwokParallelism raises kwok's parallel pod Stages from its default of 4,
// which marked pods Running at about 90 a second, for -run-workload. kwok
// does not default the options of a configuration read from a file: the
// others are its defaults, written out (cidr, the node lease duration and
// the node selection come from localcluster's flags).
const kwokParallelism = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true`

// proc is a process of the control plane.
type proc struct {
	name string
	pid  int
}

// controlPlaneProcs finds kube-apiserver and etcd, which envtest starts
// with their certificates and data in the cluster's directory, and kwok.
func controlPlaneProcs(env *localcluster.Cluster) []proc {
	var out []proc
	dirs, _ := os.ReadDir("/proc")
	for _, name := range []string{"kube-apiserver", "etcd"} {
		for _, d := range dirs {
			var pid int
			if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
				continue
			}
			comm, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			cmdline, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err1 != nil || err2 != nil || strings.TrimSpace(string(comm)) != name || !bytes.Contains(cmdline, []byte(env.Dir())) {
				continue
			}
			out = append(out, proc{name, pid})
		}
	}
	if pid := env.KwokPID(); pid != 0 {
		out = append(out, proc{"kwok", pid})
	}
	return out
}
