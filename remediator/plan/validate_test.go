package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

const (
	gpuA = "GPU-11111111-2222-3333-4444-555555555555"
	gpuB = "GPU-66666666-7777-8888-9999-000000000000"
)

// validated asks for validate-dcgm with timeout (0: the template's).
func validated(timeout time.Duration) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Spec.Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm"}
		if timeout > 0 {
			o.Spec.Validate.Timeout = dur(timeout)
		}
	}
}

// validatingAttempt is an operation in Validating whose attempt n's pod
// was created at start.
func validatingAttempt(n int32, start time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		s := metav1.NewTime(start)
		o.Status.Phase = v1alpha1.PhaseValidating
		o.Status.Validation = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: "validate-dcgm", Attempt: n, PodName: ValidationPodName(o, n), StartTime: &s}
		if n > 1 {
			o.Status.Validation.NoAnswer = "no report after 20m0s"
		}
	}
}

// testEnded is when the test pods' containers ended.
var testEnded = ago(10 * time.Second)

// testPod is attempt n's test pod of operation "op" in phase, with msg as
// its termination message.
func testPod(n int32, phase corev1.PodPhase, msg string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: ValidationPodName(op("op", "n1"), n)}, Status: corev1.PodStatus{Phase: phase}}
	endTestPod(p, msg)
	return p
}

// endTestPod gives a pod that Succeeded or Failed its ended container,
// with msg as its termination message, ended at testEnded.
func endTestPod(p *corev1.Pod, msg string) {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return
	}
	code := int32(0)
	if p.Status.Phase == corev1.PodFailed {
		code = 1
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "validate", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, FinishedAt: metav1.NewTime(testEnded)}}}}
}

func pods(ps ...*corev1.Pod) []*corev1.Pod { return ps }

// encoded is a kubemedic-validate report as the pod writes it.
func encoded(t *testing.T, verdict validation.Verdict, gpus ...validation.GPUResult) string {
	t.Helper()
	r := validation.Report{Schema: validation.Schema, Test: "dcgm", Model: "NVIDIA H100 80GB HBM3", Verdict: verdict, GPUs: gpus}
	if verdict == validation.VerdictNoAnswer {
		r.Reason = "dcgmi diag: timed out after 15m0s"
	}
	s, err := validation.Encode(r)
	require.NoError(t, err)
	return s
}

func pass(uuid string) validation.GPUResult {
	return validation.GPUResult{UUID: uuid, Verdict: validation.VerdictPass}
}

func fail(uuid string, tests ...string) validation.GPUResult {
	return validation.GPUResult{UUID: uuid, Verdict: validation.VerdictFail, Failed: tests, Detail: "Memory test failed: 12 errors"}
}

