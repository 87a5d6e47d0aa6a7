package plan

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// Timings of the operation lifecycle that no policy sets.
const (
	// DrainPoll is how often a drain is looked at again: a disruption
	// budget that starts allowing evictions changes no object the
	// controller watches.
	DrainPoll = 5 * time.Second
	// WaitingResync looks at a waiting operation again even when nothing it
	// watches changed, as a safety net.
	WaitingResync = time.Minute
	// VerifyResync looks at an operation being verified again at least
	// this often: a GPU count coming back changes the node, but a missed
	// watch event must not leave the node cordoned until the timeout.
	VerifyResync = 30 * time.Second
	// RebootPodGrace: under the NodeRebooted criterion, an operation pod
	// that failed (the reboot killed it, or its command returned an error
	// as the node went down) is given this long for the new boot ID to show
	// before the step fails.
	RebootPodGrace = 2 * time.Minute
	// maxMessage bounds status.message.
	maxMessage = 1024
)

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
)

func (e Effect) String() string {
	return [...]string{"None", "Reserve", "Quarantine", "Cordon", "Drain", "CreatePod", "DeletePod", "Uncordon", "DeleteOperation", "MachineRequest", "ExcludeGPU", "CreateCapturePod", "DeleteCapturePod"}[e]
}

// MachineObservation is what the controller found of the node's machine
// provider for a clusterAPI, metal3 or redfish operation (Running).
type MachineObservation struct {
	// Target names what a request goes to, e.g. "Machine ns/name",
	// "BareMetalHost ns/name" or the BMC's system URL; "" when none was
	// found.
	Target string
	// Missing says why no target was found: the operation fails.
	Missing string
	// Requested: the target carries this operation's request already (a
	// pass whose status write failed made it).
	Requested bool
	// Gone: the Machine this operation asked about no longer exists.
	Gone bool
}

// Device is the DRA device of the operation's GPU, found in a
// ResourceSlice on the node by its UUID, or by its PCI bus ID when the
// trigger names no UUID.
type Device struct {
	Driver, Pool, Name string
	// UUID is the GPU's, from the device's uuid attribute: the
	// operation's status records it when the trigger named the bus only.
	UUID string
	// Rule is the DeviceTaintRule's name for it.
	Rule string
}

func (d Device) String() string { return d.Driver + "/" + d.Pool + "/" + d.Name }

// AdvanceInput is what Advance decides from, read by the controller for the
// operation's phase. Objects are not changed.
type AdvanceInput struct {
	Op *v1alpha1.NodeOperation
	// Node is the target node; nil when it does not exist. In Cordoning it
	// must be read from the API server, not a cache, so that a fresh human
	// cordon is never taken for an operation's.
	Node *corev1.Node
	// Template is the operation's NodeOperationTemplate (Pending, Running);
	// nil when it does not exist.
	Template *v1alpha1.NodeOperationTemplate
	// Admission is plan.Admit's verdict (WaitingForBudget), unless Reserved.
	Admission Admission
	// Reserved: the admission ledger holds the operation's name already (it
	// was admitted before a crash or a failed status write).
	Reserved bool
	// Pods are the pods on the node, from the API server (Draining).
	Pods []corev1.Pod
	// Pod is the operation pod (Running); nil when it was not created yet
	// or is gone.
	Pod *corev1.Pod
	// Namespace is where operation pods run, for messages.
	Namespace string
	// Retention is how long a finished operation is kept (see Retention).
	Retention time.Duration
	// Machine is the node's machine provider as found (Running, for a
	// clusterAPI, metal3 or redfish template).
	Machine MachineObservation
	// Device is the operation's GPU as a DRA device (WaitingForBudget and
	// Cordoning, when the operation names a GPU by UUID or bus ID); nil
	// when the API server serves no DeviceTaintRule or no ResourceSlice
	// lists the GPU, and NoDevice then says which.
	Device   *Device
	NoDevice string
	// CaptureTemplate is the diagnostics' NodeOperationTemplate (Capturing);
	// nil when it does not exist.
	CaptureTemplate *v1alpha1.NodeOperationTemplate
	// CapturePod is the capture pod (Capturing); nil when it was not
	// created yet or is gone.
	CapturePod *corev1.Pod
	Now        time.Time
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
	// Remediated is the time from the trigger condition to a verified node;
	// zero when the step did not verify one or had no trigger (a negative
	// time, from clock skew between the node and the remediator, is not
	// counted either).
	Remediated time.Duration
}

