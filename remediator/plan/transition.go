package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// What one step of the lifecycle returns (a Transition: its status, its
// one Effect, its Events), and the builder the phases share to make it.

// maxMessage bounds status.message.
const maxMessage = 1024

// Effect is the one change to the cluster that a Transition needs. The
// controller makes it before it records the transition, so a failed effect
// leaves the operation where it was and the next pass decides again.
type Effect int

const (
	// EffectNone: the transition changes only the operation's status.
	EffectNone Effect = iota
	// EffectReserve writes the operation's name into the admission ledger
	// (a conflict means another admission won: decide again).
	EffectReserve
	// EffectQuarantine cordons the node and taints it quarantined.
	EffectQuarantine
	// EffectCordon cordons the node and records the operation as the one
	// that did it.
	EffectCordon
	// EffectDrain evicts or deletes the pods of Transition.Drain.
	EffectDrain
	// EffectCreatePod creates the operation pod.
	EffectCreatePod
	// EffectDeletePod deletes AdvanceInput.Pod, which timed out.
	EffectDeletePod
	// EffectUncordon undoes the operation's own cordon.
	EffectUncordon
	// EffectDeleteOperation deletes the finished operation after its
	// retention.
	EffectDeleteOperation
	// EffectMachineRequest asks the machine provider (Cluster API, Metal3,
	// a BMC) what Transition.Status.MachineRequest records.
	EffectMachineRequest
	// EffectExcludeGPU creates the DeviceTaintRule that
	// Transition.Status.Exclusion names for AdvanceInput.Device, instead
	// of a cordon (or, past the per-GPU cap, of a quarantine).
	EffectExcludeGPU
	// EffectCreateCapturePod creates the diagnostics capture pod that
	// Transition.Status.Diagnostics names, from AdvanceInput.CaptureTemplate.
	EffectCreateCapturePod
	// EffectDeleteCapturePod deletes AdvanceInput.CapturePod, which timed
	// out.
	EffectDeleteCapturePod
	// EffectCreateValidationPod creates the test pod that
	// Transition.Status.Validation names, from AdvanceInput.ValidateTemplate,
	// bound to the node and asking for every GPU it has.
	EffectCreateValidationPod
	// EffectDeleteValidationPod deletes the operation's test pods other
	// than the one Transition.Status.Validation names (a first attempt that
	// gave no answer and may hold the GPUs).
	EffectDeleteValidationPod
)

func (e Effect) String() string {
	return [...]string{"None", "Reserve", "Quarantine", "Cordon", "Drain", "CreatePod", "DeletePod", "Uncordon", "DeleteOperation", "MachineRequest", "ExcludeGPU", "CreateCapturePod", "DeleteCapturePod", "CreateValidationPod", "DeleteValidationPod"}[e]
}

// Event is an Event to emit on the operation and its node once the status
// that records the transition is written (or, OnEffect, once its effect is
// made).
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is a constant of v1alpha1.
	Reason string
	// Action is what was done, in one word.
	Action string
	Note   string
	// OnEffect: the Event reports an effect that a retried pass never
	// makes again (a machine asked), so the controller emits it as soon
	// as the effect is made. After the status write, it would be lost
	// with a write that fails: the retry only records the request.
	OnEffect bool
}

