package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/operationpod"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// The validation gate's side in the cluster: the test pods, and the node's
// GPUValidationFailed condition.

// validatePods reads the operation's test pods of both attempts that
// exist.
func (r *OperationReconciler) validatePods(ctx context.Context, op *v1alpha1.NodeOperation) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for attempt := int32(1); attempt <= 2; attempt++ {
		name := plan.ValidationPodName(op, attempt)
		created := false
		if st := op.Status.Validation; st != nil {
			created = st.Attempt > attempt || (st.Attempt == attempt && st.PodName == name)
		}
		pod, err := r.podNamed(ctx, name, created)
		if err != nil {
			return nil, err
		}
		if pod != nil {
			out = append(out, pod)
		}
	}
	return out, nil
}

// buildValidationPod is the test pod: the validation template's container
// bound to the node (past its cordon, as every operation pod), asking for
// every GPU the node has allocatable (plan.ValidationResources). The
// kubelet admits it only when none of them is held: a GPU still in use is
// no answer, never a test of fewer GPUs. Its report is the termination
// message.
func buildValidationPod(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string, node *corev1.Node) *corev1.Pod {
	pod := operationpod.Build(op, tpl, ns)
	pod.Name = op.Status.Validation.PodName
	pod.Labels["app.kubernetes.io/name"] = "kubemedic-validation"
	c := &pod.Spec.Containers[0]
	c.Name = "validate"
	// The report, never the log's tail: a pod that wrote none left no
	// answer.
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	// Copies: the template's own lists are not to be changed.
	c.Resources.Requests, c.Resources.Limits = c.Resources.Requests.DeepCopy(), c.Resources.Limits.DeepCopy()
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	for name, q := range plan.ValidationResources(node) {
		// Extended resources: the request equals the limit.
		c.Resources.Requests[name], c.Resources.Limits[name] = q, q
	}
	return pod
}

// createValidationPod creates the attempt's test pod.
func (r *OperationReconciler) createValidationPod(ctx context.Context, op *v1alpha1.NodeOperation, t *plan.Transition, st *step) error {
	tmp := &v1alpha1.NodeOperation{ObjectMeta: op.ObjectMeta, Spec: op.Spec, Status: t.Status}
	pod := buildValidationPod(tmp, st.in.ValidateTemplate, r.Namespace, st.in.Node)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create validation pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// deleteOtherValidationPods deletes the test pods other than the one the
// status names: a first attempt that gave no answer may still hold GPUs.
func (r *OperationReconciler) deleteOtherValidationPods(ctx context.Context, st *step, t *plan.Transition) error {
	keep := ""
	if v := t.Status.Validation; v != nil {
		keep = v.PodName
	}
	for _, p := range st.in.ValidatePods {
		if p.Name == keep || p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete validation pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// setValidationCondition writes the node's GPUValidationFailed condition.
func (r *OperationReconciler) setValidationCondition(ctx context.Context, nodeName string, v *plan.NodeValidation) error {
	return writeValidationCondition(ctx, r.Client, r.Reader, nodeName, v)
}

// writeValidationCondition writes the node's GPUValidationFailed
// condition, keeping its transition time when the status does not change.
// A node that is gone has no condition to write.
func writeValidationCondition(ctx context.Context, c client.Client, reader client.Reader, nodeName string, v *plan.NodeValidation) error {
	n := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: nodeName}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get node %s for its %s condition: %w", nodeName, v1alpha1.ConditionGPUValidationFailed, err)
	}
	cond, write := validationCondition(n, v)
	if !write {
		return nil
	}
	// A strategic merge on conditions, keyed by type: the kubelet's and
	// the detectors' conditions are left alone.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, n, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("set %s=%s on node %s: %w", cond.Type, cond.Status, nodeName, err)
	}
	return nil
}

// validationCondition is the GPUValidationFailed condition to write on n:
// its transition time kept when the status does not change; nothing to
// write for a pass on a node that never failed a test.
func validationCondition(n *corev1.Node, v *plan.NodeValidation) (corev1.NodeCondition, bool) {
	c := v.Condition()
	for _, old := range n.Status.Conditions {
		if string(old.Type) != v1alpha1.ConditionGPUValidationFailed {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		return c, true
	}
	return c, v.Failed
}
