package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

const (
	// labelWorkload marks the workload pods, which kwok leaves Pending
	// unless -run-workload.
	labelWorkload = "kubemedic.io/bench-workload"
	// kwokStagesFile is the kwok Stage set in the testbin directory
	// (localcluster reads it from there).
	kwokStagesFile = "kwok-stages.yaml"
	// kwokPodReadyStage is the Stage that marks a bound pod Running.
	kwokPodReadyStage = "pod-ready"
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

// skipWorkloadBinDir makes dir/testbin, a copy of the testbin directory
// (symbolic links) whose kwok Stage set leaves the workload pods alone: its
// pod-ready Stage skips pods labelled labelWorkload, so they stay Pending.
// It returns the directory, for localcluster.EnvTestBin.
func skipWorkloadBinDir(dir string) (string, error) {
	src, err := localcluster.BinDir()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "testbin")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", fmt.Errorf("read testbin directory: %w", err)
	}
	for _, e := range entries {
		if e.Name() == kwokStagesFile {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return "", err
		}
	}
	data, err := os.ReadFile(filepath.Join(src, kwokStagesFile))
	if err != nil {
		return "", fmt.Errorf("read kwok stages (run `make testbin`): %w", err)
	}
	out, err := skipWorkload(data)
	if err != nil {
		return "", fmt.Errorf("kwok stages %s: %w", filepath.Join(src, kwokStagesFile), err)
	}
	if err := os.WriteFile(filepath.Join(dst, kwokStagesFile), out, 0o644); err != nil {
		return "", err
	}
	return dst, nil
}

// skipWorkload adds to the pod-ready Stage of a kwok Stage set the
// requirement that a pod has no labelWorkload label.
func skipWorkload(stages []byte) ([]byte, error) {
	var out bytes.Buffer
	found := false
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stages)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		meta, _ := obj["metadata"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		if obj["kind"] == "Stage" && meta["name"] == kwokPodReadyStage && spec != nil {
			sel, _ := spec["selector"].(map[string]any)
			if sel == nil {
				return nil, fmt.Errorf("stage %s has no selector", kwokPodReadyStage)
			}
			exprs, _ := sel["matchExpressions"].([]any)
			sel["matchExpressions"] = append(exprs, map[string]any{
				"key": fmt.Sprintf(`.metadata.labels["%s"]`, labelWorkload), "operator": "DoesNotExist",
			})
			if doc, err = yaml.Marshal(obj); err != nil {
				return nil, err
			}
			found = true
		}
		out.WriteString("---\n")
		out.Write(doc)
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteString("\n")
		}
	}
	if !found {
		return nil, fmt.Errorf("no Stage %s", kwokPodReadyStage)
	}
	return out.Bytes(), nil
}

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
