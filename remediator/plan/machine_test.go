package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

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

// TestAdvanceMachineRebootAfterRequest: the reboot a metal3 or redfish
// operation waits for is the one it asked for. A node that rebooted between
// admission and the request (the fault itself, a long drain) has a new boot
// ID already; that change must not pass for the power cycle, which the
// provider makes later (Metal3 acts on its annotation asynchronously), or
// the node would be verified and uncordoned before it is power-cycled.
func TestAdvanceMachineRebootAfterRequest(t *testing.T) {
	for _, kind := range []v1alpha1.MachineKind{v1alpha1.MachineMetal3, v1alpha1.MachineRedfish} {
		t.Run(string(kind), func(t *testing.T) {
			tpl := machineTpl(kind)
			target := "BareMetalHost metal3/n1"
			o := op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a"),
				opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(time.Minute)))
			n := node("n1", booted("boot-b"))

			tr := Advance(AdvanceInput{Op: o, Node: n, Template: tpl, Machine: MachineObservation{Target: target}, Now: now})
			require.Equal(t, EffectMachineRequest, tr.Effect)
			require.Equal(t, "boot-b", tr.Status.BootID, "the boot ID when asked")
			require.Contains(t, tr.Status.Message, "boot ID boot-b")

			o.Status = tr.Status
			tr = Advance(AdvanceInput{Op: o, Node: n, Template: tpl, Machine: MachineObservation{Target: target, Requested: true}, Now: now.Add(time.Second)})
			require.Equal(t, v1alpha1.PhaseRunning, tr.Status.Phase, "a reboot before the request is not the power cycle: %s", tr.Status.Message)

			tr = Advance(AdvanceInput{Op: o, Node: node("n1", booted("boot-c")), Template: tpl, Machine: MachineObservation{Target: target, Requested: true}, Now: now.Add(time.Minute)})
			require.Equal(t, v1alpha1.PhaseVerifying, tr.Status.Phase, tr.Status.Message)
			require.Equal(t, v1alpha1.ReasonNodeRebooted, apimeta.FindStatusCondition(tr.Status.Conditions, v1alpha1.OperationSucceeded).Reason)
		})
	}
}

// TestAdvanceMachineLostWriteKeepsBootID: a request recorded from the
// provider's marker (its status write was lost) keeps the boot ID of
// admission: the power cycle may have happened since, and must count.
func TestAdvanceMachineLostWriteKeepsBootID(t *testing.T) {
	tpl := machineTpl(v1alpha1.MachineMetal3)
	o := op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a"),
		opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(time.Minute)))
	tr := Advance(AdvanceInput{Op: o, Node: node("n1", booted("boot-b")), Template: tpl,
		Machine: MachineObservation{Target: "BareMetalHost metal3/n1", Requested: true}, Now: now})
	require.Equal(t, v1alpha1.PhaseVerifying, tr.Status.Phase, tr.Status.Message)
	require.Equal(t, "boot-a", tr.Status.BootID)
}
