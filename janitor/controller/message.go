package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Every janitor message says what was seen, what will be done, when, and
// how to stop it. The builders are pure: the same plan gives the same
// message, in the controller and in tests.

func podRef(pp *PodPlan) string { return pp.Pod.Namespace + "/" + pp.Pod.Name }

func snoozeCommand(pp *PodPlan, until time.Time) string {
	return fmt.Sprintf("kubectl annotate pod -n %s %s --overwrite %s=%s", pp.Pod.Namespace, pp.Pod.Name,
		v1alpha1.AnnotationReclaimSnoozeUntil, until.UTC().Format(time.RFC3339))
}

func dryRunNote(dry bool) string {
	if dry {
		return " (dry run: nothing will be changed)"
	}
	return ""
}

// noticeMessage is the first message of a pod's thread. With buttons (the
// janitor serves Slack's interactivity endpoint) it carries "Keep" buttons
// up to the policy's maxSnooze and "Reclaim now"; the kubectl way is
// always there too.
func noticeMessage(pp *PodPlan, d decide.Decision, dry, buttons bool) notify.Message {
	ref := podRef(pp)
	gpus := pp.Facts.GPUs()
	what := d.Target.Describe()
	snoozeTo := d.Deadline.Add(pp.Rules.MaxSnooze)
	text := fmt.Sprintf("Your GPU pod %s (%d GPU) will be reclaimed at %s%s: %s. Rule %s: %s. To keep it: %s",
		ref, gpus, d.Deadline.UTC().Format(time.RFC3339), dryRunNote(dry), what, d.Rule, d.Evidence, snoozeCommand(pp, snoozeTo))
	how := []string{
		fmt.Sprintf("*Keep it* until a time at most %s after the deadline:\n%s", decide.Human(pp.Rules.MaxSnooze), notify.Code(snoozeCommand(pp, snoozeTo))),
	}
	if d.Rule == decide.RuleIdle {
		how = append(how, "*Or use the GPU*: the rule is checked again on fresh metrics at the deadline; if it no longer holds, nothing happens.")
	}
	if d.Rule == decide.RuleExpired {
		how = append(how, fmt.Sprintf("*Or* remove or extend the %s / %s annotation named above.", v1alpha1.AnnotationJanitorTTL, v1alpha1.AnnotationJanitorExpires))
	}
	if pp.Rules.AllowOptOut {
		how = append(how, fmt.Sprintf("*Or opt out*: %s", notify.Code(fmt.Sprintf("kubectl annotate pod -n %s %s %s=%s", pp.Pod.Namespace, pp.Pod.Name, v1alpha1.AnnotationReclaim, v1alpha1.ReclaimDisabled))))
	}
	blocks := []slack.Block{
		notify.Header(fmt.Sprintf("GPU pod %s will be reclaimed%s", ref, dryRunNote(dry))),
		notify.MarkdownFields(
			"Seen", notify.Escape(fmt.Sprintf("%s: %s", d.Rule, d.Evidence)),
			"Will be done", notify.Escape(what),
			"When", notify.Date(d.Deadline)+fmt.Sprintf(" (in %s)", decide.Human(pp.Rules.GracePeriod)),
			"Pod", notify.Code(ref)+fmt.Sprintf(" on %s, %d GPU", notify.Escape(nodeOr(pp.Pod.Spec.NodeName)), gpus),
		),
		notify.Section(strings.Join(how, "\n")),
	}
	ctx := []string{"kubemedic janitor", "policies " + notify.Escape(strings.Join(pp.Rules.Policies, ", "))}
	if pp.Rules.Description != "" {
		ctx = append(ctx, notify.Escape(pp.Rules.Description))
	}
	if buttons {
		if b := noticeButtons(pp, d); b != nil {
			blocks = append(blocks, notify.Section(noticeButtonsText(pp, d)), b)
			text += ". Or press a button in this message."
		}
	}
	blocks = append(blocks, notify.Context(ctx...))
	return notify.Message{Text: text, Blocks: blocks}
}

// noticeButtonsText says what the buttons do and the snooze's limit.
func noticeButtonsText(pp *PodPlan, d decide.Decision) string {
	limit := d.Deadline.Add(pp.Rules.MaxSnooze)
	s := "*Or press a button* (only the pod's owner can): "
	if len(decide.KeepButtons(pp.Rules.MaxSnooze)) > 0 {
		s += fmt.Sprintf("*Keep* keeps it for that long from the press, at most %s after the deadline (until %s); ",
			decide.Human(pp.Rules.MaxSnooze), notify.Date(limit))
	}
	s += "*Reclaim now* frees the GPUs at once"
	if decide.Restorable(d.Target) {
		s += "; the message that says it was reclaimed has a *Restore* button"
	}
	return s + "."
}