func TestAdvanceValidating(t *testing.T) {
	dcgm := tpl(v1alpha1.SuccessPodSucceeded, func(t *v1alpha1.NodeOperationTemplate) { t.Spec.Timeout = dur(20 * time.Minute) })
	healthy := node("n1", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(3*time.Minute)))
	passed := encoded(t, validation.VerdictPass, pass(gpuA), pass(gpuB))
	failed := encoded(t, validation.VerdictFail, pass(gpuA), fail(gpuB, "memory"))
	noAnswer := encoded(t, validation.VerdictNoAnswer)
	cases := []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		{desc: "verifying: a verified node with a validate step is tested, not uncordoned",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), withDrain, validated(0), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute)), Node: healthy},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectNone, conditions: []string{"Verified=True/Verified", "Validated=False/Validating"}, message: "the node stays cordoned"}},
		{desc: "verifying: without validate the node is uncordoned as before",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), withDrain, trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute)), Node: healthy},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectUncordon, conditions: []string{"Verified=True/Verified"}, events: []string{v1alpha1.ReasonVerified}, remediated: time.Hour}},
		{desc: "verifying: a node that is not verified is never tested",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), withDrain, validated(0), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute)),
				Node: node("n1", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, "XidRebootRequired", "", ago(time.Hour)))},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"Verified=False/Waiting"}}},
		{desc: "verifying: GPUValidationFailed as the trigger is left to the test, which alone clears it",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), withDrain, validated(0), healthyFor(2*time.Minute), func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonDCGMDiagFailed, LastTransitionTime: metav1.NewTime(ago(time.Hour))}
			}), Node: node("n1", cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionTrue, v1alpha1.ReasonDCGMDiagFailed, "dcgm failed", ago(time.Hour)))},
			want: want{phase: v1alpha1.PhaseValidating, conditions: []string{"Verified=True/Verified"}}},

		{desc: "pending: the next step after a failed test targets the GPU it names, for the per-GPU cap and DRA exclusion",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonDCGMDiagFailed,
					Message: "dcgm failed on GPU " + gpuB + " (memory): Memory test failed", LastTransitionTime: metav1.NewTime(ago(time.Minute))}
			}), Template: tpl(v1alpha1.SuccessPodSucceeded)},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, check: func(t *testing.T, tr Transition) {
				require.Equal(t, &v1alpha1.GPUTarget{UUID: gpuB}, tr.Status.GPU)
			}}},
		{desc: "admit: a NodeOperation made by hand with a GPU test but no cordon is cordoned all the same",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), validated(0)), Node: node("n1"), Admission: Admission{Verdict: Start}},
			want: want{phase: v1alpha1.PhaseCordoning, effect: EffectReserve}},
		{desc: "validating: the first pass creates attempt 1's pod, named after the operation",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseValidating), withDrain, validated(0)), Node: healthy, ValidateTemplate: dcgm, Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectCreateValidationPod, events: []string{v1alpha1.EventValidationStarted}, requeue: 20 * time.Minute,
				check: func(t *testing.T, tr Transition) {
					v := tr.Status.Validation
					require.Equal(t, v1alpha1.ValidationValidating, v.Result)
					require.Equal(t, int32(1), v.Attempt)
					require.Equal(t, "op-validate-1", v.PodName)
					require.Equal(t, now, v.StartTime.Time)
					require.Contains(t, tr.Events[0].Note, "testing node n1's GPUs with pod kubemedic/op-validate-1 (validate-dcgm) before the uncordon; the node stays cordoned")
				}}},
		{desc: "validating: the pod runs: wait until the deadline, the node cordoned",
			in:   AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm, ValidatePods: pods(testPod(1, corev1.PodRunning, "")), Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseValidating, requeue: 15 * time.Minute, message: "testing the GPUs with pod kubemedic/op-validate-1 (validate-dcgm, attempt 1 of 2)"}},
		{desc: "validating: the step's timeout wins over the template's",
			in:   AdvanceInput{Op: op("op", "n1", withDrain, validated(10*time.Minute), validatingAttempt(1, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm, ValidatePods: pods(testPod(1, corev1.PodPending, ""))},
			want: want{phase: v1alpha1.PhaseValidating, requeue: 5 * time.Minute}},
		{desc: "validating: pass: uncordon, Validated True, the node's GPUValidationFailed cleared",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), trigger(xidMessage, ago(time.Hour)), validatingAttempt(1, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodSucceeded, passed))},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectUncordon, conditions: []string{"Validated=True/ValidationPassed"}, events: []string{v1alpha1.ReasonValidationPassed, v1alpha1.ReasonVerified},
				remediated: time.Hour, message: "verified and validated: dcgm passed on 2 GPU(s) (NVIDIA H100 80GB HBM3)", check: func(t *testing.T, tr Transition) {
					v := tr.Status.Validation
					require.Equal(t, v1alpha1.ValidationPassed, v.Result)
					require.Equal(t, "dcgm", v.Test)
					require.Len(t, v.GPUs, 2)
					require.Equal(t, &NodeValidation{Reason: v1alpha1.ReasonValidated, Message: v.Message, At: now}, tr.Validation)
					require.Empty(t, FailingGPUs(v))
				}}},
		{desc: "validating: fail: the step fails ValidationFailed with the GPU and test, cordoned, GPUValidationFailed set",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodFailed, failed))},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, conditions: []string{"Validated=False/ValidationFailed"}, events: []string{v1alpha1.ReasonValidationFailed, v1alpha1.ReasonValidationFailed},
				message: "ValidationFailed: verified, but dcgm failed on GPU " + gpuB + " (memory)", check: func(t *testing.T, tr Transition) {
					v := tr.Status.Validation
					require.Equal(t, v1alpha1.ValidationFailed, v.Result)
					require.Equal(t, []string{gpuB}, FailingGPUs(v))
					require.Equal(t, testEnded, v.CompletionTime.Time, "timed by the container's end, the same in a retried pass")
					require.True(t, tr.Validation.Failed)
					require.Equal(t, v1alpha1.ReasonDCGMDiagFailed, tr.Validation.Reason)
					require.Equal(t, corev1.EventTypeWarning, tr.Events[0].Type)
					c := tr.Validation.Condition()
					require.Equal(t, corev1.ConditionTrue, c.Status)
					require.Equal(t, now, c.LastTransitionTime.Time, "the pass's time, which ends the operation too: the ladder goes on in its episode")
					require.Equal(t, v1alpha1.ConditionGPUValidationFailed, string(c.Type))
				}}},
		{desc: "validating: no answer from the tool: retried once, the first pod deleted first",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodFailed, noAnswer))},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, events: []string{v1alpha1.ReasonValidationNoAnswer}, requeue: ValidationRetryPoll,
				message: "retrying the GPU test after no answer", check: func(t *testing.T, tr Transition) {
					v := tr.Status.Validation
					require.Equal(t, int32(2), v.Attempt)
					require.Empty(t, v.PodName)
					require.Contains(t, v.NoAnswer, "dcgm gave no answer: dcgmi diag: timed out after 15m0s")
					require.Nil(t, tr.Validation, "no answer sets no node condition")
				}}},
		{desc: "validating: the retry waits for the first pod to go",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(2, ago(time.Second)), func(o *v1alpha1.NodeOperation) { o.Status.Validation.PodName, o.Status.Validation.StartTime = "", nil }),
				Node: healthy, ValidateTemplate: dcgm, ValidatePods: pods(testPod(1, corev1.PodFailed, noAnswer)), Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, requeue: ValidationRetryPoll, message: "waiting for pod kubemedic/op-validate-1 to go first"}},
		{desc: "validating: the first pod gone, attempt 2 starts",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(2, ago(time.Second)), func(o *v1alpha1.NodeOperation) { o.Status.Validation.PodName, o.Status.Validation.StartTime = "", nil }),
				Node: healthy, ValidateTemplate: dcgm, Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectCreateValidationPod, events: []string{v1alpha1.EventValidationStarted}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "op-validate-2", tr.Status.Validation.PodName)
				require.Contains(t, tr.Events[0].Note, "testing again, after no answer,")
			}}},
		{desc: "validating: no answer twice counts as a failure, both reasons said",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(2, ago(5*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(2, corev1.PodFailed, noAnswer))},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"Validated=False/ValidationFailed"},
				message: "no answer from the GPU test twice, which counts as a failure", check: func(t *testing.T, tr Transition) {
					require.Contains(t, tr.Status.Validation.Message, "the first attempt: no report after 20m0s")
					require.Equal(t, v1alpha1.ReasonNoValidationAnswer, tr.Validation.Reason)
					require.Empty(t, FailingGPUs(tr.Status.Validation), "no GPU named: none counts toward the per-GPU cap")
				}}},
		{desc: "validating: a timeout is no answer: the hung pod is deleted and the test retried",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(20*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodRunning, ""))},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, events: []string{v1alpha1.ReasonValidationNoAnswer}, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "no report after 20m0s; pod kubemedic/op-validate-1 was Running")
			}}},
		{desc: "validating: an image that cannot be pulled says so at the timeout",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(20*time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(func() *corev1.Pod {
					p := testPod(1, corev1.PodPending, "")
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "validate", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
					return p
				}())},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "container validate waiting: ImagePullBackOff Back-off pulling image")
			}}},
		{desc: "validating: a pod the kubelet refused (GPUs still held) is no answer",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Second))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(func() *corev1.Pod {
					p := testPod(1, corev1.PodFailed, "")
					p.Status.ContainerStatuses, p.Status.Reason, p.Status.Message = nil, "UnexpectedAdmissionError", "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu"
					return p
				}())},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "its report is unusable: no container terminated (Failed)")
			}}},
		{desc: "validating: an unparseable report is no answer, never a pass",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodSucceeded, `{"schema":"kubemedic.io/validation/v1","verdict":"Pa`))},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, events: []string{v1alpha1.ReasonValidationNoAnswer}, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "pod kubemedic/op-validate-1 succeeded; its report is unusable: container validate (exit code 0)")
			}}},
		{desc: "validating: an empty termination message is no answer",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodSucceeded, ""))},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "left no report: the termination message is empty")
			}}},
		{desc: "validating: a report of Pass from a pod that failed is no pass",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Minute))), Node: healthy, ValidateTemplate: dcgm,
				ValidatePods: pods(testPod(1, corev1.PodFailed, passed))},
			want: want{phase: v1alpha1.PhaseValidating, effect: EffectDeleteValidationPod, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Validation.NoAnswer, "its report says Pass, which a failed pod cannot vouch for")
			}}},
		{desc: "validating: a node with no GPU allocatable cannot be tested: no answer twice, a failure",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseValidating), withDrain, validated(0)), Node: node("n1", gpus(8, 0)), ValidateTemplate: dcgm},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"Validated=False/ValidationFailed"}, message: "has no nvidia.com/* resource allocatable"}},
		{desc: "validating: a template deleted since is a failure, never a pass",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseValidating), withDrain, validated(0)), Node: healthy},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"Validated=False/ValidationFailed"}, message: "NodeOperationTemplate validate-dcgm does not exist"}},
		{desc: "validating: a node that is gone fails the operation",
			in:   AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Minute))), ValidateTemplate: dcgm},
			want: want{phase: v1alpha1.PhaseFailed, message: "NodeNotFound"}},
		{desc: "validating: a pass recorded by a pass whose phase change was lost uncordons",
			in: AdvanceInput{Op: op("op", "n1", withDrain, validated(0), validatingAttempt(1, ago(time.Minute)), func(o *v1alpha1.NodeOperation) {
				o.Status.Validation.Result, o.Status.Validation.Message = v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s)"
			}), Node: healthy, ValidateTemplate: dcgm},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectUncordon}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}

