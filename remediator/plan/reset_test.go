package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// intended is the evidence of an intent recorded at `at` on boot-a with
// the BMC On, its LastResetTime lr; seen now: the same boot, the BMC On
// with the same LastResetTime, the kubelet last heard from at hb.
func intended(at time.Time, hb time.Time) ResetEvidence {
	const lr = "2026-03-01T08:00:00Z"
	return ResetEvidence{Intended: at, CallTimeout: 30 * time.Second, BootID: "boot-a", PowerState: PowerOn, LastResetTime: lr,
		NodeBootID: "boot-a", NodeHeartbeat: hb, BMCPowerState: PowerOn, BMCLastResetTime: lr}
}

func TestJudgeReset(t *testing.T) {
	asked := ago(10 * time.Minute)
	window := asked.Add(30*time.Second + ResetSettle)
	alive := window.Add(time.Second)
	for _, tc := range []struct {
		desc string
		e    func(e *ResetEvidence)
		at   time.Time // now; zero: the package's now
		want ResetVerdict
		why  string
	}{
		{desc: "a new boot ID: the node rebooted",
			e: func(e *ResetEvidence) { e.NodeBootID = "boot-b" }, want: ResetApplied, why: "the node rebooted (boot ID boot-b, was boot-a)"},
		{desc: "a new boot ID wins over an unreachable BMC",
			e: func(e *ResetEvidence) { e.NodeBootID, e.BMCUnread = "boot-b", "timeout" }, want: ResetApplied, why: "rebooted"},
		{desc: "a new boot ID wins over a kubelet that reported after the window (it is the new boot's)",
			e: func(e *ResetEvidence) { e.NodeBootID, e.NodeHeartbeat = "boot-b", alive }, want: ResetApplied},
		{desc: "a new LastResetTime: the BMC reset it",
			e: func(e *ResetEvidence) { e.BMCLastResetTime = "2026-03-04T11:51:00Z" }, want: ResetApplied, why: "last came out of a reset at 2026-03-04T11:51:00Z"},
		{desc: "a new LastResetTime wins over a kubelet that reported (a ForceRestart so quick the kubelet reported before the boot ID)",
			e: func(e *ResetEvidence) { e.BMCLastResetTime, e.NodeHeartbeat = "2026-03-04T11:51:00Z", alive }, want: ResetApplied},
		{desc: "PoweringOff: the cycle is under way",
			e: func(e *ResetEvidence) { e.BMCPowerState = PowerPoweringOff }, want: ResetApplied, why: "PoweringOff (On before the ask)"},
		{desc: "PoweringOn: the machine is coming back",
			e: func(e *ResetEvidence) { e.BMCPowerState, e.NodeHeartbeat = PowerPoweringOn, alive }, want: ResetApplied, why: "PoweringOn"},
		{desc: "Off after On: the cycle is under way",
			e: func(e *ResetEvidence) { e.BMCPowerState = PowerOff }, want: ResetApplied, why: "Off (On before the ask)"},
		{desc: "Off, and no power state recorded: not On before, so the cut is the ask's or someone's; never asked again",
			e: func(e *ResetEvidence) { e.PowerState, e.BMCPowerState = "", PowerOff }, want: ResetApplied, why: "none reported before the ask"},
		{desc: "Off before and Off still: nothing says",
			e: func(e *ResetEvidence) { e.PowerState, e.BMCPowerState, e.NodeHeartbeat = PowerOff, PowerOff, alive }, want: ResetUnknown, why: "Off before the ask and shows it Off still"},
		{desc: "On after Off: the machine was powered on",
			e: func(e *ResetEvidence) { e.PowerState, e.NodeHeartbeat = PowerOff, alive }, want: ResetApplied, why: "On, Off before the ask"},
		{desc: "Paused: not a state to judge by",
			e: func(e *ResetEvidence) { e.BMCPowerState, e.NodeHeartbeat = "Paused", alive }, want: ResetUnknown, why: "PowerState as Paused"},
		{desc: "no PowerState: missing evidence",
			e: func(e *ResetEvidence) { e.BMCPowerState, e.NodeHeartbeat = "", alive }, want: ResetUnknown, why: "none reported"},
		{desc: "the BMC cannot be read, though the kubelet reported: no second cycle without the BMC's word",
			e: func(e *ResetEvidence) {
				e.BMCUnread, e.NodeHeartbeat = "redfish read of system 1: read service root: timeout", alive
			},
			want: ResetUnknown, why: "its BMC cannot be read (redfish read of system 1: read service root: timeout)"},
		{desc: "On, the same boot, the kubelet reported after the window: the ask never came",
			e: func(e *ResetEvidence) { e.NodeHeartbeat = alive }, want: ResetNotApplied, why: "after the ask would have cut the power"},
		{desc: "On, the same boot, the same LastResetTime absent (an old BMC), the kubelet reported after the window: the ask never came",
			e: func(e *ResetEvidence) { e.NodeHeartbeat, e.LastResetTime, e.BMCLastResetTime = alive, "", "" }, want: ResetNotApplied},
		{desc: "a LastResetTime only now (a firmware update): no evidence either way from it",
			e: func(e *ResetEvidence) { e.NodeHeartbeat, e.LastResetTime = alive, "" }, want: ResetNotApplied},
		{desc: "the kubelet reported at the window's end exactly: not after it",
			e: func(e *ResetEvidence) { e.NodeHeartbeat = window }, want: ResetUnknown, why: "may be booting"},
		{desc: "the kubelet reported only before the ask: it may be dead, or the machine booting",
			e: func(e *ResetEvidence) { e.NodeHeartbeat = asked.Add(-time.Minute) }, want: ResetUnknown, why: "has not reported since the ask (last at"},
		{desc: "no heartbeat at all",
			e: func(e *ResetEvidence) { e.NodeHeartbeat = time.Time{} }, want: ResetUnknown, why: "(never)"},
		{desc: "within the ask's window: it may still land, rechecked at its end",
			e: func(e *ResetEvidence) { e.NodeHeartbeat = asked.Add(time.Minute) }, at: asked.Add(time.Minute), want: ResetUnknown, why: "may still be landing until"},
		{desc: "no boot ID recorded with the intent",
			e: func(e *ResetEvidence) { e.BootID, e.NodeHeartbeat = "", alive }, want: ResetUnknown, why: "no boot ID"},
		{desc: "an intent that does not parse: nothing is known",
			e: func(e *ResetEvidence) { e.IntentUnread, e.NodeHeartbeat = "invalid character", alive }, want: ResetUnknown, why: "cannot be read (invalid character)"},
		{desc: "no boot ID now",
			e: func(e *ResetEvidence) { e.NodeBootID, e.NodeHeartbeat = "", alive }, want: ResetUnknown, why: "no boot ID"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := intended(asked, asked.Add(-time.Minute))
			tc.e(&e)
			at := tc.at
			if at.IsZero() {
				at = now
			}
			got := JudgeReset(e, at)
			require.Equal(t, tc.want, got.Verdict, got.Why)
			require.Contains(t, got.Why, tc.why)
			if tc.at.IsZero() {
				require.Zero(t, got.RecheckAt, "past the window, only new evidence changes the verdict")
			} else {
				require.Equal(t, window, got.RecheckAt)
			}
		})
	}
}

