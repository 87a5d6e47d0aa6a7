package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Event reasons. They are API: ops filter Events by them.
const (
	EventNoticeSent       = "ReclaimNoticeSent"
	EventNoticeFailed     = "ReclaimNoticeFailed"
	EventNoticeReset      = "ReclaimNoticeReset"
	EventSnoozed          = "ReclaimSnoozed"
	EventSnoozeEnded      = "ReclaimSnoozeEnded"
	EventCancelled        = "ReclaimCancelled"
	EventReclaimed        = "Reclaimed"
	EventReclaimFailed    = "ReclaimFailed"
	EventWouldNotify      = "ReclaimWouldNotify"
	EventWouldReclaim     = "ReclaimWouldReclaim"
	EventUnsupportedOwner = "ReclaimUnsupportedOwner"
	EventInvalidValue     = "ReclaimInvalidAnnotation"
	EventPolicyIgnored    = "ReclaimPolicyIgnored"
	EventDeferred         = "ReclaimDeferred"
)

// Janitor runs the reclaim cycle. It is a leader-only Runnable.
type Janitor struct {
	// Client reads from the cache and writes.
	Client client.Client
	// Reader reads from the API server, to recheck a pod just before acting.
	Reader   client.Reader
	Source   gpuutil.Source
	Notifier notify.Notifier
	// NotifierReady is false when Slack is not configured.
	NotifierReady bool
	Recorder      events.EventRecorder
	Clock         clock.Clock
	Metrics       *Metrics
	// Interval between cycles.
	Interval       time.Duration
	Identity       string
	DefaultChannel string
	SelfNamespace  string
	// Log is the janitor's logger.
	Log logr.Logger

	// pods are the GPU pods of the cache, fed by its pod informer;
	// podsSynced reports whether the handler has seen every pod of the
	// initial list (nil: do not wait).
	pods       *gpuPods
	podsSynced func() bool

	// mu guards reported: the last Event key per object, so an unchanged
	// decision that has no state on the pod (dry run, blocked notice,
	// invalid annotation) is evented once, not every cycle.
	mu       sync.Mutex
	reported map[string]string
	// backoff delays notices to pods whose last notice failed (guarded by mu).
	backoff map[string]backoff
	// interactions is the Slack interactivity endpoint (interact.go); nil
	// when buttons are off.
	interactions *Interactions
	// leading is true while Start runs: this replica leads and runs the
	// cycle, so a press may kick it.
	leading atomic.Bool
}

var _ manager.LeaderElectionRunnable = &Janitor{}

// NeedLeaderElection: only the leader acts.
func (j *Janitor) NeedLeaderElection() bool { return true }

// Start runs a cycle every Interval until ctx ends.
func (j *Janitor) Start(ctx context.Context) error {
	j.leading.Store(true)
	defer j.leading.Store(false)
	log := j.Log
	ctx = logr.NewContext(ctx, log)
	// A first cycle on part of the pods would only miss some; waiting
	// keeps the first plan whole.
	if j.podsSynced != nil && !toolscache.WaitForCacheSync(ctx.Done(), j.podsSynced) {
		return nil
	}
	for {
		if _, err := j.Cycle(ctx); err != nil {
			log.Error(err, "Janitor cycle failed; trying again next cycle")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-j.Clock.After(j.Interval):
		case <-j.kicked(): // a button asked for a reclaim now
		}
	}
}

