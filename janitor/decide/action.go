package decide

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Action is what an owner asks for with a button of a Slack message.
type Action string

const (
	// ActionKeep snoozes the reclaim for Button.Keep from the press.
	ActionKeep Action = "keep"
	// ActionReclaimNow reclaims the pod at the next cycle, through the
	// same recheck-and-act path as at the deadline.
	ActionReclaimNow Action = "reclaim"
	// ActionRestore undoes a reclaim: the workload is scaled back to its
	// kubemedic.io/reclaimed-replicas, or the notebook started again.
	ActionRestore Action = "restore"
)

// KeepDurations are the "Keep" buttons a notice offers before the policy's
// cap.
var KeepDurations = []time.Duration{4 * time.Hour, 24 * time.Hour}

// Button is what one button of a janitor message stands for. It travels
// in the button's value, which Slack returns as sent in the signed
// request: it names the pod by namespace, name and UID, so that a press
// on the notice of a pod since recreated under the same name is refused.
type Button struct {
	Action    Action    `json:"a"`
	Namespace string    `json:"ns"`
	Pod       string    `json:"p"`
	UID       types.UID `json:"u"`
	// Keep is the snooze an ActionKeep asks for, from the press.
	Keep time.Duration `json:"k,omitempty"`
	// Target is the object a restore acts on (the reclaim's target):
	// its kind, name, UID and, for a Notebook, API version.
	TargetKind       TargetKind `json:"tk,omitempty"`
	TargetName       string     `json:"tn,omitempty"`
	TargetUID        types.UID  `json:"tu,omitempty"`
	TargetAPIVersion string     `json:"tv,omitempty"`
}

// MaxButtonValue is Slack's limit on a button's value.
const MaxButtonValue = 2000

// Encode is the button's value: compact JSON, at most MaxButtonValue
// bytes for any valid Kubernetes names (253 + 63 + 36 + 253 + 36 + ...).
func (b Button) Encode() string {
	raw, err := json.Marshal(b)
	if err != nil {
		panic(fmt.Sprintf("encode button: %v", err)) // plain struct: cannot fail
	}
	return string(raw)
}

// ActionID is the button's action_id: unique within a message, as Slack
// asks, and saying what the button does in Slack's logs.
func (b Button) ActionID() string {
	if b.Action == ActionKeep {
		return "kubemedic-keep-" + strconv.FormatInt(int64(b.Keep/time.Minute), 10) + "m"
	}
	return "kubemedic-" + string(b.Action)
}

// ParseButton reads a button's value. It checks the shape only; whether
// the press may act is PressDecision's.
func ParseButton(v string) (Button, error) {
	var b Button
	if len(v) > MaxButtonValue {
		return b, fmt.Errorf("button value longer than %d bytes", MaxButtonValue)
	}
	if err := json.Unmarshal([]byte(v), &b); err != nil {
		return b, fmt.Errorf("button value: %w", err)
	}
	switch {
	case b.Action != ActionKeep && b.Action != ActionReclaimNow && b.Action != ActionRestore:
		return b, fmt.Errorf("button value: unknown action %q", b.Action)
	case b.Namespace == "" || b.Pod == "" || b.UID == "":
		return b, fmt.Errorf("button value: namespace, pod and UID are required")
	case b.Action == ActionKeep && b.Keep <= 0:
		return b, fmt.Errorf("button value: keep needs a positive duration")
	case b.Action == ActionRestore && (b.TargetName == "" || b.TargetUID == ""):
		return b, fmt.Errorf("button value: restore needs its target's name and UID")
	}
	return b, nil
}

// KeepButton is one "Keep" button a notice offers.
type KeepButton struct {
	Keep time.Duration
	// Capped is set for the button that stands for maxSnooze because a
	// longer one of KeepDurations was left out.
	Capped bool
}

