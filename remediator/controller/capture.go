package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v2"
	corev1 "k8s.io/api/core/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

// DiagnosticsOptions say where capture pods put their bundles.
type DiagnosticsOptions struct {
	// Store is the S3-compatible store and bucket.
	Store diagstore.Config
	// Secret names the Secret in the remediator's namespace with the
	// store's accessKey and secretKey. Capture pods get them by
	// secretKeyRef; the remediator reads them to presign links.
	Secret string
	// LinkExpiry is how long a presigned link works (at most
	// diagnostics.MaxLinkExpiry).
	LinkExpiry time.Duration
	// SpooledRecheck is how often a bundle left in a node's spool is looked
	// for in the store; default SpooledRecheck.
	SpooledRecheck time.Duration
	// Retention is how long bundles are kept, but for those of nodes still
	// quarantined; default diagnostics.DefaultRetention.
	Retention time.Duration
	// SweepEvery is how often the store is swept of bundles past their
	// retention, the first time after it too; default RetentionSweep (the
	// first sweep a minute after the start).
	SweepEvery time.Duration
}

// DefaultLinkExpiry is how long a bundle's link works by default: S3's
// longest, so the link in an issue outlives a weekend.
const DefaultLinkExpiry = diagnostics.MaxLinkExpiry

// capturePod reads the operation's capture pod; nil when it was not
// created yet or is gone.
func (r *OperationReconciler) capturePod(ctx context.Context, op *v1alpha1.NodeOperation) (*corev1.Pod, error) {
	created := op.Status.Diagnostics != nil && op.Status.Diagnostics.PodName != ""
	return r.podNamed(ctx, plan.CapturePodName(op), created)
}

// buildCapturePod is the capture pod: the diagnostics template's container
// on the node, like an operation pod, with the store's endpoint, bucket
// and credentials (by secretKeyRef, never in the pod spec's values).
func buildCapturePod(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string, o *DiagnosticsOptions) *corev1.Pod {
	pod := buildPod(op, tpl, ns)
	pod.Name = plan.CapturePodName(op)
	pod.Labels["app.kubernetes.io/name"] = "kubemedic-diagnostics"
	c := &pod.Spec.Containers[0]
	// The report is the termination message; a container that dies before
	// writing it leaves its log's tail instead, which the remediator
	// records as a failed capture.
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	if o == nil || o.Store.Endpoint == "" {
		return pod
	}
	insecure := "false"
	if o.Store.Insecure {
		insecure = "true"
	}
	if g := op.Status.GPU; g != nil && g.UUID != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: diagnostics.EnvGPU, Value: g.UUID})
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: diagnostics.EnvEndpoint, Value: o.Store.Endpoint},
		corev1.EnvVar{Name: diagnostics.EnvBucket, Value: o.Store.Bucket},
		corev1.EnvVar{Name: diagnostics.EnvRegion, Value: o.Store.Region},
		corev1.EnvVar{Name: diagnostics.EnvInsecure, Value: insecure},
		secretEnv(diagnostics.EnvAccessKey, o.Secret, diagnostics.SecretAccessKey),
		secretEnv(diagnostics.EnvSecretKey, o.Secret, diagnostics.SecretSecretKey),
	)
	return pod
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// link adds a presigned link to a stored bundle. It fails soft: a store
// that is not configured, or a Secret that cannot be read, leaves the link
// empty and says why in the capture's message, and the repair goes on.
func (r *OperationReconciler) link(ctx context.Context, st *v1alpha1.DiagnosticsStatus, now time.Time) {
	b := st.Bundle
	if b == nil || !b.Stored {
		return
	}
	u, err := r.presign(ctx, b.Key)
	if err != nil {
		log.FromContext(ctx).Error(err, "Presigning the diagnostics bundle's link failed", "key", b.Key)
		st.Message = plan.Truncate(st.Message+"; no link: "+err.Error(), 1024)
		return
	}
	exp := metav1.NewTime(now.Add(r.linkExpiry()))
	b.URL, b.URLExpires = u, &exp
}

