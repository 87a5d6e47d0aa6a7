package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoHeavyImports keeps kubemedic-detect cheap to start: NPD starts it
// every 30 s per check on every node, and each package below costs every
// invocation its init functions and its share of the binary's memory
// (docs/detectors.md, Measurements). detectors/kube talks to the kubelet
// and API server with net/http, and detectors/reason repeats the API's
// reasons, so that none of these is needed.
func TestNoHeavyImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"k8s.io/",      // client-go, apimachinery, api, klog
		"sigs.k8s.io/", // controller-runtime, yaml, structured-merge-diff
		"github.com/kubemedic/kubemedic/policies",
		"github.com/prometheus/",
		"github.com/spf13/cobra",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("kubemedic-detect imports %s", pkg)
			}
		}
	}
}