// Advance decides the next step of an operation in its phase: the status it
// moves to, the one effect that step needs and the Events it leaves. The
// controller reads what the phase needs, calls Advance, makes the effect,
// and calls it again while the phase changes.
//
// The lifecycle: Pending (template and parameters) → WaitingForBudget
// (admission: skip, wait or start; dry run ends here) → Cordoning (or
// quarantine) → Draining → Running (the pod, or a reboot seen by boot ID,
// within the timeout) → Verifying (within the recovery timeout) →
// Succeeded | Failed | Skipped, deleted after the retention.
func Advance(in AdvanceInput) Transition {
	t := &transition{in: in, Transition: Transition{Status: *in.Op.Status.DeepCopy()}}
	switch in.Op.Status.Phase {
	case "", v1alpha1.PhasePending:
		t.pending()
	case v1alpha1.PhaseWaitingForBudget:
		t.admit()
	case v1alpha1.PhaseCordoning:
		t.cordoning()
	case v1alpha1.PhaseCapturing:
		t.capturing()
	case v1alpha1.PhaseDraining:
		t.draining()
	case v1alpha1.PhaseRunning:
		t.running()
	case v1alpha1.PhaseVerifying:
		t.verifying()
	default:
		t.finished()
	}
	return t.Transition
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

// pending checks what the operation needs before it can wait for a budget:
// its template and the parameters the template takes from the trigger.
func (t *transition) pending() {
	op := t.in.Op
	if !op.Spec.Quarantine {
		if t.in.Template == nil {
			t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonTemplateNotFound, fmt.Sprintf("NodeOperationTemplate %s does not exist", op.Spec.Operation))
			return
		}
		params, err := Parameters(t.in.Template, op)
		if err != nil {
			t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonParameterMissing, err.Error())
			return
		}
		t.Status.Parameters = params
	}
	if tr := op.Spec.Trigger; tr != nil && t.Status.GPU == nil {
		if bus, uuid := gpuwire.GPUFromMessage(tr.Message); bus != "" || uuid != "" {
			t.Status.GPU = &v1alpha1.GPUTarget{UUID: uuid, BusID: bus}
		}
	}
	t.setPhase(v1alpha1.PhaseWaitingForBudget, "checking the safety limits")
}

// admit turns the admission verdict into the operation's next step.
func (t *transition) admit() {
	op := t.in.Op
	a := t.in.Admission
	if t.in.Reserved {
		a = Admission{Verdict: Start, Message: "admitted earlier (admission ledger)"}
	}
	if op.Spec.DryRun {
		t.dryRun(a)
		return
	}
	switch a.Verdict {
	case Skip:
		t.Blocked = a.Reason
		switch {
		case a.ExcludeGPU && t.in.Device != nil:
			t.excludeGPU(a.Message)
			t.finish(v1alpha1.PhaseSkipped, a.Reason, a.Message+"; GPU "+t.in.Device.String()+" excluded by DeviceTaintRule "+t.in.Device.Rule+", the node keeps serving its other GPUs")
			return
		case a.ExcludeGPU || a.Quarantine:
			if a.ExcludeGPU {
				t.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: Truncate("quarantined the node, as the GPU alone cannot be excluded: "+t.in.NoDevice, maxMessage)}
			}
			t.Effect = EffectQuarantine
			t.cond(v1alpha1.OperationQuarantined, metav1.ConditionTrue, a.Reason, "node cordoned and tainted "+v1alpha1.TaintQuarantined)
		}
		t.finish(v1alpha1.PhaseSkipped, a.Reason, a.Message)
		return
	case Wait:
		prev := apimeta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationAdmitted)
		if prev == nil || prev.Reason != a.Reason {
			// Counted and told once per limit, not once per pass.
			t.Blocked = a.Reason
			t.emit(corev1.EventTypeNormal, a.Reason, "Wait", "waiting: "+a.Message)
		}
		t.cond(v1alpha1.OperationAdmitted, metav1.ConditionFalse, a.Reason, a.Message)
		t.Status.Message = Truncate(a.Reason+": "+a.Message, maxMessage)
		t.requeue(WaitingResync)
		t.requeueAt(a.Next)
		return
	}
	if !t.in.Reserved {
		t.Effect = EffectReserve
	}
	t.cond(v1alpha1.OperationAdmitted, metav1.ConditionTrue, v1alpha1.ReasonLimitsPassed, a.Message)
	start := metav1.NewTime(t.in.Now)
	t.Status.StartTime = &start
	if t.in.Node != nil {
		t.Status.BootID = t.in.Node.Status.NodeInfo.BootID
		t.Status.NodeUID = string(t.in.Node.UID)
	}
	t.emit(corev1.EventTypeNormal, v1alpha1.EventStarted, "Start", "every safety limit passed; starting "+Describe(op))
	switch {
	case op.Spec.Quarantine || op.Spec.Cordon || op.Spec.Drain != nil:
		t.setPhase(v1alpha1.PhaseCordoning, "cordoning the node")
	case t.captureNow():
	default:
		t.setPhase(v1alpha1.PhaseRunning, "starting the operation")
	}
}

