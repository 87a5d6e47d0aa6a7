package plan

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// The validation gate (Validating): after the node passed verification,
// an active GPU test (kubemedic-validate: DCGM diagnostics, NCCL, nvbandwidth)
// runs in a pod bound to the still-cordoned node that asks for every GPU it
// has. Only a report that passes every GPU uncordons the node. A report
// that fails a GPU fails the step with reason ValidationFailed, so the
// ladder moves on. No answer (the pod could not start or run, timed out,
// or left no usable report) is never a pass: it is tried once more, then
// counts as a failure, its reason said.

// ValidationRetryPoll is how often a retry looks again for the first
// attempt's pod to be gone before it starts the second: that pod may still
// hold the GPUs the second asks for.
const ValidationRetryPoll = 2 * time.Second

// validationAttempts is how many attempts a test gets: a first, and one
// retry after no answer.
const validationAttempts = 2

// ValidationPodName is the test pod of an operation's attempt: deterministic,
// so a retried create meets AlreadyExists, and a DNS label.
func ValidationPodName(op *v1alpha1.NodeOperation, attempt int32) string {
	return PodName(op.Name, fmt.Sprintf("-validate-%d", attempt))
}

// validateNow moves a verified operation to Validating when its step asks
// for a test that has not passed yet; it reports whether it did.
func (t *transition) validateNow() bool {
	v := t.in.Op.Spec.Validate
	if v == nil || (t.Status.Validation != nil && t.Status.Validation.Result == v1alpha1.ValidationPassed) {
		return false
	}
	t.cond(v1alpha1.OperationValidated, metav1.ConditionFalse, v1alpha1.ReasonValidating, "testing the GPUs with "+v.Operation+" before the uncordon")
	t.setPhase(v1alpha1.PhaseValidating, "testing the GPUs before the uncordon; the node stays cordoned")
	return true
}

// validating runs the step's test (Validating): it creates the pod, reads
// its report, retries once after no answer, and passes, fails or waits.
func (t *transition) validating() {
	op, v := t.in.Op, t.in.Op.Spec.Validate
	if v == nil {
		t.passed("")
		return
	}
	if t.in.Node == nil {
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonNodeNotFound, "node "+op.Spec.NodeName+" does not exist")
		return
	}
	st := t.Status.Validation
	if st == nil {
		st = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: v.Operation}
		t.Status.Validation = st
		if t.in.ValidateTemplate == nil {
			// The policy was checked when it was loaded; the template was
			// deleted since. Nothing can be tested, and an untested node
			// does not serve.
			t.validationFailed(v1alpha1.ReasonNoValidationAnswer, fmt.Sprintf("NodeOperationTemplate %s does not exist, so the GPUs cannot be tested", v.Operation), time.Time{})
			return
		}
		t.startAttempt(1)
		return
	}
	if st.Result != v1alpha1.ValidationValidating {
		// Recorded by a pass whose phase change was not written.
		if st.Result == v1alpha1.ValidationPassed {
			t.passed("")
		} else {
			t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonValidationFailed, st.Message)
		}
		return
	}
	if st.PodName == "" {
		// A retry waits for the first attempt's pod to be gone.
		if old := t.validatePod(ValidationPodName(op, st.Attempt-1)); old != nil {
			t.Effect = EffectDeleteValidationPod
			t.Status.Message = fmt.Sprintf("retrying the GPU test: waiting for pod %s/%s to go first", t.in.Namespace, old.Name)
			t.requeue(ValidationRetryPoll)
			return
		}
		t.startAttempt(st.Attempt)
		return
	}
	timeout := policies.ValidateTimeout(v, t.in.ValidateTemplate)
	start := t.in.Now
	if st.StartTime != nil {
		start = st.StartTime.Time
	}
	deadline := start.Add(timeout)
	pod := t.validatePod(st.PodName)
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			t.judge(pod)
			return
		}
	}
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("no report after %s", timeout)
		if pod != nil {
			msg += fmt.Sprintf("; pod %s/%s was %s%s", pod.Namespace, pod.Name, pod.Status.Phase, podWaiting(pod))
		} else {
			msg += fmt.Sprintf("; pod %s/%s does not exist", t.in.Namespace, st.PodName)
		}
		t.noAnswer(msg)
		return
	}
	t.requeueAt(deadline)
	t.Status.Message = fmt.Sprintf("testing the GPUs with pod %s/%s (%s, attempt %d of %d), until %s; the node stays cordoned",
		t.in.Namespace, st.PodName, st.Template, st.Attempt, validationAttempts, deadline.UTC().Format(time.RFC3339))
}

