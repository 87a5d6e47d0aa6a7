package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

// gpuUUID is the GPU the xid trigger below names.
const gpuUUID = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"

const gpuXidMessage = "XidResetRequired: Xid 48 on 0000:3b:00.0 (" + gpuUUID + "): double-bit ECC error"

func machineTpl(kind v1alpha1.MachineKind) *v1alpha1.NodeOperationTemplate {
	t := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "last-rung"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessNodeRebooted, Timeout: dur(20 * time.Minute)}}
	switch kind {
	case v1alpha1.MachineClusterAPI:
		t.Spec.ClusterAPI = &v1alpha1.ClusterAPIAction{}
		t.Spec.SuccessCriterion = v1alpha1.SuccessMachineReplaced
	case v1alpha1.MachineMetal3:
		t.Spec.Metal3 = &v1alpha1.Metal3Action{Mode: "hard"}
	case v1alpha1.MachineRedfish:
		t.Spec.Redfish = &v1alpha1.RedfishAction{Address: "https://bmc", CredentialsSecret: "bmc", ResetType: "PowerCycle"}
	}
	return t
}

func asked(kind v1alpha1.MachineKind, target string, at time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: target, Action: "asked", Time: metav1.NewTime(at)}
	}
}

func nodeUID(uid string) opOpt { return func(o *v1alpha1.NodeOperation) { o.Status.NodeUID = uid } }

func withUID(uid string) nodeOpt { return func(n *corev1.Node) { n.UID = types.UID(uid) } }

func onGPU(uuid, bus string) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Status.GPU = &v1alpha1.GPUTarget{UUID: uuid, BusID: bus} }
}

