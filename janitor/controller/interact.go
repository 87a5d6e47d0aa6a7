package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/slack-go/slack"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// EventRestored is the Event reason on a workload restored from Slack.
const EventRestored = "ReclaimRestored"

// InteractionTimeout bounds the work of one press (API reads and writes,
// Slack's user lookup and replies). Slack's 3-second answer does not wait
// for it: the request is acknowledged first.
const InteractionTimeout = 30 * time.Second

// maxInteractionBody bounds a request: Slack's payload echoes the message
// with its blocks, well under this.
const maxInteractionBody = 1 << 20

// UserLookup finds a Slack user ID by email; notify.Slack is one.
type UserLookup interface {
	UserIDByEmail(ctx context.Context, email string) (string, error)
}

// Interactions serves Slack's interactivity endpoint: the presses of the
// buttons in the janitor's messages. Every request is verified (signature,
// timestamp, replay) before anything is read from it; a valid one is
// answered 200 at once and handled within InteractionTimeout, so Slack's
// 3 seconds hold whatever the API server or Slack take. Only the pod's
// owner as the notice resolves it may act; every action is written to the
// pod (or the workload) with an optimistic lock, confirmed in the thread,
// and counted.
//
// Every replica serves it, leader or not: the state is on the pods. A
// "Reclaim now" is recorded on the pod and done by the leader's cycle (at
// once when this replica leads, else within --interval).
type Interactions struct {
	j        *Janitor
	verifier *notify.Verifier
	users    UserLookup
	http     *http.Client
	listener net.Listener
	// kick asks the cycle to run now (buffered 1: a pending kick is enough).
	kick chan struct{}

	// wg counts the presses in flight; base is their parent context.
	wg   sync.WaitGroup
	mu   sync.Mutex
	base context.Context
}

var (
	_ manager.Runnable               = &Interactions{}
	_ manager.LeaderElectionRunnable = &Interactions{}
)

// NeedLeaderElection: every replica answers Slack.
func (in *Interactions) NeedLeaderElection() bool { return false }

// Addr is the address the endpoint listens on.
func (in *Interactions) Addr() string { return in.listener.Addr().String() }

// Start serves until ctx ends, then waits for the presses in flight.
func (in *Interactions) Start(ctx context.Context) error {
	in.mu.Lock()
	in.base = ctx
	in.mu.Unlock()
	mux := http.NewServeMux()
	mux.Handle("/slack/interactivity", in)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(in.listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("slack interactivity endpoint on %s: %w", in.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	in.wg.Wait()
	return nil
}

func (in *Interactions) count(action, result string) {
	in.j.Metrics.interactions.WithLabelValues(action, result).Inc()
}

// ServeHTTP verifies one request, acknowledges it, and handles it in the
// background.
func (in *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := in.j.Log.WithName("slack")
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteractionBody))
	if err != nil {
		in.count("unknown", "bad_request")
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := in.verifier.Verify(r.Header, body); err != nil {
		result := "forged"
		switch {
		case errors.Is(err, notify.ErrStale):
			result = "stale"
		case errors.Is(err, notify.ErrReplayed):
			result = "replayed"
		case errors.Is(err, notify.ErrBusy):
			result = "busy"
		}
		in.count("unknown", result)
		log.Info("Refused a Slack request", "result", result, "reason", err.Error(), "remote", r.RemoteAddr)
		http.Error(w, "request not verified", http.StatusUnauthorized)
		return
	}
	ic, b, err := parsePress(body)
	if err != nil {
		in.count("unknown", "bad_request")
		log.Info("Ignored a Slack request", "reason", err.Error())
		// Verified, so from Slack: 200, or Slack shows the user an error
		// for an interaction that is not ours to handle.
		w.WriteHeader(http.StatusOK)
		return
	}
	in.mu.Lock()
	base := in.base
	in.mu.Unlock()
	if base == nil {
		base = context.Background()
	}
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		ctx, cancel := context.WithTimeout(base, InteractionTimeout)
		defer cancel()
		plog := log.WithValues("action", b.Action, "pod", b.Namespace+"/"+b.Pod, "user", ic.User.ID)
		in.handle(logr.NewContext(ctx, plog), ic, b)
	}()
	w.WriteHeader(http.StatusOK)
}