// Cycle lists the GPU pods, plans and acts once.
func (j *Janitor) Cycle(ctx context.Context) (*Plan, error) {
	log := logr.FromContextOrDiscard(ctx)
	start := j.Clock.Now()
	defer func() {
		j.Metrics.cycleDuration.Observe(j.Clock.Since(start).Seconds())
		j.Metrics.lastCycle.Set(float64(j.Clock.Now().Unix()))
	}()
	// The cache's own pods, not copies: the plan only reads them, and
	// every write builds its own object.
	pods := j.pods.list()
	plan, err := MakePlan(ctx, PlanInput{Reader: j.Client, Pods: pods, Source: j.Source, Now: start,
		NotifierReady: j.NotifierReady, DefaultChannel: j.DefaultChannel, SelfNamespace: j.SelfNamespace})
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, ig := range plan.Ignored {
		key := "policy/" + string(ig.Policy.UID)
		live[key+"/"+EventPolicyIgnored] = true
		j.tell(ctx, ig.Policy, key, []decide.Tale{{Reason: EventPolicyIgnored, Text: ig.Why}}, func(decide.Tale) {
			j.event(ig.Policy, corev1.EventTypeWarning, EventPolicyIgnored, "Check", "Not enforced: it is looser than a cluster policy: "+ig.Why)
		})
	}
	for _, r := range plan.Results {
		if r.Err != nil {
			log.Error(r.Err, "Reading GPU metrics failed; idle pods are Unknown this cycle")
		}
	}
	for i := range plan.Pods {
		pp := &plan.Pods[i]
		key := "pod/" + string(pp.Pod.UID)
		live[key], live[key+"/notice"], live[key+"/"+EventInvalidValue], live[key+"/"+EventUnsupportedOwner] = true, true, true, true
		plog := log.WithValues("pod", klog.KObj(pp.Pod))
		if pp.Err != nil {
			plog.Error(pp.Err, "Reading the pod's owners failed; leaving it alone this cycle")
			continue
		}
		pctx := logr.NewContext(ctx, plog)
		j.act(pctx, pp, key, plan.Now)
		// After act: its optimistic locks use the cached resourceVersion,
		// which the record of what was told would change.
		j.tell(pctx, pp.Pod, key, podTales(pp), func(t decide.Tale) {
			switch t.Reason {
			case EventInvalidValue:
				for _, p := range pp.Problems {
					j.event(pp.Pod, corev1.EventTypeWarning, EventInvalidValue, "Judge", p)
					// The owner who wrote a snooze that does not parse is
					// told where they look: in the notice's thread.
					if strings.HasPrefix(p, "annotation "+v1alpha1.AnnotationReclaimSnoozeUntil) {
						j.reply(ctx, pp, fmt.Sprintf("Your snooze of %s was not understood: %s. Use an RFC 3339 time like 2026-12-01T18:00:00Z.", podRef(pp), p))
					}
				}
			case EventUnsupportedOwner:
				plog.Info("Not reclaiming: unsupported owner", "why", pp.Decision.Why)
				j.event(pp.Pod, corev1.EventTypeWarning, EventUnsupportedOwner, "Reclaim", pp.Decision.Why+"; set deletePodsOfUnknownOwners in the policy to delete such pods")
			}
		})
	}
	j.forget(live)
	j.Metrics.setStates(plan)
	log.V(1).Info("Janitor cycle done", "pods", len(pods), "withState", len(plan.Pods), "queries", len(plan.Queries), "took", j.Clock.Since(start))
	return plan, nil
}

