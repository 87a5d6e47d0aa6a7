package localcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FinishPod ends a Running pod as the kubelet reports a finished
// container, with msg as its termination message, reading it again on a
// conflict (kwok writes its status too): the demo's simulator and the
// tests play operation and capture pods on simulated nodes with it.
func FinishPod(ctx context.Context, c client.Client, p *corev1.Pod, ok bool, msg string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		if cur.UID != p.UID || cur.Status.Phase != corev1.PodRunning {
			return nil // gone, replaced or ended meanwhile
		}
		return c.Status().Update(ctx, endedPod(&cur, ok, msg))
	})
}

// endedPod is p with its containers terminated: exit 0 and Succeeded, or
// exit 1 and Failed, with msg as the termination message.
func endedPod(p *corev1.Pod, ok bool, msg string) *corev1.Pod {
	phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
	if !ok {
		phase, code, reason = corev1.PodFailed, 1, "Error"
	}
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = phase
	p.Status.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now}},
		})
	}
	return p
}
