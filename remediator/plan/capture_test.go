package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

const bundleSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// diag asks for a capture with collect-gpu-diagnostics.
func diag(when v1alpha1.DiagnosticsWhen, required bool, timeout time.Duration) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Spec.Diagnostics = &v1alpha1.DiagnosticsSpec{Operation: "collect-gpu-diagnostics", When: when, Required: required}
		if timeout > 0 {
			o.Spec.Diagnostics.Timeout = &metav1.Duration{Duration: timeout}
		}
	}
}

// capturing is an operation whose capture pod was created at start.
func capturing(start time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		s := metav1.NewTime(start)
		o.Status.Phase = v1alpha1.PhaseCapturing
		o.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCapturing, Template: "collect-gpu-diagnostics", PodName: o.Name + "-diag", StartTime: &s}
	}
}

// capturePod is the capture pod in phase, with report as its termination
// message.
func capturePod(phase corev1.PodPhase, report string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: "op-diag"}, Status: corev1.PodStatus{Phase: phase}}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		code := int32(0)
		if phase == corev1.PodFailed {
			code = 2
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operation", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", Message: report, FinishedAt: metav1.NewTime(now)}}}}
	}
	return p
}

func report(r diagnostics.Report) string { return string(r.Encode()) }

func TestAdvanceCapturing(t *testing.T) {
	collect := tpl(v1alpha1.SuccessPodSucceeded)
	captured := report(diagnostics.Report{Result: v1alpha1.DiagnosticsCaptured, Key: "n1/op.tar.gz", Size: 2048, SHA256: bundleSHA,
		Files: []string{"manifest.json", "kmsg.txt"}, Stored: true, Message: "6 parts captured"})
	partial := report(diagnostics.Report{Result: v1alpha1.DiagnosticsPartial, Key: "n1/op.tar.gz", Size: 2048, SHA256: bundleSHA,
		Files: []string{"manifest.json"}, FailedParts: []string{"nvidia-bug-report (timed out after 2m0s)"}, Stored: true, Message: "5 of 6 parts"})
	spooled := report(diagnostics.Report{Result: v1alpha1.DiagnosticsCaptured, Key: "n1/op.tar.gz", Size: 2048, SHA256: bundleSHA,
		Files: []string{"manifest.json"}, Message: "store unreachable: the bundle waits in the spool"})
	cases := []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		{desc: "cordoning: a step with diagnostics captures before the drain by default",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), withDrain, diag("", false, 0)), Node: node("n1"), Template: tpl(v1alpha1.SuccessPodSucceeded)},
			want: want{phase: v1alpha1.PhaseCapturing, effect: EffectCordon, conditions: []string{"Diagnosed=False/Capturing"}}},
		{desc: "cordoning: AfterDrain drains first",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), withDrain, diag(v1alpha1.DiagnosticsAfterDrain, false, 0)), Node: node("n1"), Template: tpl(v1alpha1.SuccessPodSucceeded)},
			want: want{phase: v1alpha1.PhaseDraining, effect: EffectCordon}},
		{desc: "draining done: AfterDrain captures now",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain, diag(v1alpha1.DiagnosticsAfterDrain, false, 0))},
			want: want{phase: v1alpha1.PhaseCapturing, conditions: []string{"Drained=True/Drained", "Diagnosed=False/Capturing"}}},
		{desc: "draining done: a capture taken before the drain is not taken again",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain, diag("", false, 0), func(o *v1alpha1.NodeOperation) {
				o.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured}
			})},
			want: want{phase: v1alpha1.PhaseRunning}},
		{desc: "admit: without cordon or drain the capture still comes first",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), diag(v1alpha1.DiagnosticsAfterDrain, false, 0)), Node: node("n1"), Admission: Admission{Verdict: Start}},
			want: want{phase: v1alpha1.PhaseCapturing, effect: EffectReserve}},
		{desc: "capturing: the first pass creates the pod once, named after the operation",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 5*time.Minute)), CaptureTemplate: collect, Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseCapturing, effect: EffectCreateCapturePod, events: []string{v1alpha1.EventCaptureStarted}, requeue: 5 * time.Minute,
				message: "capturing diagnostics with pod kubemedic/op-diag", check: func(t *testing.T, tr Transition) {
					d := tr.Status.Diagnostics
					require.Equal(t, v1alpha1.DiagnosticsCapturing, d.Result)
					require.Equal(t, "op-diag", d.PodName)
					require.Equal(t, now, d.StartTime.Time)
				}}},
		{desc: "capturing: a missing template is a failed capture, and the repair goes on",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 0))},
			want: want{phase: v1alpha1.PhaseDraining, conditions: []string{"Diagnosed=False/DiagnosticsFailed"}, events: []string{v1alpha1.ReasonDiagnosticsFailed}}},
		{desc: "capturing: the pod still runs: wait until the deadline",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 5*time.Minute), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodRunning, "")},
			want: want{phase: v1alpha1.PhaseCapturing, requeue: 4 * time.Minute}},
		{desc: "capturing: the pod is not in the cache yet: no second pod",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 5*time.Minute), capturing(ago(time.Second))), CaptureTemplate: collect},
			want: want{phase: v1alpha1.PhaseCapturing, effect: EffectNone}},
		{desc: "capturing: captured and stored: recorded, linked, then the drain",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodSucceeded, captured)},
			want: want{phase: v1alpha1.PhaseDraining, conditions: []string{"Diagnosed=True/Captured"}, events: []string{v1alpha1.ReasonCaptured}, check: func(t *testing.T, tr Transition) {
				require.True(t, tr.LinkBundle)
				d := tr.Status.Diagnostics
				require.Equal(t, v1alpha1.DiagnosticsCaptured, d.Result)
				require.Equal(t, &v1alpha1.DiagnosticsBundle{Key: "n1/op.tar.gz", Size: 2048, SHA256: bundleSHA, Files: []string{"manifest.json", "kmsg.txt"}, Stored: true}, d.Bundle)
				require.Equal(t, now, d.CompletionTime.Time)
			}}},
		{desc: "capturing: partial: a Warning naming the failed parts, the repair goes on",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), diag("", true, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodSucceeded, partial)},
			want: want{phase: v1alpha1.PhaseRunning, conditions: []string{"Diagnosed=True/CapturePartial"}, events: []string{v1alpha1.ReasonCapturePartial}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, []string{"nvidia-bug-report (timed out after 2m0s)"}, tr.Status.Diagnostics.FailedParts)
				require.Equal(t, corev1.EventTypeWarning, tr.Events[0].Type)
			}}},
		{desc: "capturing: the store is down: the bundle is spooled, not linked",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodSucceeded, spooled)},
			want: want{phase: v1alpha1.PhaseDraining, conditions: []string{"Diagnosed=True/Captured"}, check: func(t *testing.T, tr Transition) {
				require.False(t, tr.LinkBundle)
				require.False(t, tr.Status.Diagnostics.Bundle.Stored)
				require.Contains(t, tr.Events[0].Note, "waiting in the node's spool")
			}}},
		{desc: "capturing: a pod that succeeded with a bad report is a failed capture",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodSucceeded, `{"result":"Captured"}`)},
			want: want{phase: v1alpha1.PhaseDraining, conditions: []string{"Diagnosed=False/DiagnosticsFailed"}, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Diagnostics.Message, "report is unusable: pod kubemedic/op-diag: container operation: report: result Captured without a key")
			}}},
		{desc: "capturing: a failed pod is a failed capture; not required: the repair goes on",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), diag("", false, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodFailed, "")},
			want: want{phase: v1alpha1.PhaseRunning, conditions: []string{"Diagnosed=False/DiagnosticsFailed"}, events: []string{v1alpha1.ReasonDiagnosticsFailed}}},
		{desc: "capturing: required and failed: the operation fails before touching the node",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), diag("", true, 0), capturing(ago(time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodFailed, "")},
			want: want{phase: v1alpha1.PhaseFailed, message: "the required diagnostics (collect-gpu-diagnostics) failed", conditions: []string{"Diagnosed=False/DiagnosticsFailed"},
				events: []string{v1alpha1.ReasonDiagnosticsFailed, v1alpha1.ReasonDiagnosticsFailed}}},
		{desc: "capturing: past the timeout the hung pod is deleted and the repair goes on",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 5*time.Minute), capturing(ago(5*time.Minute))), CaptureTemplate: collect, CapturePod: capturePod(corev1.PodRunning, "")},
			want: want{phase: v1alpha1.PhaseDraining, effect: EffectDeleteCapturePod, conditions: []string{"Diagnosed=False/DiagnosticsFailed"}, check: func(t *testing.T, tr Transition) {
				require.Contains(t, tr.Status.Diagnostics.Message, "no report after 5m0s; pod kubemedic/op-diag was Running and is deleted")
			}}},
		{desc: "capturing: the template's timeout when the step sets none",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCapturing), withDrain, diag("", false, 0), capturing(ago(5*time.Minute))),
				CaptureTemplate: tpl(v1alpha1.SuccessPodSucceeded, func(t *v1alpha1.NodeOperationTemplate) { t.Spec.Timeout = &metav1.Duration{Duration: 8 * time.Minute} }),
				CapturePod:      capturePod(corev1.PodRunning, "")},
			want: want{phase: v1alpha1.PhaseCapturing, requeue: 3 * time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}

