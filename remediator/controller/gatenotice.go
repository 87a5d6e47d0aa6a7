package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// maxListedGPUs bounds the failing GPUs a result reply names; the
// operation's status.validation holds them all.
const maxListedGPUs = 8

// resultMessage is the reply, in the thread of the message about pod n,
// with the result of the operation's GPU test: what was seen (the test,
// its verdict, the failing GPUs, why), what happens next to the node and
// the workload, and where to look or how to stop it. policy is the
// operation's RemediationPolicy as read now, nil when it has none or it
// could not be read; it says what the ladder does after a failure. The
// operation must have ended on its test's verdict (gateVerdict). Pure: the
// same objects give the same message.
func resultMessage(op *v1alpha1.NodeOperation, n v1alpha1.OwnerNotice, policy *v1alpha1.RemediationPolicy, issue string) notify.Message {
	passed, _ := gateVerdict(op)
	v := op.Status.Validation
	ref := n.Namespace + "/" + n.Name
	node := op.Spec.NodeName
	template := v.Template
	if template == "" {
		template = op.Spec.Validate.Operation
	}
	test, testMD := "template "+template, "template "+notify.Code(template)
	if v.Test != "" {
		test, testMD = v.Test+" ("+test+")", notify.Code(v.Test)+" ("+testMD+")"
	}
	follow := "kubectl get nodeoperation " + op.Name

	verdict, outcome, state, result := "passed", "serves again", "uncordoned", "Passed"
	if !passed {
		verdict, outcome, state, result = "failed", "stays cordoned", "cordoned", "Failed"
	}
	if m := strings.TrimSpace(v.Message); m != "" {
		result += ": " + clip(m, 500)
	}
	work, workMD := workloadAfter(n, node, passed)
	said := []string{
		fmt.Sprintf("Update on your pod %s: node %s %s its GPU test, %s, after the repair and %s", ref, node, verdict, test, outcome),
		notify.Escape(result), // a tool's words: may hold <, > or &
	}
	next := "*What happens next*: the node is back in service. " + workMD
	if !passed {
		ladder, ladderMD := afterFailure(op, policy)
		said = append(said, ladder)
		next = "*What happens next*: the node stays cordoned; " + ladderMD + " " + workMD
	}
	said = append(said, work)
	if !passed && op.Spec.Policy != "" {
		stop := v1alpha1.LabelRemediation + "=" + v1alpha1.RemediationDisabled
		said = append(said, "To stop it, label the node "+stop)
		next += "\n*To stop it*: label the node " + notify.Code(stop) + ", and no policy acts on it (it stays cordoned)."
	}
	text := sentences(said...) + " Follow the repair: " + follow
	if issue != "" {
		text += " or " + issue
	}

	repair := notify.Escape(plan.Describe(op))
	if op.Spec.Step != "" {
		repair += ", step " + notify.Code(op.Spec.Step)
	}
	repair += ", operation " + notify.Code(op.Name)
	fields := []string{
		"Test", testMD,
		"Result", notify.Escape(result),
	}
	if gpus := plan.FailingGPUs(v); len(gpus) > 0 {
		fields = append(fields, "Failing GPUs", gpuList(gpus))
	}
	if v.CompletionTime != nil {
		fields = append(fields, "When", notify.Date(v.CompletionTime.Time))
	}
	fields = append(fields, "Node", notify.Code(node)+" ("+state+")", "Repair", repair)
	if issue != "" {
		fields = append(fields, "Issue", notify.Link(issue, issueLabel(issue)))
	}
	followMD := "*Follow the repair*: " + notify.Code(follow)
	if issue != "" {
		followMD += ", or the issue above"
	}
	return notify.Message{
		Text: text,
		Blocks: []slack.Block{
			notify.Header(fmt.Sprintf("Node %s %s its GPU test", node, verdict)),
			notify.Section(fmt.Sprintf("Update on your pod %s: node %s *%s* its GPU test after the repair and %s.",
				notify.Code(ref), notify.Code(node), verdict, outcome)),
			notify.MarkdownFields(fields...),
			notify.Section(next + "\n" + followMD),
			notify.Context("kubemedic remediator"),
		},
	}
}

// sentences joins parts as sentences: each ends with one full stop.
func sentences(parts ...string) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p = strings.TrimRight(strings.TrimSpace(p), "."); p != "" {
			out = append(out, p+".")
		}
	}
	return strings.Join(out, " ")
}

