package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

func TestHistoryEntry(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	gpu := &v1alpha1.GPUTarget{UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", BusID: "0000:3b:00.0"}
	trig := &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonXidResetRequired,
		Message: "XidResetRequired: Xid 48 on 0000:3b:00.0: double-bit ECC", LastTransitionTime: metav1.NewTime(t0)}
	mem := &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUMemoryUnhealthy, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonRowRemapFailed,
		Message: "RowRemapFailed on 0000:3b:00.0", LastTransitionTime: metav1.NewTime(t0)}
	op := func(trigger *v1alpha1.TriggerCondition, mods ...func(*v1alpha1.NodeOperation)) *v1alpha1.NodeOperation {
		o := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "xid.n1-1", Labels: map[string]string{v1alpha1.LabelStepIndex: "1"}},
			Spec: v1alpha1.NodeOperationSpec{NodeName: "n1", Policy: "gpu-xid", StepAction: v1alpha1.StepAction{Operation: "reboot"}, Trigger: trigger}}
		for _, m := range mods {
			m(o)
		}
		return o
	}
	done := metav1.NewTime(t0.Add(time.Hour))
	for _, tc := range []struct {
		desc   string
		before v1alpha1.NodeOperationPhase
		op     *v1alpha1.NodeOperation
		after  v1alpha1.NodeOperationStatus
		want   *gpuwire.Entry
	}{
		{desc: "leaving Pending records the fault at the condition's time, with its Xid",
			before: v1alpha1.PhasePending, op: op(trig), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseWaitingForBudget, GPU: gpu},
			want: &gpuwire.Entry{Time: t0, UUID: gpu.UUID, Bus: gpu.BusID, Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidResetRequired, Xid: 48}}},
		{desc: "a memory fault records its ECC kind",
			before: "", op: op(mem), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseWaitingForBudget, GPU: gpu},
			want: &gpuwire.Entry{Time: t0, UUID: gpu.UUID, Bus: gpu.BusID, Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUMemoryUnhealthy, Reason: v1alpha1.ReasonRowRemapFailed, ECC: v1alpha1.ReasonRowRemapFailed}}},
		{desc: "a manual operation without a trigger records no fault",
			before: v1alpha1.PhasePending, op: op(nil), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseWaitingForBudget}},
		{desc: "finishing records the operation and its outcome",
			before: v1alpha1.PhaseVerifying, op: op(trig), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseFailed, GPU: gpu, CompletionTime: &done},
			want: &gpuwire.Entry{Time: done.Time, UUID: gpu.UUID, Bus: gpu.BusID, Operation: &gpuwire.Operation{Name: "xid.n1-1", Policy: "gpu-xid", Step: 1, Operation: "reboot", Outcome: gpuwire.Failed}}},
		{desc: "a dry run changed nothing and is not recorded",
			before: v1alpha1.PhaseWaitingForBudget, op: op(trig, func(o *v1alpha1.NodeOperation) { o.Spec.DryRun = true }),
			after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseSkipped, CompletionTime: &done}},
		{desc: "a phase change inside the lifecycle records nothing",
			before: v1alpha1.PhaseRunning, op: op(trig), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseVerifying}},
		{desc: "a finished operation passing again records nothing",
			before: v1alpha1.PhaseFailed, op: op(trig), after: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseFailed, CompletionTime: &done}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e, ok := historyEntry(tc.before, tc.op, tc.after)
			if tc.want == nil {
				require.False(t, ok, "recorded %+v", e)
				return
			}
			require.True(t, ok)
			require.Equal(t, *tc.want, e)
			// Recorded once: a retried pass finds it and adds nothing.
			h := gpuhistory.Add(gpuwire.History{}, e, t0)
			require.True(t, gpuhistory.Has(h, e))
			other := e
			other.Time = e.Time.Add(time.Minute)
			if other.Operation != nil {
				other.Operation = &gpuwire.Operation{Name: "another", Operation: "reboot", Outcome: gpuwire.Failed}
			}
			require.False(t, gpuhistory.Has(h, other), "a different entry is not taken for this one")
		})
	}
}