// KeepButtons are the "Keep" buttons under a maxSnooze: each of
// KeepDurations that fits, and, when one was left out, one for maxSnooze
// itself (so a policy with maxSnooze 8h offers 4 h and 8 h, one with 2h
// offers 2 h). None when the policy allows no snooze.
func KeepButtons(maxSnooze time.Duration) []KeepButton {
	if maxSnooze <= 0 {
		return nil
	}
	var out []KeepButton
	left := false
	for _, d := range KeepDurations {
		if d <= maxSnooze {
			out = append(out, KeepButton{Keep: d})
		} else {
			left = true
		}
	}
	// The cap gets its own button only a minute or more past the last
	// one: action_ids count minutes, and Slack refuses the whole message
	// (invalid_blocks) for two equal ones.
	if left && (len(out) == 0 || maxSnooze-out[len(out)-1].Keep >= time.Minute) {
		out = append(out, KeepButton{Keep: maxSnooze, Capped: true})
	}
	return out
}

// ButtonLabel is a Keep button's text: "Keep 4 h", "Keep 24 h", "Keep 90 min",
// else "Keep " and Human's form.
func ButtonLabel(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("Keep %d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("Keep %d min", d/time.Minute)
	}
	return "Keep " + Human(d)
}

// PressOutcome is what a button press does.
type PressOutcome string

const (
	// PressRefused: nothing is done; Answer says why, to the presser only.
	PressRefused PressOutcome = "Refused"
	// PressKeep: write the snooze (SnoozeUntil) and confirm it.
	PressKeep PressOutcome = "Keep"
	// PressReclaim: record the owner's request on the notice; the cycle
	// reclaims.
	PressReclaim PressOutcome = "Reclaim"
	// PressRestore: scale the target back or start the notebook.
	PressRestore PressOutcome = "Restore"
)

// Press results for the metric's result label. They are API: dashboards
// count them.
const (
	ResultDone       = "done"
	ResultNotOwner   = "not_owner"
	ResultRecreated  = "recreated"
	ResultGone       = "gone"
	ResultReclaimed  = "already_reclaimed"
	ResultNoNotice   = "no_notice"
	ResultNotAllowed = "not_allowed"
	ResultFailed     = "failed"
)

// OwnerCheck is whether the presser is the pod's owner, and what a
// refusal may say about that owner. It never holds the owner's email:
// anyone who sees the message can press, and must not learn it so.
type OwnerCheck struct {
	// Match: the presser is the owner.
	Match bool
	// UserID is the owner's Slack user ID when known (recorded, or
	// looked up from the recorded email). A refusal mentions it, which
	// Slack shows as the owner's name, and to the presser only.
	UserID string
	// Source is where the owner is recorded, e.g. "pod annotation
	// kubemedic.io/owner" or "namespace annotation kubemedic.io/owner";
	// "" when nowhere.
	Source string
	// Note is one more fact for a refusal, e.g. that the recorded owner
	// is not on Slack, or where to record one.
	Note string
	// Failed: the check could not be made (Slack's user lookup failed for
	// another reason than an unknown user: rate limit, outage, network).
	// The press is refused as ResultFailed, and may be made again.
	Failed bool
}

// refusal is the result and answer for a press by someone who is not the
// owner, or whose ownership could not be checked; can says what the press
// asked for ("keep team/nb-0").
func (o OwnerCheck) refusal(can string) (string, string) {
	note := ""
	if o.Note != "" {
		note = " (" + o.Note + ")"
	}
	if o.Failed {
		return ResultFailed, fmt.Sprintf("The janitor could not check that you are the pod's owner, who alone can %s: Slack's user lookup failed (a rate limit, an outage or the network)%s. Nothing was done. Press again in a minute; if it keeps failing, ask the owner, or use kubectl if you have access.", can, note)
	}
	switch {
	case o.UserID != "":
		return ResultNotOwner, fmt.Sprintf("Only the pod's owner (<@%s>) can %s%s. Nothing was done. Ask them to press it, or use kubectl if you have access.", o.UserID, can, note)
	case o.Source != "":
		return ResultNotOwner, fmt.Sprintf("Only the pod's owner, as recorded in %s, can %s%s. Nothing was done. Ask the owner to do it, or use kubectl if you have access.", o.Source, can, note)
	}
	return ResultNotOwner, fmt.Sprintf("Only the pod's owner can %s, and no owner is recorded%s. Nothing was done. Use kubectl if you have access.", can, note)
}

