package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Kubeflow's Notebook: its controller owns the notebook's StatefulSet, and
// stops a notebook whose annotation kubeflow-resource-stopped is set.
const (
	kubeflowGroup           = "kubeflow.org"
	kindNotebook            = "Notebook"
	AnnotationNotebookStops = "kubeflow-resource-stopped"
)

// LabelPartOf marks kubemedic's own objects; the janitor never reclaims them.
const LabelPartOf = "app.kubernetes.io/part-of"

// owner is one link of a pod's controller chain.
type owner struct {
	gvk  schema.GroupVersionKind
	meta *metav1.PartialObjectMetadata // nil when not fetched (Notebook) or gone
}

// controllerChain follows the pod's controller references up to two levels
// (pod → ReplicaSet → Deployment, pod → StatefulSet → Notebook,
// pod → Job → CronJob), reading metadata only.
func controllerChain(ctx context.Context, r client.Reader, pod *corev1.Pod) ([]owner, error) {
	var chain []owner
	ns := pod.Namespace
	ref := metav1.GetControllerOf(pod)
	for depth := 0; ref != nil && depth < 2; depth++ {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return chain, fmt.Errorf("owner %s %s: %w", ref.Kind, ref.Name, err)
		}
		gvk := gv.WithKind(ref.Kind)
		o := owner{gvk: gvk}
		switch gvk {
		case gvkReplicaSet, gvkDeployment, gvkStatefulSet, gvkJob, gvkDaemonSet:
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, m); err != nil {
				if apierrors.IsNotFound(err) {
					chain = append(chain, owner{gvk: gvk, meta: nil})
					return chain, nil
				}
				return chain, fmt.Errorf("get %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
			}
			if m.UID != ref.UID {
				chain = append(chain, owner{gvk: gvk})
				return chain, nil
			}
			o.meta = m
			chain = append(chain, o)
			ref = metav1.GetControllerOf(m)
		default:
			o.meta = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ns, UID: ref.UID}}
			chain = append(chain, o)
			return chain, nil
		}
	}
	return chain, nil
}

func ownerName(o owner) string {
	if o.meta != nil {
		return o.meta.Name
	}
	return "?"
}

// target picks what the janitor stops for a pod, from its controller chain.
func target(pod *corev1.Pod, chain []owner) decide.Target {
	if len(chain) == 0 {
		return decide.Target{Kind: decide.TargetPod, Name: pod.Name}
	}
	first := chain[0]
	unsupported := func(o owner) decide.Target {
		return decide.Target{Kind: decide.TargetUnsupported, OwnerKind: o.gvk.Kind, Name: ownerName(o)}
	}
	if first.meta == nil { // the controller is gone: the pod is an orphan
		return decide.Target{Kind: decide.TargetPod, Name: pod.Name}
	}
	switch first.gvk {
	case gvkJob:
		return decide.Target{Kind: decide.TargetJob, Name: first.meta.Name, UID: first.meta.UID}
	case gvkReplicaSet:
		if len(chain) > 1 && chain[1].gvk == gvkDeployment && chain[1].meta != nil {
			return decide.Target{Kind: decide.TargetDeployment, Name: chain[1].meta.Name, UID: chain[1].meta.UID}
		}
		return unsupported(first)
	case gvkStatefulSet:
		if len(chain) > 1 {
			if n := chain[1]; n.gvk.Group == kubeflowGroup && n.gvk.Kind == kindNotebook && n.meta != nil {
				return decide.Target{Kind: decide.TargetNotebook, Name: n.meta.Name, APIVersion: n.gvk.GroupVersion().String(), UID: n.meta.UID}
			}
			return unsupported(chain[1])
		}
		return decide.Target{Kind: decide.TargetStatefulSet, Name: first.meta.Name, UID: first.meta.UID}
	}
	return unsupported(first)
}

// exemption says why kubemedic never reclaims the pod ("" when it may):
// DaemonSet pods and kubemedic's own.
func exemption(pod *corev1.Pod, chain []owner, selfNamespace string) string {
	if len(chain) > 0 && chain[0].gvk == gvkDaemonSet {
		return "the pod belongs to DaemonSet " + ownerName(chain[0])
	}
	if pod.Namespace == selfNamespace {
		return "the pod is in kubemedic's namespace " + selfNamespace
	}
	if pod.Labels[LabelPartOf] == "kubemedic" {
		return "the pod is part of kubemedic"
	}
	if _, ok := pod.Labels[v1alpha1.LabelOperation]; ok {
		return "the pod is a kubemedic node operation"
	}
	return ""
}

// podFacts reads what decide.Judge needs from the pod, its controllers
// and its namespace.
func podFacts(pod *corev1.Pod, chain []owner, ns *corev1.Namespace) decide.Pod {
	whole, mig := GPURequests(pod)
	p := decide.Pod{
		Namespace: pod.Namespace, Name: pod.Name, Created: pod.CreationTimestamp.Time, Phase: pod.Status.Phase,
		WholeGPUs: whole, MIGInstances: mig,
	}
	if pod.Status.StartTime != nil {
		p.Started = pod.Status.StartTime.Time
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			p.Unschedulable = &decide.Unschedulable{Since: c.LastTransitionTime.Time, Message: strings.TrimSpace(c.Message)}
		}
	}
	// The object's name is built only when it has an annotation: this runs
	// for every GPU pod twice a cycle.
	add := func(kind string, m metav1.Object) {
		a := m.GetAnnotations()
		ttl, exp := a[v1alpha1.AnnotationJanitorTTL], a[v1alpha1.AnnotationJanitorExpires]
		if ttl != "" || exp != "" {
			p.Expiry = append(p.Expiry, decide.ExpirySource{Object: kind + " " + m.GetName(), Created: m.GetCreationTimestamp().Time, TTL: ttl, Expires: exp})
		}
	}
	add("pod", pod)
	for _, o := range chain {
		if o.meta != nil {
			add(o.gvk.Kind, o.meta)
		}
	}
	if ns != nil {
		add("namespace", ns)
	}
	return p
}

// chainMemo reads each controller once per cycle: the pods of one
// workload share it.
type chainMemo struct {
	reader client.Reader
	memo   map[types.UID]chainResult
}

type chainResult struct {
	chain []owner
	err   error
}

func (m *chainMemo) get(ctx context.Context, pod *corev1.Pod) ([]owner, error) {
	uid := controllerUID(pod.OwnerReferences)
	if uid == "" {
		return controllerChain(ctx, m.reader, pod)
	}
	if r, ok := m.memo[uid]; ok {
		return r.chain, r.err
	}
	chain, err := controllerChain(ctx, m.reader, pod)
	m.memo[uid] = chainResult{chain, err}
	return chain, err
}

// controllerUID is the UID of the controller reference ("" when none),
// found without metav1.GetControllerOf's copy of the reference.
func controllerUID(refs []metav1.OwnerReference) types.UID {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return refs[i].UID
		}
	}
	return ""
}
