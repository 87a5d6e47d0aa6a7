package plan

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Label values of nvidia.com/mig.strategy under which the whole-GPU count of
// nvidia.com/gpu.count no longer equals the nvidia.com/gpu resource.
const migStrategyMixed = "mixed"

// Verification is whether a node passed the checks after an operation.
type Verification struct {
	OK bool
	// Message says what passed, or the first check that did not.
	Message string
	// Next is when the answer changes with nothing else changing: when the
	// condition will have been healthy for healthyFor.
	Next time.Time
}

// Verify checks a node after an operation, before it is uncordoned:
//   - the node is Ready;
//   - the trigger condition is present and not in its unhealthy status, and
//     has stayed so for healthyFor (zero skips this check); a condition that
//     is missing is not evidence of health;
//   - every nvidia.com/ resource is fully allocatable (the device plugin
//     counts unhealthy GPUs in capacity but not in allocatable), and, on a
//     node that is not MIG-mixed, nvidia.com/gpu is back to the
//     nvidia.com/gpu.count label.
func Verify(op *v1alpha1.NodeOperation, n *corev1.Node, now time.Time) Verification {
	if !nodeReady(n) {
		return Verification{Message: fmt.Sprintf("node %s is not Ready", n.Name)}
	}
	var passed []string
	healthyFor := time.Duration(0)
	if op.Spec.HealthyFor != nil {
		healthyFor = op.Spec.HealthyFor.Duration
	}
	if t := op.Spec.Trigger; t != nil && healthyFor > 0 {
		var c *corev1.NodeCondition
		for i := range n.Status.Conditions {
			if string(n.Status.Conditions[i].Type) == t.Type {
				c = &n.Status.Conditions[i]
			}
		}
		switch {
		case c == nil:
			return Verification{Message: fmt.Sprintf("condition %s is not reported on the node", t.Type)}
		case c.Status == t.Status:
			reason := v1alpha1.EffectiveReason(string(c.Type), c.Reason, c.Message)
			return Verification{Message: fmt.Sprintf("condition %s is still %s (%s): %s", c.Type, c.Status, reason, c.Message)}
		case c.Status == corev1.ConditionUnknown:
			return Verification{Message: fmt.Sprintf("condition %s is Unknown: %s", c.Type, c.Message)}
		}
		if until := c.LastTransitionTime.Add(healthyFor); now.Before(until) {
			return Verification{Next: until, Message: fmt.Sprintf("condition %s is %s since %s; waiting until %s (healthyFor %s)",
				c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), healthyFor)}
		}
		passed = append(passed, fmt.Sprintf("%s=%s for %s", c.Type, c.Status, healthyFor))
	}
	if msg := driverAsks(op, n); msg != "" {
		return Verification{Message: msg}
	}
	if msg := gpusShort(n); msg != "" {
		return Verification{Message: msg}
	}
	passed = append(passed, "GPUs fully allocatable")
	return Verification{OK: true, Message: "node Ready, " + strings.Join(passed, ", ")}
}

// gpuConditions are the detector conditions about a GPU: an operation they
// trigger has repaired a GPU, which the driver must agree with.
var gpuConditions = map[string]bool{
	v1alpha1.ConditionGPULost: true, v1alpha1.ConditionGPUXidError: true,
	v1alpha1.ConditionGPUMemoryUnhealthy: true, v1alpha1.ConditionGPURecoveryRequired: true,
}

// driverAsks says why a GPU repair is not verified while the driver still
// asks for a recovery action (GPURecoveryRequired True or Unknown), or ""
// when it asks none or the node does not report it. An Xid line can clear
// with a reset while the driver still wants a reboot; uncordoning then
// would hand the GPU back too early.
func driverAsks(op *v1alpha1.NodeOperation, n *corev1.Node) string {
	if op.Spec.Trigger == nil || !gpuConditions[op.Spec.Trigger.Type] {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if string(c.Type) != v1alpha1.ConditionGPURecoveryRequired || c.Status == corev1.ConditionFalse {
			continue
		}
		reason := v1alpha1.EffectiveReason(string(c.Type), c.Reason, c.Message)
		return fmt.Sprintf("the driver still asks for recovery: %s is %s (%s): %s", c.Type, c.Status, reason, c.Message)
	}
	return ""
}

// gpusShort says which GPU resource is short, or "" when none is.
func gpusShort(n *corev1.Node) string {
	for name, capacity := range n.Status.Capacity {
		if !strings.HasPrefix(string(name), "nvidia.com/") {
			continue
		}
		alloc := n.Status.Allocatable[name]
		if alloc.Cmp(capacity) < 0 {
			return fmt.Sprintf("%s: %s of %s allocatable", name, alloc.String(), capacity.String())
		}
	}
	want, ok := n.Labels["nvidia.com/gpu.count"]
	if !ok || n.Labels["nvidia.com/mig.strategy"] == migStrategyMixed {
		return ""
	}
	wantQ, err := resource.ParseQuantity(want)
	if err != nil {
		return fmt.Sprintf("label nvidia.com/gpu.count=%q is not a number", want)
	}
	alloc := n.Status.Allocatable["nvidia.com/gpu"]
	if alloc.Cmp(wantQ) < 0 {
		return fmt.Sprintf("nvidia.com/gpu: %s allocatable, nvidia.com/gpu.count says %s", alloc.String(), want)
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool { return nodeReady(n) }