// TestAdvanceWalksTheGate: a drained reset with a capture and a validation
// creates the capture pod, drains, runs, verifies, tests (after one
// attempt that gave no answer), and only then uncordons.
func TestAdvanceWalksTheGate(t *testing.T) {
	o := op("op", "n1", withDrain, validated(0), trigger(xidMessage, ago(time.Hour)), diag("", false, 5*time.Minute))
	ok := report(diagnostics.Report{Result: v1alpha1.DiagnosticsCaptured, Key: "n1/op.tar.gz", Size: 10, SHA256: bundleSHA, Stored: true})
	passed := encoded(t, validation.VerdictPass, pass(gpuA))
	noAnswer := encoded(t, validation.VerdictNoAnswer)
	effects, o := walk(o, 20, func(in *AdvanceInput) {
		in.CaptureTemplate = tpl(v1alpha1.SuccessPodSucceeded)
		in.ValidateTemplate = tpl(v1alpha1.SuccessPodSucceeded)
		if in.Op.Status.Phase == v1alpha1.PhaseCapturing && in.Op.Status.Diagnostics != nil {
			in.CapturePod = capturePod(corev1.PodSucceeded, ok)
		}
		if v := in.Op.Status.Validation; v != nil && v.PodName != "" {
			msg, phase := noAnswer, corev1.PodFailed
			if v.Attempt == 2 {
				msg, phase = passed, corev1.PodSucceeded
			}
			in.ValidatePods = pods(testPod(v.Attempt, phase, msg))
		}
	})
	require.Equal(t, []Effect{EffectNone, EffectReserve, EffectCordon, EffectCreateCapturePod, EffectNone, EffectNone, EffectCreatePod, EffectNone, EffectNone,
		EffectCreateValidationPod, EffectDeleteValidationPod, EffectCreateValidationPod, EffectUncordon, EffectNone, EffectDeleteOperation}, effects)
	require.Equal(t, v1alpha1.ValidationPassed, o.Status.Validation.Result)
	require.Equal(t, int32(2), o.Status.Validation.Attempt)
	require.True(t, strings.HasPrefix(o.Status.Message, "Verified: verified and validated: dcgm passed on 1 GPU(s)"), o.Status.Message)
}