// workloadAfter says what the test's verdict means for the pod's
// workload, as plain text and mrkdwn.
func workloadAfter(n v1alpha1.OwnerNotice, node string, passed bool) (string, string) {
	if n.ControllerKind != "" {
		s := fmt.Sprintf("Its controller, %s %s, recreated it on another node; nothing to do.", n.ControllerKind, n.ControllerName)
		return s, fmt.Sprintf("Its controller, %s %s, recreated it on another node; nothing to do.", notify.Escape(n.ControllerKind), notify.Code(n.ControllerName))
	}
	if passed {
		s := fmt.Sprintf("A bare pod is not recreated: submit it again if you have not; %s takes pods again.", node)
		return s, fmt.Sprintf("A bare pod is not recreated: submit it again if you have not; %s takes pods again.", notify.Code(node))
	}
	s := fmt.Sprintf("A bare pod is not recreated: submit it again; it will not be scheduled on %s while it stays cordoned.", node)
	return s, fmt.Sprintf("A bare pod is not recreated: submit it again; it will not be scheduled on %s while it stays cordoned.", notify.Code(node))
}

// afterFailure says, as plain text and mrkdwn, what the operation's
// ladder does after its test failed: a policy that acts on
// GPUValidationFailed takes its next step or quarantines the node; one
// that does not, and a NodeOperation made by hand, leave the node to a
// human. p is the operation's policy, nil when it could not be read.
func afterFailure(op *v1alpha1.NodeOperation, p *v1alpha1.RemediationPolicy) (string, string) {
	name := op.Spec.Policy
	if name == "" {
		s := "nothing more happens by itself: the NodeOperation was made by hand, and a human decides what becomes of the node."
		return strings.ToUpper(s[:1]) + s[1:], s
	}
	byNameMD := "policy " + notify.Code(name)
	if p == nil {
		s := " decides what comes next: its next step, or a quarantine after its last."
		return "Policy " + name + s, byNameMD + s
	}
	acts := false
	for _, c := range p.Spec.Conditions {
		acts = acts || c.Type == v1alpha1.ConditionGPUValidationFailed
	}
	if !acts {
		s := " does not act on " + v1alpha1.ConditionGPUValidationFailed + ": a human decides what becomes of the node."
		return "Policy " + name + s, byNameMD + notify.Escape(s)
	}
	steps := p.Spec.Steps
	idx, err := strconv.Atoi(op.Labels[v1alpha1.LabelStepIndex])
	switch {
	case err != nil || idx < 0 || idx > len(steps):
		s := " takes its next step, or quarantines the node after its last."
		return "Policy " + name + s, byNameMD + s
	case idx+1 < len(steps) && steps[idx+1].Quarantine:
		return fmt.Sprintf("Policy %s quarantines the node next (step %s): a human decides when it serves again.", name, steps[idx+1].Name),
			fmt.Sprintf("%s quarantines the node next (step %s): a human decides when it serves again.", byNameMD, notify.Code(steps[idx+1].Name))
	case idx+1 < len(steps):
		return fmt.Sprintf("Policy %s takes its next step, %s, on %s.", name, steps[idx+1].Name, v1alpha1.ConditionGPUValidationFailed),
			fmt.Sprintf("%s takes its next step, %s, on %s.", byNameMD, notify.Code(steps[idx+1].Name), notify.Code(v1alpha1.ConditionGPUValidationFailed))
	case idx+1 == len(steps) && !steps[idx].Quarantine:
		s := " quarantines the node next, after the last step of its ladder: a human decides when it serves again."
		return "Policy " + name + s, byNameMD + s
	}
	s := " has no step left: a human decides what becomes of the node."
	return "Policy " + name + s, byNameMD + s
}

// gpuList is the failing GPUs' UUIDs as mrkdwn, the first maxListedGPUs
// of them and a count of the rest.
func gpuList(uuids []string) string {
	shown := uuids[:min(len(uuids), maxListedGPUs)]
	parts := make([]string, len(shown))
	for i, u := range shown {
		parts[i] = notify.Code(u)
	}
	s := strings.Join(parts, ", ")
	if rest := len(uuids) - len(shown); rest > 0 {
		s += fmt.Sprintf(" and %d more", rest)
	}
	return s
}