func (j *Janitor) act(ctx context.Context, pp *PodPlan, key string, evidenceAt time.Time) {
	log := logr.FromContextOrDiscard(ctx)
	d := pp.Decision
	switch d.Step {
	case decide.StepNone, decide.StepWait:
		if d.State == decide.StateUnknown && d.Deadline.Before(j.Clock.Now()) && !d.Deadline.IsZero() {
			j.once(key, string(d.Step)+d.Why, func() { j.event(pp.Pod, corev1.EventTypeWarning, EventDeferred, "Recheck", d.Why) })
		}
		log.V(2).Info("No action", "step", d.Step, "why", d.Why)
	case decide.StepWouldNotify:
		j.once(key, string(d.Step)+string(d.Rule), func() {
			log.Info("Dry run: would notify", "why", d.Why)
			j.event(pp.Pod, corev1.EventTypeNormal, EventWouldNotify, "Notify", d.Why)
		})
	case decide.StepUnsupportedOwner:
		// Told once by Cycle (podTales), with its record on the pod.
		log.V(2).Info("No action: unsupported owner", "why", d.Why)
	case decide.StepNoticeBlocked:
		err := notify.ErrNotConfigured
		why := d.Why
		if j.NotifierReady && !pp.HasRecipient {
			err, why = notify.ErrNoRecipient, fmt.Sprintf("rule %s holds (%s) but nobody can be told: no %s on the pod or namespace, no %s, and no default channel; nothing is reclaimed",
				d.Rule, d.Evidence, notify.AnnotationOwner, notify.AnnotationSlackChannel)
		}
		j.Metrics.noticeFailed(err)
		j.once(key, why, func() { j.event(pp.Pod, corev1.EventTypeWarning, EventNoticeFailed, "Notify", why) })
	case decide.StepReset:
		log.Info("Clearing the notice", "why", d.Why)
		if j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: nil}, "") == nil {
			j.event(pp.Pod, corev1.EventTypeWarning, EventNoticeReset, "Notify", d.Why)
		}
	case decide.StepNotify:
		if until, ok := j.backingOff(key); ok {
			log.V(1).Info("Not sending the notice yet: Slack failed", "retryAt", until)
			return
		}
		j.notice(ctx, pp, key)
	case decide.StepConfirmSnooze:
		n := *pp.Notice
		n.SnoozeAcked = pp.Pod.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil]
		if err := j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: ptr.To(n.Encode())}, pp.Pod.ResourceVersion); err != nil {
			return
		}
		text := snoozeText(pp, d)
		j.reply(ctx, pp, text)
		j.event(pp.Pod, corev1.EventTypeNormal, EventSnoozed, "Snooze", text)
	case decide.StepSnoozeEnded:
		if err := j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: nil, v1alpha1.AnnotationReclaimSnoozeUntil: nil}, pp.Pod.ResourceVersion); err != nil {
			return
		}
		j.reply(ctx, pp, snoozeEndedText(pp))
		j.event(pp.Pod, corev1.EventTypeNormal, EventSnoozeEnded, "Snooze", d.Why)
	case decide.StepCancel:
		if err := j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: nil, v1alpha1.AnnotationReclaimSnoozeUntil: nil}, pp.Pod.ResourceVersion); err != nil {
			return
		}
		text := cancelText(pp, d)
		log.Info("Cancelled the reclaim", "why", d.Why)
		j.reply(ctx, pp, text)
		j.event(pp.Pod, corev1.EventTypeNormal, EventCancelled, "Cancel", text)
	case decide.StepWouldReclaim:
		n := *pp.Notice
		n.ReclaimedAt = j.Clock.Now()
		if err := j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: ptr.To(n.Encode())}, pp.Pod.ResourceVersion); err != nil {
			return
		}
		text := wouldReclaimText(pp, d)
		log.Info("Dry run: would reclaim", "why", d.Why)
		j.reply(ctx, pp, text)
		j.event(pp.Pod, corev1.EventTypeNormal, EventWouldReclaim, "Reclaim", text)
	case decide.StepReclaim:
		// A cycle slowed down (by Slack, say) must not act on evidence
		// read long ago: the next cycle reads it again.
		if age, old := decide.EvidenceTooOld(evidenceAt, j.Clock.Now(), j.Interval); old {
			log.Info("Not reclaiming on old evidence; deciding again next cycle", "age", age)
			return
		}
		j.reclaim(ctx, pp, key)
	}
}

// notice claims the notice on the pod (optimistic lock: one janitor wins),
// sends it, then records the deadline and the thread.
func (j *Janitor) notice(ctx context.Context, pp *PodPlan, key string) {
	log := logr.FromContextOrDiscard(ctx)
	d := pp.Decision
	now := j.Clock.Now()
	n := decide.Notice{Rule: d.Rule, Evidence: d.Evidence, ClaimedAt: now, Claimer: j.Identity, DryRun: pp.Rules.DryRun}
	if err := j.patchPod(ctx, pp.Pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: ptr.To(n.Encode())}, pp.Pod.ResourceVersion); err != nil {
		return // changed under us, or gone: the next cycle sees it
	}
	if j.NotifierReady && pp.HasRecipient {
		msg := noticeMessage(pp, decide.Decision{Rule: d.Rule, Evidence: d.Evidence, Target: d.Target, Deadline: now.Add(pp.Rules.GracePeriod)}, pp.Rules.DryRun, j.buttons())
		log.Info("Sending the reclaim notice", "rule", d.Rule, "to", pp.Recipient.String())
		sendCtx, cancel := context.WithTimeout(ctx, decide.NoticeTimeout)
		th, err := j.Notifier.Post(sendCtx, pp.Recipient, nil, msg)
		cancel()
		if err != nil {
			j.Metrics.noticeFailed(err)
			j.backOff(key)
			log.Error(err, "Sending the reclaim notice failed", "to", pp.Recipient.String())
			// Evented once per distinct failure: a Slack outage retried
			// every claim timeout is not an Event every time.
			j.once(key+"/notice", err.Error(), func() {
				j.event(pp.Pod, corev1.EventTypeWarning, EventNoticeFailed, "Notify",
					fmt.Sprintf("rule %s holds (%s) but the Slack notice to %s failed: %v; nothing is reclaimed before a notice is sent; retried with backoff", d.Rule, d.Evidence, pp.Recipient.String(), err))
			})
			if pp.Rules.RequireNotice {
				return // the claim expires after decide.ClaimTimeout and the notice is retried
			}
		} else {
			n.Sent, n.Channel, n.TS, n.Recipient = true, th.Channel, th.TS, th.Recipient
			j.clearBackOff(key)
		}
	}
	n.NoticedAt = j.Clock.Now()
	n.Deadline = now.Add(pp.Rules.GracePeriod)
	// The notice is out: losing its record would send it again, so the
	// record is retried.
	if err := j.record(ctx, pp.Pod, n); err != nil {
		return
	}
	how := "told " + n.Recipient
	if !n.Sent {
		how = "no Slack message could be sent and the policy does not require one"
	}
	j.event(pp.Pod, corev1.EventTypeNormal, EventNoticeSent, "Notify", fmt.Sprintf("Rule %s: %s. Will %s at %s%s unless kept with %s (%s).",
		d.Rule, d.Evidence, d.Target.Describe(), n.Deadline.UTC().Format(time.RFC3339), dryRunNote(pp.Rules.DryRun), v1alpha1.AnnotationReclaimSnoozeUntil, how))
}

