package decide

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TargetKind is what the janitor stops to reclaim a pod's GPUs.
type TargetKind string

const (
	// TargetPod: a bare pod (or, with deletePodsOfUnknownOwners, a pod
	// whose controller the janitor does not know) is deleted.
	TargetPod TargetKind = "Pod"
	// TargetJob: the Job is deleted with background propagation.
	TargetJob TargetKind = "Job"
	// TargetDeployment and TargetStatefulSet are scaled to 0, the previous
	// count kept in kubemedic.io/reclaimed-replicas.
	TargetDeployment  TargetKind = "Deployment"
	TargetStatefulSet TargetKind = "StatefulSet"
	// TargetNotebook: a Kubeflow Notebook gets kubeflow-resource-stopped,
	// Kubeflow's own culling mechanism.
	TargetNotebook TargetKind = "Notebook"
	// TargetUnsupported: any other controller; the pod only gets an Event.
	TargetUnsupported TargetKind = "Unsupported"
)

// Target is the object the janitor would act on for a pod.
type Target struct {
	Kind TargetKind
	// Name of the object (the pod's for TargetPod).
	Name string
	// OwnerKind is the controller's kind for TargetUnsupported, e.g.
	// "RayCluster".
	OwnerKind string
	// APIVersion of a Notebook, e.g. kubeflow.org/v1.
	APIVersion string
	// UID of the object, checked when acting: an object recreated under
	// the same name is not the one the owner was told about.
	UID types.UID
}

// Effective is the target after the policy: an unsupported owner becomes
// a pod deletion under deletePodsOfUnknownOwners.
func (t Target) Effective(r policies.Reclaim, pod string) Target {
	if t.Kind == TargetUnsupported && r.DeleteUnknownOwners {
		return Target{Kind: TargetPod, Name: pod}
	}
	return t
}

// Describe says what acting does, for the notice and Events.
func (t Target) Describe() string {
	switch t.Kind {
	case TargetPod:
		return fmt.Sprintf("delete pod %s", t.Name)
	case TargetJob:
		return fmt.Sprintf("delete Job %s and its pods", t.Name)
	case TargetDeployment, TargetStatefulSet:
		return fmt.Sprintf("scale %s %s to 0 replicas (the count before is kept in its annotation %s)", t.Kind, t.Name, v1alpha1.AnnotationReclaimedReplicas)
	case TargetNotebook:
		return fmt.Sprintf("stop Kubeflow Notebook %s (annotation kubeflow-resource-stopped; start it again from the Kubeflow UI)", t.Name)
	}
	return fmt.Sprintf("nothing: its controller %s %s is not one the janitor can stop", t.OwnerKind, t.Name)
}

// Step is what the controller does for a pod in this pass.
type Step string

const (
	// StepNone: nothing to do.
	StepNone Step = "None"
	// StepNotify: claim the notice on the pod, send it, record it.
	StepNotify Step = "Notify"
	// StepWouldNotify: dry run without notify: log and Event only.
	StepWouldNotify Step = "WouldNotify"
	// StepNoticeBlocked: a notice is required but Slack is not configured
	// or failing; nothing is reclaimed. Retried every cycle.
	StepNoticeBlocked Step = "NoticeBlocked"
	// StepUnsupportedOwner: the rule holds but nothing can be stopped.
	StepUnsupportedOwner Step = "UnsupportedOwner"
	// StepWait: noticed (or claimed) and waiting for the deadline.
	StepWait Step = "Wait"
	// StepConfirmSnooze: post the snooze confirmation, record it.
	StepConfirmSnooze Step = "ConfirmSnooze"
	// StepCancel: the rule no longer holds (or the pod is exempt now):
	// clear the annotations, post "cancelled".
	StepCancel Step = "Cancel"
	// StepSnoozeEnded: the snooze is over: clear the notice and the
	// snooze so the pod is judged afresh, post that in the thread.
	StepSnoozeEnded Step = "SnoozeEnded"
	// StepReset: the notice annotation is unreadable or stale: clear it
	// with a Warning Event; the pod is judged afresh next cycle.
	StepReset Step = "Reset"
	// StepReclaim: act on the target, post the result, record it.
	StepReclaim Step = "Reclaim"
	// StepWouldReclaim: dry run at the deadline: Event, and a thread
	// message under dryRun.notify; the notice records it.
	StepWouldReclaim Step = "WouldReclaim"
)