// dryRun ends a dry-run operation with what it would have done.
func (t *transition) dryRun(a Admission) {
	var would string
	switch {
	case a.Verdict == Skip && a.Quarantine:
		would = "would quarantine the node: " + a.Message
	case a.Verdict == Skip:
		would = "would skip: " + a.Message
	case a.Verdict == Wait:
		would = fmt.Sprintf("would %s, after waiting for %s: %s", Describe(t.in.Op), a.Reason, a.Message)
	default:
		would = fmt.Sprintf("would %s now", Describe(t.in.Op))
	}
	t.Blocked = v1alpha1.ReasonDryRun
	t.finish(v1alpha1.PhaseSkipped, v1alpha1.ReasonDryRun, would+"; nothing was changed")
}

// cordoning quarantines the node for a quarantine operation, else cordons
// it unless someone else did.
func (t *transition) cordoning() {
	op := t.in.Op
	if op.Spec.Quarantine {
		t.Effect = EffectQuarantine
		t.cond(v1alpha1.OperationQuarantined, metav1.ConditionTrue, v1alpha1.ReasonLadderExhausted, "node cordoned and tainted "+v1alpha1.TaintQuarantined)
		t.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonQuarantined, fmt.Sprintf("node %s cordoned and tainted %s:NoSchedule; a human decides what happens next", op.Spec.NodeName, v1alpha1.TaintQuarantined))
		return
	}
	n := t.in.Node
	if n == nil {
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonNodeNotFound, "node "+op.Spec.NodeName+" does not exist")
		return
	}
	if t.gpuScoped() {
		if t.in.Device != nil {
			t.excludeGPU("kubemedic excluded only the faulty GPU; the node stays schedulable for its other GPUs")
			t.next()
			return
		}
		t.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: Truncate("cordoned the node: "+t.in.NoDevice, maxMessage)}
	} else {
		t.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: "cordoned the node: " + t.whyNotGPU()}
	}
	switch by := n.Annotations[v1alpha1.AnnotationCordonedBy]; {
	case n.Spec.Unschedulable && by == "":
		t.cond(v1alpha1.OperationCordoned, metav1.ConditionTrue, v1alpha1.ReasonCordonedByHuman, "the node was already cordoned by someone else; kubemedic leaves it cordoned")
	case n.Spec.Unschedulable && by == op.Name:
		// Cordoned by this operation in a pass whose status write failed,
		// and with it that pass's Event.
		t.cond(v1alpha1.OperationCordoned, metav1.ConditionTrue, v1alpha1.ReasonCordonedByKubemedic, "kubemedic cordoned the node and uncordons it after verification")
		t.emit(corev1.EventTypeNormal, v1alpha1.EventCordoned, "Cordon", "node cordoned")
	default:
		// Not cordoned, or cordoned by an earlier kubemedic operation (the
		// step before an escalation), which passes it to this one.
		t.Effect = EffectCordon
		t.cond(v1alpha1.OperationCordoned, metav1.ConditionTrue, v1alpha1.ReasonCordonedByKubemedic, "kubemedic cordoned the node and uncordons it after verification")
		t.emit(corev1.EventTypeNormal, v1alpha1.EventCordoned, "Cordon", "node cordoned")
	}
	t.next()
}