func TestAdvanceMachine(t *testing.T) {
	capi, metal3, bmc := machineTpl(v1alpha1.MachineClusterAPI), machineTpl(v1alpha1.MachineMetal3), machineTpl(v1alpha1.MachineRedfish)
	// runningSince is an operation running since the given time.
	runningSince := func(since time.Time, opts ...opOpt) *v1alpha1.NodeOperation {
		return op("op", "n1", append([]opOpt{phase(v1alpha1.PhaseRunning), bootID("boot-a"), nodeUID("uid-a"),
			opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, since)}, opts...)...)
	}
	running := func(opts ...opOpt) *v1alpha1.NodeOperation { return runningSince(ago(time.Minute), opts...) }
	machine := "Machine capi/md-0-abc"
	for _, tc := range []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		{desc: "admit records the node's UID to recognise its replacement",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1", withUID("uid-a"), booted("boot-a")), Admission: Admission{Verdict: Start}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectReserve, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "uid-a", tr.Status.NodeUID)
			}}},
		{desc: "clusterAPI: asks the Machine once, with an Event naming it, and creates no pod",
			in: AdvanceInput{Op: running(), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest, events: []string{v1alpha1.EventMachineRequested},
				message: "asked " + machine + "; waiting for the Machine to be replaced",
				check: func(t *testing.T, tr Transition) {
					r := tr.Status.MachineRequest
					require.Equal(t, v1alpha1.MachineClusterAPI, r.Kind)
					require.Equal(t, machine, r.Target)
					require.Contains(t, r.Action, AnnotationRemediateMachine)
					require.Empty(t, tr.Status.PodName)
					require.True(t, tr.Events[0].OnEffect, "told when asked: the status write may be lost, and its retry does not ask again")
				}}},
		{desc: "clusterAPI: a request already on the Machine (a lost status write) is recorded, not made again",
			in: AdvanceInput{Op: running(), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine, Requested: true}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, check: func(t *testing.T, tr Transition) {
				require.Empty(t, tr.Events, "no second MachineRequested Event")
				require.NotNil(t, tr.Status.MachineRequest)
			}}},
		{desc: "clusterAPI: the Machine gone but the Node still marked (a lost status write, then the MachineHealthCheck) is the replacement",
			in: AdvanceInput{Op: running(), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Requested: true, Gone: true}},
			want: want{phase: v1alpha1.PhaseVerifying, effect: EffectNone, conditions: []string{"OperationSucceeded=True/MachineReplaced"}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "the Machine of node n1", tr.Status.MachineRequest.Target)
			}}},
		{desc: "clusterAPI: the node gone before the request was recorded (lost status write, quick replacement) is the replacement, not MachineNotFound",
			in: AdvanceInput{Op: running(), Template: capi, Machine: MachineObservation{Missing: "no Cluster API Machine for node n1"}},
			want: want{phase: v1alpha1.PhaseVerifying, effect: EffectNone, conditions: []string{"OperationSucceeded=True/MachineReplaced"}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "the Machine of node n1", tr.Status.MachineRequest.Target)
				for _, e := range tr.Events {
					require.NotEqual(t, v1alpha1.EventMachineRequested, e.Reason, "not asked now")
				}
			}}},
		{desc: "clusterAPI: the node back under a new UID, its Machine gone, before the request was recorded is the replacement, recorded as not asked",
			in: AdvanceInput{Op: running(), Node: node("n1", withUID("uid-b")), Template: capi, Machine: MachineObservation{Missing: "no Cluster API Machine for node n1"}},
			want: want{phase: v1alpha1.PhaseVerifying, effect: EffectNone, conditions: []string{"OperationSucceeded=True/MachineReplaced"}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, ActionFoundReplaced, tr.Status.MachineRequest.Action)
			}}},
		{desc: "clusterAPI: a node back under a new UID whose Machine is still there (it re-registered) is asked, not taken for replaced",
			in: AdvanceInput{Op: running(), Node: node("n1", withUID("uid-b")), Template: capi, Machine: MachineObservation{Target: machine}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest, events: []string{v1alpha1.EventMachineRequested}, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "uid-b", tr.Status.NodeUID, "the replacement to wait for is of the node as asked")
			}}},
		{desc: "clusterAPI: a recorded request waiting for a replacement that is not Ready says what was asked",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute))), Node: node("n1", withUID("uid-b"), notReady), Template: capi, Machine: MachineObservation{Target: ""}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, message: "asked " + machine + "; waiting for the Machine to be replaced"}},
		{desc: "metal3: a node gone before anything was asked is not a power cycle",
			in:   AdvanceInput{Op: running(), Template: metal3, Machine: MachineObservation{Missing: "node n1 does not exist, so its BareMetalHost cannot be found"}},
			want: want{phase: v1alpha1.PhaseFailed, message: "MachineNotFound"}},
		{desc: "clusterAPI: no Machine fails the step, saying why",
			in:   AdvanceInput{Op: running(), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Missing: "no Cluster API Machine for node n1"}},
			want: want{phase: v1alpha1.PhaseFailed, message: "MachineNotFound: no Cluster API Machine for node n1", conditions: []string{"OperationSucceeded=False/MachineNotFound"}}},
		{desc: "clusterAPI: the same node, same UID, is still waiting",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute))), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine, Requested: true}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, requeue: VerifyResync}},
		{desc: "clusterAPI: the node re-created under its name and Ready is the replacement",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute))), Node: node("n1", withUID("uid-b")), Template: capi, Machine: MachineObservation{Target: machine, Requested: true}},
			want: want{phase: v1alpha1.PhaseVerifying, message: "verifying", conditions: []string{"OperationSucceeded=True/MachineReplaced"}, events: []string{v1alpha1.EventOperationSucceeded}}},
		{desc: "clusterAPI: a re-created node that is not Ready yet is not",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute))), Node: node("n1", withUID("uid-b"), notReady), Template: capi, Machine: MachineObservation{Target: machine, Requested: true}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone}},
		{desc: "clusterAPI: the Machine gone is the replacement",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute))), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine, Gone: true}},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"OperationSucceeded=True/MachineReplaced"}}},
		{desc: "clusterAPI: past the timeout it fails, saying what was asked",
			in: AdvanceInput{Op: runningSince(ago(time.Hour), asked(v1alpha1.MachineClusterAPI, machine, ago(time.Hour))),
				Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine, Requested: true}},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, message: "OperationTimeout: no success after 20m0s (MachineReplaced) since " + machine + " was asked"}},
		{desc: "clusterAPI: a request never made (a BMC kept answering 503) fails at the timeout without asking again",
			in:   AdvanceInput{Op: runningSince(ago(time.Hour)), Node: node("n1", withUID("uid-a")), Template: capi, Machine: MachineObservation{Target: machine}},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, message: "could not be asked"}},
		{desc: "verifying: after a replacement the old node gone is success",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), asked(v1alpha1.MachineClusterAPI, machine, ago(time.Minute)))},
			want: want{phase: v1alpha1.PhaseSucceeded, message: "MachineReplaced: node n1 is gone with its replaced machine"}},
		{desc: "verifying: a missing node without a replacement is a failure",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), asked(v1alpha1.MachineRedfish, "https://bmc", ago(time.Minute)))},
			want: want{phase: v1alpha1.PhaseFailed, message: "NodeNotFound"}},
		{desc: "metal3: asks the BareMetalHost for a hard power cycle",
			in: AdvanceInput{Op: running(), Node: node("n1", booted("boot-a")), Template: metal3, Machine: MachineObservation{Target: "BareMetalHost metal3/n1"}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest, message: "waiting for the node to reboot (boot ID boot-a)", check: func(t *testing.T, tr Transition) {
				require.Equal(t, `annotated reboot.metal3.io={"mode":"hard"} (power cycle)`, tr.Status.MachineRequest.Action)
			}}},
		{desc: "metal3: a new boot ID and Ready is success",
			in:   AdvanceInput{Op: running(asked(v1alpha1.MachineMetal3, "BareMetalHost metal3/n1", ago(time.Minute))), Node: node("n1", booted("boot-b")), Template: metal3, Machine: MachineObservation{Target: "BareMetalHost metal3/n1", Requested: true}},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"OperationSucceeded=True/NodeRebooted"}}},
		{desc: "metal3: a new boot ID before anything was asked is not success (the fault rebooted it)",
			in:   AdvanceInput{Op: running(), Node: node("n1", booted("boot-b")), Template: metal3, Machine: MachineObservation{Target: "BareMetalHost metal3/n1"}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest}},
		{desc: "redfish: the action names the reset type",
			in: AdvanceInput{Op: running(), Node: node("n1", booted("boot-a")), Template: bmc, Machine: MachineObservation{Target: "https://bmc/redfish/v1/Systems/1"}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest, check: func(t *testing.T, tr Transition) {
				require.Equal(t, "ComputerSystem.Reset ResetType=PowerCycle", tr.Status.MachineRequest.Action)
				require.Equal(t, "https://bmc/redfish/v1/Systems/1", tr.Status.MachineRequest.Target)
			}}},
	} {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}

