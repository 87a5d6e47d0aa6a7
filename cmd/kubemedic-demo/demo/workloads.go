package demo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
)

// gpuResource is the device plugin's resource of whole GPUs.
const gpuResource = corev1.ResourceName("nvidia.com/gpu")

const (
	// labelDevicePlugin is the GPU Operator's label that says whether the
	// NVIDIA device plugin runs on a node: "false" where the GPUs are
	// published through DRA instead.
	labelDevicePlugin = "nvidia.com/gpu.deploy.device-plugin"
	// annotationGPUUtil on a pod is the GPU utilisation, in percent, the
	// dcgm-exporter stand-in reports for each of its GPUs (default
	// trainingUtil): the simulator reads it wherever the pod runs.
	annotationGPUUtil = "demo.kubemedic.io/gpu-util"
)

// trainingUtil is the GPU utilisation, in percent, the dcgm-exporter
// stand-in reports for busy training pods.
const trainingUtil = 87

// notebookUtil is the utilisation of an idle notebook's GPU.
const notebookUtil = 0.5

// workloadsTimeout bounds the wait for the workloads' pods to run.
const workloadsTimeout = 60 * time.Second

// trainingName is the training Deployment that prefers node.
func trainingName(node string) string { return "train-" + node }

// inferenceName is the DRA node's inference Deployment.
func inferenceName(node string) string { return "infer-" + node }

// createWorkloads creates, for the real controllers and scheduler:
//
//   - on every device-plugin node, a 4-GPU training Deployment that prefers
//     that node (preferred node affinity on kubernetes.io/hostname): the
//     stories find it where they expect it, and after a drain the
//     scheduler places its replacement on another node with 4 GPUs free,
//     as it would in a cluster. A hard nodeSelector would keep the
//     replacement Pending until the node is uncordoned. It requires a node
//     of the device plugin (labelDevicePlugin=true): the DRA nodes advertise
//     nvidia.com/gpu too (see createNodes) and must not be given it twice.
//   - on every DRA node, an inference Deployment of 8 pods pinned there by
//     nodeSelector, each claiming one GPU through a ResourceClaim (the
//     exclusion story watches them).
//
// Owners are the researchers in turn (the kubemedic.io/owner annotation is
// their e-mail, which the Slack stand-in knows). The pods are busy on
// dcgm-exporter (annotationGPUUtil; the simulator sets their series where
// they run). waitWorkloads waits for them.
func (w *World) createWorkloads(ctx context.Context) error {
	if err := w.waitNodesSchedulable(ctx); err != nil {
		return err
	}
	i := 0
	for _, node := range w.Nodes {
		if slices.Contains(w.DRANodes, node) {
			continue
		}
		r := researchers[i%len(researchers)]
		i++
		if _, err := w.Cluster.CreateWorkload(ctx, localcluster.WorkloadSpec{
			Namespace: workloadNS, Name: trainingName(node), GPUs: 4,
			Affinity:    preferNode(node),
			Labels:      map[string]string{"app": "train"},
			Annotations: map[string]string{notify.AnnotationOwner: r.Email, annotationGPUUtil: strconv.Itoa(trainingUtil)},
		}); err != nil {
			return fmt.Errorf("create the training Deployment of %s: %w", node, err)
		}
	}
	for _, node := range w.DRANodes {
		if _, err := w.Cluster.CreateWorkload(ctx, localcluster.WorkloadSpec{
			Namespace: workloadNS, Name: inferenceName(node), Replicas: 8, GPUClaims: 1,
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Labels:       map[string]string{"app": "infer"},
			Annotations:  map[string]string{notify.AnnotationOwner: researchers[1].Email, annotationGPUUtil: strconv.Itoa(trainingUtil)},
		}); err != nil {
			return fmt.Errorf("create the inference Deployment of %s: %w", node, err)
		}
	}
	return nil
}