// next leaves Cordoning for the capture (BeforeDrain), the drain, or the
// operation.
func (t *transition) next() {
	if (t.in.Op.Spec.Drain == nil || captureWhen(t.in.Op) == v1alpha1.DiagnosticsBeforeDrain) && t.captureNow() {
		return
	}
	t.drainOrRun()
}

// drainOrRun moves to Draining when the step drains, else to Running.
func (t *transition) drainOrRun() {
	if t.in.Op.Spec.Drain != nil {
		t.cond(v1alpha1.OperationDrained, metav1.ConditionFalse, v1alpha1.ReasonDraining, "draining")
		t.setPhase(v1alpha1.PhaseDraining, "draining the node")
		return
	}
	t.setPhase(v1alpha1.PhaseRunning, "starting the operation")
}

// gpuScoped reports whether the operation acts on one GPU the trigger names
// by UUID or bus ID: it is not a quarantine, it does not drain (a drain
// empties the whole node, and on a node left schedulable the evicted pods'
// controllers would place them back while the drain chases them), and its
// template (read in Cordoning) does not reboot, power-cycle or replace the
// node.
func (t *transition) gpuScoped() bool {
	op := t.in.Op
	g := op.Status.GPU
	return !op.Spec.Quarantine && op.Spec.Drain == nil && g != nil && (g.UUID != "" || g.BusID != "") && !NodeWide(t.in.Template)
}

// whyNotGPU says why an operation that is not gpuScoped cordons the node.
func (t *transition) whyNotGPU() string {
	g := t.in.Op.Status.GPU
	switch {
	case NodeWide(t.in.Template):
		return "the operation acts on the whole node"
	case t.in.Op.Spec.Drain != nil:
		return "the step drains the node, which must not take new pods meanwhile"
	case g == nil || (g.UUID == "" && g.BusID == ""):
		return "the trigger names no GPU"
	}
	return "the operation is not scoped to one GPU"
}

// NodeWide reports whether a template acts on the whole node (a reboot,
// a power cycle, a machine replacement), so that excluding one GPU instead
// of cordoning would let pods land on a node about to go down. A missing
// template counts as node-wide.
func NodeWide(tpl *v1alpha1.NodeOperationTemplate) bool {
	if tpl == nil {
		return true
	}
	switch tpl.Spec.SuccessCriterion {
	case v1alpha1.SuccessNodeRebooted, v1alpha1.SuccessMachineReplaced:
		return true
	}
	return tpl.Spec.MachineKind() != ""
}

// excludeGPU taints the operation's GPU (AdvanceInput.Device) through a
// DeviceTaintRule instead of cordoning the node.
func (t *transition) excludeGPU(msg string) {
	d := t.in.Device
	t.Effect = EffectExcludeGPU
	uuid := d.UUID
	if g := t.Status.GPU; g != nil && g.UUID != "" {
		uuid = g.UUID
	} else if g != nil {
		// Found by its bus ID: the GPU is known by UUID from now on (the
		// rule, its removal, the history). A copy: the input is not
		// changed.
		named := *g
		named.UUID = d.UUID
		t.Status.GPU = &named
	}
	t.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: d.Rule, Device: d.String(), Message: Truncate(msg, maxMessage)}
	t.cond(v1alpha1.OperationCordoned, metav1.ConditionFalse, v1alpha1.ReasonGPUExcluded, fmt.Sprintf("GPU %s (%s) excluded by DeviceTaintRule %s (NoSchedule); the node is not cordoned", uuid, d, d.Rule))
	t.emit(corev1.EventTypeNormal, v1alpha1.ReasonGPUExcluded, "Exclude", fmt.Sprintf("GPU %s excluded by DeviceTaintRule %s; the node stays schedulable", uuid, d.Rule))
}

