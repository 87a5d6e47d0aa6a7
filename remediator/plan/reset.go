package plan

import (
	"fmt"
	"time"
)

// A BMC power cycle is asked after its intent is recorded (the Node's
// kubemedic.io/machine-reset-intent, with the node's boot ID and the BMC's
// power state and last reset time at that moment), and its answer is
// recorded after (kubemedic.io/machine-requested-by). A pass that finds
// the intent without the answer cannot tell from its own state whether the
// BMC applied the reset: the answer was lost (a 5xx or a timeout after
// the POST), the process died between the intent and the POST, or the
// record of the answer failed. JudgeReset decides from evidence, and a
// second power cycle of a node that may be booting is the one outcome it
// must never choose without proof.

// Power states of a Redfish ComputerSystem (the PowerState enum of the
// Resource schema, DSP8010), as the BMC reports them.
const (
	PowerOn          = "On"
	PowerOff         = "Off"
	PowerPoweringOn  = "PoweringOn"
	PowerPoweringOff = "PoweringOff"
)

// ResetSettle is how long after the ask's own deadline a reset the BMC
// accepted may still take to show (in its power state, or by cutting the
// kubelet off), and covers the clock skew between the remediator that
// wrote the intent, the one judging it and the node's kubelet.
const ResetSettle = 2 * time.Minute

// ResetEvidence is what is known of a BMC reset whose intent was recorded
// and whose answer was not.
type ResetEvidence struct {
	// IntentUnread says why the intent on the Node cannot be read; ""
	// when it was. Nothing else is known then.
	IntentUnread string
	// Intended is when the intent was written; the ask followed at once,
	// or never.
	Intended time.Time
	// CallTimeout bounds the ask: no reset can come from it later than
	// Intended+CallTimeout (plus ResetSettle for the BMC to act on it).
	CallTimeout time.Duration
	// BootID, PowerState and LastResetTime are the node's boot ID and the
	// BMC's power state and LastResetTime recorded with the intent; ""
	// where unknown (the node reported no boot ID, the BMC sends no
	// LastResetTime).
	BootID, PowerState, LastResetTime string

	// NodeBootID is the node's boot ID now; "" when unknown.
	NodeBootID string
	// NodeHeartbeat is when the node's kubelet last reported (its Ready
	// condition's lastHeartbeatTime, which only the kubelet moves); zero
	// when unknown.
	NodeHeartbeat time.Time
	// BMCUnread says why the BMC could not be read now (its error, or
	// what is missing to ask it); "" when it was.
	BMCUnread string
	// BMCPowerState and BMCLastResetTime are what the BMC says now.
	BMCPowerState, BMCLastResetTime string
}

// ResetVerdict is JudgeReset's answer.
type ResetVerdict string

const (
	// ResetApplied: the evidence shows the reset happened, or that the
	// machine's power is being changed now: record it, never ask again.
	ResetApplied ResetVerdict = "Applied"
	// ResetNotApplied: the evidence shows the machine kept running, on
	// the same boot, after the ask could have reached it: ask again.
	ResetNotApplied ResetVerdict = "NotApplied"
	// ResetUnknown: the evidence says neither: hold, say what is missing,
	// and fail the step at its timeout if nothing more comes.
	ResetUnknown ResetVerdict = "Unknown"
)

// ResetJudgement is a verdict and its reason.
type ResetJudgement struct {
	Verdict ResetVerdict
	// Why says what the evidence shows, or what is missing, in words.
	Why string
	// RecheckAt is when time alone may turn an Unknown into an answer
	// (the end of the window in which the ask could still land); zero
	// when only new evidence can.
	RecheckAt time.Time
}