// preferNode is the affinity of a pod of the device plugin that prefers
// node.
func preferNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: labelDevicePlugin, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// waitNodesSchedulable waits until no node has the not-ready taint, which
// the API server gives every new node and the node-lifecycle controller
// lifts once kwok reports it Ready: before that the scheduler would place
// a training pod on another node than the one it prefers.
func (w *World) waitNodesSchedulable(ctx context.Context) error {
	var tainted []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, workloadsTimeout, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := w.Cluster.Client.List(ctx, &nodes); err != nil {
			return false, fmt.Errorf("list nodes: %w", err)
		}
		tainted = tainted[:0]
		for _, n := range nodes.Items {
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady {
					tainted = append(tainted, n.Name)
				}
			}
		}
		return len(tainted) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the node-lifecycle controller to lift %s from %v: %w", corev1.TaintNodeNotReady, tainted, err)
	}
	return nil
}

// waitWorkloads waits until every workload's pods run, each training pod
// on the node it prefers, and reports their GPUs on dcgm-exporter.
func (w *World) waitWorkloads(ctx context.Context) error {
	var problem string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, workloadsTimeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := w.Cluster.Client.List(ctx, &pods, client.InNamespace(workloadNS)); err != nil {
			return false, fmt.Errorf("list pods in %s: %w", workloadNS, err)
		}
		running := map[string]int{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			name := p.Labels[localcluster.LabelAppName]
			if p.Status.Phase != corev1.PodRunning {
				problem = fmt.Sprintf("pod %s is %s on %q: %s", p.Name, p.Status.Phase, p.Spec.NodeName, unschedulableMessage(&p))
				return false, nil
			}
			running[name]++
			if name == trainingName(p.Spec.NodeName) || slices.Contains(w.DRANodes, p.Spec.NodeName) {
				continue
			}
			// Placed before the scheduler saw its node: the stories would
			// not find it where they expect.
			return false, fmt.Errorf("pod %s/%s of %s was scheduled on %s, not on the node it prefers", p.Namespace, p.Name, name, p.Spec.NodeName)
		}
		for _, node := range w.Nodes {
			name, want := trainingName(node), 1
			if slices.Contains(w.DRANodes, node) {
				name, want = inferenceName(node), 8
			}
			if running[name] != want {
				problem = fmt.Sprintf("Deployment %s has %d pods running, want %d", name, running[name], want)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the workloads (%s): %w", problem, err)
	}
	w.syncGPUs(ctx)
	w.say("Each device-plugin node runs a 4-GPU training Deployment that prefers it, in namespace %s, owned by %s, %s or %s (kubemedic.io/owner); the ReplicaSet controller made the pods, kube-scheduler placed them",
		workloadNS, researchers[0].Email, researchers[1].Email, researchers[2].Email)
	for _, node := range w.DRANodes {
		w.say("%s runs Deployment %s/%s: 8 pods pinned to the node, one GPU each through a ResourceClaim", node, workloadNS, inferenceName(node))
	}
	return nil
}

// unschedulableMessage is the scheduler's reason for not placing pod, ""
// when it gave none.
func unschedulableMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

// Notebook is a Jupyter notebook the idle story starts.
type Notebook struct {
	Namespace, Deployment, Pod, Node string
	// Owner is the e-mail of its owner (kubemedic.io/owner), who answers
	// the janitor in Slack.
	Owner string `json:",omitempty"`
	// Waiting is the Deployment (namespace/name) whose pod waits, Pending,
	// for this notebook's GPU: it asks for one GPU more than the node has
	// free beside the notebook. Empty when none.
	Waiting string `json:",omitempty"`
}

// IdleNotebooks starts two Jupyter notebooks (Deployments of one pod with
// one GPU, pinned to a node) in the interactive namespace, on simulated
// device-plugin nodes with whole GPUs to spare, whose GPUs dcgm-exporter
// reports idle, owned by carol. Then, on the first notebook's node, a
// training Deployment of alice that needs the notebook's GPU too: its pod
// waits Pending until the janitor stops the notebook.
func (w *World) IdleNotebooks(ctx context.Context) ([]Notebook, error) {
	var nodes []string
	free := map[string]int64{}
	for _, name := range w.SimulatedNodes() {
		var n corev1.Node
		if err := w.Cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return nil, fmt.Errorf("get node %s: %w", name, err)
		}
		if n.Labels[labelDevicePlugin] != "true" || n.Labels[localcluster.LabelMIGStrategy] != "" || n.Spec.Unschedulable {
			continue
		}
		f, err := w.freeGPUs(ctx, &n)
		if err != nil {
			return nil, err
		}
		if f >= 2 {
			free[name] = f
			nodes = append(nodes, name)
		}
	}
	if len(nodes) < 2 {
		return nil, fmt.Errorf("the idle story needs two schedulable simulated nodes with 2 whole GPUs free, the demo has %d", len(nodes))
	}
	seq := w.next()
	var out []Notebook
	for i, node := range nodes[:2] {
		name := fmt.Sprintf("notebook-%d-%d", seq, i+1)
		// Pinned: the story needs the node, for the pod that waits for
		// this GPU.
		if _, err := w.Cluster.CreateWorkload(ctx, localcluster.WorkloadSpec{
			Namespace: notebookNS, Name: name, GPUs: 1,
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Labels:       map[string]string{"app": "jupyter"},
			Annotations:  map[string]string{notify.AnnotationOwner: researchers[2].Email, annotationGPUUtil: strconv.FormatFloat(notebookUtil, 'f', -1, 64)},
		}); err != nil {
			return nil, fmt.Errorf("create notebook %s/%s on %s: %w", notebookNS, name, node, err)
		}
		pod, err := w.waitPodRunning(ctx, notebookNS, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Notebook{Namespace: notebookNS, Deployment: name, Pod: pod.Name, Node: node, Owner: researchers[2].Email})
	}
	// Created once the notebook holds its GPU: it asks for every GPU free
	// before the notebook came.
	queue := fmt.Sprintf("train-queue-%d", seq)
	if _, err := w.Cluster.CreateWorkload(ctx, localcluster.WorkloadSpec{
		Namespace: workloadNS, Name: queue, GPUs: int(free[out[0].Node]),
		NodeSelector: map[string]string{corev1.LabelHostname: out[0].Node},
		Labels:       map[string]string{"app": "train"},
		Annotations:  map[string]string{notify.AnnotationOwner: researchers[0].Email, annotationGPUUtil: strconv.Itoa(trainingUtil)},
	}); err != nil {
		return nil, fmt.Errorf("create the training Deployment %s/%s on %s: %w", workloadNS, queue, out[0].Node, err)
	}
	out[0].Waiting = workloadNS + "/" + queue
	return out, nil
}

// freeGPUs is node's allocatable whole GPUs less those its pods request.
func (w *World) freeGPUs(ctx context.Context, n *corev1.Node) (int64, error) {
	var pods corev1.PodList
	if err := w.Cluster.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return 0, fmt.Errorf("list the pods of node %s: %w", n.Name, err)
	}
	alloc := n.Status.Allocatable[gpuResource]
	free := alloc.Value()
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[gpuResource]
			free -= q.Value()
		}
	}
	return free, nil
}

// waitPodRunning waits for the one pod of Deployment name to run, and
// returns it.
func (w *World) waitPodRunning(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var found *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, workloadsTimeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := w.Cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{localcluster.LabelAppName: name}); err != nil {
			return false, fmt.Errorf("list the pods of %s/%s: %w", ns, name, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				found = p
				return true, nil
			}
			last = fmt.Sprintf("pod %s is %s: %s", p.Name, p.Status.Phase, unschedulableMessage(p))
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for the pod of %s/%s to run (%s): %w", ns, name, last, err)
	}
	return found, nil
}