// Transition is one step of an operation's lifecycle.
type Transition struct {
	// Status is the operation's status after the step; the controller
	// writes it once the Effect is made.
	Status v1alpha1.NodeOperationStatus
	// Effect is the change to make first; Drain is its decision for
	// EffectDrain.
	Effect Effect
	Drain  drain.Decision
	// Events to emit once Status is written (those marked OnEffect once
	// the Effect is made).
	Events []Event
	// RequeueAfter is when to look again with nothing changing; zero: on
	// change only.
	RequeueAfter time.Duration
	// Blocked, when set, is the reason to count in the blocked-operations
	// metric (a limit that newly holds or ends the operation, or DryRun).
	Blocked string
	// Captured is how a capture that ended in this step went (for the
	// captures metric); "" when none ended.
	Captured v1alpha1.DiagnosticsResult
	// LinkBundle: the capture's bundle is in the store; the controller
	// adds a presigned link to Status.Diagnostics.Bundle before it writes.
	LinkBundle bool
	// Validation, when set, is the node's GPUValidationFailed condition
	// after a test ended in this step; the controller writes it before the
	// status.
	Validation *NodeValidation
	// Remediated is the time from the trigger condition to a verified node;
	// zero when the step did not verify one or had no trigger (a negative
	// time, from clock skew between the node and the remediator, is not
	// counted either).
	Remediated time.Duration
}

// SplitEvents splits a transition's Events, each part in its order, into
// those the controller emits as soon as the effect is made (OnEffect) and
// those it emits after the status write that records the step. An Event of
// an effect a retried pass never makes again (a machine asked) is told at
// once, or a failed write would lose it; every other Event waits for the
// write, as a pass whose write fails is retried, decides the step again
// and tells it then.
func SplitEvents(events []Event) (onEffect, afterWrite []Event) {
	for _, e := range events {
		if e.OnEffect {
			onEffect = append(onEffect, e)
		} else {
			afterWrite = append(afterWrite, e)
		}
	}
	return onEffect, afterWrite
}

// HoldForEvents reports whether a pass must stop before making effect,
// when pending Events of its earlier steps (a cordon, a drain) still wait
// for the status write. A machine request's Event is emitted as soon as
// the request is made, so it would come before them: the controller writes
// the status and emits them first, and makes the request in a pass a
// second later, so that the Events keep the order of the steps.
func HoldForEvents(effect Effect, pending int) bool {
	return effect == EffectMachineRequest && pending > 0
}

// transition builds a Transition.
type transition struct {
	in AdvanceInput
	Transition
}

func (t *transition) setPhase(phase v1alpha1.NodeOperationPhase, msg string) {
	t.Status.Phase = phase
	t.Status.Message = Truncate(msg, maxMessage)
	if phase.Finished() && t.Status.CompletionTime == nil {
		c := metav1.NewTime(t.in.Now)
		t.Status.CompletionTime = &c
	}
}

// finish ends the operation, with an Event: Normal for success, Warning
// otherwise.
func (t *transition) finish(phase v1alpha1.NodeOperationPhase, reason, msg string) {
	t.setPhase(phase, reason+": "+msg)
	typ := corev1.EventTypeNormal
	if phase != v1alpha1.PhaseSucceeded {
		typ = corev1.EventTypeWarning
	}
	t.emit(typ, reason, string(phase), msg)
}

func (t *transition) emit(typ, reason, action, note string) {
	t.Events = append(t.Events, Event{Type: typ, Reason: reason, Action: action, Note: note})
}

func (t *transition) cond(typ string, status metav1.ConditionStatus, reason, msg string) {
	SetCondition(&t.Status.Conditions, typ, status, reason, msg, t.in.Op.Generation, t.in.Now)
}

// since is when the condition last changed; now when it is not set.
func (t *transition) since(typ string) time.Time {
	if c := apimeta.FindStatusCondition(t.Status.Conditions, typ); c != nil {
		return c.LastTransitionTime.Time
	}
	return t.in.Now
}

func (t *transition) requeue(d time.Duration) {
	d = max(d, time.Second)
	if t.RequeueAfter == 0 || d < t.RequeueAfter {
		t.RequeueAfter = d
	}
}

func (t *transition) requeueAt(at time.Time) {
	if !at.IsZero() {
		t.requeue(at.Sub(t.in.Now))
	}
}

// SetCondition sets a condition, keeping lastTransitionTime while the
// status stays, and bounding the message to the API's 32 KiB.
func SetCondition(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string, gen int64, now time.Time) {
	if len(msg) > 32768 {
		msg = msg[:32768]
	}
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
}
