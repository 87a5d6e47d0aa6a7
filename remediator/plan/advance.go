package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// The NodeOperation lifecycle: Advance, what it decides from, and its
// phases. What a step returns is in transition.go; excluding one GPU
// instead of cordoning in exclusion.go; the machine provider's rung in
// machine.go; the diagnostics capture in capture.go.

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
)

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
	// ValidateTemplate is the validation's NodeOperationTemplate
	// (Validating); nil when it does not exist.
	ValidateTemplate *v1alpha1.NodeOperationTemplate
	// ValidatePods are the operation's test pods that exist, of either
	// attempt (Validating).
	ValidatePods []*corev1.Pod
	Now          time.Time
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
// Validating (the step's active GPU test, when it names one; validate.go)
// → Succeeded | Failed | Skipped, deleted after the retention.
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
	case v1alpha1.PhaseValidating:
		t.validating()
	default:
		t.finished()
	}
	return t.Transition
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
	case op.Spec.Quarantine || op.Spec.Cordon || op.Spec.Drain != nil || op.Spec.Validate != nil:
		// A GPU test implies the cordon, as a drain does: a NodeOperation
		// made by hand may say neither (a policy's step must).
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
		// The pod's name comes from the operation's (OperationPodName),
		// so a second creation fails AlreadyExists instead of running the
		// operation twice.
		t.Effect = EffectCreatePod
		t.Status.PodName = OperationPodName(op)
		if n := t.in.Node; criterion == v1alpha1.SuccessNodeRebooted && n != nil && n.Status.NodeInfo.BootID != "" {
			// The reboot to wait for is the pod's: a boot ID that changed
			// since admission (the fault, a long drain) must not pass for it.
			t.Status.BootID = n.Status.NodeInfo.BootID
		}
		t.emit(corev1.EventTypeNormal, v1alpha1.EventPodCreated, "Run", fmt.Sprintf("created operation pod %s/%s (%s)", t.in.Namespace, t.Status.PodName, tpl.Spec.Image))
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
	n, was := t.in.Node, t.Status.BootID
	if n == nil || was == "" || n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.BootID == was || !nodeReady(n) {
		return false
	}
	msg := fmt.Sprintf("the node rebooted: boot ID %s, was %s, and it is Ready", n.Status.NodeInfo.BootID, was)
	t.cond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonNodeRebooted, msg)
	t.emit(corev1.EventTypeNormal, v1alpha1.EventOperationSucceeded, "Run", msg)
	t.setPhase(v1alpha1.PhaseVerifying, "verifying the node")
	return true
}

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
		if t.validateNow() {
			t.cond(v1alpha1.OperationVerified, metav1.ConditionTrue, v1alpha1.ReasonVerified, v.Message)
			return
		}
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
	// Missing evidence is Unknown while it waits; at the timeout the
	// verdict is False all the same: not verified in time.
	status := metav1.ConditionFalse
	if v.Unknown {
		status = metav1.ConditionUnknown
	}
	t.cond(v1alpha1.OperationVerified, status, v1alpha1.ReasonWaiting, v.Message)
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
