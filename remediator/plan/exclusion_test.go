package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// gpuUUID is the GPU the xid trigger below names.
const gpuUUID = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"

const gpuXidMessage = "XidResetRequired: Xid 48 on 0000:3b:00.0 (" + gpuUUID + "): double-bit ECC error"

func onGPU(uuid, bus string) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Status.GPU = &v1alpha1.GPUTarget{UUID: uuid, BusID: bus} }
}

func TestAdvanceGPUExclusion(t *testing.T) {
	dev := &Device{Driver: "gpu.nvidia.com", Pool: "n1", Name: "gpu-3", Rule: "kubemedic-n1-gpu-0f1e"}
	reset, reboot := tpl(v1alpha1.SuccessPodSucceeded), tpl(v1alpha1.SuccessNodeRebooted)
	cordoning := func(opts ...opOpt) *v1alpha1.NodeOperation {
		return op("op", "n1", append([]opOpt{phase(v1alpha1.PhaseCordoning), cordoned}, opts...)...)
	}
	for _, tc := range []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		{desc: "pending: the trigger's GPU is recorded, UUID and bus",
			in: AdvanceInput{Op: op("op", "n1", trigger(gpuXidMessage, ago(time.Hour))), Template: reset},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, check: func(t *testing.T, tr Transition) {
				require.Equal(t, &v1alpha1.GPUTarget{UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", BusID: "0000:3b:00.0"}, tr.Status.GPU)
			}}},
		{desc: "pending: a trigger naming no GPU records none",
			in:   AdvanceInput{Op: op("op", "n1", trigger("NFSMountHung: /data", ago(time.Hour))), Template: reset},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, check: func(t *testing.T, tr Transition) { require.Nil(t, tr.Status.GPU) }}},
		{desc: "cordoning: a GPU-scoped reset with its device excludes the GPU, not the node",
			in: AdvanceInput{Op: cordoning(onGPU(gpuUUID, "0000:3b:00.0")), Node: node("n1"), Template: reset, Device: dev},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectExcludeGPU, conditions: []string{"Cordoned=False/GPUExcluded"}, events: []string{v1alpha1.ReasonGPUExcluded},
				check: func(t *testing.T, tr Transition) {
					require.Equal(t, v1alpha1.ExclusionDeviceTaintRule, tr.Status.Exclusion.Method)
					require.Equal(t, dev.Rule, tr.Status.Exclusion.DeviceTaintRule)
					require.Equal(t, "gpu.nvidia.com/n1/gpu-3", tr.Status.Exclusion.Device)
				}}},
		{desc: "cordoning: a step that drains cordons the node: a schedulable node would take back the pods it evicts",
			in: AdvanceInput{Op: cordoning(onGPU(gpuUUID, ""), withDrain), Node: node("n1"), Template: reset, Device: dev},
			want: want{phase: v1alpha1.PhaseDraining, effect: EffectCordon, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "cordoned the node: the step drains the node, which must not take new pods meanwhile", tr.Status.Exclusion.Message)
			}}},
		{desc: "cordoning: a step with a GPU test cordons the node: the test takes every GPU, and the node must not serve before it passes (issue 31)",
			in: AdvanceInput{Op: cordoning(onGPU(gpuUUID, ""), validated(0)), Node: node("n1"), Template: reset, Device: dev},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, conditions: []string{"Cordoned=True/CordonedByKubemedic"}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "cordoned the node: the step tests every GPU of the node (validate-dcgm) before it serves again", tr.Status.Exclusion.Message)
			}}},
		{desc: "cordoning: without DRA the node is cordoned and the status says why",
			in: AdvanceInput{Op: cordoning(onGPU(gpuUUID, "")), Node: node("n1"), Template: reset, NoDevice: "the API server does not serve resource.k8s.io/v1beta2 DeviceTaintRule"},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, conditions: []string{"Cordoned=True/CordonedByKubemedic"}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, v1alpha1.ExclusionCordon, tr.Status.Exclusion.Method)
				require.Equal(t, "cordoned the node: the API server does not serve resource.k8s.io/v1beta2 DeviceTaintRule", tr.Status.Exclusion.Message)
			}}},
		{desc: "cordoning: a reboot cordons the node even for a GPU fault it could exclude",
			in: AdvanceInput{Op: cordoning(onGPU(gpuUUID, "")), Node: node("n1"), Template: reboot, Device: dev},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, check: func(t *testing.T, tr Transition) {
				require.Equal(t, v1alpha1.ExclusionCordon, tr.Status.Exclusion.Method)
				require.Contains(t, tr.Status.Exclusion.Message, "whole node")
			}}},
		{desc: "cordoning: a GPU known by bus ID only (an Xid) and found by it is excluded, and known by UUID from then on",
			in: AdvanceInput{Op: cordoning(onGPU("", "0000:3b:00.0")), Node: node("n1"), Template: reset,
				Device: &Device{Driver: dev.Driver, Pool: dev.Pool, Name: dev.Name, UUID: gpuUUID, Rule: dev.Rule}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectExcludeGPU, conditions: []string{"Cordoned=False/GPUExcluded"}, events: []string{v1alpha1.ReasonGPUExcluded},
				check: func(t *testing.T, tr Transition) {
					require.Equal(t, &v1alpha1.GPUTarget{UUID: gpuUUID, BusID: "0000:3b:00.0"}, tr.Status.GPU)
					require.Equal(t, v1alpha1.ExclusionDeviceTaintRule, tr.Status.Exclusion.Method)
					require.Contains(t, tr.Events[0].Note, "GPU "+gpuUUID+" excluded")
				}}},
		{desc: "cordoning: a GPU known by bus ID only that no device carries cordons, saying why",
			in: AdvanceInput{Op: cordoning(onGPU("", "0000:3b:00.0")), Node: node("n1"), Template: reset, NoDevice: "no device with a pcieBusID or pciBusID attribute 0000:3b:00.0 on node n1"},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "cordoned the node: no device with a pcieBusID or pciBusID attribute 0000:3b:00.0 on node n1", tr.Status.Exclusion.Message)
				require.Empty(t, tr.Status.GPU.UUID)
			}}},
		{desc: "cordoning: a fault naming no GPU cordons, saying so",
			in: AdvanceInput{Op: cordoning(), Node: node("n1"), Template: reset},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "cordoned the node: the trigger names no GPU", tr.Status.Exclusion.Message)
			}}},
		{desc: "admit: the per-GPU cap excludes the GPU and leaves the node alone",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), onGPU(gpuUUID, "")), Node: node("n1"), Device: dev,
				Admission: Admission{Verdict: Skip, Reason: v1alpha1.ReasonGPUAttemptCapReached, Message: "3 faults", ExcludeGPU: true}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectExcludeGPU, blocked: v1alpha1.ReasonGPUAttemptCapReached, message: "excluded by DeviceTaintRule kubemedic-n1-gpu-0f1e, the node keeps serving its other GPUs"}},
		{desc: "admit: the per-GPU cap excludes a GPU its Xid names by bus ID only, found by it",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), onGPU("", "0000:3b:00.0")), Node: node("n1"),
				Device:    &Device{Driver: dev.Driver, Pool: dev.Pool, Name: dev.Name, UUID: gpuUUID, Rule: dev.Rule},
				Admission: Admission{Verdict: Skip, Reason: v1alpha1.ReasonGPUAttemptCapReached, Message: "3 faults", ExcludeGPU: true}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectExcludeGPU, blocked: v1alpha1.ReasonGPUAttemptCapReached, message: "the node keeps serving its other GPUs",
				check: func(t *testing.T, tr Transition) { require.Equal(t, gpuUUID, tr.Status.GPU.UUID) }}},
		{desc: "admit: the per-GPU cap without DRA quarantines the node and says why",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), onGPU(gpuUUID, "")), Node: node("n1"), NoDevice: "no ResourceSlice lists it",
				Admission: Admission{Verdict: Skip, Reason: v1alpha1.ReasonGPUAttemptCapReached, Message: "3 faults", ExcludeGPU: true}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectQuarantine, conditions: []string{"Quarantined=True/GPUAttemptCapReached"}, blocked: v1alpha1.ReasonGPUAttemptCapReached,
				check: func(t *testing.T, tr Transition) {
					require.Equal(t, "quarantined the node, as the GPU alone cannot be excluded: no ResourceSlice lists it", tr.Status.Exclusion.Message)
				}}},
	} {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}