// parsePress reads a verified body: a block_actions payload with one of
// the janitor's buttons.
func parsePress(body []byte) (*slack.InteractionCallback, decide.Button, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, decide.Button{}, fmt.Errorf("form body: %w", err)
	}
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
		return nil, decide.Button{}, fmt.Errorf("payload: %w", err)
	}
	if ic.Type != slack.InteractionTypeBlockActions {
		return nil, decide.Button{}, fmt.Errorf("payload type %q is not block_actions", ic.Type)
	}
	if len(ic.ActionCallback.BlockActions) != 1 || ic.User.ID == "" {
		return nil, decide.Button{}, fmt.Errorf("payload has %d actions and user %q; want one action and a user", len(ic.ActionCallback.BlockActions), ic.User.ID)
	}
	a := ic.ActionCallback.BlockActions[0]
	b, err := decide.ParseButton(a.Value)
	if err != nil {
		return nil, b, err
	}
	if a.ActionID != b.ActionID() {
		return nil, b, fmt.Errorf("action_id %q does not match its value (%s)", a.ActionID, b.ActionID())
	}
	return &ic, b, nil
}

func (in *Interactions) handle(ctx context.Context, ic *slack.InteractionCallback, b decide.Button) {
	log := logr.FromContextOrDiscard(ctx)
	var result, answer string
	var err error
	if b.Action == decide.ActionRestore {
		result, answer, err = in.restore(ctx, ic, b)
	} else {
		result, answer, err = in.press(ctx, ic, b)
	}
	if err != nil {
		log.Error(err, "Handling a Slack button failed")
		// A write that timed out may have been done: a second press says
		// so, and does nothing twice.
		result, answer = decide.ResultFailed, fmt.Sprintf("That did not work: %v. Press again (a press already done is told so), or act with kubectl.", err)
	}
	in.count(string(b.Action), result)
	if answer != "" {
		if err := notify.RespondEphemeral(ctx, in.http, ic.ResponseURL, answer); err != nil {
			log.Error(err, "Answering the Slack user failed")
		}
	}
}

// owner checks whether the Slack user is the recipient's person. A lookup
// that fails for another reason than an unknown user (rate limit, outage,
// network) is a check not made, not a refusal: the press may be made
// again.
func (in *Interactions) owner(ctx context.Context, r notify.Recipient, found bool, user string) decide.OwnerCheck {
	if !found || (r.UserID == "" && r.Email == "") {
		return decide.OwnerCheck{Note: fmt.Sprintf("set %s on the pod or its namespace", notify.AnnotationOwner)}
	}
	// The owner's own source, without the channel's ("...; channel from ...").
	src, _, _ := strings.Cut(r.Source, "; ")
	if r.UserID != "" {
		return decide.OwnerCheck{Match: r.UserID == user, UserID: r.UserID, Source: src}
	}
	if in.users == nil {
		return decide.OwnerCheck{Source: src, Note: "this janitor cannot look up Slack users"}
	}
	id, err := in.users.UserIDByEmail(ctx, r.Email)
	switch {
	case err != nil && notify.IsUnreachable(err):
		return decide.OwnerCheck{Source: src, Note: "that owner is not found on Slack"}
	case err != nil:
		logr.FromContextOrDiscard(ctx).Error(err, "Looking up the pod's owner on Slack failed", "source", src)
		return decide.OwnerCheck{Source: src, Failed: true}
	}
	return decide.OwnerCheck{Match: id == user, UserID: id, Source: src}
}