// State is the pod's state for the metrics.
type State string

const (
	StateNone      State = ""
	StateCandidate State = "candidate"
	StateNoticed   State = "noticed"
	StateSnoozed   State = "snoozed"
	StateReclaimed State = "reclaimed"
	StateUnknown   State = "unknown"
)

// ClaimTimeout is how long a claimed, unsent notice holds before another
// janitor may take it over: longer than NoticeTimeout.
const ClaimTimeout = policies.NoticeClaimTimeout

// NoticeTimeout bounds the sending of one notice, Slack's retries and
// Retry-After waits included; a notice not sent by then is retried later.
const NoticeTimeout = policies.NoticeSendTimeout

// Input is everything Next needs about one pod.
type Input struct {
	Now     time.Time
	Reclaim policies.Reclaim
	// Exempt says why the pod is exempt now ("" when it is not).
	Exempt  string
	Verdict Verdict
	// Notice is the parsed annotation; NoticeErr when it does not parse.
	Notice    *Notice
	NoticeErr error
	// Snooze is the owner's kubemedic.io/reclaim-snooze-until, raw.
	Snooze string
	// Target is what acting would stop (before the policy's
	// deletePodsOfUnknownOwners).
	Target Target
	// NotifierReady is false when Slack is not configured.
	NotifierReady bool
	// PodName for Target.Effective.
	PodName string
}

// Decision is what to do with one pod now.
type Decision struct {
	Step  Step
	State State
	// Rule and Evidence: the rule acted on (the notice's, once noticed).
	Rule     Rule
	Evidence string
	// Target is what acting stops (after the policy).
	Target Target
	// Deadline is the notice's deadline, or the one a new notice gets.
	Deadline time.Time
	// SnoozeUntil is the snooze in force (capped), for StepConfirmSnooze
	// and StepWait while snoozed.
	SnoozeUntil time.Time
	// SnoozeCapped is set when the owner asked for more than maxSnooze.
	SnoozeCapped bool
	// Why explains the decision in one sentence for logs and Events.
	Why string
	// Problems are Warnings to Event (invalid annotations).
	Problems []string
	// RequeueAt is when the pod should be looked at again without any
	// change (zero: next cycle is fine).
	RequeueAt time.Time
}

// Next decides the pod's next step in notice → grace → recheck → act.
func Next(in Input) Decision {
	d := decideNext(in)
	d.Problems = append(in.Verdict.Problems, d.Problems...)
	if d.RequeueAt.IsZero() {
		d.RequeueAt = in.Verdict.NextCheck
	} else if !in.Verdict.NextCheck.IsZero() && in.Verdict.NextCheck.Before(d.RequeueAt) {
		d.RequeueAt = in.Verdict.NextCheck
	}
	return d
}

