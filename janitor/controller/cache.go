package controller

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/notify"
)

// Resource names of NVIDIA's device plugin: whole GPUs, and MIG instances
// under the mixed strategy (nvidia.com/mig-1g.10gb, ...).
const (
	resourceGPU       = corev1.ResourceName("nvidia.com/gpu")
	resourceMIGPrefix = "nvidia.com/mig-"
)

// GPURequests counts the whole GPUs and MIG instances a pod's containers
// request (limits, which the device plugin requires to equal requests).
// Init containers are not counted: they have finished before the pod runs.
// A pod from the janitor's cache has no containers: stripPod keeps the
// counts in annotationGPUs.
func GPURequests(pod *corev1.Pod) (whole, mig int) {
	if v, ok := pod.Annotations[annotationGPUs]; ok && len(pod.Spec.Containers) == 0 {
		w, m, _ := strings.Cut(v, ",")
		wn, err1 := strconv.Atoi(w)
		mn, err2 := strconv.Atoi(m)
		if err1 == nil && err2 == nil {
			return wn, mn
		}
	}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Limits {
			switch {
			case name == resourceGPU:
				whole += int(q.Value())
			case strings.HasPrefix(string(name), resourceMIGPrefix):
				mig += int(q.Value())
			}
		}
	}
	return whole, mig
}

// annotationGPUs holds "whole,mig" on a pod in the janitor's cache only:
// a container with its resource map costs about 900 bytes a pod, the
// annotation about 60. It is never written to the API server (every write
// builds its own object), and a pod that carries it in the API server is
// not trusted: it is read only when the pod has no containers.
const annotationGPUs = "kubemedic.io/janitor-cached-gpus"

// keptAnnotation reports whether the janitor needs a pod annotation: its
// own, kube-janitor's, and the owner's.
func keptAnnotation(k string) bool {
	return strings.HasPrefix(k, "kubemedic.io/") || strings.HasPrefix(k, "janitor/")
}

// CacheOptions caches what the janitor needs. Every pod is watched (GPU
// pods can be in any namespace), but a pod that requests no GPU is kept as
// its identity alone, and a GPU pod keeps its identity, labels, the
// janitor's annotations, owners, node, phase, start time, a PodScheduled
// condition that is False, and its GPU counts (annotationGPUs): 3.0 KB
// for a notebook pod that costs 24.5 KB whole (BenchmarkCachedPodSize).
// Workload controllers are cached as metadata only (their annotations and
// owners). Nothing is written back from a cached pod: every write is a
// patch of the janitor's own annotations (TestStripPodKeepsDecisions
// holds the decisions to those of the whole pod).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: stripMeta,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: stripPod},
		},
	}
}

// stripMeta drops managed fields from every cached object, and from
// namespaces and workload metadata every annotation the janitor does not
// read: a kubectl last-applied-configuration on thousands of Deployments
// would cost more than the pods.
func stripMeta(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		o.ManagedFields = nil
		o.Annotations = keepAnnotations(o.Annotations, false)
		return o, nil
	case *corev1.Namespace:
		o.ManagedFields = nil
		o.Annotations = keepAnnotations(o.Annotations, true)
		return o, nil
	}
	return cache.TransformStripManagedFields()(obj)
}

// keepAnnotations keeps the janitor's and kube-janitor's annotations, and
// on a namespace Kubeflow's owner.
func keepAnnotations(a map[string]string, namespace bool) map[string]string {
	var out map[string]string
	for k, v := range a {
		if keptAnnotation(k) || namespace && k == notify.AnnotationKubeflowOwner {
			if out == nil {
				out = make(map[string]string, 2)
			}
			out[k] = v
		}
	}
	return out
}

func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
	}
	whole, mig := GPURequests(pod)
	if whole+mig == 0 {
		return out, nil
	}
	out.Labels = pod.Labels
	for k, v := range pod.Annotations {
		if keptAnnotation(k) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.OwnerReferences = pod.OwnerReferences
	out.CreationTimestamp = pod.CreationTimestamp
	out.DeletionTimestamp = pod.DeletionTimestamp
	out.Spec.NodeName = pod.Spec.NodeName
	if out.Annotations == nil {
		out.Annotations = make(map[string]string, 1)
	}
	out.Annotations[annotationGPUs] = strconv.Itoa(whole) + "," + strconv.Itoa(mig)
	out.Status.Phase = pod.Status.Phase
	out.Status.StartTime = pod.Status.StartTime
	for _, c := range pod.Status.Conditions {
		// Only an unschedulable pod's condition is read (stuck pending).
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out.Status.Conditions = []corev1.PodCondition{c}
		}
	}
	return out, nil
}

// Kinds of workload controllers the janitor follows from a pod, cached as
// metadata only.
var (
	gvkReplicaSet  = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")
	gvkDeployment  = appsv1.SchemeGroupVersion.WithKind("Deployment")
	gvkStatefulSet = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	gvkDaemonSet   = appsv1.SchemeGroupVersion.WithKind("DaemonSet")
	gvkJob         = batchv1.SchemeGroupVersion.WithKind("Job")
)