func (r *OperationReconciler) linkExpiry() time.Duration {
	if r.Diagnostics == nil || r.Diagnostics.LinkExpiry <= 0 {
		return DefaultLinkExpiry
	}
	return r.Diagnostics.LinkExpiry
}

// presign makes a link to key with the credentials of the store's Secret.
func (r *OperationReconciler) presign(ctx context.Context, key string) (string, error) {
	store, err := r.store(ctx)
	if err != nil {
		return "", err
	}
	u, err := store.Link(ctx, key, r.linkExpiry())
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// store is a client of the diagnostics store with the credentials of its
// Secret, read from the API server (the cache holds no Secrets).
func (r *OperationReconciler) store(ctx context.Context) (*diagstore.Store, error) {
	o := r.Diagnostics
	if o == nil || o.Store.Endpoint == "" {
		return nil, fmt.Errorf("no diagnostics store configured")
	}
	var sec corev1.Secret
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: o.Secret}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret %s/%s does not exist", r.Namespace, o.Secret)
		}
		return nil, fmt.Errorf("read secret %s/%s: %w", r.Namespace, o.Secret, err)
	}
	store, err := diagstore.New(o.Store, diagstore.Credentials{
		AccessKey: string(sec.Data[diagnostics.SecretAccessKey]), SecretKey: string(sec.Data[diagnostics.SecretSecretKey])})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", r.Namespace, o.Secret, err)
	}
	return store, nil
}

// PodLogs reads a container's log (the GPU Operator's pods, for the
// must-gather). A kubernetes.Interface gives one: ClientsetLogs.
type PodLogs interface {
	Logs(ctx context.Context, namespace, pod, container string) ([]byte, error)
}

// ClientsetLogs reads logs through the API server's pods/log.
type ClientsetLogs struct{ Clientset kubernetes.Interface }

// mustGatherLogTail and mustGatherLogBytes bound each container's log.
const (
	mustGatherLogTail  int64 = 2000
	mustGatherLogBytes int64 = 4 << 20
)

// Logs implements PodLogs.
func (c ClientsetLogs) Logs(ctx context.Context, namespace, pod, container string) ([]byte, error) {
	tail, limit := mustGatherLogTail, mustGatherLogBytes
	return c.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
}

// DefaultMustGatherSelectors find the GPU Operator's pods whose logs the
// must-gather keeps: the driver, the device plugin and dcgm-exporter.
var DefaultMustGatherSelectors = []string{"app=nvidia-driver-daemonset", stackhealth.DefaultDevicePluginSelector, stackhealth.DefaultDCGMExporterSelector}

// mustGatherTimeout bounds the must-gather's reads and its upload: it
// never holds the repair longer.
const mustGatherTimeout = 30 * time.Second

// mustGather reads what the API server knows of the operation's node (the
// Node, its Events, its NodeOperations, the GPU Operator's pods' logs) and
// puts it in the store beside the node's bundle, once. It fails soft: an
// unreadable part is recorded in the must-gather's manifest, and a store
// that cannot be reached leaves status.diagnostics.cluster empty, with a
// Warning Event; the repair goes on either way.
func (r *OperationReconciler) mustGather(ctx context.Context, op *v1alpha1.NodeOperation, t *plan.Transition, now time.Time) {
	o := r.Diagnostics
	if o == nil || o.Store.Endpoint == "" || t.Status.Diagnostics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, mustGatherTimeout)
	defer cancel()
	m := &diagnostics.MustGather{Node: op.Spec.NodeName, Operation: op.Name, Created: now}
	if g := op.Status.GPU; g != nil {
		m.GPU = g.UUID
	}
	m.Files = r.gather(ctx, op.Spec.NodeName)
	b, err := r.putMustGather(ctx, m)
	if err != nil {
		log.FromContext(ctx).Error(err, "The cluster must-gather was not stored; the repair goes on")
		t.Events = append(t.Events, plan.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonDiagnosticsFailed, Action: "Capture",
			Note: plan.Truncate("the cluster must-gather (Node, Events, NodeOperations, GPU Operator logs) was not stored: "+err.Error(), 1024)})
		return
	}
	t.Status.Diagnostics.Cluster = b
}