// press handles Keep and Reclaim now on a pod's notice.
func (in *Interactions) press(ctx context.Context, ic *slack.InteractionCallback, b decide.Button) (string, string, error) {
	j := in.j
	pod := &corev1.Pod{}
	found := true
	if err := j.Reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Pod}, pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("read pod %s/%s: %w", b.Namespace, b.Pod, err)
		}
		found = false
	}
	pin := decide.PressInput{Now: j.Clock.Now(), Button: b, Found: found, UID: pod.UID, Terminating: pod.DeletionTimestamp != nil}
	var ns *corev1.Namespace
	var rules policies.Reclaim
	var rcpt notify.Recipient
	if found && pod.UID == b.UID {
		ns = &corev1.Namespace{}
		if err := j.Reader.Get(ctx, client.ObjectKey{Name: b.Namespace}, ns); err != nil {
			return "", "", fmt.Errorf("read namespace %s: %w", b.Namespace, err)
		}
		var ok bool
		rcpt, _, ok = notify.ResolveOwner(pod, ns, j.DefaultChannel)
		pin.Owner = in.owner(ctx, rcpt, ok, ic.User.ID)
		pin.Notice, pin.NoticeErr = decide.ParseNotice(pod.Annotations[v1alpha1.AnnotationReclaimNotice])
		var err error
		if rules, _, err = j.rulesFor(ctx, pod, ns); err != nil {
			return "", "", err
		}
		pin.MaxSnooze = rules.MaxSnooze
	}
	d := decide.DecidePress(pin)
	if d.Outcome == decide.PressRefused {
		return d.Result, d.Answer, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	n := *pin.Notice
	pp := &PodPlan{Pod: pod, Notice: &n, Recipient: rcpt}
	var set map[string]*string
	var text string
	switch d.Outcome {
	case decide.PressKeep:
		until := d.SnoozeUntil.UTC().Format(time.RFC3339)
		n.SnoozeAcked, n.SnoozedBy = until, ic.User.ID
		enc := n.Encode()
		set = map[string]*string{v1alpha1.AnnotationReclaimSnoozeUntil: &until, v1alpha1.AnnotationReclaimNotice: &enc}
		text = fmt.Sprintf("Kept: %s pressed %q. %s is kept until %s. After that the rules are checked again, and you get a new notice if one still holds.",
			notify.Mention(ic.User.ID), decide.ButtonLabel(b.Keep), podRef(pp), until)
		if d.Capped {
			text += fmt.Sprintf(" The policy allows at most %s after the deadline, so it is kept until then, not %s from the press.", decide.Human(rules.MaxSnooze), decide.Human(b.Keep))
		}
		log.Info("Keeping the pod, as its owner pressed", "until", until)
	case decide.PressReclaim:
		n.ReclaimRequestedAt, n.ReclaimRequestedBy = j.Clock.Now(), ic.User.ID
		enc := n.Encode()
		set = map[string]*string{v1alpha1.AnnotationReclaimNotice: &enc}
		text = fmt.Sprintf("Reclaim now: %s asked to reclaim %s now. The janitor does it in its next cycle, within %s, and says so here.", notify.Mention(ic.User.ID), podRef(pp), decide.Human(j.Interval))
		if n.DryRun {
			text = fmt.Sprintf("Reclaim now: %s asked to reclaim %s now, but its policy is a dry run: in its next cycle, within %s, the janitor only says here what it would do, and stops nothing.", notify.Mention(ic.User.ID), podRef(pp), decide.Human(j.Interval))
		}
		log.Info("Reclaiming now, as the owner pressed")
	}
	if err := j.patchPod(ctx, pod, set, pod.ResourceVersion); err != nil {
		if apierrors.IsConflict(err) {
			return "conflict", fmt.Sprintf("%s changed while you pressed (the janitor or someone else wrote to it). Nothing was done; look at the thread and press again.", podRef(pp)), nil
		}
		if apierrors.IsNotFound(err) {
			return decide.ResultGone, fmt.Sprintf("Pod %s is gone. Nothing was done.", podRef(pp)), nil
		}
		return "", "", fmt.Errorf("record on pod %s: %w", podRef(pp), err)
	}
	in.confirm(ctx, pp, ic, text)
	if d.Outcome == decide.PressKeep {
		j.event(pod, corev1.EventTypeNormal, EventSnoozed, "Snooze", text)
	} else {
		in.kickWhenCached(ctx, pod)
	}
	return decide.ResultDone, "", nil
}

