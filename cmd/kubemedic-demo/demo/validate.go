package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/validation/run"
)

// The GPU tests in the demo. kwok runs no container, so the simulator
// plays a test pod the way its node would: the real kubemedic-validate
// (run.Main, the program the validate-dcgm image runs) with the pod's own
// arguments, against a dcgmi that prints DCGM's real output of 8 passing
// GPUs (remediator/validation/dcgmdiag/testdata) and an nvidia-smi that
// lists the node's 8 GPUs. On a silent-gpu node the output is changed
// the way DCGM reports a GPU whose memory test failed (failDCGMMemory). The
// report is the pod's termination message and kubemedic-validate's exit
// status its phase, which is all the remediator reads.

// validateTemplate is the test template of the demo's policies
// (policies/examples/operation-templates.yaml).
const validateTemplate = "validate-dcgm"

// dcgmFixture is DCGM 3.1.0's dcgmi diag -j of 8 passing GPUs, kept byte
// for byte from NVIDIA's repository (its SOURCES.md says where).
const dcgmFixture = "remediator/validation/dcgmdiag/testdata/dcgm-3.1.0-8gpu-pass.txt"

// dcgmFailExit is dcgmi's exit status when a test fails (the same the
// remediator's tests give their fake).
const dcgmFailExit = 226

// backgroundTestDuration is how long a background test runs before the
// simulator passes it, divided by the demo's speed: 25 s at the default.
// DCGM's level 2 takes a few minutes on 8 GPUs, as the gate's tests take
// here (opDuration); a background test is held longer so that a person
// watching, and the background story, can see a real pod preempt one. It
// must stay below the timeout of the demo's ValidationPolicy (40m), or
// every background test that no pod preempts would be no answer.
const backgroundTestDuration = 25 * time.Minute

// isBackgroundTest reports whether p is a ValidationPolicy's background
// test pod: it went through the scheduler at a priority class, where a join
// test is bound to its node and a step's test belongs to a NodeOperation.
func isBackgroundTest(p *corev1.Pod) bool {
	return p.Labels[v1alpha1.LabelValidationPolicy] != "" && p.Spec.PriorityClassName != ""
}

// validate plays a test pod of validateTemplate on its node.
func (w *World) validate(ctx context.Context, p *corev1.Pod) (bool, string) {
	node := p.Spec.NodeName
	w.mu.Lock()
	bad, silent := w.silent[node]
	w.mu.Unlock()
	out, err := os.ReadFile(filepath.Join(w.opts.RepoRoot, dcgmFixture))
	if err != nil {
		return false, "validate: " + err.Error()
	}
	exit := 0
	if silent {
		out, exit = []byte(failDCGMMemory(string(out), bad)), dcgmFailExit
	}
	dir := filepath.Join(w.opts.Dir, "validate", p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, "validate: " + err.Error()
	}
	var smi strings.Builder
	for i := range simGPUsPerNode {
		fmt.Fprintf(&smi, "%d, %s, NVIDIA H100 80GB HBM3, %s, %s\n", i, gpuUUID(node, i), strings.ToUpper(kernelBus(i)), gpuSerial(i))
	}
	files := map[string]string{
		"dcgmi.out": string(out), "nvidia-smi.out": smi.String(),
		"dcgmi":      fmt.Sprintf("#!/bin/sh\ncat '%s'\nexit %d\n", filepath.Join(dir, "dcgmi.out"), exit),
		"nvidia-smi": fmt.Sprintf("#!/bin/sh\ncat '%s'\n", filepath.Join(dir, "nvidia-smi.out")),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			return false, "validate: " + err.Error()
		}
	}
	term := filepath.Join(dir, "termination-log")
	var args []string
	if len(p.Spec.Containers) > 0 {
		args = append(args, p.Spec.Containers[0].Args...)
	}
	args = append(args, "--tool-path", filepath.Join(dir, "dcgmi"), "--nvidia-smi", filepath.Join(dir, "nvidia-smi"), "--termination-log", term)
	var stdout, stderr bytes.Buffer
	code := run.Main(args, &stdout, &stderr, os.Getenv)
	report, err := os.ReadFile(term)
	if err != nil {
		return false, fmt.Sprintf("validate: kubemedic-validate (exit %d) wrote no report: %v: %s", code, err, strings.TrimSpace(stderr.String()))
	}
	return code == run.ExitPass, string(report)
}

// failDCGMMemory is DCGM 3.1.0's real output (dcgmFixture) as DCGM reports
// a GPU that fails its memory test: its one plugin test ("software", in
// category "Custom") becomes DCGM 3's memory test ("GPU Memory", category
// "Hardware", as dcgmdiag names it), whose result for GPU gpu is FAIL with
// DCGM's warning for a memory mismatch (DCGM_FR_MEMORY_MISMATCH), a string
// as DCGM 3 writes its warnings. The other GPUs and tests pass as in the
// sample. No real dcgmi output of a failing GPU is public
// (dcgmdiag/testdata/SOURCES.md); this is cut by hand the way the parser's
// tests cut theirs.
func failDCGMMemory(out string, gpu int) string {
	out = strings.Replace(out, `"category" : "Custom"`, `"category" : "Hardware"`, 1)
	out = strings.Replace(out, `"name" : "software"`, `"name" : "GPU Memory"`, 1)
	result := fmt.Sprintf("\"gpu_ids\" : %d,\n\t\t\t\t\t\t\t\t\"status\" : \"PASS\"", gpu)
	failed := fmt.Sprintf("\"gpu_ids\" : %d,\n\t\t\t\t\t\t\t\t\"status\" : \"FAIL\",\n\t\t\t\t\t\t\t\t\"warnings\" : [\"A memory mismatch was detected on GPU %d, but no error was reported by CUDA or NVML.\"]", gpu, gpu)
	return strings.Replace(out, result, failed, 1)
}