// gather reads the must-gather's files; a read that fails is a file with
// its error.
func (r *OperationReconciler) gather(ctx context.Context, node string) []diagnostics.GatheredFile {
	var files []diagnostics.GatheredFile
	add := func(name string, data []byte, err error) {
		files = append(files, diagnostics.GatheredFile{Name: name, Data: data, Err: err})
	}
	var n corev1.Node
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		add("node.yaml", nil, fmt.Errorf("get node %s: %w", node, err))
	} else {
		n.ManagedFields = nil
		b, err := yaml.Marshal(&n)
		add("node.yaml", b, err)
	}
	var events corev1.EventList
	if err := r.Reader.List(ctx, &events, client.MatchingFields{"involvedObject.kind": "Node", "involvedObject.name": node}); err != nil {
		add("events.txt", nil, fmt.Errorf("list the node's events: %w", err))
	} else {
		sort.Slice(events.Items, func(i, j int) bool { return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j])) })
		var b bytes.Buffer
		for _, e := range events.Items {
			fmt.Fprintf(&b, "%s  %-7s  %-24s  %s (x%d, from %s)\n", eventTime(&e).UTC().Format(time.RFC3339), e.Type, e.Reason,
				strings.ReplaceAll(e.Message, "\n", " "), max(e.Count, 1), e.ReportingController)
		}
		add("events.txt", b.Bytes(), nil)
	}
	var ops v1alpha1.NodeOperationList
	if err := r.Client.List(ctx, &ops, client.MatchingLabels{v1alpha1.LabelNode: plan.LabelValue(node)}); err != nil {
		add("nodeoperations.yaml", nil, fmt.Errorf("list the node's NodeOperations: %w", err))
	} else {
		for i := range ops.Items {
			ops.Items[i].ManagedFields = nil
		}
		b, err := yaml.Marshal(&ops)
		add("nodeoperations.yaml", b, err)
	}
	files = append(files, r.gatherLogs(ctx, node)...)
	return files
}

// gatherLogs keeps the logs of the GPU Operator's pods on the node.
func (r *OperationReconciler) gatherLogs(ctx context.Context, node string) []diagnostics.GatheredFile {
	if r.Logs == nil {
		return nil
	}
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return []diagnostics.GatheredFile{{Name: "logs", Err: fmt.Errorf("list the pods on node %s: %w", node, err)}}
	}
	var files []diagnostics.GatheredFile
	for _, sel := range DefaultMustGatherSelectors {
		s, err := labels.Parse(sel)
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if !s.Matches(labels.Set(p.Labels)) {
				continue
			}
			for _, c := range p.Spec.Containers {
				name := fmt.Sprintf("logs/%s_%s_%s.log", p.Namespace, p.Name, c.Name)
				data, err := r.Logs.Logs(ctx, p.Namespace, p.Name, c.Name)
				if err != nil {
					err = fmt.Errorf("logs of %s/%s container %s: %w", p.Namespace, p.Name, c.Name, err)
				}
				files = append(files, diagnostics.GatheredFile{Name: name, Data: data, Err: err})
			}
		}
	}
	return files
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// putMustGather stores the must-gather under its key, once: an object the
// store holds already (a retried pass) is kept, and linked.
func (r *OperationReconciler) putMustGather(ctx context.Context, m *diagnostics.MustGather) (*v1alpha1.DiagnosticsBundle, error) {
	store, err := r.store(ctx)
	if err != nil {
		return nil, err
	}
	key := diagnostics.ClusterKey(m.Node, m.Operation)
	var b *v1alpha1.DiagnosticsBundle
	// Once: a pass that decided on a stale copy of the operation (its
	// status write then fails) must not replace the must-gather the
	// recorded status names.
	switch have, err := store.Stat(ctx, key); {
	case err == nil:
		b = &v1alpha1.DiagnosticsBundle{Key: key, Size: have.Size, SHA256: have.SHA256, Files: have.Files, Stored: true}
	case errors.Is(err, diagstore.ErrNotFound):
		data, sum, files, err := m.Build()
		if err != nil {
			return nil, err
		}
		if err := store.PutWith(ctx, key, bytes.NewReader(data), int64(len(data)), sum,
			map[string]string{diagnostics.MetaGPU: m.GPU, diagnostics.MetaFiles: metaFiles(files)}); err != nil {
			return nil, err
		}
		b = &v1alpha1.DiagnosticsBundle{Key: key, Size: int64(len(data)), SHA256: sum, Files: files, Stored: true}
	default:
		return nil, err
	}
	if u, err := store.Link(ctx, key, r.linkExpiry()); err == nil {
		exp := metav1.NewTime(m.Created.Add(r.linkExpiry()))
		b.URL, b.URLExpires = u.String(), &exp
	}
	return b, nil
}