// kickWhenCached runs a cycle once the cache has the request the handler
// wrote: a cycle on the older pod would only wait another interval. A
// standby replica runs no cycle, so it neither polls nor kicks: the
// leader acts within --interval.
func (in *Interactions) kickWhenCached(ctx context.Context, pod *corev1.Pod) {
	j := in.j
	if !j.leading.Load() {
		return
	}
	deadline := j.Clock.Now().Add(5 * time.Second)
	for j.Clock.Now().Before(deadline) {
		cached := &corev1.Pod{}
		if err := j.Client.Get(ctx, client.ObjectKeyFromObject(pod), cached); err == nil {
			if n, _ := decide.ParseNotice(cached.Annotations[v1alpha1.AnnotationReclaimNotice]); n != nil && !n.ReclaimRequestedAt.IsZero() {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-j.Clock.After(50 * time.Millisecond):
		}
	}
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// confirm posts text in the notice's thread (or the pressed message's).
func (in *Interactions) confirm(ctx context.Context, pp *PodPlan, ic *slack.InteractionCallback, text string) {
	th := &notify.Thread{Channel: ic.Container.ChannelID, TS: ic.Container.ThreadTs}
	if th.TS == "" {
		th.TS = ic.Container.MessageTs
	}
	if pp.Notice != nil && pp.Notice.TS != "" {
		th.Channel, th.TS = pp.Notice.Channel, pp.Notice.TS
	}
	msg := notify.Message{Text: text, Blocks: []slack.Block{notify.Section(notify.Escape(text)), notify.Context("kubemedic janitor", notify.Code(podRef(pp)))}}
	// Mentions are the janitor's own, not user text: keep them live.
	msg.Blocks[0] = notify.Section(strings.ReplaceAll(notify.Escape(text), "&lt;@"+ic.User.ID+"&gt;", notify.Mention(ic.User.ID)))
	if _, err := in.j.Notifier.Post(ctx, notify.Recipient{Channel: th.Channel}, th, msg); err != nil {
		in.j.Metrics.noticeFailed(err)
		logr.FromContextOrDiscard(ctx).Error(err, "Confirming in the pod's Slack thread failed", "channel", th.Channel)
	}
}

// restore scales a reclaimed workload back, or starts a stopped notebook.
func (in *Interactions) restore(ctx context.Context, ic *slack.InteractionCallback, b decide.Button) (string, string, error) {
	j := in.j
	var obj client.Object
	var current int32
	var template metav1.ObjectMeta
	switch b.TargetKind {
	case decide.TargetDeployment:
		obj = &appsv1.Deployment{}
	case decide.TargetStatefulSet:
		obj = &appsv1.StatefulSet{}
	case decide.TargetNotebook:
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(b.TargetAPIVersion)
		u.SetKind(kindNotebook)
		obj = u
	default:
		d := decide.DecideRestore(decide.RestoreInput{Button: b, Found: true, UID: b.TargetUID, Owner: decide.OwnerCheck{Match: true}})
		return d.Result, d.Answer, nil
	}
	rin := decide.RestoreInput{Button: b, Found: true}
	if err := j.Reader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.TargetName}, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("read %s %s/%s: %w", b.TargetKind, b.Namespace, b.TargetName, err)
		}
		rin.Found = false
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		current, template = ptrOr(o.Spec.Replicas), o.Spec.Template.ObjectMeta
	case *appsv1.StatefulSet:
		current, template = ptrOr(o.Spec.Replicas), o.Spec.Template.ObjectMeta
	case *unstructured.Unstructured:
		if m, ok, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata"); ok {
			raw, _ := json.Marshal(m)
			_ = json.Unmarshal(raw, &template)
		}
	}
	rin.UID, rin.Current = obj.GetUID(), current
	ann := obj.GetAnnotations()
	rin.Replicas, rin.ReclaimedBy = ann[v1alpha1.AnnotationReclaimedReplicas], ann[v1alpha1.AnnotationReclaimedBy]
	_, rin.Stopped = ann[AnnotationNotebookStops]
	if rin.Found && rin.UID == b.TargetUID {
		ns := &corev1.Namespace{}
		if err := j.Reader.Get(ctx, client.ObjectKey{Name: b.Namespace}, ns); err != nil {
			return "", "", fmt.Errorf("read namespace %s: %w", b.Namespace, err)
		}
		// The pod is gone: its owner is read where it came from, the
		// workload (its own metadata over its pod template's) and the
		// namespace.
		meta := &metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Pod, Annotations: merge(template.Annotations, ann), Labels: merge(template.Labels, obj.GetLabels())}
		rcpt, _, ok := notify.ResolveOwner(meta, ns, j.DefaultChannel)
		rin.Owner = in.owner(ctx, rcpt, ok, ic.User.ID)
		if rest, ok := strings.CutPrefix(rin.Owner.Source, "pod "); ok {
			rin.Owner.Source = fmt.Sprintf("%s of %s %s or its pod template", rest, b.TargetKind, b.TargetName)
		}
	}
	d := decide.DecideRestore(rin)
	if d.Outcome == decide.PressRefused {
		return d.Result, d.Answer, nil
	}
	meta := map[string]any{"resourceVersion": obj.GetResourceVersion()}
	patch := map[string]any{"metadata": meta}
	var did string
	if b.TargetKind == decide.TargetNotebook {
		meta["annotations"] = map[string]any{AnnotationNotebookStops: nil, v1alpha1.AnnotationReclaimedBy: nil}
		did = fmt.Sprintf("started Kubeflow Notebook %s again", b.TargetName)
	} else {
		meta["annotations"] = map[string]any{v1alpha1.AnnotationReclaimedReplicas: nil, v1alpha1.AnnotationReclaimedBy: nil}
		patch["spec"] = map[string]any{"replicas": d.Replicas}
		did = fmt.Sprintf("scaled %s %s back to %d replicas", b.TargetKind, b.TargetName, d.Replicas)
	}
	logr.FromContextOrDiscard(ctx).Info("Restoring, as the owner pressed", "target", did)
	if err := j.mergePatch(ctx, obj, patch); err != nil {
		if apierrors.IsConflict(err) {
			return "conflict", fmt.Sprintf("%s %s changed while you pressed. Nothing was done; press again.", b.TargetKind, b.TargetName), nil
		}
		return "", "", fmt.Errorf("restore %s %s/%s: %w", b.TargetKind, b.Namespace, b.TargetName, err)
	}
	text := fmt.Sprintf("Restored %s/%s: %s pressed Restore and the janitor %s. The GPUs are requested again; the pod starts when the scheduler finds room.", b.Namespace, b.Pod, notify.Mention(ic.User.ID), did)
	pp := &PodPlan{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Pod, UID: b.UID}}}
	in.confirm(ctx, pp, ic, text)
	j.event(obj, corev1.EventTypeNormal, EventRestored, "Restore", text)
	return decide.ResultDone, "", nil
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func merge(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// rulesFor merges the policies that select pod now, as MakePlan does,
// for the snooze cap a press is held to.
func (j *Janitor) rulesFor(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (policies.Reclaim, bool, error) {
	var clusters v1alpha1.ClusterReclaimPolicyList
	if err := j.Client.List(ctx, &clusters); err != nil {
		return policies.Reclaim{}, false, fmt.Errorf("list ClusterReclaimPolicies: %w", err)
	}
	var nsPolicies v1alpha1.ReclaimPolicyList
	if err := j.Client.List(ctx, &nsPolicies, client.InNamespace(pod.Namespace)); err != nil {
		return policies.Reclaim{}, false, fmt.Errorf("list ReclaimPolicies: %w", err)
	}
	var cs []*v1alpha1.ClusterReclaimPolicy
	for i := range clusters.Items {
		if policies.SelectsNamespace(&clusters.Items[i], ns.Name, ns.Labels) {
			cs = append(cs, &clusters.Items[i])
		}
	}
	var ns2 []*v1alpha1.ReclaimPolicy
	for i := range nsPolicies.Items {
		np := &nsPolicies.Items[i]
		ok := policies.SelectsPod(np, pod.Labels)
		for _, c := range cs {
			if len(policies.CheckReclaimOverride(np, c)) > 0 {
				ok = false
			}
		}
		if ok {
			ns2 = append(ns2, np)
		}
	}
	r, ok := policies.MergeReclaim(cs, ns2)
	return r, ok, nil
}

// InteractivityOptions turns on Slack's buttons.
type InteractivityOptions struct {
	// Addr is where the endpoint listens (path /slack/interactivity);
	// "" or "0" turns buttons off.
	Addr string
	// SigningSecret is the Slack app's; "" turns buttons off.
	SigningSecret string
	// Users resolves an owner's email to a Slack user ID; nil takes the
	// Notifier when it can (notify.Slack).
	Users UserLookup
	// HTTPClient posts to response_url; nil: a client with a timeout.
	HTTPClient *http.Client
}

// enableInteractions listens on o.Addr and hangs the endpoint on j; the
// caller adds it to the manager. nil, nil when it is off.
func enableInteractions(j *Janitor, o InteractivityOptions) (*Interactions, error) {
	if o.Addr == "" || o.Addr == "0" || o.SigningSecret == "" || !j.NotifierReady {
		return nil, nil
	}
	l, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen for Slack interactivity on %s: %w", o.Addr, err)
	}
	users := o.Users
	if users == nil {
		users, _ = j.Notifier.(UserLookup)
	}
	c := o.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	in := &Interactions{j: j, verifier: notify.NewVerifier(o.SigningSecret, 0, nil), users: users, http: c, listener: l, kick: make(chan struct{}, 1)}
	j.interactions = in
	return in, nil
}

// buttons: the janitor's messages carry buttons.
func (j *Janitor) buttons() bool { return j.interactions != nil }

// kicked is where a press asks for a cycle now; nil (never) without
// buttons.
func (j *Janitor) kicked() <-chan struct{} {
	if j.interactions == nil {
		return nil
	}
	return j.interactions.kick
}

// Interactivity is the Slack endpoint, nil when off.
func (j *Janitor) Interactivity() *Interactions { return j.interactions }

// replyMessage posts msg in the pod's thread, as reply does with text.
func (j *Janitor) replyMessage(ctx context.Context, pp *PodPlan, msg notify.Message) {
	if pp.Notice == nil || pp.Notice.TS == "" || !j.NotifierReady {
		return
	}
	th := &notify.Thread{Channel: pp.Notice.Channel, TS: pp.Notice.TS}
	if _, err := j.Notifier.Post(ctx, pp.Recipient, th, msg); err != nil {
		j.Metrics.noticeFailed(err)
		logr.FromContextOrDiscard(ctx).Error(err, "Posting in the pod's Slack thread failed", "channel", th.Channel)
	}
}