// draining decides the drain's next pass from the node's pods.
func (t *transition) draining() {
	op := t.in.Op
	d, err := drain.Plan(t.in.Pods, *op.Spec.Drain, t.since(v1alpha1.OperationDrained), t.in.Now)
	switch {
	case err != nil:
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonDrainFailed, err.Error())
	case d.Failed:
		t.cond(v1alpha1.OperationDrained, metav1.ConditionFalse, v1alpha1.ReasonDrainTimeout, d.Message)
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonDrainFailed, d.Message)
	case d.Done:
		t.cond(v1alpha1.OperationDrained, metav1.ConditionTrue, v1alpha1.ReasonDrained, d.Message)
		t.emit(corev1.EventTypeNormal, v1alpha1.ReasonDrained, "Drain", d.Message)
		if captureWhen(op) == v1alpha1.DiagnosticsAfterDrain && t.captureNow() {
			return
		}
		t.setPhase(v1alpha1.PhaseRunning, "starting the operation")
	default:
		t.Effect, t.Drain = EffectDrain, d
		t.Status.Message = DrainProgress(d, nil)
		t.requeue(DrainPoll)
		t.requeueAt(d.Next)
	}
}

// DrainProgress is the status message of a drain pass, with the pods a
// disruption budget blocked in it.
func DrainProgress(d drain.Decision, blocked []string) string {
	msg := d.Message
	if len(blocked) > 0 {
		msg = fmt.Sprintf("%s; blocked: %s", msg, blocked[0])
		if len(blocked) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(blocked)-1)
		}
	}
	return Truncate("draining: "+msg, maxMessage)
}

// running waits for the template's success criterion within the timeout,
// creating the operation pod the first time.
func (t *transition) running() {
	op, tpl, pod := t.in.Op, t.in.Template, t.in.Pod
	if tpl == nil {
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonTemplateNotFound, fmt.Sprintf("NodeOperationTemplate %s does not exist", op.Spec.Operation))
		return
	}
	criterion := tpl.Spec.SuccessCriterion
	if criterion == "" {
		criterion = policies.DefaultSuccessCriterion
	}
	if criterion == v1alpha1.SuccessNone {
		t.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonNothingToRun, tpl.Name+" runs no pod")
		t.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
		return
	}
	kind := tpl.Spec.MachineKind()
	if apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.OperationSucceeded) == nil {
		msg := "the operation pod is running"
		if kind != "" {
			msg = "asking the machine provider (" + string(kind) + ")"
		}
		t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, msg)
	}
	timeout := OperationTimeout(op, tpl)
	deadline := t.since(v1alpha1.OperationSucceeded).Add(timeout)
	if kind != "" {
		t.machine(kind, criterion, timeout, deadline)
		return
	}

	if pod != nil && t.Status.PodName == "" {
		// Created in a pass whose status write failed: recorded now, so
		// that a pod gone later is not created a second time. That pass
		// emitted no Event, so this one tells it (a pass reading a stale
		// operation fails its write, and emits none either).
		t.Status.PodName = pod.Name
		image := tpl.Spec.Image
		if len(pod.Spec.Containers) > 0 {
			image = pod.Spec.Containers[0].Image
		}
		t.emit(corev1.EventTypeNormal, v1alpha1.EventPodCreated, "Run", fmt.Sprintf("created operation pod %s/%s (%s)", pod.Namespace, pod.Name, image))
	}
	// A reboot counts only once the operation pod was created: a node that
	// rebooted before (a long drain, or the fault itself) has not run the
	// template.
	if criterion == v1alpha1.SuccessNodeRebooted && t.Status.PodName != "" && t.rebooted() {
		return
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			if criterion == v1alpha1.SuccessPodSucceeded {
				msg := fmt.Sprintf("pod %s/%s succeeded", pod.Namespace, pod.Name)
				t.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, msg)
				t.emit(corev1.EventTypeNormal, v1alpha1.EventOperationSucceeded, "Run", msg)
				t.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
				return
			}
		case corev1.PodFailed:
			failedAt := PodFinishedAt(pod)
			if criterion == v1alpha1.SuccessPodSucceeded || (!failedAt.IsZero() && !t.in.Now.Before(failedAt.Add(RebootPodGrace))) {
				msg := fmt.Sprintf("pod %s/%s failed: %s", pod.Namespace, pod.Name, PodFailure(pod))
				t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonPodFailed, msg)
				t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationFailed, msg)
				return
			}
			if !failedAt.IsZero() {
				t.requeueAt(failedAt.Add(RebootPodGrace))
			}
		}
	}
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("no success after %s (%s)", timeout, criterion)
		if pod != nil {
			t.Effect = EffectDeletePod
			msg += fmt.Sprintf("; pod %s/%s was %s and is deleted", pod.Namespace, pod.Name, pod.Status.Phase)
		}
		t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonOperationTimeout, msg)
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationTimeout, msg)
		return
	}
	if pod == nil && t.Status.PodName == "" {
		// The pod's name is the operation's, so a second creation fails
		// AlreadyExists instead of running the operation twice.
		t.Effect = EffectCreatePod
		t.Status.PodName = op.Name
		if n := t.in.Node; criterion == v1alpha1.SuccessNodeRebooted && n != nil && n.Status.NodeInfo.BootID != "" {
			// The reboot to wait for is the pod's: a boot ID that changed
			// since admission (the fault, a long drain) must not pass for it.
			t.Status.BootID = n.Status.NodeInfo.BootID
		}
		t.emit(corev1.EventTypeNormal, v1alpha1.EventPodCreated, "Run", fmt.Sprintf("created operation pod %s/%s (%s)", t.in.Namespace, op.Name, tpl.Spec.Image))
	}
	t.requeueAt(deadline)
	if criterion == v1alpha1.SuccessNodeRebooted {
		t.Status.Message = fmt.Sprintf("waiting for the node to reboot (boot ID %s) and be Ready, until %s", t.Status.BootID, deadline.UTC().Format(time.RFC3339))
	} else {
		t.Status.Message = fmt.Sprintf("waiting for pod %s/%s to succeed, until %s", t.in.Namespace, t.Status.PodName, deadline.UTC().Format(time.RFC3339))
	}
}