// JudgeReset decides whether a BMC reset whose intent was recorded and
// whose answer was not was applied. The rule, first match wins:
//
//  0. The intent cannot be read: Unknown.
//  1. The node's boot ID differs from the one recorded with the intent:
//     Applied (the node rebooted).
//  2. The BMC was read:
//     a. its LastResetTime differs from the one recorded: Applied;
//     b. it reports PoweringOff or PoweringOn: Applied (the machine's
//     power is being changed; a second ask would cut a boot short);
//     c. it reports Off and was not Off when the intent was recorded:
//     Applied (the cycle is under way); Off before and still Off: Unknown;
//     d. it reports On and was Off: Applied (the machine was powered on);
//     e. any other state but On (Paused, none): Unknown.
//  3. The BMC could not be read: Unknown.
//  4. Power is On. Until Intended+CallTimeout+ResetSettle the ask may
//     still land: Unknown, rechecked then.
//  5. No boot ID, then or now: Unknown.
//  6. The kubelet reported after that window, on the boot ID recorded
//     with the intent: NotApplied. A power cycle would have cut it off
//     before then, so the ask never reached the machine.
//  7. Otherwise (the kubelet is silent: it may be dead, or the machine
//     may be booting with the BMC already showing On): Unknown.
//
// So only a kubelet alive on the same boot after the ask's window, with
// the BMC reachable and showing On and no new LastResetTime, leads to a
// second ask; missing evidence never does.
func JudgeReset(e ResetEvidence, now time.Time) ResetJudgement {
	if e.IntentUnread != "" {
		return ResetJudgement{Verdict: ResetUnknown, Why: fmt.Sprintf("the record of that ask cannot be read (%s)", e.IntentUnread)}
	}
	if e.BootID != "" && e.NodeBootID != "" && e.NodeBootID != e.BootID {
		return ResetJudgement{Verdict: ResetApplied, Why: fmt.Sprintf("the node rebooted (boot ID %s, was %s)", e.NodeBootID, e.BootID)}
	}
	if e.BMCUnread != "" {
		return ResetJudgement{Verdict: ResetUnknown, Why: fmt.Sprintf("its boot ID is unchanged and its BMC cannot be read (%s)", e.BMCUnread)}
	}
	if e.LastResetTime != "" && e.BMCLastResetTime != "" && e.BMCLastResetTime != e.LastResetTime {
		return ResetJudgement{Verdict: ResetApplied, Why: fmt.Sprintf("the BMC says the system last came out of a reset at %s (%s before the ask)", e.BMCLastResetTime, e.LastResetTime)}
	}
	switch e.BMCPowerState {
	case PowerPoweringOff, PowerPoweringOn:
		return ResetJudgement{Verdict: ResetApplied, Why: fmt.Sprintf("the BMC shows the system %s (%s before the ask)", e.BMCPowerState, orNone(e.PowerState))}
	case PowerOff:
		if e.PowerState != PowerOff {
			return ResetJudgement{Verdict: ResetApplied, Why: fmt.Sprintf("the BMC shows the system Off (%s before the ask)", orNone(e.PowerState))}
		}
		return ResetJudgement{Verdict: ResetUnknown, Why: "the BMC showed the system Off before the ask and shows it Off still"}
	case PowerOn:
		if e.PowerState == PowerOff {
			return ResetJudgement{Verdict: ResetApplied, Why: "the BMC shows the system On, Off before the ask"}
		}
	default:
		return ResetJudgement{Verdict: ResetUnknown, Why: fmt.Sprintf("the BMC reports the system's PowerState as %s", orNone(e.BMCPowerState))}
	}
	window := e.Intended.Add(e.CallTimeout + ResetSettle)
	if now.Before(window) {
		return ResetJudgement{Verdict: ResetUnknown, RecheckAt: window,
			Why: fmt.Sprintf("the ask may still be landing until %s (the BMC shows it On, its boot ID is unchanged)", window.UTC().Format(time.RFC3339))}
	}
	if e.BootID == "" || e.NodeBootID == "" {
		return ResetJudgement{Verdict: ResetUnknown, Why: "the BMC shows it On, but the node reported no boot ID to tell a reboot by"}
	}
	if e.NodeHeartbeat.After(window) {
		return ResetJudgement{Verdict: ResetNotApplied, Why: fmt.Sprintf("its kubelet reported at %s on boot ID %s, after the ask would have cut the power, and the BMC shows it On: the ask never reached it",
			e.NodeHeartbeat.UTC().Format(time.RFC3339), e.NodeBootID)}
	}
	last := "never"
	if !e.NodeHeartbeat.IsZero() {
		last = "last at " + e.NodeHeartbeat.UTC().Format(time.RFC3339)
	}
	return ResetJudgement{Verdict: ResetUnknown,
		Why: fmt.Sprintf("the BMC shows it On and its boot ID %s is unchanged, but its kubelet has not reported since the ask (%s): it may be booting", e.NodeBootID, last)}
}

func orNone(s string) string {
	if s == "" {
		return "none reported"
	}
	return s
}
