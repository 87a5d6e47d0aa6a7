package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Field indexes, all in one place.
const (
	// indexPodNode indexes the cached (operation) pods by spec.nodeName.
	// It is also the API server's field selector the drain lists a node's
	// pods with.
	indexPodNode = "spec.nodeName"
	// indexOpNode indexes NodeOperations by spec.nodeName.
	indexOpNode = "spec.nodeName"
)

// mirrorAnnotation marks a static pod's mirror in the API server.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// CacheOptions caches only what the remediator needs. Pods are cached only
// in namespace, where the operation pods run: the drain lists the pods of
// the node it drains from the API server (field selector spec.nodeName,
// served from the API server's watch cache). Caching every pod of the
// cluster cost about 2.4 KB per pod even stripped (a corev1.Pod is 1.2 KB
// before any field is set), 230 MiB of live heap and 600-800 MiB of RSS at
// 100,000 pods (test/scale/remediator). A cached pod keeps its identity,
// labels, owners, node, phase and, for operation pods, the container
// states. A cached node keeps what the remediator reads (stripNode).
func CacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Namespaces: map[string]cache.Config{namespace: {}},
				Transform:  stripPod,
			},
			&corev1.Node{}: {Transform: stripNode(newInterner())},
		},
	}
}

func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
			DeletionTimestamp: pod.DeletionTimestamp,
			CreationTimestamp: pod.CreationTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message},
	}
	if v, ok := pod.Annotations[mirrorAnnotation]; ok {
		out.Annotations = map[string]string{mirrorAnnotation: v}
	}
	if _, ok := pod.Labels[v1alpha1.LabelOperation]; ok {
		out.Status.ContainerStatuses = pod.Status.ContainerStatuses
	}
	if _, ok := pod.Labels[v1alpha1.LabelValidationPolicy]; ok {
		// A ValidationPolicy's test pod: its report, when it started on
		// the node, and whether it was preempted (DisruptionTarget).
		out.Status.ContainerStatuses = pod.Status.ContainerStatuses
		out.Status.StartTime = pod.Status.StartTime
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				out.Status.Conditions = append(out.Status.Conditions, c)
			}
		}
	}
	return out, nil
}

// stripNode keeps of a node what the remediator reads, in a new object:
// identity, labels, annotations and owners; cordon, taints and providerID;
// conditions, the boot ID and the nvidia.com/ resources of capacity and
// allocatable. Addresses, daemon endpoints, images, volumes, pod CIDRs, the
// rest of the system info and other resources are dropped. The strings
// that repeat from node to node (label keys and values, annotation keys,
// condition types, statuses, reasons and messages, taints) and equal GPU
// resource lists are shared through in instead of each node holding its
// own copies: cached nodes are never changed in place. A GPU
// node of the local cluster with 14 conditions held 9.1 KB in the cache
// and holds 5.0 KB (BenchmarkCachedNodeBytes). Nothing writes a cached
// node back whole: a quarantine reads the node from the API server before
// its update, and the other node writes are patches.
func stripNode(in *interner) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		return in.node(node), nil
	}
}

// node is the stripped copy of node, sharing in's strings.
func (in *interner) node(node *corev1.Node) *corev1.Node {
	m := &node.ObjectMeta
	in.mu.Lock()
	defer in.mu.Unlock()
	conds := make([]corev1.NodeCondition, len(node.Status.Conditions))
	for i, c := range node.Status.Conditions {
		conds[i] = corev1.NodeCondition{Type: corev1.NodeConditionType(in.get(string(c.Type))), Status: corev1.ConditionStatus(in.get(string(c.Status))),
			Reason: in.get(c.Reason), Message: in.get(c.Message), LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime}
	}
	var taints []corev1.Taint
	if len(node.Spec.Taints) > 0 {
		taints = make([]corev1.Taint, len(node.Spec.Taints))
		for i, t := range node.Spec.Taints {
			taints[i] = corev1.Taint{Key: in.get(t.Key), Value: in.get(t.Value), Effect: corev1.TaintEffect(in.get(string(t.Effect))), TimeAdded: t.TimeAdded}
		}
	}
	return &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
			CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
			Labels: in.stringMap(m.Labels, true), Annotations: in.stringMap(m.Annotations, false),
			OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
		},
		Spec: corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: taints, ProviderID: node.Spec.ProviderID},
		Status: corev1.NodeStatus{
			Capacity:    in.resources(node.Status.Capacity),
			Allocatable: in.resources(node.Status.Allocatable),
			Phase:       node.Status.Phase,
			Conditions:  conds,
			NodeInfo:    corev1.NodeSystemInfo{BootID: node.Status.NodeInfo.BootID},
		},
	}
}