// ValidationResources are what a test pod asks for: every GPU resource
// the node has allocatable (nvidia.com/gpu, or each MIG profile's
// instances), so that the test gets all of the node's GPUs or does not
// start.
func ValidationResources(n *corev1.Node) corev1.ResourceList {
	out := corev1.ResourceList{}
	if n == nil {
		return out
	}
	for name, q := range n.Status.Allocatable {
		if strings.HasPrefix(string(name), ResourceNVIDIAPrefix) && !q.IsZero() {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// startAttempt creates the test pod of attempt n, unless the node has no
// GPU to give it: no answer.
func (t *transition) startAttempt(n int32) {
	op, st := t.in.Op, t.Status.Validation
	st.Attempt = n
	if len(ValidationResources(t.in.Node)) == 0 {
		t.noAnswer(fmt.Sprintf("node %s has no %s* resource allocatable, so no test pod can get its GPUs", op.Spec.NodeName, ResourceNVIDIAPrefix))
		return
	}
	now := metav1.NewTime(t.in.Now)
	st.PodName, st.StartTime = ValidationPodName(op, n), &now
	t.Effect = EffectCreateValidationPod
	what := "testing"
	if n > 1 {
		what = "testing again, after no answer,"
	}
	t.emit(corev1.EventTypeNormal, v1alpha1.EventValidationStarted, "Validate",
		fmt.Sprintf("%s node %s's GPUs with pod %s/%s (%s) before the uncordon; the node stays cordoned", what, op.Spec.NodeName, t.in.Namespace, st.PodName, st.Template))
	t.requeueAt(t.in.Now.Add(policies.ValidateTimeout(op.Spec.Validate, t.in.ValidateTemplate)))
}

// validatePod is the test pod of that name among AdvanceInput.ValidatePods.
func (t *transition) validatePod(name string) *corev1.Pod {
	for _, p := range t.in.ValidatePods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// judge reads the report of an ended test pod.
func (t *transition) judge(pod *corev1.Pod) {
	j := JudgeTestPod(pod)
	if j.Report != nil {
		RecordReport(t.Status.Validation, *j.Report)
	}
	switch j.Outcome {
	case TestFailed:
		// Timed by the kubelet's end of the container, the same in a pass
		// retried after a failed status write: the GPU history's faults
		// are written again unchanged, not added twice.
		t.validationFailed(j.Reason, j.Message, j.At)
	case TestPassed:
		t.passed(j.Message)
	default:
		t.noAnswer(j.Message)
	}
}

// TestOutcome is what an ended test pod says.
type TestOutcome int

const (
	// TestNoAnswer: the pod left no usable report, or one that cannot be
	// trusted; never a pass.
	TestNoAnswer TestOutcome = iota
	// TestPassed: the report passes every GPU, from a pod that succeeded.
	TestPassed
	// TestFailed: the report fails a GPU.
	TestFailed
)

// TestJudgement is the verdict on an ended test pod.
type TestJudgement struct {
	Outcome TestOutcome
	// Report is the pod's report, when it left a usable one.
	Report *validation.Report
	// Reason is GPUValidationFailed's reason for a failure.
	Reason string
	// Message says what passed or failed, or why there was no answer.
	Message string
	// At is when the test ended: the container's finishedAt.
	At time.Time
}

// JudgeTestPod reads the report of an ended test pod (Succeeded or
// Failed): the one rule of the gate, of the join gate and of the
// background tests.
func JudgeTestPod(pod *corev1.Pod) TestJudgement {
	ended := fmt.Sprintf("pod %s/%s %s", pod.Namespace, pod.Name, strings.ToLower(string(pod.Status.Phase)))
	r, err := ValidationReport(pod)
	if err != nil {
		if pod.Status.Phase == corev1.PodFailed {
			ended += " (" + PodFailure(pod) + ")"
		}
		return TestJudgement{Outcome: TestNoAnswer, Message: ended + "; its report is unusable: " + err.Error(), At: PodFinishedAt(pod)}
	}
	j := TestJudgement{Report: &r, At: PodFinishedAt(pod)}
	switch {
	case r.Verdict == validation.VerdictFail:
		j.Outcome, j.Reason = TestFailed, v1alpha1.ValidationFailedReason(r.Test)
		j.Message = fmt.Sprintf("%s failed on %s: %s", r.Test, failingGPUs(r), r.Reason)
	case r.Verdict == validation.VerdictPass && pod.Status.Phase == corev1.PodSucceeded:
		j.Outcome = TestPassed
		j.Message = fmt.Sprintf("%s passed on %d GPU(s)%s", r.Test, len(r.GPUs), modelOf(&r))
	case r.Verdict == validation.VerdictPass:
		// A pass from a pod that failed is no pass.
		j.Message = ended + "; its report says Pass, which a failed pod cannot vouch for"
	default:
		j.Message = fmt.Sprintf("%s; %s gave no answer: %s", ended, r.Test, r.Reason)
	}
	return j
}

// ValidationReport is the kubemedic-validate report a test pod left as its
// termination message.
func ValidationReport(pod *corev1.Pod) (validation.Report, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if strings.TrimSpace(t.Message) == "" {
				return validation.Report{}, fmt.Errorf("container %s (exit code %d) left no report: the termination message is empty", cs.Name, t.ExitCode)
			}
			r, err := validation.Decode(t.Message)
			if err != nil {
				return validation.Report{}, fmt.Errorf("container %s (exit code %d): %w", cs.Name, t.ExitCode, err)
			}
			return r, nil
		}
	}
	return validation.Report{}, fmt.Errorf("no container terminated (%s)", pod.Status.Phase)
}

// RecordReport keeps a report's verdicts in a test's status.
func RecordReport(st *v1alpha1.ValidationStatus, r validation.Report) {
	st.Test, st.Model = Truncate(r.Test, 64), Truncate(r.Model, 128)
	st.GPUs = nil
	for _, g := range r.GPUs {
		if len(st.GPUs) == 64 {
			break
		}
		failed := g.Failed
		if len(failed) > 16 {
			failed = failed[:16]
		}
		st.GPUs = append(st.GPUs, v1alpha1.ValidationGPU{UUID: g.UUID, Verdict: string(g.Verdict), Failed: failed, Detail: Truncate(g.Detail, 256)})
	}
}

// noAnswer retries once, then fails the step.
func (t *transition) noAnswer(msg string) {
	st := t.Status.Validation
	if st.Attempt < validationAttempts {
		st.NoAnswer = Truncate(msg, 512)
		st.Attempt++
		st.PodName, st.StartTime = "", nil
		t.Effect = EffectNone
		t.emit(corev1.EventTypeWarning, v1alpha1.ReasonValidationNoAnswer, "Validate", Truncate("no answer from the GPU test, which is no pass; trying once more: "+msg, maxMessage))
		t.Status.Message = Truncate("retrying the GPU test after no answer: "+msg, maxMessage)
		if t.validatePod(ValidationPodName(t.in.Op, st.Attempt-1)) != nil {
			t.Effect = EffectDeleteValidationPod
			t.requeue(ValidationRetryPoll)
			return
		}
		t.startAttempt(st.Attempt)
		return
	}
	first := ""
	if st.NoAnswer != "" {
		first = "; the first attempt: " + st.NoAnswer
	}
	t.validationFailed(v1alpha1.ReasonNoValidationAnswer, fmt.Sprintf("no answer from the GPU test twice, which counts as a failure: %s%s", msg, first), time.Time{})
}

// validationFailed fails the step: the node stays cordoned, and its
// GPUValidationFailed condition says why, for the ladder's next step. at
// is when the test ended (zero: now).
func (t *transition) validationFailed(reason, msg string, at time.Time) {
	st := t.Status.Validation
	if at.IsZero() {
		at = t.in.Now
	}
	now := metav1.NewTime(at)
	st.Result, st.CompletionTime, st.Message = v1alpha1.ValidationFailed, &now, Truncate(msg, maxMessage)
	msg = Truncate(msg, maxMessage)
	t.Validation = &NodeValidation{Failed: true, Reason: reason, Message: msg, At: t.in.Now}
	t.cond(v1alpha1.OperationValidated, metav1.ConditionFalse, v1alpha1.ReasonValidationFailed, msg)
	t.emit(corev1.EventTypeWarning, v1alpha1.ReasonValidationFailed, "Validate", Truncate("the GPU test failed, the node stays cordoned: "+msg, maxMessage))
	t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonValidationFailed, Truncate(fmt.Sprintf("verified, but %s (%s); the node stays cordoned", msg, t.Status.Validation.Template), maxMessage))
}

// passed uncordons the node after a test that passed every GPU (msg is
// the pass's; empty when the pass was recorded before).
func (t *transition) passed(msg string) {
	op := t.in.Op
	done := "verified"
	if st := t.Status.Validation; st != nil {
		if msg != "" {
			now := metav1.NewTime(t.in.Now)
			st.Result, st.CompletionTime = v1alpha1.ValidationPassed, &now
			st.Message = Truncate(msg, maxMessage)
			t.cond(v1alpha1.OperationValidated, metav1.ConditionTrue, v1alpha1.ReasonValidationPassed, st.Message)
			t.emit(corev1.EventTypeNormal, v1alpha1.ReasonValidationPassed, "Validate", st.Message+"; uncordoning")
			t.Validation = &NodeValidation{Reason: v1alpha1.ReasonValidated, Message: st.Message, At: t.in.Now}
		}
		done = "verified and validated: " + st.Message
	}
	t.Effect = EffectUncordon
	if op.Spec.Trigger != nil {
		t.Remediated = t.in.Now.Sub(op.Spec.Trigger.LastTransitionTime.Time)
	}
	t.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonVerified, done)
}

