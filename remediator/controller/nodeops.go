package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// cordon marks the node unschedulable for the operation and records that
// kubemedic did it. node is the node as plan.Advance saw it, read from the
// API server: the patch carries its resourceVersion, so a human cordon
// made since then fails it with a conflict and the next pass decides again.
func (r *OperationReconciler) cordon(ctx context.Context, node *corev1.Node, opName string) error {
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": node.ResourceVersion,
			"annotations":     map[string]any{v1alpha1.AnnotationCordonedBy: opName},
		},
		"spec": map[string]any{"unschedulable": true},
	}
	if err := r.patchNode(ctx, node.Name, patch); err != nil {
		return fmt.Errorf("cordon node %s: %w", node.Name, err)
	}
	return nil
}

// uncordon undoes the operation's own cordon. It leaves the node alone when
// someone else cordoned it, another operation holds it, or it is quarantined.
func (r *OperationReconciler) uncordon(ctx context.Context, nodeName, opName string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get node %s: %w", nodeName, err)
		}
		if node.Annotations[v1alpha1.AnnotationCordonedBy] != opName || hasQuarantineTaint(node) {
			return nil
		}
		patch := map[string]any{
			"metadata": map[string]any{
				"resourceVersion": node.ResourceVersion,
				"annotations":     map[string]any{v1alpha1.AnnotationCordonedBy: nil},
			},
			"spec": map[string]any{"unschedulable": false},
		}
		if err := r.patchNode(ctx, nodeName, patch); err != nil {
			return fmt.Errorf("uncordon node %s: %w", nodeName, err)
		}
		return nil
	})
}

// quarantine cordons the node and taints it kubemedic.io/quarantined, so that
// nothing new lands on it until a human has looked.
func (r *OperationReconciler) quarantine(ctx context.Context, nodeName, opName string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get node %s: %w", nodeName, err)
		}
		if hasQuarantineTaint(node) && node.Spec.Unschedulable {
			return nil
		}
		if !node.Spec.Unschedulable || node.Annotations[v1alpha1.AnnotationCordonedBy] != "" {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[v1alpha1.AnnotationCordonedBy] = opName
		}
		node.Spec.Unschedulable = true
		if !hasQuarantineTaint(node) {
			now := metav1.NewTime(r.Clock.Now())
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{
				Key: v1alpha1.TaintQuarantined, Value: plan.LabelValue(opName), Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now,
			})
		}
		if err := r.Client.Update(ctx, node); err != nil {
			return fmt.Errorf("quarantine node %s: %w", nodeName, err)
		}
		return nil
	})
}

func (r *OperationReconciler) patchNode(ctx context.Context, name string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	node.Name = name
	return r.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, data))
}

func hasQuarantineTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintQuarantined {
			return true
		}
	}
	return false
}