// rebooted moves to Verifying when the node's boot ID changed since the
// operation started and the node is Ready.
func (t *transition) rebooted() bool {
	op, n := t.in.Op, t.in.Node
	if n == nil || op.Status.BootID == "" || n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.BootID == op.Status.BootID || !nodeReady(n) {
		return false
	}
	msg := fmt.Sprintf("the node rebooted: boot ID %s, was %s, and it is Ready", n.Status.NodeInfo.BootID, op.Status.BootID)
	t.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonNodeRebooted, msg)
	t.emit(corev1.EventTypeNormal, v1alpha1.EventOperationSucceeded, "Run", msg)
	t.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
	return true
}

// machine runs a clusterAPI, metal3 or redfish operation: ask the provider
// once, then wait for the machine to be replaced (MachineReplaced) or
// power-cycled (NodeRebooted) within the timeout.
func (t *transition) machine(kind v1alpha1.MachineKind, criterion v1alpha1.SuccessCriterion, timeout time.Duration, deadline time.Time) {
	op, n, m := t.in.Op, t.in.Node, t.in.Machine
	if t.Status.MachineRequest == nil {
		switch {
		case m.Requested:
			// Asked in a pass whose status write failed: recorded now,
			// never asked twice.
			t.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: machineTarget(m, op), Action: MachineAction(kind, t.in.Template), Time: metav1.NewTime(t.in.Now)}
		case criterion == v1alpha1.SuccessMachineReplaced && m.Missing != "" && (n == nil || nodeReplaced(op, n)):
			// No Machine, and the node is gone or back under a new UID:
			// the machine was replaced already. Our request's status write
			// was lost and the MachineHealthCheck acted, with Machine and
			// Node, before the retry (or someone else replaced it): either
			// way there is nothing left to ask, and this is not
			// MachineNotFound. A Machine still there is asked as usual.
			t.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: machineTarget(m, op), Action: ActionFoundReplaced, Time: metav1.NewTime(t.in.Now)}
		case m.Missing != "":
			msg := Truncate(m.Missing, maxMessage)
			t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonMachineNotFound, msg)
			t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonMachineNotFound, msg)
			return
		case !t.in.Now.Before(deadline):
			// Transient errors until the timeout (a BMC answering 503).
		default:
			t.Effect = EffectMachineRequest
			t.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: m.Target, Action: MachineAction(kind, t.in.Template), Time: metav1.NewTime(t.in.Now)}
			if criterion == v1alpha1.SuccessNodeRebooted && n != nil && n.Status.NodeInfo.BootID != "" {
				// The reboot to wait for is the one asked now: a boot ID
				// that changed since admission (the fault, a long drain)
				// must not pass for a power cycle the provider makes later.
				t.Status.BootID = n.Status.NodeInfo.BootID
			}
			if criterion == v1alpha1.SuccessMachineReplaced && n != nil && n.UID != "" {
				// Likewise the replacement: a node that re-registered
				// since admission (a new UID, the same machine) is not it.
				t.Status.NodeUID = string(n.UID)
			}
			t.Events = append(t.Events, Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventMachineRequested, Action: "Request",
				Note: fmt.Sprintf("asked %s: %s", m.Target, t.Status.MachineRequest.Action), OnEffect: true})
		}
	}
	if t.Status.MachineRequest != nil && t.Effect == EffectNone {
		switch criterion {
		case v1alpha1.SuccessMachineReplaced:
			msg := ""
			switch {
			case m.Gone:
				msg = fmt.Sprintf("%s is gone: Cluster API replaced the machine", t.Status.MachineRequest.Target)
			case n == nil:
				msg = fmt.Sprintf("node %s is gone with its machine", op.Spec.NodeName)
			case nodeReplaced(op, n) && nodeReady(n):
				msg = fmt.Sprintf("node %s was replaced: UID %s, was %s, and it is Ready", n.Name, n.UID, op.Status.NodeUID)
			}
			if msg != "" {
				t.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonMachineReplaced, msg)
				t.emit(corev1.EventTypeNormal, v1alpha1.EventOperationSucceeded, "Run", msg)
				t.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
				return
			}
		case v1alpha1.SuccessNodeRebooted:
			if t.rebooted() {
				return
			}
		}
	}
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("no success after %s (%s)", timeout, criterion)
		if r := t.Status.MachineRequest; r != nil {
			msg += fmt.Sprintf(" since %s was asked to %s", r.Target, r.Action)
		} else {
			msg += fmt.Sprintf("; %s could not be asked", m.Target)
		}
		t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonOperationTimeout, msg)
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationTimeout, msg)
		return
	}
	t.requeueAt(deadline)
	t.requeue(VerifyResync)
	what := "the node to reboot (boot ID " + t.Status.BootID + ") and be Ready"
	if criterion == v1alpha1.SuccessMachineReplaced {
		what = "the Machine to be replaced"
	}
	target := m.Target
	if r := t.Status.MachineRequest; r != nil {
		target = r.Target
	}
	t.Status.Message = Truncate(fmt.Sprintf("asked %s; waiting for %s, until %s", target, what, deadline.UTC().Format(time.RFC3339)), maxMessage)
}