// noticeButtons is the actions block of a notice; nil when the pod has
// no UID (never, for a pod read from the API server).
func noticeButtons(pp *PodPlan, d decide.Decision) slack.Block {
	if pp.Pod.UID == "" {
		return nil
	}
	ref := decide.Button{Namespace: pp.Pod.Namespace, Pod: pp.Pod.Name, UID: pp.Pod.UID}
	var elems []slack.BlockElement
	for i, k := range decide.KeepButtons(pp.Rules.MaxSnooze) {
		b := ref
		b.Action, b.Keep = decide.ActionKeep, k.Keep
		e := slack.NewButtonBlockElement(b.ActionID(), b.Encode(), plain(decide.ButtonLabel(k.Keep)))
		if i == 0 {
			e = e.WithStyle(slack.StylePrimary)
		}
		elems = append(elems, e)
	}
	b := ref
	b.Action = decide.ActionReclaimNow
	what := fmt.Sprintf("This will %s now, without waiting for the deadline.", d.Target.Describe())
	if pp.Rules.DryRun {
		what = fmt.Sprintf("The policy is a dry run: the janitor will only say that it would %s, and stop nothing.", d.Target.Describe())
	}
	confirm := slack.NewConfirmationBlockObject(plain("Reclaim now?"), plain(cut(what, 300)), plain("Reclaim now"), plain("Cancel"))
	elems = append(elems, slack.NewButtonBlockElement(b.ActionID(), b.Encode(), plain("Reclaim now")).WithStyle(slack.StyleDanger).WithConfirm(confirm))
	return slack.NewActionBlock("kubemedic-notice", elems...)
}

// reclaimedMessage is the thread's reply after a reclaim; with buttons, a
// reclaim that can be undone carries "Restore".
func reclaimedMessage(pp *PodPlan, d decide.Decision, text string, buttons bool) notify.Message {
	m := threadMessage(pp, text)
	if !buttons || !decide.Restorable(d.Target) || pp.Pod.UID == "" {
		return m
	}
	b := decide.Button{Action: decide.ActionRestore, Namespace: pp.Pod.Namespace, Pod: pp.Pod.Name, UID: pp.Pod.UID,
		TargetKind: d.Target.Kind, TargetName: d.Target.Name, TargetUID: d.Target.UID, TargetAPIVersion: d.Target.APIVersion}
	m.Text += " Or press Restore."
	m.Blocks = append(m.Blocks[:1:1], slack.NewActionBlock("kubemedic-reclaimed",
		slack.NewButtonBlockElement(b.ActionID(), b.Encode(), plain("Restore")).WithStyle(slack.StylePrimary)), m.Blocks[1])
	return m
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

// cut shortens s to n runes for a field with a Slack limit.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func nodeOr(n string) string {
	if n == "" {
		return "no node (unscheduled)"
	}
	return n
}

// threadMessage is a follow-up in the pod's thread: one section and the
// pod reference.
func threadMessage(pp *PodPlan, text string) notify.Message {
	return notify.Message{Text: text, Blocks: []slack.Block{notify.Section(notify.Escape(text)), notify.Context("kubemedic janitor", notify.Code(podRef(pp)))}}
}

func cancelText(pp *PodPlan, d decide.Decision) string {
	return fmt.Sprintf("Cancelled: %s is kept. %s. Nothing will be done; you will get a new notice if a rule holds again.", podRef(pp), capitalize(d.Why))
}

func snoozeText(pp *PodPlan, d decide.Decision) string {
	s := fmt.Sprintf("Snooze confirmed: %s is kept until %s. After that the rules are checked again, and you get a new notice if one still holds.",
		podRef(pp), d.SnoozeUntil.UTC().Format(time.RFC3339))
	if d.SnoozeCapped {
		s += fmt.Sprintf(" You asked for %s; the policy allows at most %s after the deadline.", pp.Pod.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil], decide.Human(pp.Rules.MaxSnooze))
	}
	return s
}

func snoozeEndedText(pp *PodPlan) string {
	return fmt.Sprintf("The snooze of %s has ended. The rules are checked again now; if one still holds you get a new notice with a new grace period.", podRef(pp))
}

func reclaimedText(pp *PodPlan, d decide.Decision, result string) string {
	return fmt.Sprintf("Reclaimed %s: %s. Rule %s: %s. %s", podRef(pp), result, d.Rule, d.Evidence, restoreHint(pp, d))
}

func wouldReclaimText(pp *PodPlan, d decide.Decision) string {
	if pp.Notice != nil && !pp.Notice.ReclaimRequestedAt.IsZero() {
		return fmt.Sprintf("Dry run: reclaiming %s now was asked for (%s). A live policy would now %s. Nothing was changed.", podRef(pp), d.Evidence, d.Target.Describe())
	}
	return fmt.Sprintf("Dry run: the grace period of %s is over and rule %s still holds (%s). A live policy would now %s. Nothing was changed.",
		podRef(pp), d.Rule, d.Evidence, d.Target.Describe())
}

func reclaimFailedText(pp *PodPlan, err error) string {
	return fmt.Sprintf("Reclaiming %s failed: %v. The janitor tries again in its next cycle.", podRef(pp), err)
}

func restoreHint(pp *PodPlan, d decide.Decision) string {
	switch d.Target.Kind {
	case decide.TargetDeployment, decide.TargetStatefulSet:
		return fmt.Sprintf("To restore it: kubectl scale %s -n %s %s --replicas=<the count in its %s annotation>.",
			strings.ToLower(string(d.Target.Kind)), pp.Pod.Namespace, d.Target.Name, v1alpha1.AnnotationReclaimedReplicas)
	case decide.TargetNotebook:
		return fmt.Sprintf("Start the notebook again from the Kubeflow UI when you need it (or: kubectl annotate notebook -n %s %s %s-).", pp.Pod.Namespace, d.Target.Name, AnnotationNotebookStops)
	}
	return "Submit it again when you need the GPU."
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