// reclaim rechecks the pod on the API server, stops its target, records
// it and tells the owner.
func (j *Janitor) reclaim(ctx context.Context, pp *PodPlan, key string) {
	log := logr.FromContextOrDiscard(ctx)
	d := pp.Decision
	fresh := &corev1.Pod{}
	if err := j.Reader.Get(ctx, client.ObjectKeyFromObject(pp.Pod), fresh); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "Rechecking the pod before reclaiming failed")
		}
		return
	}
	for _, a := range []string{v1alpha1.AnnotationReclaimNotice, v1alpha1.AnnotationReclaimSnoozeUntil, v1alpha1.AnnotationReclaim} {
		if fresh.UID != pp.Pod.UID || fresh.Annotations[a] != pp.Pod.Annotations[a] || fresh.DeletionTimestamp != nil {
			log.Info("The pod changed since the cache was read; deciding again next cycle", "annotation", a)
			return
		}
	}
	log.Info("Reclaiming", "rule", d.Rule, "target", d.Target.Describe())
	result, err := j.stop(ctx, pp, d.Target)
	if err != nil {
		log.Error(err, "Reclaiming failed")
		j.once(key, "fail"+err.Error(), func() {
			j.event(pp.Pod, corev1.EventTypeWarning, EventReclaimFailed, "Reclaim", reclaimFailedText(pp, err))
		})
		return
	}
	j.Metrics.reclaimedPods.WithLabelValues(string(d.Rule), string(d.Target.Kind)).Inc()
	j.Metrics.reclaimedGPUs.WithLabelValues(string(d.Rule)).Add(float64(pp.Facts.GPUs()))
	if d.Target.Kind != decide.TargetPod {
		n := *pp.Notice
		n.ReclaimedAt = j.Clock.Now()
		_ = j.record(ctx, pp.Pod, n) // logged; the action is idempotent if it is repeated
	}
	text := reclaimedText(pp, d, result)
	j.replyMessage(ctx, pp, reclaimedMessage(pp, d, text, j.buttons()))
	j.event(pp.Pod, corev1.EventTypeNormal, EventReclaimed, "Reclaim", text)
}

