package controller

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// ownerNotifier tells the owner of each pod a drain stops, on Slack: one
// message per pod, the root of its own thread. The reconciler writes each
// message owed into the operation's status (owed.go says how), and queues
// the operation for the sender, which claims, posts and records them; a
// reconcile never waits for Slack.
type ownerNotifier struct {
	sender *sender
	// reader reads each stopped pod's Namespace (its owner annotations):
	// the manager's cache holds no namespaces, and a cluster-wide informer
	// for a handful of reads per drain would cost more than it saves.
	reader         client.Reader
	defaultChannel string
}

// prepare writes into op.Status a Pending notice for each pod that d is
// about to stop whose owner can be found and that has none yet (or whose
// notice says another way of stopping), and reports whether it wrote any:
// the pass must then end there, so that the status write holds them
// before the pods are stopped, and the next pass stops them. pods are the
// pods d was decided from. unrecorded are the pods whose notice did not
// fit (status.ownerNotices is full of unsent ones), to be counted when
// they are stopped. A pod without a recipient gets no notice (logged at
// V(1)). Safe to call on a nil ownerNotifier: Slack is not configured.
func (o *ownerNotifier) prepare(ctx context.Context, op *v1alpha1.NodeOperation, pods []corev1.Pod, d drain.Decision) (hold bool, unrecorded map[types.UID]bool) {
	if o == nil {
		return false, nil
	}
	need := noticesToWrite(op.Status.OwnerNotices, d)
	if len(need) == 0 {
		return false, nil
	}
	logger := log.FromContext(ctx)
	byUID := make(map[types.UID]*corev1.Pod, len(pods))
	for i := range pods {
		byUID[pods[i].UID] = &pods[i]
	}
	existing := make(map[string]v1alpha1.OwnerNotice, len(op.Status.OwnerNotices))
	for _, n := range op.Status.OwnerNotices {
		existing[n.UID] = n
	}
	namespaces := map[string]metav1.Object{}
	var add []v1alpha1.OwnerNotice
	for _, s := range need {
		if n, ok := existing[string(s.UID)]; ok {
			n.Deleted = s.Deleted
			add = append(add, n)
			continue
		}
		pod := byUID[s.UID]
		if pod == nil {
			continue // Plan decided from these pods, with these UIDs
		}
		ns, read := namespaces[pod.Namespace]
		if !read {
			ns = o.namespace(ctx, pod.Namespace)
			namespaces[pod.Namespace] = ns
		}
		to, problems, ok := notify.ResolveOwner(pod, ns, o.defaultChannel)
		if len(problems) > 0 {
			logger.Info("Ignoring unusable owner annotations of a pod the drain stops", "pod", klog.KObj(pod), "problems", problems)
		}
		if ok && len(to.Email) > 254 {
			logger.Info("Ignoring an owner email longer than an address can be", "pod", klog.KObj(pod))
			to.Email = ""
			ok = to.UserID != "" || to.Channel != ""
		}
		if !ok {
			logger.V(1).Info("Not telling anyone that the drain stops a pod: no owner or channel found", "pod", klog.KObj(pod))
			continue
		}
		add = append(add, pendingNotice(pod, to, s.Deleted))
	}
	if len(add) == 0 {
		return false, nil
	}
	notices, left := addNotices(op.Status.OwnerNotices, add, v1alpha1.MaxOwnerNotices)
	for _, n := range left {
		if unrecorded == nil {
			unrecorded = map[types.UID]bool{}
		}
		unrecorded[types.UID(n.UID)] = true
	}
	if len(left) == len(add) {
		return false, unrecorded
	}
	logger.V(1).Info("Recording the Slack messages owed for the pods the drain stops next", "pods", len(add)-len(left))
	op.Status.OwnerNotices = notices
	return true, unrecorded
}