// nodeReplaced reports whether n is not the node the operation was admitted
// on, or, once a Machine was asked, the node as it was then: the same name
// with another UID.
func nodeReplaced(op *v1alpha1.NodeOperation, n *corev1.Node) bool {
	return op.Status.NodeUID != "" && string(n.UID) != op.Status.NodeUID
}

// ActionFoundReplaced is the action a MachineRequest records when the
// machine was found replaced before kubemedic recorded asking for it.
const ActionFoundReplaced = "not asked (again): found replaced, its Node gone or back under a new UID and its Machine gone"

// machineTarget is what a request is recorded as asking: the target found,
// else the node's Machine in words.
func machineTarget(m MachineObservation, op *v1alpha1.NodeOperation) string {
	if m.Target != "" {
		return m.Target
	}
	return "the Machine of node " + op.Spec.NodeName
}

// MachineAction says in words what a machine template asks.
func MachineAction(kind v1alpha1.MachineKind, tpl *v1alpha1.NodeOperationTemplate) string {
	switch kind {
	case v1alpha1.MachineClusterAPI:
		return "annotated " + AnnotationRemediateMachine + " so that its MachineHealthCheck replaces it"
	case v1alpha1.MachineMetal3:
		mode := policies.DefaultMetal3Mode
		if tpl != nil && tpl.Spec.Metal3 != nil && tpl.Spec.Metal3.Mode != "" {
			mode = tpl.Spec.Metal3.Mode
		}
		return fmt.Sprintf("annotated %s={\"mode\":\"%s\"} (power cycle)", AnnotationMetal3Reboot, mode)
	case v1alpha1.MachineRedfish:
		rt := policies.DefaultRedfishReset
		if tpl != nil && tpl.Spec.Redfish != nil && tpl.Spec.Redfish.ResetType != "" {
			rt = tpl.Spec.Redfish.ResetType
		}
		return "ComputerSystem.Reset ResetType=" + rt
	}
	return ""
}