// stop acts on the target; each action is idempotent, so a crash before
// the record is written only repeats it.
func (j *Janitor) stop(ctx context.Context, pp *PodPlan, t decide.Target) (string, error) {
	ns := pp.Pod.Namespace
	switch t.Kind {
	case decide.TargetPod:
		j.Metrics.writes.WithLabelValues("delete").Inc()
		err := j.Client.Delete(ctx, pp.Pod, client.Preconditions{UID: &pp.Pod.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete pod %s/%s: %w", ns, pp.Pod.Name, err)
		}
		return "deleted the pod", nil
	case decide.TargetJob:
		job := &metav1.PartialObjectMetadata{}
		job.SetGroupVersionKind(gvkJob)
		job.Namespace, job.Name = ns, t.Name
		opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
		if t.UID != "" {
			opts = append(opts, client.Preconditions{UID: &t.UID})
		}
		j.Metrics.writes.WithLabelValues("delete").Inc()
		err := j.Client.Delete(ctx, job, opts...)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete Job %s/%s: %w", ns, t.Name, err)
		}
		return fmt.Sprintf("deleted Job %s and its pods", t.Name), nil
	case decide.TargetDeployment, decide.TargetStatefulSet:
		var obj client.Object = &appsv1.Deployment{}
		if t.Kind == decide.TargetStatefulSet {
			obj = &appsv1.StatefulSet{}
		}
		if err := j.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, obj); err != nil {
			return "", fmt.Errorf("get %s %s/%s: %w", t.Kind, ns, t.Name, err)
		}
		if t.UID != "" && obj.GetUID() != t.UID {
			return "", fmt.Errorf("%s %s/%s was recreated (UID %s, the pod's controller was %s): not scaling the new one", t.Kind, ns, t.Name, obj.GetUID(), t.UID)
		}
		var replicas *int32
		switch o := obj.(type) {
		case *appsv1.Deployment:
			replicas = o.Spec.Replicas
		case *appsv1.StatefulSet:
			replicas = o.Spec.Replicas
		}
		before := int32(1)
		if replicas != nil {
			before = *replicas
		}
		if before == 0 {
			return fmt.Sprintf("%s %s was already scaled to 0", t.Kind, t.Name), nil
		}
		patch := map[string]any{
			"metadata": map[string]any{"resourceVersion": obj.GetResourceVersion(), "annotations": map[string]any{
				v1alpha1.AnnotationReclaimedReplicas: fmt.Sprint(before),
				v1alpha1.AnnotationReclaimedBy:       fmt.Sprintf("janitor: pod %s, rule %s, %s", pp.Pod.Name, pp.Decision.Rule, j.Clock.Now().UTC().Format(time.RFC3339)),
			}},
			"spec": map[string]any{"replicas": 0},
		}
		if err := j.mergePatch(ctx, obj, patch); err != nil {
			return "", fmt.Errorf("scale %s %s/%s to 0: %w", t.Kind, ns, t.Name, err)
		}
		return fmt.Sprintf("scaled %s %s from %d to 0 replicas", t.Kind, t.Name, before), nil
	case decide.TargetNotebook:
		nb := &unstructured.Unstructured{}
		nb.SetAPIVersion(t.APIVersion)
		nb.SetKind(kindNotebook)
		nb.SetNamespace(ns)
		nb.SetName(t.Name)
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			AnnotationNotebookStops:        j.Clock.Now().UTC().Format(time.RFC3339),
			v1alpha1.AnnotationReclaimedBy: fmt.Sprintf("janitor: pod %s, rule %s", pp.Pod.Name, pp.Decision.Rule),
		}}}
		if err := j.mergePatch(ctx, nb, patch); err != nil {
			return "", fmt.Errorf("stop Notebook %s/%s: %w", ns, t.Name, err)
		}
		return fmt.Sprintf("stopped Kubeflow Notebook %s", t.Name), nil
	}
	return "", fmt.Errorf("nothing to stop for %s", t.Describe())
}

func (j *Janitor) mergePatch(ctx context.Context, obj client.Object, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	j.Metrics.writes.WithLabelValues("patch").Inc()
	return j.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}

// patchPod sets (value) or removes (nil) pod annotations in one merge
// patch; with rv the API server refuses it if the pod changed since.
func (j *Janitor) patchPod(ctx context.Context, pod *corev1.Pod, set map[string]*string, rv string) error {
	ann := map[string]any{}
	for k, v := range set {
		if v == nil {
			ann[k] = nil
		} else {
			ann[k] = *v
		}
	}
	meta := map[string]any{"annotations": ann}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	err := j.mergePatch(ctx, target, map[string]any{"metadata": meta})
	if err != nil {
		lvl := logr.FromContextOrDiscard(ctx)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			lvl.V(1).Info("The pod changed or is gone; deciding again next cycle", "err", err.Error())
		} else {
			lvl.Error(err, "Updating the pod's reclaim annotations failed")
		}
		return err
	}
	return nil
}

// record writes the notice annotation, retrying a failed write: the
// Slack side of what it records has already happened.
func (j *Janitor) record(ctx context.Context, pod *corev1.Pod, n decide.Notice) error {
	return retry.OnError(recordBackoff, func(err error) bool { return !apierrors.IsNotFound(err) }, func() error {
		return j.patchPod(ctx, pod, map[string]*string{v1alpha1.AnnotationReclaimNotice: ptr.To(n.Encode())}, "")
	})
}

// recordBackoff: about 6 s in all.
var recordBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}

// backOff delays the next notice to a pod after a Slack failure: one claim
// timeout, doubling up to an hour. It lives in memory (a restart retries at
// once); it only spares Slack and the API server during an outage.
func (j *Janitor) backOff(key string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.backoff == nil {
		j.backoff = map[string]backoff{}
	}
	b := j.backoff[key]
	b.failures++
	wait := decide.ClaimTimeout << min(b.failures-1, 5)
	b.until = j.Clock.Now().Add(min(wait, time.Hour))
	j.backoff[key] = b
}