// pendingNotice is the notice about pod, to be stopped (deleted) and told
// to to.
func pendingNotice(pod *corev1.Pod, to notify.Recipient, deleted bool) v1alpha1.OwnerNotice {
	n := v1alpha1.OwnerNotice{
		UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name,
		Recipient: v1alpha1.OwnerNoticeRecipient{UserID: to.UserID, Email: to.Email, Channel: to.Channel, Source: clip(to.Source, 128)},
		State:     v1alpha1.OwnerNoticePending, Deleted: deleted,
	}
	if c := metav1.GetControllerOf(pod); c != nil {
		n.ControllerKind, n.ControllerName = clip(c.Kind, 63), c.Name
	}
	return n
}

// stopped records a drain pass's outcome in status: the notices of the
// pods it stopped are owed. Stopped pods whose notice did not fit
// (unrecorded, from prepare) are counted in
// status.ownerNoticesUnrecorded, the metric's "dropped" and the log: their
// owners are not told. Safe to call on a nil ownerNotifier.
func (o *ownerNotifier) stopped(ctx context.Context, status *v1alpha1.NodeOperationStatus, stopped []drain.Stopped, unrecorded map[types.UID]bool, now time.Time) {
	if o == nil || len(stopped) == 0 {
		return
	}
	status.OwnerNotices = noticesStopped(status.OwnerNotices, stopped, now)
	for _, s := range stopped {
		if unrecorded[s.UID] {
			status.OwnerNoticesUnrecorded++
			o.sender.results.WithLabelValues(notificationDropped).Inc()
			log.FromContext(ctx).Info("Not telling the owner of a stopped pod: the operation holds as many unsent messages as it can", "pod", klog.KRef(s.Pod.Namespace, s.Pod.Name), "max", v1alpha1.MaxOwnerNotices)
		}
	}
}

// owe queues op for the sender when one of its notices, or the result
// reply of one, can be claimed now, and returns when to look at it again
// for its notices: after a claim expires, sooner when the queue was full;
// zero when nothing is owed. The status decides what is owed, so a queue
// that was full, a send that failed or a claimer that crashed is made up
// by a later pass.
// Safe to call on a nil ownerNotifier.
func (o *ownerNotifier) owe(op *v1alpha1.NodeOperation, now time.Time) time.Duration {
	if o == nil {
		return 0
	}
	owed, next := owedNow(op, now)
	if owed {
		if !o.sender.enqueue(op.Name) {
			return noticeRequeue
		}
		return noticeClaimTimeout
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Second)
}

// namespace reads a Namespace from the API server; nil when that fails, so
// that the owner is resolved from the pod and the default channel alone.
func (o *ownerNotifier) namespace(ctx context.Context, name string) metav1.Object {
	ns := &corev1.Namespace{}
	if err := o.reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if ctx.Err() != nil {
			return nil // stopping: this pass's status write fails too
		}
		log.FromContext(ctx).Error(err, "Reading the namespace of a pod the drain stops failed; finding its owner from the pod alone", "namespace", name)
		return nil
	}
	return ns
}

// noticeMessage is the message a notice owes, and to whom: the pod as the
// notice keeps it (it may be gone), at the time it was stopped.
func noticeMessage(op *v1alpha1.NodeOperation, n v1alpha1.OwnerNotice, issue string) (notify.Recipient, notify.Message) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name, UID: types.UID(n.UID)}}
	if n.ControllerKind != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{Kind: n.ControllerKind, Name: n.ControllerName, Controller: ptr.To(true)}}
	}
	to := notify.Recipient{UserID: n.Recipient.UserID, Email: n.Recipient.Email, Channel: n.Recipient.Channel, Source: n.Recipient.Source}
	return to, stoppedMessage(op, pod, n.Deleted, issue, to, timeOf(n.StoppedAt))
}

// issueURL is the GitHub issue of the operation's fault: the
// kubemedic.io/github-issue annotation of the operation, else of the node;
// "" when neither holds an http(s) URL.
func issueURL(op *v1alpha1.NodeOperation, node *corev1.Node) string {
	var candidates []string
	if op != nil {
		candidates = append(candidates, op.Annotations[v1alpha1.AnnotationGitHubIssue])
	}
	if node != nil {
		candidates = append(candidates, node.Annotations[v1alpha1.AnnotationGitHubIssue])
	}
	for _, c := range candidates {
		c = strings.TrimSpace(c)
		u, err := url.Parse(c)
		if c == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		return c
	}
	return ""
}

