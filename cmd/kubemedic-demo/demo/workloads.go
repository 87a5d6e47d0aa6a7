package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
)

// gpuResource is the device plugin's resource of whole GPUs.
const gpuResource = corev1.ResourceName("nvidia.com/gpu")

// trainingUtil is the GPU utilisation, in percent, the dcgm-exporter
// stand-in reports for busy training pods.
const trainingUtil = 87

// createWorkloads runs one training pod with 4 GPUs on every node (a
// Deployment's: kwok would complete a Job's pod), owned by the researchers in
// turn (the kubemedic.io/owner annotation is
// their e-mail, which the Slack stand-in knows), busy on dcgm-exporter.
func (w *World) createWorkloads(ctx context.Context) error {
	for i, node := range w.Nodes {
		r := researchers[i%len(researchers)]
		pod, err := w.Cluster.CreatePod(ctx, localcluster.PodSpec{
			Namespace: workloadNS, NodeName: node, GPUs: 4,
			Owner: localcluster.OwnerDeployment, OwnerName: fmt.Sprintf("train-%s", node),
			Annotations: map[string]string{notify.AnnotationOwner: r.Email},
		})
		if err != nil {
			return fmt.Errorf("create the training pod on %s: %w", node, err)
		}
		w.setUtil(pod.Namespace, pod.Name, node, 0, 4, trainingUtil)
	}
	w.say("Each node runs a 4-GPU training Deployment in namespace %s, owned by %s, %s or %s (kubemedic.io/owner)",
		workloadNS, researchers[0].Email, researchers[1].Email, researchers[2].Email)
	return nil
}

// setUtil reports GPUs first..first+n-1 of node, held by the pod, at util
// percent on dcgm-exporter.
func (w *World) setUtil(namespace, pod, node string, first, n int, util float64) {
	for g := first; g < first+n; g++ {
		w.DCGM.Set(localcluster.DCGMSeries{Namespace: namespace, Pod: pod, Container: "main", Hostname: node,
			UUID: gpuUUID(node, g), GPU: g}, util)
	}
}

// Notebook is a Jupyter notebook the idle story starts.
type Notebook struct {
	Namespace, Deployment, Pod, Node string
}

// IdleNotebooks starts two Jupyter notebooks (Deployments with one GPU) in
// the interactive namespace, on simulated nodes with whole GPUs to spare,
// whose GPUs dcgm-exporter reports idle, owned by carol.
func (w *World) IdleNotebooks(ctx context.Context) ([]Notebook, error) {
	var nodes []string
	for _, name := range w.SimulatedNodes() {
		var n corev1.Node
		if err := w.Cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return nil, fmt.Errorf("get node %s: %w", name, err)
		}
		// The training pod holds 4 whole GPUs; MIG nodes have only 4.
		if q := n.Status.Allocatable[gpuResource]; q.Value() > 4 && n.Labels[localcluster.LabelMIGStrategy] == "" && !n.Spec.Unschedulable {
			nodes = append(nodes, name)
		}
	}
	if len(nodes) < 2 {
		return nil, fmt.Errorf("the idle story needs two schedulable simulated nodes with more than 4 whole GPUs, the demo has %d", len(nodes))
	}
	seq := w.next()
	var out []Notebook
	for i, node := range nodes[:2] {
		name := fmt.Sprintf("notebook-%d-%d", seq, i+1)
		pod, err := w.Cluster.CreatePod(ctx, localcluster.PodSpec{
			Namespace: notebookNS, NodeName: node, GPUs: 1, Owner: localcluster.OwnerDeployment, OwnerName: name,
			Labels:      map[string]string{"app": "jupyter"},
			Annotations: map[string]string{notify.AnnotationOwner: researchers[2].Email},
		})
		if err != nil {
			return nil, fmt.Errorf("create notebook %s/%s on %s: %w", notebookNS, name, node, err)
		}
		w.setUtil(pod.Namespace, pod.Name, node, 4, 1, 0.5) // GPUs 0-3 are the training pod's
		out = append(out, Notebook{Namespace: pod.Namespace, Deployment: name, Pod: pod.Name, Node: node})
	}
	return out, nil
}