// SpooledRecheck is how often a bundle that waits in a node's spool is
// looked for in the store: the next capture on that node, or a flush,
// uploads it.
const SpooledRecheck = time.Minute

// checkSpooled records a bundle the capture left in the node's spool as
// stored, with its link, once the store holds it with the same size and
// sha256 (a later capture on the node, or kubemedic-diag flush, uploaded
// it). It returns when to look again; 0 when there is nothing to wait for.
func (r *OperationReconciler) checkSpooled(ctx context.Context, op *v1alpha1.NodeOperation) time.Duration {
	d := op.Status.Diagnostics
	if d == nil || d.Bundle == nil || d.Bundle.Stored || d.Result == v1alpha1.DiagnosticsCapturing {
		return 0
	}
	if r.Diagnostics == nil || r.Diagnostics.Store.Endpoint == "" {
		return 0
	}
	store, err := r.store(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "Cannot look for a spooled diagnostics bundle in the store", "key", d.Bundle.Key)
		return r.spooledRecheck()
	}
	ok, err := store.Exists(ctx, d.Bundle.Key, d.Bundle.Size, d.Bundle.SHA256)
	if err != nil || !ok {
		if err != nil {
			log.FromContext(ctx).Error(err, "Cannot look for a spooled diagnostics bundle in the store", "key", d.Bundle.Key)
		}
		return r.spooledRecheck()
	}
	d.Bundle.Stored = true
	if u, err := store.Link(ctx, d.Bundle.Key, r.linkExpiry()); err == nil {
		exp := metav1.NewTime(r.Clock.Now().Add(r.linkExpiry()))
		d.Bundle.URL, d.Bundle.URLExpires = u.String(), &exp
	}
	log.FromContext(ctx).Info("A spooled diagnostics bundle reached the store", "key", d.Bundle.Key)
	return 0
}

func (r *OperationReconciler) spooledRecheck() time.Duration {
	if r.Diagnostics == nil || r.Diagnostics.SpooledRecheck <= 0 {
		return SpooledRecheck
	}
	return r.Diagnostics.SpooledRecheck
}

// RetentionSweep is how often the store is swept of bundles past their
// retention.
const RetentionSweep = time.Hour

// sweepLoop deletes bundles older than the retention, every RetentionSweep
// from a minute after the start, on the leader only (a manager runnable
// that does not say otherwise runs on the leader).
func (r *OperationReconciler) sweepLoop(ctx context.Context) error {
	wait, every := time.Minute, RetentionSweep
	if d := r.Diagnostics; d != nil && d.SweepEvery > 0 {
		wait, every = d.SweepEvery, d.SweepEvery
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = every
		if err := r.sweep(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Sweeping the diagnostics store failed; trying again later")
		}
	}
}

