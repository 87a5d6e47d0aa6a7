package plan

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

// The diagnostics capture (Capturing): a pod that collects the node's
// diagnostics once per operation, before or after the drain, before the
// repair runs.

// captureWhen is when the operation's capture runs; "" for none. A step
// without a drain captures just before the operation either way.
func captureWhen(op *v1alpha1.NodeOperation) v1alpha1.DiagnosticsWhen {
	dg := op.Spec.Diagnostics
	switch {
	case dg == nil:
		return ""
	case dg.When == "":
		return policies.DefaultDiagnosticsWhen
	}
	return dg.When
}

// captureNow moves to Capturing when the step asks for diagnostics and none
// was taken for this operation yet; it reports whether it did.
func (t *transition) captureNow() bool {
	dg := t.in.Op.Spec.Diagnostics
	if dg == nil || t.Status.Diagnostics != nil {
		return false
	}
	t.cond(v1alpha1.OperationDiagnosed, metav1.ConditionFalse, v1alpha1.ReasonCapturing, "capturing the node's diagnostics with "+dg.Operation)
	t.setPhase(v1alpha1.PhaseCapturing, "capturing the node's diagnostics before the repair")
	return true
}

// capturing runs the step's capture once (Capturing): it creates the pod,
// waits for its report within the timeout, records it, and goes on with
// the repair whatever the result, unless the capture is required and
// made no bundle.
func (t *transition) capturing() {
	op, dg := t.in.Op, t.in.Op.Spec.Diagnostics
	if dg == nil {
		t.afterCapture()
		return
	}
	st := t.Status.Diagnostics
	if st == nil {
		if t.in.CaptureTemplate == nil {
			t.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCapturing, Template: dg.Operation}
			t.captureEnded(v1alpha1.DiagnosticsFailed, fmt.Sprintf("NodeOperationTemplate %s does not exist", dg.Operation), nil, nil)
			return
		}
		now := metav1.NewTime(t.in.Now)
		t.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCapturing, Template: dg.Operation, PodName: CapturePodName(op), StartTime: &now}
		t.Effect = EffectCreateCapturePod
		t.emit(corev1.EventTypeNormal, v1alpha1.EventCaptureStarted, "Capture",
			fmt.Sprintf("capturing node %s's diagnostics with pod %s/%s (%s) before %s", op.Spec.NodeName, t.in.Namespace, CapturePodName(op), dg.Operation, op.Spec.Operation))
		st = t.Status.Diagnostics
	}
	if st.Result != v1alpha1.DiagnosticsCapturing {
		// Recorded by a pass whose phase change was not written.
		t.afterCapture()
		return
	}
	timeout, ok := policies.DiagnosticsTimeout(dg, t.in.CaptureTemplate)
	if !ok {
		timeout = policies.DefaultTemplateTimeout
	}
	start := t.in.Now
	if st.StartTime != nil {
		start = st.StartTime.Time
	}
	deadline := start.Add(timeout)
	if pod := t.in.CapturePod; pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			r, err := diagnostics.ReportFromPod(pod)
			if err != nil {
				t.captureEnded(v1alpha1.DiagnosticsFailed, "the capture pod succeeded but its report is unusable: "+err.Error(), nil, nil)
				return
			}
			result, bundle := r.Status()
			t.captureEnded(result, r.Message, r.FailedParts, bundle)
			return
		case corev1.PodFailed:
			msg := fmt.Sprintf("pod %s/%s failed: %s", pod.Namespace, pod.Name, PodFailure(pod))
			if r, err := diagnostics.ReportFromPod(pod); err == nil && r.Message != "" {
				msg += "; " + r.Message
			}
			t.captureEnded(v1alpha1.DiagnosticsFailed, msg, nil, nil)
			return
		}
	}
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("no report after %s", timeout)
		if pod := t.in.CapturePod; pod != nil {
			t.Effect = EffectDeleteCapturePod
			msg += fmt.Sprintf("; pod %s/%s was %s and is deleted (a bundle it wrote stays in the node's spool for the next capture or kubemedic diag flush)", pod.Namespace, pod.Name, pod.Status.Phase)
		}
		t.captureEnded(v1alpha1.DiagnosticsFailed, msg, nil, nil)
		return
	}
	t.requeueAt(deadline)
	t.Status.Message = fmt.Sprintf("capturing diagnostics with pod %s/%s, until %s", t.in.Namespace, st.PodName, deadline.UTC().Format(time.RFC3339))
}

// captureEnded records the capture's end, its condition and Event, and
// goes on: to the drain or the operation, or, when the capture was
// required and made no bundle, to Failed.
func (t *transition) captureEnded(result v1alpha1.DiagnosticsResult, msg string, failed []string, bundle *v1alpha1.DiagnosticsBundle) {
	op, dg := t.in.Op, t.in.Op.Spec.Diagnostics
	st := t.Status.Diagnostics
	now := metav1.NewTime(t.in.Now)
	st.Result, st.CompletionTime, st.Bundle = result, &now, bundle
	st.FailedParts = failed
	if len(st.FailedParts) > 32 {
		st.FailedParts = st.FailedParts[:32]
	}
	st.Message = Truncate(msg, maxMessage)
	t.Captured = result
	where := ""
	if bundle != nil {
		where = fmt.Sprintf(" %s (%d bytes, sha256 %s)", bundle.Key, bundle.Size, bundle.SHA256)
		if !bundle.Stored {
			where += ", waiting in the node's spool for the store"
		}
		t.LinkBundle = bundle.Stored
	}
	switch result {
	case v1alpha1.DiagnosticsCaptured:
		t.cond(v1alpha1.OperationDiagnosed, metav1.ConditionTrue, v1alpha1.ReasonCaptured, Truncate("captured"+where, maxMessage))
		t.emit(corev1.EventTypeNormal, v1alpha1.ReasonCaptured, "Capture", Truncate("diagnostics captured:"+where, maxMessage))
	case v1alpha1.DiagnosticsPartial:
		m := fmt.Sprintf("captured%s; failed parts: %s", where, strings.Join(failed, ", "))
		t.cond(v1alpha1.OperationDiagnosed, metav1.ConditionTrue, v1alpha1.ReasonCapturePartial, Truncate(m, maxMessage))
		t.emit(corev1.EventTypeWarning, v1alpha1.ReasonCapturePartial, "Capture", Truncate("diagnostics "+m, maxMessage))
	default:
		t.cond(v1alpha1.OperationDiagnosed, metav1.ConditionFalse, v1alpha1.ReasonDiagnosticsFailed, Truncate(msg, maxMessage))
		if dg != nil && dg.Required {
			t.emit(corev1.EventTypeWarning, v1alpha1.ReasonDiagnosticsFailed, "Capture", Truncate("required diagnostics failed, the repair does not run: "+msg, maxMessage))
			t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonDiagnosticsFailed, Truncate(fmt.Sprintf("the required diagnostics (%s) failed: %s; %s did not run", dg.Operation, msg, op.Spec.Operation), maxMessage))
			return
		}
		t.emit(corev1.EventTypeWarning, v1alpha1.ReasonDiagnosticsFailed, "Capture", Truncate("diagnostics failed, the repair goes on without them: "+msg, maxMessage))
	}
	t.afterCapture()
}

// afterCapture leaves Capturing: to the drain when the capture ran before
// it, else to the operation.
func (t *transition) afterCapture() {
	if captureWhen(t.in.Op) == v1alpha1.DiagnosticsAfterDrain || t.in.Op.Spec.Drain == nil {
		t.setPhase(v1alpha1.PhaseRunning, "starting the operation")
		return
	}
	t.drainOrRun()
}
