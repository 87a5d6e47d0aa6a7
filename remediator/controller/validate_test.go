package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// TestValidationFaults: a failed test adds one fault per GPU it failed,
// timed by the test's end, so that a pass retried after a failed status
// write adds nothing; a pass, a no answer and a test still running add
// none.
func TestValidationFaults(t *testing.T) {
	ended := metav1.NewTime(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
	bad := "GPU-66666666-7777-8888-9999-000000000000"
	failed := v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseFailed, Validation: &v1alpha1.ValidationStatus{
		Result: v1alpha1.ValidationFailed, Test: "dcgm", CompletionTime: &ended,
		GPUs: []v1alpha1.ValidationGPU{{UUID: "GPU-11111111-2222-3333-4444-555555555555", Verdict: "Pass"}, {UUID: bad, Verdict: "Fail", Failed: []string{"memory"}}}}}
	got := validationFaults(v1alpha1.PhaseValidating, failed)
	require.Equal(t, []gpuwire.Entry{{Time: ended.Time, UUID: bad, Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUValidationFailed, Reason: v1alpha1.ReasonDCGMDiagFailed}}}, got)

	h := gpuhistory.Add(gpuwire.History{}, got[0], ended.Time)
	require.True(t, gpuhistory.Has(h, validationFaults(v1alpha1.PhaseValidating, failed)[0]), "the retried pass's fault is already there")

	require.Empty(t, validationFaults(v1alpha1.PhaseFailed, failed), "recorded once, on the transition out of Validating")
	passed := *failed.DeepCopy()
	passed.Phase, passed.Validation.Result = v1alpha1.PhaseSucceeded, v1alpha1.ValidationPassed
	require.Empty(t, validationFaults(v1alpha1.PhaseValidating, passed))
	noAnswer := *failed.DeepCopy()
	noAnswer.Validation.GPUs = nil
	require.Empty(t, validationFaults(v1alpha1.PhaseValidating, noAnswer), "no answer names no GPU")
}

// TestBuildValidationPod: the test pod is bound to the node, asks for every
// GPU resource it has allocatable (request equal to limit), and reads its
// report from the termination message file, never the log.
func TestBuildValidationPod(t *testing.T) {
	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "op", UID: "u1"}, Spec: v1alpha1.NodeOperationSpec{NodeName: "n1",
		StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Cordon: true, Validate: &v1alpha1.ValidateSpec{Operation: "validate-dcgm"}}},
		Status: v1alpha1.NodeOperationStatus{Validation: &v1alpha1.ValidationStatus{PodName: "op-validate-1"}}}
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "validate-dcgm"}, Spec: v1alpha1.NodeOperationTemplateSpec{Image: "img", Command: []string{"/ko-app/kubemedic-validate"},
		Resources: &v1alpha1.TemplateResources{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		"nvidia.com/mig-1g.10gb": resource.MustParse("7"), "nvidia.com/gpu": resource.MustParse("1"), "nvidia.com/mig-3g.40gb": resource.MustParse("0"),
		corev1.ResourceCPU: resource.MustParse("64")}}}
	pod := buildValidationPod(op, tpl, "kubemedic", node)
	require.Equal(t, "op-validate-1", pod.Name)
	require.Equal(t, "n1", pod.Spec.NodeName)
	c := pod.Spec.Containers[0]
	require.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy)
	want := corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("7"), "nvidia.com/gpu": resource.MustParse("1")}
	require.Equal(t, want, c.Resources.Requests, "every GPU resource allocatable, none of 0, no CPU")
	want[corev1.ResourceMemory] = resource.MustParse("1Gi")
	require.Equal(t, want, c.Resources.Limits, "the template's limits and the GPUs")
	require.Equal(t, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}, tpl.Spec.Resources.Limits, "the template is not changed")
	require.Equal(t, "kubemedic-validation", pod.Labels["app.kubernetes.io/name"])
}

// TestValidationCondition: a failed test sets GPUValidationFailed, a pass
// clears it, the transition time stays while the status does not change,
// and a pass on a node that never failed one writes nothing.
func TestValidationCondition(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	at := t0.Add(time.Hour)
	failed := &plan.NodeValidation{Failed: true, Reason: v1alpha1.ReasonDCGMDiagFailed, Message: "dcgm failed", At: at}
	passed := &plan.NodeValidation{Reason: v1alpha1.ReasonValidated, Message: "dcgm passed", At: at}
	withCond := func(status corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1alpha1.ConditionGPUValidationFailed, Status: status, LastTransitionTime: metav1.NewTime(t0)}}}}
	}
	for _, tc := range []struct {
		desc   string
		node   *corev1.Node
		v      *plan.NodeValidation
		write  bool
		status corev1.ConditionStatus
		since  time.Time
	}{
		{"a first failure sets it now", &corev1.Node{}, failed, true, corev1.ConditionTrue, at},
		{"a failure again keeps when it began", withCond(corev1.ConditionTrue), failed, true, corev1.ConditionTrue, t0},
		{"a pass after a failure clears it now", withCond(corev1.ConditionTrue), passed, true, corev1.ConditionFalse, at},
		{"a pass again keeps when it cleared", withCond(corev1.ConditionFalse), passed, true, corev1.ConditionFalse, t0},
		{"a pass on a node that never failed writes nothing", &corev1.Node{}, passed, false, "", time.Time{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, write := validationCondition(tc.node, tc.v)
			require.Equal(t, tc.write, write)
			if !write {
				return
			}
			require.Equal(t, v1alpha1.ConditionGPUValidationFailed, string(c.Type))
			require.Equal(t, tc.status, c.Status)
			require.Equal(t, tc.since, c.LastTransitionTime.Time)
			require.Equal(t, tc.v.Reason, c.Reason)
		})
	}
}