// sweep deletes the bundles older than the retention, but for those of
// nodes still quarantined: the evidence of an RMA in progress.
func (r *OperationReconciler) sweep(ctx context.Context) error {
	o := r.Diagnostics
	if o == nil || o.Store.Endpoint == "" {
		return nil
	}
	retention := o.Retention
	if retention <= 0 {
		retention = diagnostics.DefaultRetention
	}
	store, err := r.store(ctx)
	if err != nil {
		return err
	}
	objs, err := store.List(ctx, "")
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	quarantined := map[string]bool{}
	for i := range nodes.Items {
		if plan.Quarantined(&nodes.Items[i]) {
			quarantined[nodes.Items[i].Name] = true
		}
	}
	excluded, err := r.excludedForGood(ctx)
	if err != nil {
		return err
	}
	// The GPU is in the object's metadata, which a listing does not
	// carry: read only for the expired bundles, and kept when it cannot
	// be read (no evidence is no reason to delete evidence).
	keep := func(o diagnostics.Object) bool {
		if quarantined[diagnostics.NodeOf(o.Key)] {
			return true
		}
		if len(excluded) == 0 {
			return false
		}
		full, err := store.Stat(ctx, o.Key)
		if err != nil {
			return !errors.Is(err, diagstore.ErrNotFound)
		}
		return full.GPU != "" && excluded[devicetaint.CanonicalUUID(full.GPU)]
	}
	var errs []error
	for _, key := range diagnostics.Expired(objs, r.Clock.Now(), retention, keep) {
		if err := store.Delete(ctx, key); err != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("Deleted a diagnostics bundle past its retention", "key", key, "retention", retention)
	}
	return errors.Join(errs...)
}

// excludedForGood are the GPUs (canonical UUIDs) a permanent
// DeviceTaintRule excludes (the per-GPU cap's): quarantined, one GPU at a
// time. Empty where the API server serves no DeviceTaintRule.
func (r *OperationReconciler) excludedForGood(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	if !r.DRA {
		return out, nil
	}
	var rules resourcev1beta2.DeviceTaintRuleList
	if err := r.Reader.List(ctx, &rules, client.MatchingLabels{devicetaint.LabelManagedBy: devicetaint.ManagedBy}); err != nil {
		return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	for _, rule := range rules.Items {
		if rule.Annotations[devicetaint.AnnotationPermanent] != "" {
			if uuid := rule.Labels[devicetaint.LabelGPUUUID]; uuid != "" {
				out[uuid] = true
			}
		}
	}
	return out, nil
}

// metaFiles is a file list for user metadata, which S3 bounds to 2 KB in
// all: the first names that fit in 1,500 bytes (manifest.json lists all).
func metaFiles(files []string) string {
	out := ""
	for _, f := range files {
		if len(out)+len(f)+1 > 1500 {
			break
		}
		if out != "" {
			out += ","
		}
		out += f
	}
	return out
}

// captureStore is the store settings a capture pod gets: none when no
// store is configured, or when its Secret cannot be read. A pod whose
// secretKeyRef names a missing Secret would never start, and would hold
// the repair for the whole capture timeout; without the store it keeps
// the bundle in the node's spool, and a Warning Event says why.
func (r *OperationReconciler) captureStore(ctx context.Context, t *plan.Transition) *DiagnosticsOptions {
	if r.Diagnostics == nil || r.Diagnostics.Store.Endpoint == "" {
		return nil
	}
	if _, err := r.store(ctx); err != nil {
		log.FromContext(ctx).Error(err, "The capture pod gets no store: its bundle stays in the node's spool")
		t.Events = append(t.Events, plan.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonDiagnosticsFailed, Action: "Capture",
			Note: plan.Truncate("the diagnostics store cannot be used ("+err.Error()+"); the bundle stays in the node's spool until kubemedic diag flush", 1024)})
		return nil
	}
	return r.Diagnostics
}
