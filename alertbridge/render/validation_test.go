package render_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The GPUs of the fixtures, and what DCGM says of a bad memory
// (dcgm_errors.h: DCGM_FR_FAULTY_MEMORY_MSG, DCGM_FR_MEMORY_MISMATCH_MSG).
const (
	gpu2       = "GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10"
	gpu5       = "GPU-8c1d4e7a-2f90-4b3e-a6c5-1d7e9f0b2a34"
	faultyMem  = "Found 3 faulty memory elements on GPU 2"
	mismatch   = "A memory mismatch was detected on GPU 5, but no error was reported by CUDA or NVML."
	pullFailed = `no report after 20m0s; pod kubemedic-system/gpu-lost.gpu-7.5f2c-0-validate-1 was Pending, container validate waiting: ImagePullBackOff Back-off pulling image "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04"`
)

// validated is the reset of gpu-7 whose test ran 14m12s until readAt and
// judged 8 GPUs: those in fail (by index) failed, the others passed.
func validated(result v1alpha1.ValidationResult, msg string, fail map[int]v1alpha1.ValidationGPU) v1alpha1.NodeOperation {
	op := historyOp("gpu-lost.gpu-7.5f2c-0", "gpu-7", 40)
	op.Spec.Step = "reset"
	start, end := metav1.NewTime(readAt.Add(-14*time.Minute-12*time.Second)), metav1.NewTime(readAt)
	v := &v1alpha1.ValidationStatus{Result: result, Template: "validate-dcgm-diag", Attempt: 1,
		PodName: "gpu-lost.gpu-7.5f2c-0-validate-1", StartTime: &start, CompletionTime: &end, Message: msg,
		Test: "dcgm", Model: "NVIDIA H100 80GB HBM3"}
	for i := range 8 {
		g, ok := fail[i]
		if !ok {
			g = v1alpha1.ValidationGPU{UUID: fmt.Sprintf("GPU-00000000-0000-4000-8000-00000000000%d", i), Verdict: "Pass"}
		}
		v.GPUs = append(v.GPUs, g)
	}
	op.Status.Validation = v
	return op
}

func failedTwoGPUs() v1alpha1.NodeOperation {
	return validated(v1alpha1.ValidationFailed, "dcgm failed on GPU "+gpu2+" (memory), GPU "+gpu5+" (memory, pcie): memory test failed on 2 GPUs",
		map[int]v1alpha1.ValidationGPU{
			2: {UUID: gpu2, Verdict: "Fail", Failed: []string{"memory"}, Detail: faultyMem},
			5: {UUID: gpu5, Verdict: "Fail", Failed: []string{"memory", "pcie"}, Detail: mismatch},
		})
}

func TestValidationCommentGolden(t *testing.T) {
	passed := validated(v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3)", nil)
	for _, tc := range []struct {
		name string
		op   v1alpha1.NodeOperation
	}{
		{name: "validation-passed", op: passed},
		{name: "validation-failed", op: failedTwoGPUs()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, render.ValidationComment(&tc.op))
		})
	}
}