// candidate decides for a pod without a (valid) notice.
func candidate(in Input, target Target) Decision {
	f, ok := in.Verdict.Candidate()
	if !ok {
		d := Decision{Step: StepNone}
		if why, unknown := in.Verdict.Unknown[RuleIdle]; unknown {
			d.State, d.Rule, d.Why = StateUnknown, RuleIdle, why
		}
		return d
	}
	d := Decision{Rule: f.Rule, Evidence: f.Evidence, Target: target, State: StateCandidate, Deadline: in.Now.Add(in.Reclaim.GracePeriod)}
	switch {
	case target.Kind == TargetUnsupported:
		d.Step, d.Why = StepUnsupportedOwner, fmt.Sprintf("rule %s holds (%s) but %s", f.Rule, f.Evidence, target.Describe())
	case in.Reclaim.DryRun && !in.Reclaim.DryRunNotify:
		d.Step, d.Why = StepWouldNotify, fmt.Sprintf("dry run: would notify the owner (rule %s: %s) and, after %s, %s", f.Rule, f.Evidence, Human(in.Reclaim.GracePeriod), target.Describe())
	case !in.NotifierReady && in.Reclaim.RequireNotice:
		d.Step, d.Why = StepNoticeBlocked, fmt.Sprintf("rule %s holds (%s) but Slack is not configured and the policy requires a notice: nothing is reclaimed", f.Rule, f.Evidence)
	default:
		d.Step, d.Why = StepNotify, fmt.Sprintf("rule %s holds: %s", f.Rule, f.Evidence)
	}
	return d
}