// PressInput is what PressDecision needs about one press on a pod's
// notice (keep, reclaim now).
type PressInput struct {
	Now    time.Time
	Button Button
	// Found is false when no pod has the button's namespace and name.
	Found bool
	// UID is the pod's UID now.
	UID types.UID
	// Owner is whether the presser is the pod's owner as resolved now.
	Owner OwnerCheck
	// Notice is the pod's notice now (nil: none), NoticeErr when unreadable.
	Notice    *Notice
	NoticeErr error
	// Terminating: the pod is being deleted.
	Terminating bool
	// MaxSnooze is the policy's cap now.
	MaxSnooze time.Duration
}

// PressDecision is what to do about a press.
type PressDecision struct {
	Outcome PressOutcome
	// Result is the metric's label.
	Result string
	// Answer is the reply: ephemeral to the presser when refused, in the
	// thread otherwise.
	Answer string
	// SnoozeUntil and Capped for PressKeep.
	SnoozeUntil time.Time
	Capped      bool
}

// DecidePress decides a press on a pod's notice buttons (keep, reclaim
// now). Checks, in order: the pod exists, is the same pod (UID), the
// presser owns it, a notice is pending and not yet acted on.
func DecidePress(in PressInput) PressDecision {
	b := in.Button
	ref := b.Namespace + "/" + b.Pod
	refuse := func(result, answer string) PressDecision {
		return PressDecision{Outcome: PressRefused, Result: result, Answer: answer}
	}
	switch {
	case !in.Found || (in.Terminating && in.UID == b.UID):
		if in.Notice != nil && !in.Notice.ReclaimedAt.IsZero() || in.Terminating {
			return refuse(ResultGone, fmt.Sprintf("Pod %s is gone: it was reclaimed or deleted. Nothing was done.", ref))
		}
		return refuse(ResultGone, fmt.Sprintf("Pod %s no longer exists. Nothing was done.", ref))
	case in.UID != b.UID:
		return refuse(ResultRecreated, fmt.Sprintf("Pod %s was recreated since this notice (UID %s, the notice was about %s): the button does not apply to the new pod. Nothing was done.", ref, in.UID, b.UID))
	case !in.Owner.Match:
		can := "keep " + ref
		if b.Action == ActionReclaimNow {
			can = "reclaim " + ref + " now"
		}
		return refuse(in.Owner.refusal(can))
	case in.NoticeErr != nil || in.Notice == nil || !in.Notice.Noticed():
		return refuse(ResultNoNotice, fmt.Sprintf("No reclaim of %s is pending (it was cancelled or its notice cleared). Nothing was done.", ref))
	case !in.Notice.ReclaimedAt.IsZero():
		if in.Notice.DryRun {
			return refuse(ResultReclaimed, fmt.Sprintf("The dry run of %s is over (a live policy would have reclaimed it at %s). Nothing was done.", ref, in.Notice.ReclaimedAt.UTC().Format(time.RFC3339)))
		}
		return refuse(ResultReclaimed, fmt.Sprintf("Pod %s was already reclaimed at %s. Nothing was done.", ref, in.Notice.ReclaimedAt.UTC().Format(time.RFC3339)))
	}
	n := in.Notice
	switch b.Action {
	case ActionKeep:
		if in.MaxSnooze <= 0 {
			return refuse(ResultNotAllowed, fmt.Sprintf("The reclaim policies of %s allow no snooze. Nothing was done.", ref))
		}
		if !n.ReclaimRequestedAt.IsZero() {
			return refuse(ResultNotAllowed, fmt.Sprintf("Reclaiming %s was already asked for at %s; it can no longer be kept.", ref, n.ReclaimRequestedAt.UTC().Format(time.RFC3339)))
		}
		until := in.Now.Add(b.Keep)
		limit := n.Deadline.Add(in.MaxSnooze)
		d := PressDecision{Outcome: PressKeep, Result: ResultDone}
		if until.After(limit) {
			until, d.Capped = limit, true
		}
		if !until.After(in.Now) {
			return refuse(ResultNotAllowed, fmt.Sprintf("%s cannot be kept longer: the policy allows at most %s after the deadline, until %s. Nothing was done.",
				ref, Human(in.MaxSnooze), limit.UTC().Format(time.RFC3339)))
		}
		d.SnoozeUntil = until
		return d
	case ActionReclaimNow:
		if !n.ReclaimRequestedAt.IsZero() {
			return refuse(ResultDone, fmt.Sprintf("Reclaiming %s was already asked for at %s; it happens within a cycle.", ref, n.ReclaimRequestedAt.UTC().Format(time.RFC3339)))
		}
		return PressDecision{Outcome: PressReclaim, Result: ResultDone}
	}
	return refuse(ResultNotAllowed, fmt.Sprintf("The button %q does not apply to a notice.", b.Action))
}