// TestAdvanceWalksTheLifecycleWithCapture: a drained reset with a capture
// before the drain creates the capture pod once, then drains and runs.
func TestAdvanceWalksTheLifecycleWithCapture(t *testing.T) {
	o := op("op", "n1", withDrain, trigger(xidMessage, ago(time.Hour)), diag("", false, 5*time.Minute))
	ok := report(diagnostics.Report{Result: v1alpha1.DiagnosticsCaptured, Key: "n1/op.tar.gz", Size: 10, SHA256: bundleSHA, Stored: true})
	effects, o := walk(o, 14, func(in *AdvanceInput) {
		in.CaptureTemplate = tpl(v1alpha1.SuccessPodSucceeded)
		if in.Op.Status.Phase == v1alpha1.PhaseCapturing && in.Op.Status.Diagnostics != nil {
			in.CapturePod = capturePod(corev1.PodSucceeded, ok)
		}
	})
	require.Equal(t, []Effect{EffectNone, EffectReserve, EffectCordon, EffectCreateCapturePod, EffectNone, EffectNone, EffectCreatePod, EffectNone, EffectUncordon, EffectNone, EffectDeleteOperation}, effects)
	require.Equal(t, v1alpha1.DiagnosticsCaptured, o.Status.Diagnostics.Result)
}
