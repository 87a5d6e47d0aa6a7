package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
)

// trainingUtil is the GPU utilisation, in percent, the dcgm-exporter
// stand-in reports for busy training pods.
const trainingUtil = 87

// createWorkloads runs one training pod (a Deployment; kwok would complete a Job's pod) with 4 GPUs on every node,
// owned by the researchers in turn (the kubemedic.io/owner annotation is
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

// IdleNotebooks starts two Jupyter notebooks (Deployments with one GPU) in
// the interactive namespace whose GPUs dcgm-exporter reports idle, owned
// by carol, and returns their pod names.
func (w *World) IdleNotebooks(ctx context.Context) ([]string, error) {
	var names []string
	for i, node := range w.SimulatedNodes()[:2] {
		name := fmt.Sprintf("notebook-%d-%d", time.Now().Unix()%100000, i)
		pod, err := w.Cluster.CreatePod(ctx, localcluster.PodSpec{
			Namespace: notebookNS, NodeName: node, GPUs: 1, Owner: localcluster.OwnerDeployment, OwnerName: name,
			Labels:      map[string]string{"app": "jupyter"},
			Annotations: map[string]string{notify.AnnotationOwner: researchers[2].Email},
		})
		if err != nil {
			return nil, err
		}
		w.setUtil(pod.Namespace, pod.Name, node, 4+i, 1, 0.5) // GPUs 0-3 are the training pod's
		names = append(names, pod.Namespace+"/"+pod.Name)
	}
	return names, nil
}
