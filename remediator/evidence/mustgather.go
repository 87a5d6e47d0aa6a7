package evidence

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

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

// MustGather reads what the API server knows of the operation's node (the
// Node, its Events, its NodeOperations, the GPU Operator's pods' logs) and
// puts it in the store beside the node's bundle, once, recording it in
// t's status.diagnostics.cluster. It fails soft: an unreadable part is
// recorded in the must-gather's manifest, and a store that cannot be
// reached leaves status.diagnostics.cluster empty, with a Warning Event on
// t; the repair goes on either way.
func (k *Keeper) MustGather(ctx context.Context, op *v1alpha1.NodeOperation, t *plan.Transition, now time.Time) {
	if !k.storeConfigured() || t.Status.Diagnostics == nil {
		return
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, mustGatherTimeout)
	defer cancel()
	m := &diagnostics.MustGather{Node: op.Spec.NodeName, Operation: op.Name, Created: now}
	if g := op.Status.GPU; g != nil {
		m.GPU = g.UUID
	}
	m.Files = k.gather(ctx, op.Spec.NodeName)
	b, err := k.putMustGather(ctx, m)
	if err != nil && parent.Err() != nil {
		return // stopping: this pass's status write fails too
	}
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
func (k *Keeper) gather(ctx context.Context, node string) []diagnostics.GatheredFile {
	var files []diagnostics.GatheredFile
	add := func(name string, data []byte, err error) {
		files = append(files, diagnostics.GatheredFile{Name: name, Data: data, Err: err})
	}
	var n corev1.Node
	if err := k.Reader.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		add("node.yaml", nil, fmt.Errorf("get node %s: %w", node, err))
	} else {
		n.ManagedFields = nil
		b, err := yaml.Marshal(&n)
		add("node.yaml", b, err)
	}
	var events corev1.EventList
	if err := k.Reader.List(ctx, &events, client.MatchingFields{"involvedObject.kind": "Node", "involvedObject.name": node}); err != nil {
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
	if err := k.Client.List(ctx, &ops, client.MatchingLabels{v1alpha1.LabelNode: plan.LabelValue(node)}); err != nil {
		add("nodeoperations.yaml", nil, fmt.Errorf("list the node's NodeOperations: %w", err))
	} else {
		for i := range ops.Items {
			ops.Items[i].ManagedFields = nil
		}
		b, err := yaml.Marshal(&ops)
		add("nodeoperations.yaml", b, err)
	}
	files = append(files, k.gatherLogs(ctx, node)...)
	return files
}

// gatherLogs keeps the logs of the GPU Operator's pods on the node.
func (k *Keeper) gatherLogs(ctx context.Context, node string) []diagnostics.GatheredFile {
	if k.Logs == nil {
		return nil
	}
	var pods corev1.PodList
	if err := k.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
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
				data, err := k.Logs.Logs(ctx, p.Namespace, p.Name, c.Name)
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
func (k *Keeper) putMustGather(ctx context.Context, m *diagnostics.MustGather) (*v1alpha1.DiagnosticsBundle, error) {
	store, err := k.store(ctx)
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
	if u, err := store.Link(ctx, key, k.linkExpiry()); err == nil {
		exp := metav1.NewTime(m.Created.Add(k.linkExpiry()))
		b.URL, b.URLExpires = u.String(), &exp
	}
	return b, nil
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