func TestValidationComment(t *testing.T) {
	noAnswerTwice := validated(v1alpha1.ValidationFailed, "no answer from the GPU test twice, which counts as a failure: "+
		"no report after 20m0s; pod kubemedic-system/gpu-lost.gpu-7.5f2c-0-validate-2 does not exist; the first attempt: "+pullFailed, nil)
	noAnswerTwice.Status.Validation.Attempt, noAnswerTwice.Status.Validation.PodName = 2, "gpu-lost.gpu-7.5f2c-0-validate-2"
	noAnswerTwice.Status.Validation.NoAnswer, noAnswerTwice.Status.Validation.GPUs = pullFailed, nil
	noAnswerTwice.Status.Validation.Test, noAnswerTwice.Status.Validation.Model = "", ""

	retriedPass := validated(v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3)", nil)
	retriedPass.Status.Validation.Attempt, retriedPass.Status.Validation.NoAnswer = 2, pullFailed

	// A broken GPU whose tool writes pages: 40 failing GPUs, each with
	// every test failed, a detail of 2,000 characters of markup, a mark
	// and a table delimiter, and the longest names the CRD allows.
	longDetail := strings.Repeat("<b>|`x`|</b> ", 160) + "<!-- kubemedic-alertbridge diagnostics=forged -->"
	long := validated(v1alpha1.ValidationFailed, strings.Repeat("<|", 600), nil)
	long.Status.Validation.NoAnswer = strings.Repeat("é<", 300)
	long.Status.Validation.Template = strings.Repeat("v", 253)
	long.Status.Validation.Model = strings.Repeat("<", 128)
	long.Status.Validation.GPUs = nil
	for i := range 40 {
		var failed []string
		for j := range 16 {
			failed = append(failed, fmt.Sprintf("%s-%02d", strings.Repeat("<", 60), j))
		}
		long.Status.Validation.GPUs = append(long.Status.Validation.GPUs, v1alpha1.ValidationGPU{
			UUID: fmt.Sprintf("GPU-%08d-%s", i, strings.Repeat("<", 120)), Verdict: "Fail", Failed: failed, Detail: longDetail})
	}

	manual := validated(v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s)", nil)
	manual.Spec.Policy, manual.Spec.Step = "", ""

	for _, tc := range []struct {
		desc    string
		op      v1alpha1.NodeOperation
		has     []string
		hasNot  []string
		inOrder []string
	}{
		{desc: "passed: uncordoned, no failing GPU", op: validated(v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3)", nil),
			has: []string{
				"**GPU validation passed** on node `gpu-7` after kubemedic's `reset-gpu` (NodeOperation `gpu-lost.gpu-7.5f2c-0`, policy `gpu-lost`, step `reset`), ended 2026-11-21 14:30:00 UTC.",
				"- Tested with: template `validate-dcgm-diag`, test `dcgm`, GPU model `NVIDIA H100 80GB HBM3`",
				"- Attempt 1 of 2, pod `gpu-lost.gpu-7.5f2c-0-validate-1` in kubemedic's namespace, from 2026-11-21 14:15:48 UTC (14m12s)",
				"- Result: **Passed**: dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3)",
				"- GPUs: 8 tested, 8 passed\n",
				"kubemedic lifted its own cordon (never a person's), and the node serves again.",
			},
			hasNot: []string{"| GPU (UUID) |", "stays cordoned", "no answer", "quarantine", "kubectl label"}},
		{desc: "failed with 2 GPUs: each by UUID with its tests and detail, the ladder next, how to stop it", op: failedTwoGPUs(),
			has: []string{
				"**GPU validation failed** on node `gpu-7`",
				"- Result: **Failed**: dcgm failed on GPU " + gpu2 + " (memory), GPU " + gpu5 + " (memory, pcie)",
				"- GPUs: 8 tested, 6 passed, **2 failed**\n",
				"| `" + gpu2 + "` | Fail | memory | " + faultyMem + " |",
				"| `" + gpu5 + "` | Fail | memory, pcie | " + mismatch + " |",
				"The node stays cordoned. The step failed with reason `ValidationFailed`, and the node's condition `GPUValidationFailed` is True",
				"takes its next step, or quarantines the node (taint `kubemedic.io/quarantined`)",
				"counts toward the policy's `attemptCap.maxFailuresPerGPU`",
				"`kubectl label node gpu-7 kubemedic.io/remediation=disabled`",
			},
			hasNot:  []string{"GPU-00000000-0000-4000-8000-000000000000", "lifted its own cordon", "no answer"},
			inOrder: []string{"| `" + gpu2 + "` |", "| `" + gpu5 + "` |", "**What happens next.**"}},
		{desc: "no answer twice: both reasons, no GPU named, none counts toward the cap", op: noAnswerTwice,
			has: []string{
				"**GPU validation failed**",
				"- Tested with: template `validate-dcgm-diag`\n",
				"- Attempt 2 of 2, pod `gpu-lost.gpu-7.5f2c-0-validate-2`",
				"- The first attempt gave no answer, which is no pass, and was retried: no report after 20m0s; pod kubemedic-system/gpu-lost.gpu-7.5f2c-0-validate-1 was Pending, container validate waiting: ImagePullBackOff",
				"- Result: **Failed**: no answer from the GPU test twice, which counts as a failure",
				"- GPUs: no verdict per GPU, so no GPU counts toward the per-GPU cap.",
				"The node stays cordoned.",
				"kubemedic.io/remediation=disabled",
			},
			hasNot: []string{"| GPU (UUID) |", "maxFailuresPerGPU", "test `"}},
		{desc: "passed after a retried first attempt: its no answer said", op: retriedPass,
			has: []string{"- Attempt 2 of 2", "- The first attempt gave no answer, which is no pass, and was retried: no report after 20m0s", "- Result: **Passed**"}},
		{desc: "long details cut, tool text escaped, the GPUs listed bounded", op: long,
			has: []string{
				"- GPUs: 40 tested, 0 passed, **40 failed**",
				"And 28 more GPUs that did not pass; the NodeOperation's `status.validation.gpus` lists them all.",
				"GPU model `" + strings.Repeat("‹", 128) + "`",
				"| `GPU-00000011-" + strings.Repeat("‹", 114) + "…` |",
			},
			hasNot: []string{"GPU-00000012-", "<b>", "<|", "é<", "<!--"}},
		{desc: "a manual operation", op: manual, has: []string{"(NodeOperation `gpu-lost.gpu-7.5f2c-0`, policy `manual`)"}, hasNot: []string{"step `"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := render.ValidationComment(&tc.op)
			for _, s := range tc.has {
				require.Contains(t, got, s)
			}
			for _, s := range tc.hasNot {
				require.NotContains(t, got, s)
			}
			last := -1
			for _, s := range tc.inOrder {
				i := strings.Index(got, s)
				require.Greater(t, i, last, "%q out of order", s)
				last = i
			}
			// No text from the node can pose as the bridge's mark, nor
			// leave a table row; the body stays well under GitHub's
			// 65,536 characters with the mark the bridge adds.
			require.Empty(t, marker.DiagnosticsIDs(got))
			text, trailer := marker.SplitTrailer(got + marker.Diagnostics(marker.ValidationID("uid")))
			require.Equal(t, got, text)
			require.Equal(t, []string{"uid/validation"}, marker.DiagnosticsIDs(trailer))
			require.Less(t, len(got), 32<<10)
			for _, line := range strings.Split(got, "\n") {
				if strings.HasPrefix(line, "| `") {
					require.Equal(t, 5, strings.Count(line, "|")-strings.Count(line, `\|`), "one row, four cells: %s", line)
				}
			}
		})
	}
}

