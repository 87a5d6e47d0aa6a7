package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/evidence"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// operationPod reads the operation's pod; nil when it was not created yet
// or is gone (deleted by a reboot, say). It is the one the status records,
// once recorded: a pod made by a release that named pods otherwise is
// still found.
func (r *OperationReconciler) operationPod(ctx context.Context, op *v1alpha1.NodeOperation) (*corev1.Pod, error) {
	if name := op.Status.PodName; name != "" {
		return r.podNamed(ctx, name, true)
	}
	return r.podNamed(ctx, plan.OperationPodName(op), false)
}

// capturePod reads the operation's capture pod; nil when it was not
// created yet or is gone. As for operationPod, the status's name first.
func (r *OperationReconciler) capturePod(ctx context.Context, op *v1alpha1.NodeOperation) (*corev1.Pod, error) {
	if d := op.Status.Diagnostics; d != nil && d.PodName != "" {
		return r.podNamed(ctx, d.PodName, true)
	}
	return r.podNamed(ctx, plan.CapturePodName(op), false)
}

// evidence is the keeper of the operation's diagnostics: r.Evidence, or,
// for a reconciler built without one (by hand, in a test), one that has
// no store, as when none is configured.
func (r *OperationReconciler) evidence() *evidence.Keeper {
	if r.Evidence != nil {
		return r.Evidence
	}
	return &evidence.Keeper{Client: r.Client, Reader: r.Reader, Clock: r.Clock, Namespace: r.Namespace}
}

// podNamed reads a pod of the operation from the cache, and from the API
// server when it was created (it may be too new for the cache); nil when
// it does not exist.
func (r *OperationReconciler) podNamed(ctx context.Context, name string, created bool) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: name}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, key, pod)
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get operation pod %s: %w", key, err)
	}
	if !created {
		return nil, nil
	}
	// Created before: too new for the cache, or gone.
	if err := r.Reader.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get operation pod %s: %w", key, err)
	}
	return pod, nil
}