// TestAdvanceMachineResetIntent: a redfish request whose intent is on the
// Node and whose answer is not is recorded when the evidence shows it
// applied, asked again only when it shows the ask never came, and held
// (no effect, a Warning naming the node and what is missing, failed at
// the timeout) otherwise.
func TestAdvanceMachineResetIntent(t *testing.T) {
	bmc := machineTpl(v1alpha1.MachineRedfish)
	target := "https://bmc/redfish/v1/Systems/1"
	intentAt := ago(5 * time.Minute)
	running := func(since time.Time, opts ...opOpt) *v1alpha1.NodeOperation {
		return op("op", "n1", append([]opOpt{phase(v1alpha1.PhaseRunning), bootID("boot-0"),
			opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, since)}, opts...)...)
	}
	seen := func(edit func(e *ResetEvidence)) MachineObservation {
		e := intended(intentAt, intentAt.Add(-time.Minute))
		edit(&e)
		return MachineObservation{Target: target, Reset: &e}
	}
	for _, tc := range []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		{desc: "applied (a new LastResetTime): recorded as asked when the intent was written, told, not asked again",
			in: AdvanceInput{Op: running(ago(10 * time.Minute)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.BMCLastResetTime = "2026-03-04T11:56:00Z" })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, events: []string{v1alpha1.EventMachineRequestFound},
				message: "asked " + target + "; waiting for the node to reboot (boot ID boot-a)",
				check: func(t *testing.T, tr Transition) {
					r := tr.Status.MachineRequest
					require.NotNil(t, r)
					require.Equal(t, target, r.Target)
					require.True(t, r.Time.Time.Equal(intentAt), "the time of the ask, not of finding it")
					require.Contains(t, r.Action, "ComputerSystem.Reset ResetType=PowerCycle; its answer was not recorded, and the BMC says")
					require.Equal(t, "boot-a", tr.Status.BootID, "the boot ID recorded with the intent, not admission's")
					require.Contains(t, tr.Events[0].Note, "not asked again")
				}}},
		{desc: "applied (the node rebooted and is Ready): recorded and verified in the same pass",
			in: AdvanceInput{Op: running(ago(10 * time.Minute)), Node: node("n1", booted("boot-b")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.NodeBootID = "boot-b" })},
			want: want{phase: v1alpha1.PhaseVerifying, effect: EffectNone, events: []string{v1alpha1.EventMachineRequestFound, v1alpha1.EventOperationSucceeded},
				conditions: []string{"OperationSucceeded=True/NodeRebooted"}, check: func(t *testing.T, tr Transition) {
					require.Contains(t, tr.Events[1].Note, "boot ID boot-b, was boot-a")
				}}},
		{desc: "not applied (the kubelet reported on the same boot after the window): asked again, said so",
			in: AdvanceInput{Op: running(ago(10 * time.Minute)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.NodeHeartbeat = ago(time.Second) })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectMachineRequest, events: []string{v1alpha1.EventMachineRequested},
				check: func(t *testing.T, tr Transition) {
					require.True(t, tr.Events[0].OnEffect)
					require.Contains(t, tr.Events[0].Note, "asked "+target+" again")
					require.Contains(t, tr.Events[0].Note, "node n1 shows it never came")
					require.Equal(t, "ComputerSystem.Reset ResetType=PowerCycle", tr.Status.MachineRequest.Action)
				}}},
		{desc: "unknown (the BMC cannot be read): held, with a Warning naming the node and what is missing",
			in: AdvanceInput{Op: running(ago(10 * time.Minute)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.BMCUnread = "read service root: HTTP 503" })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, events: []string{v1alpha1.EventMachineRequestHeld}, requeue: VerifyResync,
				message: "not asking " + target + " again for node n1: the first ask has no recorded answer, and its boot ID is unchanged and its BMC cannot be read (read service root: HTTP 503)",
				check: func(t *testing.T, tr Transition) {
					require.Nil(t, tr.Status.MachineRequest)
					require.Equal(t, "Warning", tr.Events[0].Type)
					require.Contains(t, tr.Events[0].Note, "node n1")
				}}},
		{desc: "unknown within the ask's window: rechecked at its end",
			in: AdvanceInput{Op: running(ago(time.Minute)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: MachineObservation{Target: target, Reset: func() *ResetEvidence { e := intended(ago(2*time.Minute+15*time.Second), ago(time.Second)); return &e }()}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, requeue: 15 * time.Second, message: "may still be landing"}},
		{desc: "held, and already said so: no second Warning",
			in: AdvanceInput{Op: running(ago(10*time.Minute), func(o *v1alpha1.NodeOperation) {
				o.Status.Message = "not asking " + target + " again for node n1: the first ask has no recorded answer, and its boot ID is unchanged and its BMC cannot be read (x); held until new evidence, or until " +
					ago(10*time.Minute).Add(20*time.Minute).UTC().Format(time.RFC3339) + ", when the step fails"
			}), Node: node("n1", booted("boot-a")), Template: bmc, Machine: seen(func(e *ResetEvidence) { e.BMCUnread = "x" })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone}},
		{desc: "held at the timeout: the step fails, saying it was not asked again and why",
			in: AdvanceInput{Op: running(ago(time.Hour)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.BMCUnread = "read service root: HTTP 503" })},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, conditions: []string{"OperationSucceeded=False/OperationTimeout"},
				message: "has no recorded answer, and it was not asked again, as nothing showed whether node n1 was reset: its boot ID is unchanged and its BMC cannot be read"}},
		{desc: "not applied, but past the timeout: not asked",
			in: AdvanceInput{Op: running(ago(time.Hour)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.NodeHeartbeat = ago(time.Second) })},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, message: "could not be asked"}},
		{desc: "the answer recorded (the Node's marker) wins over the intent: recorded, the boot ID from the intent",
			in: AdvanceInput{Op: running(ago(10 * time.Minute)), Node: node("n1", booted("boot-a")), Template: bmc,
				Machine: MachineObservation{Target: target, Requested: true, BootID: "boot-a"}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, check: func(t *testing.T, tr Transition) {
				require.NotNil(t, tr.Status.MachineRequest)
				require.Equal(t, "boot-a", tr.Status.BootID)
				require.Empty(t, tr.Events)
			}}},
		{desc: "a request already recorded in the status ignores the evidence",
			in: AdvanceInput{Op: running(ago(10*time.Minute), asked(v1alpha1.MachineRedfish, target, ago(5*time.Minute))), Node: node("n1", booted("boot-0")), Template: bmc,
				Machine: seen(func(e *ResetEvidence) { e.BMCUnread = "x" })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, message: "waiting for the node to reboot"}},
	} {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}