// Every message to a pod owner says what was seen (the node's condition),
// what was done to the pod and by whom (the policy), when, what happens to
// the workload now, and where to follow the repair. The builder is pure:
// the same objects give the same message.

// stoppedMessage is the message about one pod that a drain evicted, or
// deleted (deleted) after its timeout.
func stoppedMessage(op *v1alpha1.NodeOperation, pod *corev1.Pod, deleted bool, issue string, to notify.Recipient, at time.Time) notify.Message {
	ref := pod.Namespace + "/" + pod.Name
	node := op.Spec.NodeName
	cause, causeMD := causeOf(op)
	by, byMD := "policy "+op.Spec.Policy, "policy "+notify.Code(op.Spec.Policy)
	if op.Spec.Policy == "" {
		by, byMD = "a manual NodeOperation", "a manual NodeOperation"
	}
	verb := "evicted"
	done := "Evicted through the Eviction API, which honours its PodDisruptionBudgets"
	if deleted {
		verb = "deleted"
		done = fmt.Sprintf("Deleted: it was still there when the drain timeout of %s ran out, and this drain then deletes pods, bypassing their PodDisruptionBudgets", drainTimeout(op))
	}
	next, nextMD := nextSteps(pod, op)
	follow := "kubectl get nodeoperation " + op.Name

	text := fmt.Sprintf("Your pod %s on node %s was stopped because %s, by %s: %s at %s, to %s. %s Follow the repair: %s",
		ref, node, cause, by, verb, at.UTC().Format("2006-01-02 15:04 UTC"), plan.Describe(op), next, follow)
	if issue != "" {
		text += " or " + issue
	}
	kept, keptMD := diagnosticsKept(op)
	if kept != "" {
		text += ". " + kept
	}

	repair := notify.Escape(plan.Describe(op))
	if op.Spec.Step != "" {
		repair += ", step " + notify.Code(op.Spec.Step)
	}
	repair += ", operation " + notify.Code(op.Name)
	fields := []string{
		"Seen", seenOf(op),
		"Done", notify.Escape(done),
		"When", notify.Date(at),
		"Node", notify.Code(node) + " (cordoned)",
		"By", byMD,
		"Repair", repair,
	}
	if issue != "" {
		fields = append(fields, "Issue", notify.Link(issue, issueLabel(issue)))
	}
	if keptMD != "" {
		fields = append(fields, "Diagnostics", keptMD)
	}
	followMD := "*Follow the repair*: " + notify.Code(follow)
	if issue != "" {
		followMD += ", or the issue above"
	}
	footer := []string{"kubemedic remediator"}
	if to.Source != "" {
		footer = append(footer, notify.Escape("recipient from the "+to.Source))
	}
	return notify.Message{
		Text: text,
		Blocks: []slack.Block{
			notify.Header(fmt.Sprintf("Your pod %s was stopped", ref)),
			notify.Section(fmt.Sprintf("Your pod %s on node %s was *%s* because %s, by %s.",
				notify.Code(ref), notify.Code(node), verb, causeMD, byMD)),
			notify.MarkdownFields(fields...),
			notify.Section(nextMD + "\n" + followMD),
			notify.Context(footer...),
		},
	}
}

// diagnosticsKept says, as plain text and as mrkdwn, that the node's
// diagnostics were kept before the repair and where; "" when the
// operation captured no bundle.
func diagnosticsKept(op *v1alpha1.NodeOperation) (string, string) {
	d := op.Status.Diagnostics
	if d == nil || d.Bundle == nil {
		return "", ""
	}
	where := "in the diagnostics store"
	if !d.Bundle.Stored {
		where = "on the node, waiting for the diagnostics store"
	}
	return fmt.Sprintf("The node's diagnostics were kept before the repair (%s, %s)", d.Bundle.Key, where),
		fmt.Sprintf("kept before the repair: %s, %s", notify.Code(d.Bundle.Key), notify.Escape(where))
}

