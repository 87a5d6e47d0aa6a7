package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Bounds of a validation comment. The status is bounded by its CRD (64
// GPUs, 16 failed tests each, details of 256 characters), but a table of
// all of it, with its escapes, would come near GitHub's 65,536 characters:
// the comment lists at most maxValidationGPUs GPUs that did not pass and
// cuts each cell, and the NodeOperation keeps the whole report.
const (
	maxValidationGPUs   = 12
	maxValidationFailed = 128 // runes of one GPU's failed tests, joined
	maxValidationDetail = 256 // runes of one GPU's detail
	maxValidationText   = 1024
)

// The verdicts of v1alpha1.ValidationGPU, as kubemedic-validate writes
// them.
const (
	verdictPass = "Pass"
	verdictFail = "Fail"
)

// ValidationEnded reports whether an operation's active GPU test ended
// with a verdict (Passed or Failed, with its end time): what a validation
// comment needs. A test still running, or retrying after no answer, has
// none.
func ValidationEnded(op *v1alpha1.NodeOperation) bool {
	v := op.Status.Validation
	return v != nil && v.CompletionTime != nil &&
		(v.Result == v1alpha1.ValidationPassed || v.Result == v1alpha1.ValidationFailed)
}

// ValidationComment is the comment that tells the readers how the
// active GPU test after a repair went: what was tested, on which node and
// for which operation, the result, the GPUs that did not pass with their
// failed tests, the first attempt's no answer when it was retried, and
// what kubemedic does next. Every text from the node's tools is escaped.
func ValidationComment(op *v1alpha1.NodeOperation) string {
	v := op.Status.Validation
	failed := v.Result == v1alpha1.ValidationFailed
	var s strings.Builder
	title := "**GPU validation passed**"
	if failed {
		title = "**GPU validation failed**"
	}
	policy, step := op.Spec.Policy, op.Spec.Step
	if policy == "" {
		policy = "manual"
	}
	where := fmt.Sprintf("NodeOperation `%s`, policy `%s`", codeSpan(op.Name), codeSpan(policy))
	if step != "" {
		where += fmt.Sprintf(", step `%s`", codeSpan(step))
	}
	fmt.Fprintf(&s, "%s on node `%s` after kubemedic's `%s` (%s), ended %s.\n\n",
		title, codeSpan(op.Spec.NodeName), codeSpan(op.Spec.Operation), where, historyTimestamp(v.CompletionTime.Time))

	tested := fmt.Sprintf("- Tested with: template `%s`", codeSpan(orDash(truncateRunes(253, v.Template))))
	if v.Test != "" {
		tested += fmt.Sprintf(", test `%s`", codeSpan(truncateRunes(64, v.Test)))
	}
	if v.Model != "" {
		tested += fmt.Sprintf(", GPU model `%s`", codeSpan(truncateRunes(128, v.Model)))
	}
	s.WriteString(tested + "\n")
	if v.Attempt > 0 {
		run := fmt.Sprintf("- Attempt %d of 2", v.Attempt)
		if v.PodName != "" {
			run += fmt.Sprintf(", pod `%s` in kubemedic's namespace", codeSpan(truncateRunes(253, v.PodName)))
		}
		if v.StartTime != nil {
			run += fmt.Sprintf(", from %s (%s)", historyTimestamp(v.StartTime.Time), v.CompletionTime.Sub(v.StartTime.Time).Round(time.Second))
		}
		s.WriteString(run + "\n")
	}
	if v.NoAnswer != "" {
		fmt.Fprintf(&s, "- The first attempt gave no answer, which is no pass, and was retried: %s\n", mdCellText(truncateRunes(maxValidationText, v.NoAnswer)))
	}
	result := "**Passed**"
	if failed {
		result = "**Failed**"
	}
	if msg := mdCellText(truncateRunes(maxValidationText, v.Message)); msg != "" {
		result += ": " + msg
	}
	fmt.Fprintf(&s, "- Result: %s\n", result)
	writeValidationGPUs(&s, v)

	s.WriteString("\n**What happens next.** ")
	node := codeSpan(op.Spec.NodeName)
	if !failed {
		fmt.Fprintf(&s, "The node passed the test after its repair: kubemedic lifted its own cordon (never a person's), and the node serves again. Its condition `%s`, if it has one, is now False.",
			v1alpha1.ConditionGPUValidationFailed)
		return s.String()
	}
	fmt.Fprintf(&s, "The node stays cordoned. The step failed with reason `%s`, and the node's condition `%s` is True, with the failed test (or the missing answer) as its reason. A policy that acts on `%s` takes its next step, or quarantines the node (taint `%s`) when its ladder has no step left.",
		v1alpha1.ReasonValidationFailed, v1alpha1.ConditionGPUValidationFailed, v1alpha1.ConditionGPUValidationFailed, v1alpha1.TaintQuarantined)
	if countVerdict(v.GPUs, verdictFail) > 0 {
		s.WriteString(" Each failing GPU is a fault in the node's GPU history and counts toward the policy's `attemptCap.maxFailuresPerGPU`.")
	}
	fmt.Fprintf(&s, "\n\nTo stop kubemedic acting on this node: `kubectl label node %s %s=%s` (the node keeps its cordon until a person lifts it).",
		node, v1alpha1.LabelRemediation, v1alpha1.RemediationDisabled)
	return s.String()
}

// writeValidationGPUs writes how many GPUs the report judged, and a table
// of those that did not pass: the failing first, in the report's order.
func writeValidationGPUs(s *strings.Builder, v *v1alpha1.ValidationStatus) {
	if len(v.GPUs) == 0 {
		if v.Result == v1alpha1.ValidationFailed {
			s.WriteString("- GPUs: no verdict per GPU, so no GPU counts toward the per-GPU cap.\n")
		}
		return
	}
	pass, fail := countVerdict(v.GPUs, verdictPass), countVerdict(v.GPUs, verdictFail)
	other := len(v.GPUs) - pass - fail
	line := fmt.Sprintf("- GPUs: %d tested, %d passed", len(v.GPUs), pass)
	if fail > 0 {
		line += fmt.Sprintf(", **%d failed**", fail)
	}
	if other > 0 {
		line += fmt.Sprintf(", %d without a verdict", other)
	}
	s.WriteString(line + "\n")
	var rows []v1alpha1.ValidationGPU
	for _, g := range v.GPUs {
		if g.Verdict == verdictFail {
			rows = append(rows, g)
		}
	}
	for _, g := range v.GPUs {
		if g.Verdict != verdictFail && g.Verdict != verdictPass {
			rows = append(rows, g)
		}
	}
	if len(rows) == 0 {
		return
	}
	more := 0
	if len(rows) > maxValidationGPUs {
		rows, more = rows[:maxValidationGPUs], len(rows)-maxValidationGPUs
	}
	s.WriteString("\n| GPU (UUID) | Verdict | Failed tests | Detail |\n|---|---|---|---|\n")
	for _, g := range rows {
		fmt.Fprintf(s, "| `%s` | %s | %s | %s |\n", codeSpan(truncateRunes(128, g.UUID)), orDash(mdCellText(truncateRunes(16, g.Verdict))),
			orDash(mdCellText(truncateRunes(maxValidationFailed, strings.Join(g.Failed, ", ")))),
			orDash(mdCellText(truncateRunes(maxValidationDetail, g.Detail))))
	}
	if more > 0 {
		fmt.Fprintf(s, "\nAnd %d more GPUs that did not pass; the NodeOperation's `status.validation.gpus` lists them all.\n", more)
	}
}

func countVerdict(gpus []v1alpha1.ValidationGPU, verdict string) int {
	n := 0
	for _, g := range gpus {
		if g.Verdict == verdict {
			n++
		}
	}
	return n
}
