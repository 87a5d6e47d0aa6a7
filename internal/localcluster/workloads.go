package localcluster

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkloadSpec describes a Deployment or a Job for CreateWorkload, whose
// pods the real controllers create (Options.ControllerManager) and the real
// scheduler places (Options.Scheduler).
type WorkloadSpec struct {
	// Namespace, created when missing. Default "default".
	Namespace string
	// Name of the Deployment or Job. Required.
	Name string
	// Kind is OwnerDeployment (the default) or OwnerJob.
	Kind OwnerKind
	// Replicas of a Deployment, or parallelism and completions of a Job.
	// Default 1.
	Replicas int32
	// GPUs each pod requests through the device plugin's nvidia.com/gpu (or
	// MIGProfile's) extended resource.
	GPUs int
	// MIGProfile requests GPUs MIG instances instead, as in PodSpec.
	MIGProfile string
	// GPUClaims each pod claims through DRA: one ResourceClaimTemplate
	// (named after the workload) with this many requests of one GPU of
	// GPUDeviceClass each, which the resourceclaim controller turns into a
	// ResourceClaim per pod. Needs CreateGPUDeviceClass and nodes with
	// ResourceSlices (NodeSpec.ResourceSlices).
	GPUClaims int
	// NodeSelector of the pods, e.g. to keep them to one node by
	// kubernetes.io/hostname.
	NodeSelector map[string]string
	// Affinity of the pods, e.g. a preferred node that the scheduler may
	// leave when the node is cordoned or full.
	Affinity *corev1.Affinity
	// Labels of the workload and of its pods; app.kubernetes.io/name=Name is
	// added and is the selector.
	Labels map[string]string
	// Annotations of the pods.
	Annotations map[string]string
}

// CreateWorkload creates spec's namespace, ResourceClaimTemplate (with
// GPUClaims) and Deployment or Job, and returns the workload. Its pods
// appear only when the controller-manager runs.
func (e *Cluster) CreateWorkload(ctx context.Context, spec WorkloadSpec) (client.Object, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("create workload in %s: a name is required", spec.Namespace)
	}
	if spec.Namespace == "" {
		spec.Namespace = metav1.NamespaceDefault
	}
	if spec.Replicas == 0 {
		spec.Replicas = 1
	}
	if err := e.ensureNamespace(ctx, spec.Namespace); err != nil {
		return nil, err
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelAppName] = spec.Name
	podSpec := buildPodSpec(PodSpec{GPUs: spec.GPUs, MIGProfile: spec.MIGProfile, Owner: spec.Kind})
	podSpec.NodeSelector = maps.Clone(spec.NodeSelector)
	if spec.Affinity != nil {
		podSpec.Affinity = spec.Affinity.DeepCopy()
	}
	if spec.GPUClaims > 0 {
		if err := e.ensureGPUClaimTemplate(ctx, spec.Namespace, spec.Name, spec.GPUClaims); err != nil {
			return nil, err
		}
		podSpec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(spec.Name)}}
		c := &podSpec.Containers[0]
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
		podSpec.Tolerations = []corev1.Toleration{{Key: string(ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: maps.Clone(spec.Annotations)},
		Spec:       podSpec,
	}
	meta := metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Name, Labels: maps.Clone(labels)}
	var obj client.Object
	switch spec.Kind {
	case OwnerDeployment, OwnerNone:
		obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelAppName: spec.Name}},
			Template: template,
		}}
	case OwnerJob:
		obj = &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(spec.Replicas),
			Completions:  ptr.To(spec.Replicas),
			BackoffLimit: ptr.To[int32](6),
			Template:     template,
		}}
	default:
		return nil, fmt.Errorf("create workload %s/%s: unknown kind %q", spec.Namespace, spec.Name, spec.Kind)
	}
	if err := e.Client.Create(ctx, obj); err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", spec.Kind, spec.Namespace, spec.Name, err)
	}
	return obj, nil
}

// ensureGPUClaimTemplate creates the ResourceClaimTemplate name in ns with
// n requests of exactly one GPU of GPUDeviceClass each.
func (e *Cluster) ensureGPUClaimTemplate(ctx context.Context, ns, name string, n int) error {
	t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i := range n {
		t.Spec.Spec.Devices.Requests = append(t.Spec.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name: "gpu-" + strconv.Itoa(i),
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: GPUDeviceClass,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           1,
			},
		})
	}
	if err := e.Client.Create(ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ResourceClaimTemplate %s/%s: %w", ns, name, err)
	}
	return nil
}