func (j *Janitor) clearBackOff(key string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.backoff, key)
}

func (j *Janitor) backingOff(key string) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, ok := j.backoff[key]
	return b.until, ok && j.Clock.Now().Before(b.until)
}

type backoff struct {
	failures int
	until    time.Time
}

// reply posts a follow-up in the pod's thread; without a thread (no
// message was sent) there is nobody to tell, and Events carry it.
func (j *Janitor) reply(ctx context.Context, pp *PodPlan, text string) {
	if pp.Notice == nil || pp.Notice.TS == "" || !j.NotifierReady {
		return
	}
	th := &notify.Thread{Channel: pp.Notice.Channel, TS: pp.Notice.TS}
	if _, err := j.Notifier.Post(ctx, pp.Recipient, th, threadMessage(pp, text)); err != nil {
		j.Metrics.noticeFailed(err)
		logr.FromContextOrDiscard(ctx).Error(err, "Posting in the pod's Slack thread failed", "channel", th.Channel)
	}
}

const maxEventNote = 1000

func (j *Janitor) event(obj runtime.Object, typ, reason, action, note string) {
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	j.Metrics.writes.WithLabelValues("event").Inc()
	j.Recorder.Eventf(obj, nil, typ, reason, action, "%s", note)
}

// podTales are the Warnings told once about a pod: its invalid values
// (all of them together, as one tale), and an owner the janitor cannot
// stop for the rule that holds.
func podTales(pp *PodPlan) []decide.Tale {
	var tales []decide.Tale
	if len(pp.Problems) > 0 {
		tales = append(tales, decide.Tale{Reason: EventInvalidValue, Text: strings.Join(pp.Problems, "\n")})
	}
	if d := pp.Decision; d.Step == decide.StepUnsupportedOwner {
		tales = append(tales, decide.Tale{Reason: EventUnsupportedOwner, Text: string(d.Rule) + " " + d.Target.OwnerKind + " " + d.Target.Name})
	}
	return tales
}

// tell emits the tales not yet told about obj (decide.Tell, against its
// annotation v1alpha1.AnnotationReclaimTold), then records them there in
// one merge patch, so that a restarted janitor or a new leader does not
// tell them again. Nothing to tell, nothing written. The Event goes first:
// a crash before the record tells once more, never not at all. The
// process memory (once) keeps a record that cannot be written (no RBAC, a
// failing API server) from telling every cycle; the write is retried.
// obj is the cache's: it is not changed.
func (j *Janitor) tell(ctx context.Context, obj client.Object, key string, tales []decide.Tale, emit func(decide.Tale)) {
	if len(tales) == 0 {
		return
	}
	news, record := decide.Tell(obj.GetAnnotations()[v1alpha1.AnnotationReclaimTold], tales)
	if len(news) == 0 {
		return
	}
	for _, t := range news {
		j.once(key+"/"+t.Reason, decide.TaleHash(t.Text), func() { emit(t) })
	}
	gvk, err := apiutil.GVKForObject(obj, j.Client.Scheme())
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Recording what was told failed")
		return
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(gvk)
	target.Namespace, target.Name = obj.GetNamespace(), obj.GetName()
	// The UID is a precondition: an object recreated under the same name
	// has been told nothing.
	patch := map[string]any{"metadata": map[string]any{"uid": string(obj.GetUID()),
		"annotations": map[string]any{v1alpha1.AnnotationReclaimTold: record}}}
	if err := j.mergePatch(ctx, target, patch); err != nil && !apierrors.IsNotFound(err) {
		logr.FromContextOrDiscard(ctx).Error(err, "Recording what was told failed; telling it again is held back until this janitor restarts",
			"object", klog.KObj(obj))
	}
}

// once runs f when key's value changed since the last call.
func (j *Janitor) once(key, value string, f func()) {
	j.mu.Lock()
	if j.reported == nil {
		j.reported = map[string]string{}
	}
	same := j.reported[key] == value
	j.reported[key] = value
	j.mu.Unlock()
	if !same {
		f()
	}
}

// forget drops the memory of objects no longer seen.
func (j *Janitor) forget(live map[string]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for k := range j.reported {
		if !live[k] {
			delete(j.reported, k)
		}
	}
	for k := range j.backoff {
		if !live[k] {
			delete(j.backoff, k)
		}
	}
}