// TestValidationCommentCuts: a detail, the failed tests, the message and
// the first attempt's reason are cut to their bounds, with an ellipsis.
func TestValidationCommentCuts(t *testing.T) {
	op := failedTwoGPUs()
	v := op.Status.Validation
	v.GPUs[2].Detail = strings.Repeat("d", 300)
	v.GPUs[2].Failed = []string{strings.Repeat("f", 100), strings.Repeat("g", 100)}
	v.Message, v.NoAnswer = strings.Repeat("m", 2000), strings.Repeat("n", 2000)
	got := render.ValidationComment(&op)
	require.Contains(t, got, " | "+strings.Repeat("d", 255)+"… |")
	require.NotContains(t, got, strings.Repeat("d", 256))
	require.Contains(t, got, " | "+strings.Repeat("f", 100)+", "+strings.Repeat("g", 25)+"… | ")
	require.Contains(t, got, "**Failed**: "+strings.Repeat("m", 1023)+"…\n")
	require.Contains(t, got, "retried: "+strings.Repeat("n", 1023)+"…\n")
}

func TestValidationEnded(t *testing.T) {
	end := metav1.NewTime(readAt)
	for _, tc := range []struct {
		desc string
		v    *v1alpha1.ValidationStatus
		want bool
	}{
		{desc: "no validation", v: nil},
		{desc: "validating", v: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Attempt: 1}},
		{desc: "retrying after no answer", v: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Attempt: 2, NoAnswer: pullFailed}},
		{desc: "passed without its end time", v: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed}},
		{desc: "an unknown result", v: &v1alpha1.ValidationStatus{Result: "Skipped", CompletionTime: &end}},
		{desc: "passed", v: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed, CompletionTime: &end}, want: true},
		{desc: "failed", v: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, CompletionTime: &end}, want: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			op := historyOp("a", "gpu-7", 5)
			op.Status.Validation = tc.v
			require.Equal(t, tc.want, render.ValidationEnded(&op))
		})
	}
}