// RestoreInput is what DecideRestore needs about a press on "Restore".
type RestoreInput struct {
	Button Button
	// Found is false when the target object is gone; UID is its UID now.
	Found bool
	UID   types.UID
	// Owner as in PressInput, resolved on the target.
	Owner OwnerCheck
	// Replicas is the target's kubemedic.io/reclaimed-replicas ("" when
	// it has none); for a Notebook, Stopped says whether it is stopped
	// and ReclaimedBy whether the janitor stopped it.
	Replicas    string
	Current     int32
	Stopped     bool
	ReclaimedBy string
}

// RestoreDecision is what to do about a restore.
type RestoreDecision struct {
	Outcome PressOutcome
	Result  string
	Answer  string
	// Replicas to scale back to, for a Deployment or StatefulSet.
	Replicas int32
}

// DecideRestore decides a press on "Restore": the target must be the one
// reclaimed (same UID), still reclaimed by the janitor, and the presser
// its owner.
func DecideRestore(in RestoreInput) RestoreDecision {
	b := in.Button
	what := fmt.Sprintf("%s %s/%s", b.TargetKind, b.Namespace, b.TargetName)
	refuse := func(result, answer string) RestoreDecision {
		return RestoreDecision{Outcome: PressRefused, Result: result, Answer: answer}
	}
	switch {
	case !in.Found:
		return refuse(ResultGone, fmt.Sprintf("%s no longer exists: there is nothing to restore.", what))
	case in.UID != b.TargetUID:
		return refuse(ResultRecreated, fmt.Sprintf("%s was recreated since the reclaim (UID %s, the reclaimed one was %s): it is left alone.", what, in.UID, b.TargetUID))
	case !in.Owner.Match:
		return refuse(in.Owner.refusal("restore " + what))
	}
	switch b.TargetKind {
	case TargetDeployment, TargetStatefulSet:
		if in.Replicas == "" {
			return refuse(ResultNoNotice, fmt.Sprintf("%s is not reclaimed by the janitor (no replica count recorded): it was restored already, or by hand. Nothing was done.", what))
		}
		n, err := strconv.ParseInt(in.Replicas, 10, 32)
		if err != nil || n <= 0 {
			return refuse(ResultFailed, fmt.Sprintf("%s records %q replicas, which is not a positive count: restore it with kubectl scale.", what, in.Replicas))
		}
		if in.Current != 0 {
			return refuse(ResultNoNotice, fmt.Sprintf("%s runs %d replicas already: it was scaled by someone else. Nothing was done.", what, in.Current))
		}
		return RestoreDecision{Outcome: PressRestore, Result: ResultDone, Replicas: int32(n)}
	case TargetNotebook:
		if !in.Stopped || in.ReclaimedBy == "" {
			return refuse(ResultNoNotice, fmt.Sprintf("%s is not stopped by the janitor: it was started again already. Nothing was done.", what))
		}
		return RestoreDecision{Outcome: PressRestore, Result: ResultDone}
	}
	return refuse(ResultNotAllowed, fmt.Sprintf("A reclaimed %s cannot be restored from Slack: submit it again.", b.TargetKind))
}

// Restorable reports whether a reclaim of target can be undone with a
// Restore button.
func Restorable(t Target) bool {
	switch t.Kind {
	case TargetDeployment, TargetStatefulSet, TargetNotebook:
		return t.UID != ""
	}
	return false
}