// causeOf says why the node is drained, as plain text and as mrkdwn:
// "the node reported GPULost (GPUCountMismatch)", or the reason of a
// NodeOperation without a trigger.
func causeOf(op *v1alpha1.NodeOperation) (string, string) {
	if t := op.Spec.Trigger; t != nil {
		s, md := "the node reported "+t.Type, "the node reported *"+notify.Escape(t.Type)+"*"
		if t.Reason != "" {
			s += " (" + t.Reason + ")"
			md += " (" + notify.Escape(t.Reason) + ")"
		}
		return s, md
	}
	if r := strings.TrimSpace(op.Spec.Reason); r != "" {
		r = clip(r, 200)
		return "of planned work on the node: " + r, "of planned work on the node: " + notify.Escape(r)
	}
	return "of planned work on the node", "of planned work on the node"
}

// seenOf is the trigger condition as mrkdwn: "`GPULost` is True since
// <date>: GPUCountMismatch: 7 of 8 GPUs", its message without a repeat of
// the reason that starts it.
func seenOf(op *v1alpha1.NodeOperation) string {
	t := op.Spec.Trigger
	if t == nil {
		if r := strings.TrimSpace(op.Spec.Reason); r != "" {
			return "NodeOperation created by hand: " + notify.Escape(clip(r, 500))
		}
		return "NodeOperation created by hand"
	}
	s := notify.Code(t.Type) + " is " + notify.Escape(string(t.Status))
	if !t.LastTransitionTime.IsZero() {
		s += " since " + notify.Date(t.LastTransitionTime.Time)
	}
	detail := strings.TrimSpace(t.Message)
	if t.Reason != "" && !strings.HasPrefix(detail, t.Reason) {
		detail = strings.TrimSuffix(t.Reason+": "+detail, ": ")
	}
	if detail != "" {
		s += ": " + notify.Escape(clip(detail, 500))
	}
	return s
}

// nextSteps says what becomes of the pod's workload, and what its owner
// should do, as plain text and mrkdwn.
func nextSteps(pod *corev1.Pod, op *v1alpha1.NodeOperation) (string, string) {
	node := op.Spec.NodeName
	if c := metav1.GetControllerOf(pod); c != nil {
		s := fmt.Sprintf("Its controller, %s %s, will recreate it on another node.", c.Kind, c.Name)
		md := fmt.Sprintf("*What happens next*: its controller, %s %s, will recreate it on another node; nothing to do.",
			notify.Escape(c.Kind), notify.Code(c.Name))
		return s, md
	}
	s := "A bare pod is not recreated: submit it again."
	until := "the repair is verified"
	if v := op.Spec.Validate; v != nil {
		until += " and its GPUs pass " + notify.Code(v.Operation)
	}
	md := fmt.Sprintf("*What to do*: a bare pod is not recreated: submit it again. It will not be scheduled on %s until %s and kubemedic uncordons the node.",
		notify.Code(node), until)
	return s, md
}

// issueLabel is the link text of an issue URL: "owner/repo#42" for a
// GitHub issue, else "GitHub issue".
func issueLabel(issue string) string {
	u, err := url.Parse(issue)
	if err != nil {
		return "GitHub issue"
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) == 4 && (parts[2] == "issues" || parts[2] == "pull") {
		return parts[0] + "/" + parts[1] + "#" + parts[3]
	}
	return "GitHub issue"
}

// drainTimeout is the operation's drain timeout, as the drain applies it.
func drainTimeout(op *v1alpha1.NodeOperation) time.Duration {
	if op.Spec.Drain != nil && op.Spec.Drain.Timeout != nil {
		return op.Spec.Drain.Timeout.Duration
	}
	return policies.DefaultDrainTimeout
}

// clip cuts s to at most n characters, ending in an ellipsis when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
