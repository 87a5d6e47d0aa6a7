package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

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

// TestAdvanceRebootPodAfterReboot: the same for a reboot pod. A node that
// rebooted between admission and the pod's creation (a long drain, the
// fault) waits for the reboot the pod makes.
func TestAdvanceRebootPodAfterReboot(t *testing.T) {
	reboot := tpl(v1alpha1.SuccessNodeRebooted)
	o := op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a"))
	n := node("n1", booted("boot-b"))
	tr := Advance(AdvanceInput{Op: o, Node: n, Template: reboot, Now: now})
	require.Equal(t, EffectCreatePod, tr.Effect)
	require.Equal(t, "boot-b", tr.Status.BootID, "the boot ID when the pod is created")
	require.Contains(t, tr.Status.Message, "boot ID boot-b")

	o.Status = tr.Status
	tr = Advance(AdvanceInput{Op: o, Node: n, Template: reboot, Pod: opPod(corev1.PodRunning, time.Time{}, 0), Now: now.Add(time.Second)})
	require.Equal(t, v1alpha1.PhaseRunning, tr.Status.Phase, "a reboot before the pod is not the pod's: %s", tr.Status.Message)

	tr = Advance(AdvanceInput{Op: o, Node: node("n1", booted("boot-c")), Template: reboot, Pod: opPod(corev1.PodRunning, time.Time{}, 0), Now: now.Add(time.Minute)})
	require.Equal(t, v1alpha1.PhaseVerifying, tr.Status.Phase, tr.Status.Message)
}