// TestMachineFailed: a refused request fails the step at once with the
// provider's words, and forgets the request it did not make.
func TestMachineFailed(t *testing.T) {
	o := op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a"))
	tr := Advance(AdvanceInput{Op: o, Node: node("n1"), Template: machineTpl(v1alpha1.MachineRedfish), Machine: MachineObservation{Target: "https://bmc/redfish/v1/Systems/1"}, Now: now})
	require.Equal(t, EffectMachineRequest, tr.Effect)
	MachineFailed(&tr, o, "redfish reset of system 1 at https://bmc: post reset: 401 Unauthorized", now)
	require.Equal(t, v1alpha1.PhaseFailed, tr.Status.Phase)
	require.Equal(t, EffectNone, tr.Effect)
	require.Nil(t, tr.Status.MachineRequest)
	require.Contains(t, tr.Status.Message, "MachineRequestFailed: redfish reset of system 1 at https://bmc: post reset: 401 Unauthorized")
	require.Equal(t, corev1.EventTypeWarning, tr.Events[len(tr.Events)-1].Type)
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

func TestGPUAttemptCap(t *testing.T) {
	uuid := "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	faults := func(n int, bus string, age time.Duration) nodeOpt {
		return func(nd *corev1.Node) {
			h, _ := gpuwire.Parse(nd.Annotations[gpuwire.Annotation])
			for i := range n {
				h = gpuhistory.Add(h, gpuwire.Entry{Time: ago(age + time.Duration(i)*time.Minute), UUID: uuid, Bus: bus,
					Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidResetRequired, Xid: 48}}, now)
			}
			enc, err := h.Encode()
			require.NoError(t, err)
			if nd.Annotations == nil {
				nd.Annotations = map[string]string{}
			}
			nd.Annotations[gpuwire.Annotation] = enc
		}
	}
	corrupt := func(nd *corev1.Node) { nd.Annotations = map[string]string{gpuwire.Annotation: "{"} }
	capGPU := func(max int32) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.AttemptCap = &v1alpha1.AttemptCap{MaxAttempts: 100, Window: dur(24 * time.Hour), MaxFailuresPerGPU: &max}
		}
	}
	for _, tc := range []struct {
		desc    string
		node    *corev1.Node
		op      *v1alpha1.NodeOperation
		verdict Verdict
		message string
	}{
		{desc: "under the cap starts", node: node("n1", faults(2, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "at the cap excludes", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Skip,
			message: "policy p: GPU GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b (0000:3b:00.0) had 3 faults in the last 24h0m0s (attemptCap.maxFailuresPerGPU 3)"},
		{desc: "the card moved to another bus through a reboot still counts by UUID", node: node("n1", faults(3, "0000:86:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Skip},
		{desc: "faults older than the window do not count", node: node("n1", faults(3, "0000:3b:00.0", 25*time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "another GPU's faults do not count", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU("GPU-11111111-2222-3333-4444-555555555555", "0000:86:00.0")), verdict: Start},
		{desc: "an operation naming no GPU is not capped per GPU", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0)), verdict: Start},
		{desc: "the operation's own fault counts before the history holds it", node: node("n1", faults(2, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0"), trigger(gpuXidMessage, ago(time.Minute))), verdict: Skip,
			message: "had 3 faults"},
		{desc: "the operation's own fault, already recorded, counts once", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0"), trigger(gpuXidMessage, ago(time.Hour))), verdict: Skip,
			message: "had 3 faults"},
		{desc: "one incident raising three conditions within seconds counts once", node: node("n1", func(nd *corev1.Node) {
			h := gpuwire.History{}
			for i, c := range []string{v1alpha1.ConditionGPUXidError, v1alpha1.ConditionGPULost, v1alpha1.ConditionGPURecoveryRequired} {
				h = gpuhistory.Add(h, gpuwire.Entry{Time: ago(time.Hour - time.Duration(i)*5*time.Second), UUID: uuid, Fault: &gpuwire.Fault{Condition: c}}, now)
			}
			enc, err := h.Encode()
			require.NoError(t, err)
			nd.Annotations = map[string]string{gpuwire.Annotation: enc}
		}), op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "an unreadable history is no evidence the GPU is fine", node: node("n1", corrupt),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "")), verdict: Skip, message: "cannot read node n1's GPU history"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			a := Admit(AdmitInput{Op: tc.op, Node: tc.node, Policies: []*Policy{policy(t, "p", capGPU(3))}, Nodes: []*corev1.Node{tc.node}, Now: now})
			require.Equal(t, tc.verdict, a.Verdict, a.Message)
			if tc.verdict == Skip {
				require.True(t, a.ExcludeGPU)
				require.False(t, a.Quarantine, "the GPU is excluded, not the node quarantined by admission itself")
				require.Equal(t, v1alpha1.ReasonGPUAttemptCapReached, a.Reason)
				require.Contains(t, a.Message, tc.message)
			}
		})
	}
}
