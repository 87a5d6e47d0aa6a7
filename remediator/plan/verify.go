package plan

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The GPU Operator's labels and resources that verification reads: GPU
// feature discovery's count and MIG strategy, and the device plugin's
// resources, all named nvidia.com/... (stackhealth.LabelGPUCount and
// stackhealth.LabelMIGStrategy name the same labels; the planner may not
// import that package).
const (
	labelGPUCount    = "nvidia.com/gpu.count"
	labelMIGStrategy = "nvidia.com/mig.strategy"
	resourceGPU      = corev1.ResourceName("nvidia.com/gpu")
	// ResourceNVIDIAPrefix begins every GPU resource kubemedic reads from a
	// node's capacity and allocatable (nvidia.com/gpu, nvidia.com/mig-*);
	// the remediator's cache keeps no other.
	ResourceNVIDIAPrefix = "nvidia.com/"
)

// Label values of nvidia.com/mig.strategy under which the whole-GPU count of
// nvidia.com/gpu.count no longer equals the nvidia.com/gpu resource.
const migStrategyMixed = "mixed"

// Verification is whether a node passed the checks after an operation.
type Verification struct {
	OK bool
	// Unknown says that the evidence to decide is missing: not a pass, and
	// not a check that failed either. The operation waits for the evidence
	// as for any check, until its recovery timeout.
	Unknown bool
	// Message says what passed, or the first check that did not.
	Message string
	// Next is when the answer changes with nothing else changing: when the
	// condition will have been healthy for healthyFor.
	Next time.Time
}

// Verify checks a node after an operation, before it is uncordoned:
//   - the node is Ready;
//   - after a GPU operation (gpuOperation), the node shows GPUs at all: an
//     nvidia.com/ resource in capacity or allocatable, or the
//     nvidia.com/gpu.count label. Without either nothing says the GPUs are
//     back (a driver that did not load after a reboot leaves none), and the
//     result is Unknown, never a pass;
//   - the trigger condition is present and not in its unhealthy status, and
//     has stayed so for healthyFor (zero skips this check); a condition that
//     is missing is not evidence of health. GPUValidationFailed, which only
//     an active GPU test clears, is left to the step's test (Validating);
//   - every nvidia.com/ resource is fully allocatable (the device plugin
//     counts unhealthy GPUs in capacity but not in allocatable), and, on a
//     node that is not MIG-mixed, nvidia.com/gpu is back to the
//     nvidia.com/gpu.count label.
func Verify(op *v1alpha1.NodeOperation, n *corev1.Node, now time.Time) Verification {
	if !nodeReady(n) {
		return Verification{Message: fmt.Sprintf("node %s is not Ready", n.Name)}
	}
	if gpuOperation(op) && !gpuEvidence(n) {
		return Verification{Unknown: true, Message: fmt.Sprintf("node %s shows no GPUs: no %s* capacity or allocatable and no %s label, so the GPU repair cannot be verified",
			n.Name, ResourceNVIDIAPrefix, labelGPUCount)}
	}
	var passed []string
	healthyFor := time.Duration(0)
	if op.Spec.HealthyFor != nil {
		healthyFor = op.Spec.HealthyFor.Duration
	}
	if t := op.Spec.Trigger; t != nil && t.Type == v1alpha1.ConditionGPUValidationFailed {
		// The condition the test sets: only the step's own test clears it
		// (Validating), so it is not waited for here.
		passed = append(passed, t.Type+" left to the step's GPU test")
	} else if t != nil && healthyFor > 0 {
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

// gpuConditions are the conditions about a GPU (the detectors', and the
// active GPU test's GPUValidationFailed): an operation they trigger has
// repaired a GPU, which the driver must agree with.
var gpuConditions = map[string]bool{
	v1alpha1.ConditionGPULost: true, v1alpha1.ConditionGPUXidError: true,
	v1alpha1.ConditionGPUMemoryUnhealthy: true, v1alpha1.ConditionGPURecoveryRequired: true,
	v1alpha1.ConditionGPUValidationFailed: true,
}

// gpuStackConditions are the remediator's stack health conditions about
// the GPUs (policies/v1alpha1 stack_conditions.go): an operation they
// trigger repairs the GPU stack, which must show GPUs afterwards.
var gpuStackConditions = map[string]bool{
	v1alpha1.ConditionGPUAllocatableMismatch: true, v1alpha1.ConditionGPUStackPodNotReady: true,
	v1alpha1.ConditionMIGConfigFailed: true,
}

// gpuOperation says whether op repairs GPUs: its trigger is a detector or
// stack health condition about GPUs, or it recorded the GPU it targets.
func gpuOperation(op *v1alpha1.NodeOperation) bool {
	if op.Status.GPU != nil {
		return true
	}
	t := op.Spec.Trigger
	return t != nil && (gpuConditions[t.Type] || gpuStackConditions[t.Type])
}

// gpuEvidence says whether n shows GPUs: an nvidia.com/ resource in its
// capacity or allocatable (whole GPUs or MIG devices, even 0 of them: the
// device plugin registered), or GPU feature discovery's count label.
func gpuEvidence(n *corev1.Node) bool {
	if _, ok := n.Labels[labelGPUCount]; ok {
		return true
	}
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		for name := range l {
			if strings.HasPrefix(string(name), ResourceNVIDIAPrefix) {
				return true
			}
		}
	}
	return false
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
		if !strings.HasPrefix(string(name), ResourceNVIDIAPrefix) {
			continue
		}
		alloc := n.Status.Allocatable[name]
		if alloc.Cmp(capacity) < 0 {
			return fmt.Sprintf("%s: %s of %s allocatable", name, alloc.String(), capacity.String())
		}
	}
	want, ok := n.Labels[labelGPUCount]
	if !ok || n.Labels[labelMIGStrategy] == migStrategyMixed {
		return ""
	}
	wantQ, err := resource.ParseQuantity(want)
	if err != nil {
		return fmt.Sprintf("label %s=%q is not a number", labelGPUCount, want)
	}
	alloc := n.Status.Allocatable[resourceGPU]
	if alloc.Cmp(wantQ) < 0 {
		return fmt.Sprintf("%s: %s allocatable, %s says %s", resourceGPU, alloc.String(), labelGPUCount, want)
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