// NodeValidation is the node condition GPUValidationFailed that a test's
// end sets: True with the failing test's reason, False after a pass. The
// controller writes it before the status.
type NodeValidation struct {
	Failed          bool
	Reason, Message string
	// At is the pass's time, which also ends the operation: the condition
	// must not be newer than the failed operation, or the policy takes it
	// for a new incident and starts its ladder over (nextStep).
	At time.Time
}

// Condition is the node condition to write, changed at At.
func (v *NodeValidation) Condition() corev1.NodeCondition {
	now := v.At
	status := corev1.ConditionFalse
	if v.Failed {
		status = corev1.ConditionTrue
	}
	return corev1.NodeCondition{Type: v1alpha1.ConditionGPUValidationFailed, Status: status, Reason: v.Reason,
		Message: v.Message, LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
}

// FailingGPUs are the UUIDs of the GPUs a failed test named.
func FailingGPUs(st *v1alpha1.ValidationStatus) []string {
	if st == nil || st.Result != v1alpha1.ValidationFailed {
		return nil
	}
	var out []string
	for _, g := range st.GPUs {
		if g.Verdict == string(validation.VerdictFail) {
			out = append(out, g.UUID)
		}
	}
	return out
}

// failingGPUs names the failing GPUs of a report and what failed on each.
func failingGPUs(r validation.Report) string {
	var parts []string
	for _, g := range r.GPUs {
		if g.Verdict != validation.VerdictFail {
			continue
		}
		p := "GPU " + g.UUID
		if len(g.Failed) > 0 {
			p += " (" + strings.Join(g.Failed, ", ") + ")"
		}
		parts = append(parts, p)
	}
	switch {
	case len(parts) == 0:
		return "the node"
	case len(parts) > 4:
		return fmt.Sprintf("%s and %d more GPUs", strings.Join(parts[:4], ", "), len(parts)-4)
	}
	return strings.Join(parts, ", ")
}

func modelOf(r *validation.Report) string {
	if r.Model == "" {
		return ""
	}
	return " (" + r.Model + ")"
}

// podWaiting says why a pod's container has not run, when it says: an
// image that cannot be pulled, a kubelet that refused it.
func podWaiting(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf(", container %s waiting: %s %s", s.Name, w.Reason, w.Message)
		}
	}
	if p.Status.Reason != "" {
		return fmt.Sprintf(" (%s: %s)", p.Status.Reason, p.Status.Message)
	}
	return ""
}
