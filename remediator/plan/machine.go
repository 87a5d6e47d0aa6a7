package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The machine rung: a clusterAPI, metal3 or redfish operation asks the
// node's machine provider (a Machine, a BareMetalHost, a BMC) once, instead
// of running a pod, and waits for the replacement or the power cycle.

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
	// BootID is the node's boot ID recorded with a redfish request's
	// intent, "" when none: the reboot to wait for is one from it.
	BootID string
	// Reset is set when a redfish request's intent is on the Node but not
	// its answer (the answer was lost, the pass died after the intent, or
	// the answer's record failed): the evidence JudgeReset decides from
	// whether it was applied. Nil otherwise.
	Reset *ResetEvidence
}

// machine runs a clusterAPI, metal3 or redfish operation: ask the provider
// once, then wait for the machine to be replaced (MachineReplaced) or
// power-cycled (NodeRebooted) within the timeout.
func (t *transition) machine(kind v1alpha1.MachineKind, criterion v1alpha1.SuccessCriterion, timeout time.Duration, deadline time.Time) {
	op, n, m := t.in.Op, t.in.Node, t.in.Machine
	var judged ResetJudgement
	if t.Status.MachineRequest == nil {
		if m.Reset != nil && !m.Requested {
			judged = JudgeReset(*m.Reset, t.in.Now)
		}
		switch {
		case m.Requested:
			// Asked in a pass whose status write failed: recorded now,
			// never asked twice.
			t.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: machineTarget(m, op), Action: MachineAction(kind, t.in.Template), Time: metav1.NewTime(t.in.Now)}
			if criterion == v1alpha1.SuccessNodeRebooted && m.BootID != "" {
				t.Status.BootID = m.BootID
			}
		case judged.Verdict == ResetApplied:
			// Asked, and its answer lost or not recorded: the evidence
			// says the BMC applied it. Recorded now, never asked again;
			// told now, as the ask was told only if answered.
			action := MachineAction(kind, t.in.Template)
			t.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: machineTarget(m, op),
				Action: Truncate(action+"; its answer was not recorded, and "+judged.Why, maxMessage), Time: metav1.NewTime(m.Reset.Intended)}
			if criterion == v1alpha1.SuccessNodeRebooted && m.Reset.BootID != "" {
				t.Status.BootID = m.Reset.BootID
			}
			t.emit(corev1.EventTypeNormal, v1alpha1.EventMachineRequestFound, "Request",
				fmt.Sprintf("asked %s: %s; its answer was not recorded, and %s: not asked again", machineTarget(m, op), action, judged.Why))
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
		case judged.Verdict == ResetUnknown:
			// Neither recorded nor asked again: held below.
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
			note := fmt.Sprintf("asked %s: %s", m.Target, t.Status.MachineRequest.Action)
			if judged.Verdict == ResetNotApplied {
				note = fmt.Sprintf("asked %s again: %s; the first ask has no recorded answer, and node %s shows it never came: %s", m.Target, t.Status.MachineRequest.Action, op.Spec.NodeName, judged.Why)
			}
			t.Events = append(t.Events, Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventMachineRequested, Action: "Request",
				Note: note, OnEffect: true})
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
	held := t.Status.MachineRequest == nil && judged.Verdict == ResetUnknown
	if !t.in.Now.Before(deadline) {
		msg := fmt.Sprintf("no success after %s (%s)", timeout, criterion)
		switch r := t.Status.MachineRequest; {
		case r != nil:
			msg += fmt.Sprintf(" since %s was asked to %s", r.Target, r.Action)
		case held:
			msg += fmt.Sprintf("; asking %s has no recorded answer, and it was not asked again, as nothing showed whether node %s was reset: %s", m.Target, op.Spec.NodeName, judged.Why)
		default:
			msg += fmt.Sprintf("; %s could not be asked", m.Target)
		}
		t.cond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonOperationTimeout, msg)
		t.finish(v1alpha1.PhaseFailed, v1alpha1.ReasonOperationTimeout, msg)
		return
	}
	t.requeueAt(deadline)
	t.requeue(VerifyResync)
	if held {
		t.requeueAt(judged.RecheckAt)
		msg := Truncate(fmt.Sprintf("not asking %s again for node %s: the first ask has no recorded answer, and %s; held until new evidence, or until %s, when the step fails",
			m.Target, op.Spec.NodeName, judged.Why, deadline.UTC().Format(time.RFC3339)), maxMessage)
		if msg != op.Status.Message {
			t.emit(corev1.EventTypeWarning, v1alpha1.EventMachineRequestHeld, "Request", msg)
		}
		t.Status.Message = msg
		return
	}
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
