package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestVerify(t *testing.T) {
	// The operation was triggered by GPUXidError=True and wants the
	// condition False for 2m.
	xidOp := func(opts ...opOpt) *v1alpha1.NodeOperation {
		o := op("gpu.a.e-0", "a", of("gpu", "e", 0), phase(v1alpha1.PhaseVerifying), func(o *v1alpha1.NodeOperation) {
			o.Spec.HealthyFor = dur(2 * time.Minute)
			o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonXidRebootRequired, Message: xidMessage, LastTransitionTime: metav1.NewTime(ago(time.Hour))}
		})
		for _, f := range opts {
			f(o)
		}
		return o
	}
	healthyFor := func(d *metav1.Duration) opOpt {
		return func(o *v1alpha1.NodeOperation) { o.Spec.HealthyFor = d }
	}
	xidClear := func(since time.Time) nodeOpt {
		return cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, v1alpha1.DetectReason, "no Xid requiring action", since)
	}
	resources := func(capacity, allocatable corev1.ResourceList) nodeOpt {
		return func(n *corev1.Node) { n.Status.Capacity, n.Status.Allocatable = capacity, allocatable }
	}
	q := resource.MustParse

	for _, tc := range []struct {
		desc    string
		op      *v1alpha1.NodeOperation
		node    *corev1.Node
		ok      bool
		unknown bool
		message string // substring
		next    time.Time
	}{
		{desc: "healthy for healthyFor, GPUs complete: verified", op: xidOp(),
			node: node("a", xidClear(ago(5*time.Minute)), gpus(8, 8), labeled("nvidia.com/gpu.count", "8")),
			ok:   true, message: "node Ready, GPUXidError=False for 2m0s, GPUs fully allocatable"},
		{desc: "healthy for exactly healthyFor: verified", op: xidOp(), node: node("a", xidClear(ago(2*time.Minute))), ok: true},

		// Ready.
		{desc: "the node is not Ready", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), notReady), message: "node a is not Ready"},
		{desc: "Ready Unknown is not Ready", op: xidOp(),
			node:    node("a", xidClear(ago(time.Hour)), cond(string(corev1.NodeReady), corev1.ConditionUnknown, "NodeStatusUnknown", "", ago(time.Minute))),
			message: "not Ready"},
		{desc: "a node without a Ready condition is not Ready", op: xidOp(),
			node: func() *corev1.Node {
				n := node("a", xidClear(ago(time.Hour)))
				n.Status.Conditions = n.Status.Conditions[1:]
				return n
			}(),
			message: "not Ready"},

		// The driver's own verdict (issue 19): a GPU repair is verified only
		// once the driver asks no recovery.
		{desc: "the Xid cleared but the driver still asks for a reboot", op: xidOp(),
			node: node("a", xidClear(ago(5*time.Minute)), cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionTrue, v1alpha1.DetectReason,
				"RebootRequired: driver asks to reboot the node: node reboot on 0000:3b:00.0", ago(time.Minute))),
			message: "the driver still asks for recovery: GPURecoveryRequired is True (RebootRequired)"},
		{desc: "the driver's action unreadable is not evidence it asks none", op: xidOp(),
			node: node("a", xidClear(ago(5*time.Minute)), cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionUnknown, v1alpha1.DetectReason,
				"cannot read the recovery action of 0000:3b:00.0: GPU is lost", ago(time.Minute))),
			message: "GPURecoveryRequired is Unknown"},
		{desc: "the driver asks nothing: verified", op: xidOp(),
			node: node("a", xidClear(ago(5*time.Minute)), cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionFalse, "GPURecoveryNotRequired", "", ago(time.Minute))),
			ok:   true},
		{desc: "a repair not about a GPU does not wait for the GPU driver", node: node("a",
			cond(v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionFalse, "NFSMountsHealthy", "", ago(time.Hour)),
			cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionTrue, v1alpha1.DetectReason, "ResetRequired: x on 0000:3b:00.0", ago(time.Minute))),
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionNFSMountUnhealthy, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonMountHung}
			}), ok: true},

		// The trigger condition.
		{desc: "the trigger condition is still True", op: xidOp(), node: node("a", xid(ago(time.Hour))),
			message: "condition GPUXidError is still True (XidRebootRequired): " + xidMessage},
		{desc: "the trigger condition is missing: not evidence of health", op: xidOp(), node: node("a"),
			message: "condition GPUXidError is not reported on the node"},
		{desc: "the trigger condition is Unknown", op: xidOp(),
			node:    node("a", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionUnknown, "NoData", "detector did not report", ago(time.Hour))),
			message: "condition GPUXidError is Unknown: detector did not report"},
		{desc: "healthy, but not for healthyFor yet: Next when it will have been", op: xidOp(), node: node("a", xidClear(ago(30*time.Second))),
			message: "waiting until 2026-03-04T12:01:30Z (healthyFor 2m0s)", next: now.Add(90 * time.Second)},
		{desc: "a longer healthyFor", op: xidOp(healthyFor(dur(10 * time.Minute))), node: node("a", xidClear(ago(5*time.Minute))),
			next: now.Add(5 * time.Minute)},
		{desc: "healthyFor 0 skips the condition check", op: xidOp(healthyFor(dur(0))), node: node("a", xid(ago(time.Hour))),
			ok: true, message: "node Ready, GPUs fully allocatable"},
		{desc: "no healthyFor (a manual operation) skips the condition check", op: xidOp(healthyFor(nil)), node: node("a"), ok: true},
		{desc: "no trigger (a manual operation) skips the condition check",
			op: xidOp(func(o *v1alpha1.NodeOperation) { o.Spec.Trigger = nil }), node: node("a", xid(ago(time.Hour))), ok: true},
		{desc: "a trigger on Ready=False is healthy once Ready is True",
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: string(corev1.NodeReady), Status: corev1.ConditionFalse}
			}),
			node: node("a"), ok: true, message: "Ready=True for 2m0s"},
		{desc: "a trigger on Ready=False, Ready again for less than healthyFor",
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: string(corev1.NodeReady), Status: corev1.ConditionFalse}
			}),
			node: node("a", cond(string(corev1.NodeReady), corev1.ConditionTrue, "KubeletReady", "", ago(time.Minute))), next: now.Add(time.Minute)},

		// GPUs.
		{desc: "a GPU the device plugin marked unhealthy: allocatable below capacity", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), gpus(8, 7)), message: "nvidia.com/gpu: 7 of 8 allocatable"},
		{desc: "a MIG resource short counts too", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), resources(
				corev1.ResourceList{"nvidia.com/mig-1g.10gb": q("7"), "nvidia.com/gpu": q("0")},
				corev1.ResourceList{"nvidia.com/mig-1g.10gb": q("6"), "nvidia.com/gpu": q("0")})),
			message: "nvidia.com/mig-1g.10gb: 6 of 7 allocatable"},
		{desc: "a capacity with no allocatable entry at all is short", op: xidOp(),
			node:    node("a", xidClear(ago(time.Hour)), resources(corev1.ResourceList{"nvidia.com/gpu": q("8")}, corev1.ResourceList{})),
			message: "nvidia.com/gpu: 0 of 8 allocatable"},
		{desc: "other resources below capacity do not matter", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), resources(
				corev1.ResourceList{corev1.ResourceCPU: q("64"), corev1.ResourceMemory: q("512Gi"), "nvidia.com/gpu": q("8")},
				corev1.ResourceList{corev1.ResourceCPU: q("63500m"), corev1.ResourceMemory: q("500Gi"), "nvidia.com/gpu": q("8")})),
			ok: true},

		// GPU evidence: after a GPU operation, a node that shows no GPU at
		// all is Unknown, never verified.
		{desc: "a GPU repair on a node without GPU resources or count label: Unknown", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), noGPUs),
			unknown: true, message: "node a shows no GPUs: no nvidia.com/* capacity or allocatable and no nvidia.com/gpu.count label, so the GPU repair cannot be verified"},
		{desc: "no GPU evidence is Unknown even with the trigger still True", op: xidOp(), node: node("a", xid(ago(time.Hour)), noGPUs),
			unknown: true, message: "node a shows no GPUs"},
		{desc: "no GPU evidence and no healthyFor: still Unknown", op: xidOp(healthyFor(nil)), node: node("a", noGPUs),
			unknown: true, message: "node a shows no GPUs"},
		{desc: "other resources are no GPU evidence", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), resources(
			corev1.ResourceList{corev1.ResourceCPU: q("64"), "amd.com/gpu": q("8")}, corev1.ResourceList{corev1.ResourceCPU: q("64"), "amd.com/gpu": q("8")})),
			unknown: true, message: "node a shows no GPUs"},
		{desc: "the count label alone is evidence (and then the GPUs are short)", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), noGPUs, labeled("nvidia.com/gpu.count", "8")),
			message: "nvidia.com/gpu: 0 allocatable, nvidia.com/gpu.count says 8"},
		{desc: "MIG devices alone are evidence", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), resources(
			corev1.ResourceList{"nvidia.com/mig-3g.40gb": q("16")}, corev1.ResourceList{"nvidia.com/mig-3g.40gb": q("16")})), ok: true},
		{desc: "an allocatable nvidia.com/gpu without capacity is evidence", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), resources(nil, corev1.ResourceList{"nvidia.com/gpu": q("8")})), ok: true},
		{desc: "a repair of the GPU stack (GPUAllocatableMismatch) needs GPU evidence too", node: node("a", noGPUs,
			cond(v1alpha1.ConditionGPUAllocatableMismatch, corev1.ConditionFalse, v1alpha1.ReasonAllocatableMatches, "", ago(time.Hour))),
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUAllocatableMismatch, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonAllocatableBelowHardware}
			}), unknown: true, message: "node a shows no GPUs"},
		{desc: "an operation that recorded its target GPU is a GPU repair, trigger or not", node: node("a", noGPUs),
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = nil
				o.Status.GPU = &v1alpha1.GPUTarget{UUID: "GPU-5b6c1a2e-0000-4000-8000-000000000001", BusID: "0000:3b:00.0"}
			}), unknown: true, message: "node a shows no GPUs"},
		{desc: "a repair not about GPUs verifies a node without GPUs", node: node("a", noGPUs,
			cond(v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionFalse, "NFSMountsHealthy", "", ago(time.Hour))),
			op: xidOp(func(o *v1alpha1.NodeOperation) {
				o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionNFSMountUnhealthy, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonMountHung}
			}), ok: true, message: "node Ready, NFSMountUnhealthy=False for 2m0s, GPUs fully allocatable"},
		{desc: "a manual operation without trigger or GPU verifies a node without GPUs",
			op: xidOp(func(o *v1alpha1.NodeOperation) { o.Spec.Trigger = nil }), node: node("a", noGPUs), ok: true},
		{desc: "Ready is checked before the GPU evidence", op: xidOp(), node: node("a", noGPUs, notReady), message: "node a is not Ready"},
		{desc: "fewer GPUs than the nvidia.com/gpu.count label, although all allocatable", op: xidOp(),
			node:    node("a", xidClear(ago(time.Hour)), gpus(7, 7), labeled("nvidia.com/gpu.count", "8")),
			message: "nvidia.com/gpu: 7 allocatable, nvidia.com/gpu.count says 8"},
		{desc: "as many GPUs as the label says", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), gpus(8, 8), labeled("nvidia.com/gpu.count", "8")), ok: true},
		{desc: "the label and no GPU resource at all", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), noGPUs, labeled("nvidia.com/gpu.count", "8")),
			message: "nvidia.com/gpu: 0 allocatable, nvidia.com/gpu.count says 8"},
		{desc: "MIG mixed: the gpu.count label is not compared with nvidia.com/gpu", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), gpus(0, 0), labeled("nvidia.com/gpu.count", "8", "nvidia.com/mig.strategy", "mixed")), ok: true},
		{desc: "MIG mixed still needs every MIG device allocatable", op: xidOp(),
			node: node("a", xidClear(ago(time.Hour)), labeled("nvidia.com/gpu.count", "8", "nvidia.com/mig.strategy", "mixed"), resources(
				corev1.ResourceList{"nvidia.com/mig-3g.40gb": q("16")}, corev1.ResourceList{"nvidia.com/mig-3g.40gb": q("15")})),
			message: "nvidia.com/mig-3g.40gb: 15 of 16 allocatable"},
		{desc: "MIG single: the label is compared", op: xidOp(),
			node:    node("a", xidClear(ago(time.Hour)), gpus(6, 6), labeled("nvidia.com/gpu.count", "8", "nvidia.com/mig.strategy", "single")),
			message: "nvidia.com/gpu.count says 8"},
		{desc: "a gpu.count label that is not a number", op: xidOp(), node: node("a", xidClear(ago(time.Hour)), gpus(8, 8), labeled("nvidia.com/gpu.count", "eight")),
			message: `label nvidia.com/gpu.count="eight" is not a number`},
		{desc: "the condition is checked before the GPUs", op: xidOp(), node: node("a", xid(ago(time.Hour)), gpus(8, 7)), message: "still True"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := tc.node.DeepCopy()
			v := Verify(tc.op, tc.node, now)
			require.Equal(t, tc.ok, v.OK, v.Message)
			require.Equal(t, tc.unknown, v.Unknown, v.Message)
			require.False(t, v.OK && v.Unknown, "Unknown is never a pass")
			require.NotEmpty(t, v.Message)
			require.Contains(t, v.Message, tc.message)
			require.Equal(t, tc.next, v.Next, "next")
			require.Equal(t, before, tc.node, "Verify changed the node")
		})
	}
}

func TestNodeReady(t *testing.T) {
	require.True(t, NodeReady(node("a")))
	require.False(t, NodeReady(node("a", notReady)))
}
