package localcluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// OwnerKind is the kind of workload a pod from CreatePod belongs to.
type OwnerKind string

const (
	// OwnerNone makes a bare pod without owner references.
	OwnerNone OwnerKind = ""
	// OwnerJob makes a batch/v1 Job owning the pod (controller=true).
	OwnerJob OwnerKind = "Job"
	// OwnerDeployment makes a Deployment and its ReplicaSet, which owns the
	// pod (controller=true), as the deployment controller would.
	OwnerDeployment OwnerKind = "Deployment"
)

// Labels the workload controllers put on what they create.
const (
	LabelJobName         = batchv1.JobNameLabel       // batch.kubernetes.io/job-name
	LabelJobControllerID = batchv1.ControllerUidLabel // batch.kubernetes.io/controller-uid
	LabelPodTemplateHash = appsv1.DefaultDeploymentUniqueLabelKey
	// LabelAppName is the selector of Deployments made by CreatePod.
	LabelAppName = "app.kubernetes.io/name"
)

// PodSpec describes a pod for CreatePod.
type PodSpec struct {
	// Namespace of the pod, created when missing. Default "default".
	Namespace string
	// Name of the pod. Required without Owner; with an Owner and no Name the
	// pod gets a controller-style name, <job>-xxxxx or <replicaset>-xxxxx.
	Name string
	// NodeName binds the pod to a node (spec.nodeName), as the scheduler
	// would. Empty leaves it Pending and unscheduled, unless the real
	// scheduler runs (Options.Scheduler).
	NodeName string
	// GPUs is the nvidia.com/gpu request and limit; 0 requests none. With
	// MIGProfile it is the number of MIG instances instead.
	GPUs int
	// MIGProfile, e.g. "nvidia.com/mig-3g.40gb" or just "3g.40gb", requests
	// MIG instances (GPUs of them, at least one) instead of whole GPUs.
	MIGProfile string
	// Owner makes a real workload object owning the pod, as its controller
	// would have, and nothing keeps them in sync: CreatePod plays the
	// controllers. With Options.ControllerManager the real ones run and
	// would fight it, so CreatePod refuses an Owner then: use
	// CreateWorkload.
	Owner OwnerKind
	// OwnerName names the Job or Deployment. Default Name. Pods naming the
	// same owner share it (a Deployment's replica count is raised for each).
	OwnerName string
	// Labels are added to the pod and to its owner's pod template.
	Labels map[string]string
	// Annotations are added to the pod.
	Annotations map[string]string
}

// CreatePod creates a pod, with its namespace and owner when needed, that
// looks like what the workload controllers and the scheduler would have
// made. Without kwok the pod keeps the status the API server gives it
// (Pending); kwok marks bound pods Running, then Succeeded for Job pods.
//
// Note that a bound pod is deleted gracefully: without kwok (playing the
// kubelet) it stays Terminating until deleted with grace period 0.
func (e *Cluster) CreatePod(ctx context.Context, spec PodSpec) (*corev1.Pod, error) {
	if spec.Namespace == "" {
		spec.Namespace = metav1.NamespaceDefault
	}
	if spec.OwnerName == "" {
		spec.OwnerName = spec.Name
	}
	if spec.Name == "" && (spec.Owner == OwnerNone || spec.OwnerName == "") {
		return nil, fmt.Errorf("create pod in %s: a name is required (Name, or OwnerName with an Owner)", spec.Namespace)
	}
	if spec.Owner != OwnerNone && e.ControllerManagerPID() != 0 {
		return nil, fmt.Errorf("create pod %s/%s owned by %s %s: kube-controller-manager runs and would fight an owner CreatePod plays; use CreateWorkload",
			spec.Namespace, spec.Name, spec.Owner, spec.OwnerName)
	}
	if err := e.ensureNamespace(ctx, spec.Namespace); err != nil {
		return nil, err
	}

	podSpec := buildPodSpec(spec)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   spec.Namespace,
			Name:        spec.Name,
			Labels:      maps.Clone(spec.Labels),
			Annotations: maps.Clone(spec.Annotations),
		},
		Spec: podSpec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}

	switch spec.Owner {
	case OwnerNone:
	case OwnerJob:
		job, err := e.ensureJob(ctx, spec, podSpec)
		if err != nil {
			return nil, err
		}
		maps.Copy(pod.Labels, job.Spec.Template.Labels)
		pod.OwnerReferences = []metav1.OwnerReference{controllerRef(job, batchv1.SchemeGroupVersion.String(), "Job")}
		if pod.Name == "" {
			pod.Name = job.Name + "-" + rand.String(5)
		}
	case OwnerDeployment:
		rs, err := e.ensureDeployment(ctx, spec, podSpec)
		if err != nil {
			return nil, err
		}
		maps.Copy(pod.Labels, rs.Spec.Template.Labels)
		pod.OwnerReferences = []metav1.OwnerReference{controllerRef(rs, appsv1.SchemeGroupVersion.String(), "ReplicaSet")}
		if pod.Name == "" {
			pod.Name = rs.Name + "-" + rand.String(5)
		}
	default:
		return nil, fmt.Errorf("create pod %s/%s: unknown owner kind %q", spec.Namespace, spec.Name, spec.Owner)
	}

	created, err := e.Clientset.CoreV1().Pods(spec.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return created, nil
}