// MachineFailed ends a machine request the provider refused for good (a
// BMC's 401): the controller calls it on the transition whose
// EffectMachineRequest failed so.
func MachineFailed(t *Transition, op *v1alpha1.NodeOperation, msg string, now time.Time) {
	tr := &transition{in: AdvanceInput{Op: op, Now: now}, Transition: Transition{Status: t.Status}}
	tr.Status.MachineRequest = nil
	tr.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonMachineRequestFailed, Truncate(msg, maxMessage))
	tr.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonMachineRequestFailed, msg)
	*t = tr.Transition
}

// Annotations of other projects' objects that machine operations set.
const (
	// AnnotationRemediateMachine on a Cluster API Machine asks its
	// MachineHealthCheck to remediate (replace) it.
	AnnotationRemediateMachine = "cluster.x-k8s.io/remediate-machine"
	// AnnotationMetal3Reboot on a BareMetalHost power-cycles it; Metal3
	// removes it once the host is back on.
	AnnotationMetal3Reboot = "reboot.metal3.io"
)

// verifying waits for the node to pass verification within the recovery
// timeout, then uncordons it.
func (t *transition) verifying() {
	op, n := t.in.Op, t.in.Node
	if n == nil {
		if r := op.Status.MachineRequest; r != nil && r.Kind == v1alpha1.MachineClusterAPI {
			// Replaced under another name: the new node is checked by the
			// policies like any node.
			t.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonMachineReplaced, fmt.Sprintf("node %s is gone with its replaced machine; its successor joins under its own name", op.Spec.NodeName))
			return
		}
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonNodeNotFound, "node "+op.Spec.NodeName+" does not exist")
		return
	}
	v := Verify(op, n, t.in.Now)
	if v.OK {
		t.Effect = EffectUncordon
		t.cond(v1alpha1.OperationVerified, metav1.ConditionTrue, v1alpha1.ReasonVerified, v.Message)
		if op.Spec.Trigger != nil {
			t.Remediated = t.in.Now.Sub(op.Spec.Trigger.LastTransitionTime.Time)
		}
		t.finish(v1alpha1.PhaseSucceeded, v1alpha1.ReasonVerified, v.Message)
		return
	}
	recovery := policies.DefaultRecoveryTimeout
	if op.Spec.RecoveryTimeout != nil {
		recovery = op.Spec.RecoveryTimeout.Duration
	}
	deadline := t.since(v1alpha1.OperationSucceeded).Add(recovery)
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("not verified %s after the operation: %s", recovery, v.Message)
		t.cond(v1alpha1.OperationVerified, metav1.ConditionFalse, v1alpha1.ReasonRecoveryTimeout, msg)
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonRecoveryTimeout, msg)
		return
	}
	t.cond(v1alpha1.OperationVerified, metav1.ConditionFalse, v1alpha1.ReasonWaiting, v.Message)
	t.Status.Message = Truncate("verifying: "+v.Message, maxMessage)
	t.requeueAt(deadline)
	t.requeueAt(v.Next)
	t.requeue(VerifyResync)
}

// finished deletes an operation once its retention has passed.
func (t *transition) finished() {
	if t.Status.CompletionTime == nil {
		c := metav1.NewTime(t.in.Now)
		t.Status.CompletionTime = &c
		t.requeue(t.in.Retention)
		return
	}
	until := t.Status.CompletionTime.Add(t.in.Retention)
	if t.in.Now.Before(until) {
		t.requeueAt(until)
		return
	}
	t.Effect = EffectDeleteOperation
}

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

// CapturePodName is the capture pod of an operation: one name, so a
// second creation fails AlreadyExists instead of capturing twice.
func CapturePodName(op *v1alpha1.NodeOperation) string { return op.Name + "-diag" }

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