func newInterner() *interner {
	return &interner{m: map[string]string{}, lists: map[string]corev1.ResourceList{}}
}

// interner hands out one copy of each string it has seen. It forgets
// everything when it holds internMax strings, so strings unique to a node
// (its hostname label, a message naming it) cannot grow it without bound;
// the copies already handed out stay valid.
type interner struct {
	mu sync.Mutex
	m  map[string]string
	// lists are the shared nvidia.com/ resource lists, by their content.
	lists map[string]corev1.ResourceList
}

const (
	internMax = 1 << 16
	// internLongest: longer strings (an annotation's JSON, say) are
	// rarely repeated and kept as they are.
	internLongest = 128
)

// get returns the shared copy of s. The caller holds mu.
func (in *interner) get(s string) string {
	if s == "" || len(s) > internLongest {
		return s
	}
	if v, ok := in.m[s]; ok {
		return v
	}
	if len(in.m) >= internMax {
		clear(in.m)
	}
	in.m[s] = s
	return s
}

// stringMap copies m with shared keys, and shared values when values is
// true. The caller holds mu.
func (in *interner) stringMap(m map[string]string, values bool) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = in.get(v)
		}
		out[in.get(k)] = v
	}
	return out
}

// resources is the nvidia.com/ part of l, nil when it has none, shared with
// every node whose part is the same (most nodes of a pool: a map of one
// resource cost about 700 bytes a node, twice). The caller holds mu.
func (in *interner) resources(l corev1.ResourceList) corev1.ResourceList {
	var names []string
	for name := range l {
		if strings.HasPrefix(string(name), plan.ResourceNVIDIAPrefix) {
			names = append(names, string(name))
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	var key strings.Builder
	for _, name := range names {
		q := l[corev1.ResourceName(name)]
		key.WriteString(name + "=" + q.String() + ";")
	}
	if shared, ok := in.lists[key.String()]; ok {
		return shared
	}
	out := make(corev1.ResourceList, len(names))
	for _, name := range names {
		out[corev1.ResourceName(name)] = l[corev1.ResourceName(name)]
	}
	if len(in.lists) >= internMax {
		clear(in.lists)
	}
	in.lists[key.String()] = out
	return out
}

// SetupIndexes registers the field indexes.
func SetupIndexes(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexPodNode, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	if err := idx.IndexField(ctx, &v1alpha1.NodeOperation{}, indexOpNode, func(o client.Object) []string {
		return []string{o.(*v1alpha1.NodeOperation).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("index operations by node: %w", err)
	}
	return nil
}

// NodeLister lists every Node the remediator sees, as the cache holds them:
// shared, not copied, and not to be changed.
type NodeLister func(ctx context.Context) ([]*corev1.Node, error)

// CachedNodes lists the Nodes of c's informer without copying them. A List,
// even with client.UnsafeDisableDeepCopy, copies every Node struct into the
// list's items (reflect, 1.2 KB a node before its maps and slices): at
// 10,000 nodes each pass of the policy reconciler and each admission
// allocated about 15 MB, 1.5 GB in a burst of 50 conditions, which set the
// remediator's peak RSS (heap profile of test/scale/remediator -profile).
// An informer that does not expose its store is listed through c.
func CachedNodes(c cache.Cache) NodeLister {
	return func(ctx context.Context) ([]*corev1.Node, error) {
		inf, err := c.GetInformer(ctx, &corev1.Node{})
		if err != nil {
			return nil, fmt.Errorf("node informer: %w", err)
		}
		st, ok := inf.(interface{ GetStore() toolscache.Store })
		if !ok {
			return listNodes(ctx, c)
		}
		objs := st.GetStore().List()
		out := make([]*corev1.Node, 0, len(objs))
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok {
				out = append(out, n)
			}
		}
		return out, nil
	}
}

// listNodes lists the nodes through r without deep copies (still copying
// each Node struct into the list); the objects must not be changed.
func listNodes(ctx context.Context, r client.Reader) ([]*corev1.Node, error) {
	var nl corev1.NodeList
	if err := r.List(ctx, &nl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(nl.Items))
	for i := range nl.Items {
		nodes[i] = &nl.Items[i]
	}
	return nodes, nil
}

// nodesOf is nodes, or a List through r when nodes is nil (reconcilers built
// without a cache, as some tests build them).
func nodesOf(ctx context.Context, nodes NodeLister, r client.Reader) ([]*corev1.Node, error) {
	if nodes != nil {
		return nodes(ctx)
	}
	return listNodes(ctx, r)
}