// buildPodSpec returns the pod spec of spec: one container requesting the
// GPUs or MIG instances, tolerating the GPU taint like GPU workloads do.
func buildPodSpec(spec PodSpec) corev1.PodSpec {
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	limits := corev1.ResourceList{}
	image := "registry.k8s.io/pause:3.10"
	var tolerations []corev1.Toleration
	if gpuRes, n := gpuRequest(spec); n > 0 {
		image = "nvcr.io/nvidia/pytorch:25.01-py3"
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		requests[gpuRes] = q
		limits[gpuRes] = q
		requests[corev1.ResourceCPU] = *resource.NewQuantity(int64(8*n), resource.DecimalSI)
		requests[corev1.ResourceMemory] = *resource.NewQuantity(int64(n)*64<<30, resource.BinarySI)
		tolerations = []corev1.Toleration{{Key: string(ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	restart := corev1.RestartPolicyAlways
	if spec.Owner == OwnerJob {
		restart = corev1.RestartPolicyNever
	}
	return corev1.PodSpec{
		NodeName:      spec.NodeName,
		RestartPolicy: restart,
		Tolerations:   tolerations,
		Containers: []corev1.Container{{
			Name:  "main",
			Image: image,
			Resources: corev1.ResourceRequirements{
				Requests: requests,
				Limits:   limits,
			},
		}},
	}
}

// gpuRequest returns the GPU resource and count a pod of spec requests.
func gpuRequest(spec PodSpec) (corev1.ResourceName, int) {
	if spec.MIGProfile != "" {
		name := spec.MIGProfile
		if !strings.Contains(name, "/") {
			name = "nvidia.com/mig-" + name
		}
		return corev1.ResourceName(name), max(spec.GPUs, 1)
	}
	return ResourceGPU, spec.GPUs
}

func controllerRef(obj metav1.Object, apiVersion, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         apiVersion,
		Kind:               kind,
		Name:               obj.GetName(),
		UID:                obj.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func (e *Cluster) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// ensureJob returns the Job spec.OwnerName, creating it when missing. The
// API server generates its selector and the controller-uid and job-name
// labels of its template, as for any Job.
func (e *Cluster) ensureJob(ctx context.Context, spec PodSpec, podSpec corev1.PodSpec) (*batchv1.Job, error) {
	jobs := e.Clientset.BatchV1().Jobs(spec.Namespace)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.OwnerName, Labels: maps.Clone(spec.Labels)},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(spec.Labels)},
				Spec:       podSpec,
			},
		},
	}
	job.Spec.Template.Spec.NodeName = ""
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = jobs.Get(ctx, spec.OwnerName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create job %s/%s: %w", spec.Namespace, spec.OwnerName, err)
	}
	return created, nil
}

// ensureDeployment returns the ReplicaSet of the Deployment spec.OwnerName,
// creating both when missing and adding a replica to both when they exist.
func (e *Cluster) ensureDeployment(ctx context.Context, spec PodSpec, podSpec corev1.PodSpec) (*appsv1.ReplicaSet, error) {
	ns, name := spec.Namespace, spec.OwnerName
	selector := map[string]string{LabelAppName: name}
	templateLabels := maps.Clone(spec.Labels)
	if templateLabels == nil {
		templateLabels = map[string]string{}
	}
	maps.Copy(templateLabels, selector)
	podSpec.NodeName = ""

	deployments := e.Clientset.AppsV1().Deployments(ns)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      maps.Clone(selector),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: templateLabels},
				Spec:       podSpec,
			},
		},
	}
	existed := false
	created, err := deployments.Create(ctx, dep, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existed = true
		created, err = deployments.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create deployment %s/%s: %w", ns, name, err)
	}
	dep = created

	// The deployment controller names the ReplicaSet after a hash of the
	// pod template; a hash of the Deployment's UID is as stable here.
	h := fnv.New32a()
	h.Write([]byte(dep.UID))
	hash := rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
	rsTemplate := dep.Spec.Template.DeepCopy()
	rsTemplate.Labels = maps.Clone(rsTemplate.Labels)
	rsTemplate.Labels[LabelPodTemplateHash] = hash
	rsSelector := maps.Clone(dep.Spec.Selector.MatchLabels)
	rsSelector[LabelPodTemplateHash] = hash
	replicaSets := e.Clientset.AppsV1().ReplicaSets(ns)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name + "-" + hash,
			Labels:    maps.Clone(rsTemplate.Labels),
			Annotations: map[string]string{
				"deployment.kubernetes.io/desired-replicas": "1",
				"deployment.kubernetes.io/max-replicas":     "2",
				"deployment.kubernetes.io/revision":         "1",
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef(dep, appsv1.SchemeGroupVersion.String(), "Deployment")},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: rsSelector},
			Template: *rsTemplate,
		},
	}
	createdRS, err := replicaSets.Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		createdRS, err = replicaSets.Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create replicaset %s/%s: %w", ns, rs.Name, err)
	}
	if !existed {
		return createdRS, nil
	}

	// One more pod of an existing Deployment: one more replica.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(ptr.Deref(d.Spec.Replicas, 0) + 1)
		_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scale deployment %s/%s: %w", ns, name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := replicaSets.Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		replicas := ptr.Deref(r.Spec.Replicas, 0) + 1
		r.Spec.Replicas = &replicas
		r.Annotations["deployment.kubernetes.io/desired-replicas"] = strconv.Itoa(int(replicas))
		r.Annotations["deployment.kubernetes.io/max-replicas"] = strconv.Itoa(int(replicas) + 1)
		createdRS, err = replicaSets.Update(ctx, r, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scale replicaset %s/%s: %w", ns, rs.Name, err)
	}
	return createdRS, nil
}