func decideNext(in Input) Decision {
	n := in.Notice
	target := in.Target.Effective(in.Reclaim, in.PodName)
	if in.NoticeErr != nil {
		return Decision{Step: StepReset, Why: fmt.Sprintf("the notice annotation is unreadable and is cleared; the pod is judged afresh: %v", in.NoticeErr)}
	}
	if in.Exempt != "" {
		if n != nil && n.ReclaimedAt.IsZero() {
			return Decision{Step: StepCancel, Rule: n.Rule, Target: target, Why: "the pod is exempt now: " + in.Exempt}
		}
		return Decision{Step: StepNone, Why: "exempt: " + in.Exempt}
	}

	if n == nil {
		return candidate(in, target)
	}

	d := Decision{Rule: n.Rule, Evidence: n.Evidence, Target: target, Deadline: n.Deadline, State: StateNoticed}
	if !n.Noticed() { // claimed, not sent
		if in.Now.Sub(n.ClaimedAt) < ClaimTimeout {
			d.Step, d.State, d.RequeueAt = StepWait, StateCandidate, n.ClaimedAt.Add(ClaimTimeout)
			d.Why = fmt.Sprintf("janitor %s is sending the notice (claimed at %s)", n.Claimer, n.ClaimedAt.UTC().Format(time.RFC3339))
			return d
		}
		if _, holds := in.Verdict.Holds(n.Rule); !holds {
			d.Step, d.Why = StepReset, "an unsent notice claim expired and its rule no longer holds"
			return d
		}
		// The claim expired without a notice: decide as for a new
		// candidate, under today's policy (dry run, owner, Slack).
		d = candidate(in, target)
		d.Why = fmt.Sprintf("the notice claimed by %s at %s was never recorded as sent; %s", n.Claimer, n.ClaimedAt.UTC().Format(time.RFC3339), d.Why)
		return d
	}
	if n.DryRun != in.Reclaim.DryRun {
		d.Step, d.Why = StepReset, "the policy's dry run changed since the notice: it is sent again"
		return d
	}
	if !n.ReclaimedAt.IsZero() {
		if _, holds := in.Verdict.Holds(n.Rule); n.DryRun && !holds {
			if _, unknown := in.Verdict.Unknown[n.Rule]; !unknown {
				d.Step, d.Why = StepCancel, fmt.Sprintf("dry run: rule %s no longer holds", n.Rule)
				return d
			}
		}
		d.Step, d.State, d.Why = StepNone, StateReclaimed, fmt.Sprintf("reclaimed at %s; waiting for its controller to remove the pod", n.ReclaimedAt.UTC().Format(time.RFC3339))
		if n.DryRun {
			d.Why = fmt.Sprintf("dry run: would have been reclaimed at %s", n.ReclaimedAt.UTC().Format(time.RFC3339))
		}
		return d
	}
	if !n.Sent && in.Reclaim.RequireNotice {
		d.Step, d.Why = StepReset, "the notice was recorded without a message, and the policy now requires one: it is sent again"
		return d
	}
	if !n.ReclaimRequestedAt.IsZero() {
		// The owner asked: neither the deadline, a snooze nor the rule
		// holds it back; the act itself goes the usual way (recheck on the
		// API server, UID checks, dry run).
		d.Evidence = fmt.Sprintf("%s asked to reclaim it now, at %s", n.ReclaimRequestedBy, n.ReclaimRequestedAt.UTC().Format(time.RFC3339))
		switch {
		case target.Kind == TargetUnsupported:
			d.Step, d.Why = StepUnsupportedOwner, fmt.Sprintf("the owner asked to reclaim it now but %s", target.Describe())
		case in.Reclaim.DryRun:
			d.Step, d.Why = StepWouldReclaim, fmt.Sprintf("dry run: the owner asked to reclaim it now; would %s", target.Describe())
		default:
			d.Step, d.Why = StepReclaim, fmt.Sprintf("the owner asked to reclaim it now: %s", target.Describe())
		}
		return d
	}
	evidence, holds := in.Verdict.Holds(n.Rule)
	if _, unknown := in.Verdict.Unknown[n.Rule]; !holds && !unknown {
		d.Step, d.Why = StepCancel, fmt.Sprintf("rule %s no longer holds", n.Rule)
		if why := in.Verdict.Cleared(n.Rule, in.Reclaim); why != "" {
			d.Why += ": " + why
		}
		return d
	}

	if in.Snooze != "" {
		until, err := ParseTime(in.Snooze)
		if err != nil {
			d.Problems = append(d.Problems, fmt.Sprintf("annotation %s: %v; the snooze is ignored", v1alpha1.AnnotationReclaimSnoozeUntil, err))
		} else {
			limit := n.Deadline.Add(in.Reclaim.MaxSnooze)
			if until.After(limit) {
				until, d.SnoozeCapped = limit, true
			}
			if in.Now.Before(until) {
				d.SnoozeUntil, d.State = until, StateSnoozed
				if n.SnoozeAcked != in.Snooze {
					d.Step, d.Why = StepConfirmSnooze, fmt.Sprintf("the owner snoozed the reclaim until %s", until.UTC().Format(time.RFC3339))
					return d
				}
				d.Step, d.RequeueAt, d.Why = StepWait, until, fmt.Sprintf("snoozed until %s", until.UTC().Format(time.RFC3339))
				return d
			}
			if until.After(n.Deadline) || n.SnoozeAcked != "" {
				d.Step, d.Why = StepSnoozeEnded, fmt.Sprintf("the snooze ended at %s; the pod is judged afresh", until.UTC().Format(time.RFC3339))
				return d
			}
			// A snooze that ended before the deadline changes nothing.
		}
	}

	if in.Now.Before(n.Deadline) {
		d.Step, d.RequeueAt = StepWait, n.Deadline
		d.Why = fmt.Sprintf("noticed; the grace period ends at %s", n.Deadline.UTC().Format(time.RFC3339))
		return d
	}
	if !holds {
		d.Step, d.State = StepWait, StateUnknown
		d.Why = fmt.Sprintf("the grace period is over but rule %s cannot be checked: %s; nothing is reclaimed until it can", n.Rule, in.Verdict.Unknown[n.Rule])
		return d
	}
	d.Evidence = evidence
	switch {
	case target.Kind == TargetUnsupported:
		d.Step, d.Why = StepUnsupportedOwner, fmt.Sprintf("rule %s still holds (%s) but %s", n.Rule, evidence, target.Describe())
	case in.Reclaim.DryRun:
		d.Step, d.Why = StepWouldReclaim, fmt.Sprintf("dry run: rule %s still holds (%s); would %s", n.Rule, evidence, target.Describe())
	default:
		d.Step, d.Why = StepReclaim, fmt.Sprintf("rule %s still holds after the grace period (%s): %s", n.Rule, evidence, target.Describe())
	}
	return d
}
