package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// shippedPolicies compiles every RemediationPolicy in policies/examples.
func shippedPolicies(t *testing.T) []*Policy {
	t.Helper()
	docs, problems := policies.LoadFiles("../../policies/examples")
	require.Empty(t, problems)
	var out []*Policy
	for _, d := range docs {
		if p, ok := d.Object.(*v1alpha1.RemediationPolicy); ok {
			c, err := Compile(p)
			require.NoError(t, err, p.Name)
			out = append(out, c)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestShippedPoliciesOneLadderPerFault: when one event sets several
// conditions (the driver logs Xid 154 as its recovery action changes, so
// GPUXidError and GPURecoveryRequired rise together), the shipped policies'
// priorities give the node to exactly one policy, the one that covers the
// others, and only it creates an operation.
func TestShippedPoliciesOneLadderPerFault(t *testing.T) {
	all := shippedPolicies(t)
	held := ago(time.Hour)
	xidReset := cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidResetRequired: Xid 154 on 0000:3b:00.0: driver asks reset; reset required", held)
	xidReboot := cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidRebootRequired: Xid 154 on 0000:3b:00.0: driver asks reboot; reboot required", held)
	recovery := func(reason, action string) nodeOpt {
		return cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionTrue, v1alpha1.DetectReason,
			reason+": driver asks to "+action+" on 0000:3b:00.0 (GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)", held)
	}
	memory := func(reason string) nodeOpt {
		return cond(v1alpha1.ConditionGPUMemoryUnhealthy, corev1.ConditionTrue, v1alpha1.DetectReason,
			reason+": memory unrepairable on 0000:3b:00.0 (GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b); replace GPU", held)
	}
	gpuNode := labeled("nvidia.com/gpu.count", "8")
	for _, tc := range []struct {
		desc, want string
		node       *corev1.Node
	}{
		{"Xid 154 and the driver both ask a reset", "gpu-recovery-reset",
			node("n1", gpuNode, xidReset, recovery(v1alpha1.ReasonResetRequired, "reset the GPU: GPU reset"))},
		{"drain and reset with the Xid", "gpu-recovery-reset",
			node("n1", gpuNode, xidReset, recovery(v1alpha1.ReasonDrainAndReset, "drain and reset the GPU: drain and reset"))},
		{"Xid 154 and the driver both ask a reboot", "gpu-recovery-reboot",
			node("n1", gpuNode, xidReboot, recovery(v1alpha1.ReasonRebootRequired, "reboot the node: node reboot"))},
		{"the driver asks a reset, an Xid a reboot: the reboot covers it", "gpu-xid-reboot",
			node("n1", gpuNode, xidReboot, recovery(v1alpha1.ReasonResetRequired, "reset the GPU: GPU reset"))},
		{"the driver alone asks a reset (a GSP fault, the Xid line lost)", "gpu-recovery-reset",
			node("n1", gpuNode, recovery(v1alpha1.ReasonResetRequired, "reset the GPU: GPU reset"))},
		{"unrepairable memory with a reset asked: replace wins", "gpu-memory-replace",
			node("n1", gpuNode, memory(v1alpha1.ReasonUnrepairableMemory), recovery(v1alpha1.ReasonResetRequired, "reset the GPU: GPU reset"))},
		{"SRAM threshold: replace", "gpu-memory-replace", node("n1", gpuNode, memory(v1alpha1.ReasonSRAMThresholdExceeded))},
		{"a pending repair: the reset ladder", "gpu-memory-reset", node("n1", gpuNode, memory(v1alpha1.ReasonRepairPending))},
		{"the driver asks a bus reset: the reboot ladder", "gpu-recovery-reboot",
			node("n1", gpuNode, recovery(v1alpha1.ReasonBusResetRequired, "reset the GPU's PCIe bus: bus reset"))},
		{"Xid 154 bus reset and the driver's field: one reboot", "gpu-recovery-reboot",
			node("n1", gpuNode, xidReboot, recovery(v1alpha1.ReasonBusResetRequired, "reset the GPU's PCIe bus: bus reset"))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			win := Winner(all, tc.node, now)
			require.NotNil(t, win)
			require.Equal(t, tc.want, win.Name())
			var created []string
			for _, p := range all {
				plan := Evaluate(PolicyInput{Policy: p, Policies: all, Nodes: []*corev1.Node{tc.node},
					Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
				for _, op := range plan.Create {
					created = append(created, op.Spec.Policy+"/"+op.Spec.Step)
				}
			}
			require.Len(t, created, 1, "one ladder: %v", created)
			require.Equal(t, tc.want, created[0][:len(tc.want)])
		})
	}

	// The two checks run apart: the driver's condition may appear up to one
	// NPD interval (60s, deploy/npd/gpu-recovery.json) after the Xid's. When
	// gpu-xid's 2m have passed, the driver's policy has held its own "for"
	// already, and claims the node; a moment before, neither acts.
	for _, tc := range []struct {
		desc       string
		xid, drive time.Duration // how long each condition has been True
		want       string
	}{
		{"the Xid's for has passed; the driver's field appeared a minute later", 2 * time.Minute, time.Minute, "gpu-recovery-reset"},
		{"the driver's field first", 2 * time.Minute, 2*time.Minute + 30*time.Second, "gpu-recovery-reset"},
		{"only just seen, both", 20 * time.Second, 20 * time.Second, ""},
	} {
		n := node("n1", gpuNode,
			cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
				"XidResetRequired: Xid 154 on 0000:3b:00.0: driver asks reset; reset required", ago(tc.xid)),
			cond(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionTrue, v1alpha1.DetectReason,
				"ResetRequired: driver asks to reset the GPU: GPU reset on 0000:3b:00.0 (GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)", ago(tc.drive)))
		win := Winner(all, n, now)
		if tc.want == "" {
			require.Nil(t, win, tc.desc)
			continue
		}
		require.NotNil(t, win, tc.desc)
		require.Equal(t, tc.want, win.Name(), tc.desc)
	}

	// IMEX domain recovery is left to a person: no shipped policy acts.
	imex := node("n1", gpuNode, recovery(v1alpha1.ReasonIMEXDomainRecovery, "recover its IMEX domain: recover IMEX domain"))
	require.Nil(t, Winner(all, imex, now), "no ladder for an IMEX domain")
	for _, p := range all {
		plan := Evaluate(PolicyInput{Policy: p, Policies: all, Nodes: []*corev1.Node{imex},
			Templates: map[string]bool{"reset-gpu": true, "reboot": true}, Now: now})
		require.Empty(t, plan.Create, p.Name)
	}
}
