package gpuaction_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The numbers are NVML's own: checked against go-nvml's constants (its
// nvml.h, driver 580) for 0 to 5; 6 and 7 are newer than that header.
func TestNumbersAreNVMLs(t *testing.T) {
	for _, tc := range []struct {
		ours gpuaction.Action
		nvml nvml.DeviceGpuRecoveryAction
	}{
		{gpuaction.None, nvml.GPU_RECOVERY_ACTION_NONE},
		{gpuaction.GPUReset, nvml.GPU_RECOVERY_ACTION_GPU_RESET},
		{gpuaction.NodeReboot, nvml.GPU_RECOVERY_ACTION_NODE_REBOOT},
		{gpuaction.DrainP2P, nvml.GPU_RECOVERY_ACTION_DRAIN_P2P},
		{gpuaction.DrainAndReset, nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET},
		{gpuaction.RecoverIMEXDomain, nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN},
	} {
		require.EqualValues(t, tc.nvml, tc.ours, tc.ours.String())
	}
	require.EqualValues(t, 6, gpuaction.BusReset)
	require.EqualValues(t, 7, gpuaction.SystemReboot)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want gpuaction.Action
		ok   bool
	}{
		{"None", gpuaction.None, true},
		{"0", gpuaction.None, true},
		{"GPU Reset Required", gpuaction.GPUReset, true},
		{"Reset", gpuaction.GPUReset, true},
		{"Node Reboot Required", gpuaction.NodeReboot, true},
		{"NODE_REBOOT", gpuaction.NodeReboot, true},
		{"Drain P2P", gpuaction.DrainP2P, true},
		{"Drain and Reset", gpuaction.DrainAndReset, true},
		{"drain-and-reset", gpuaction.DrainAndReset, true},
		{"Recover IMEX Domain", gpuaction.RecoverIMEXDomain, true},
		{"5", gpuaction.RecoverIMEXDomain, true},
		{"Bus Reset", gpuaction.BusReset, true},
		{"System Reboot", gpuaction.SystemReboot, true},
		{"7", gpuaction.SystemReboot, true},
		{"8", gpuaction.Unknown, false},
		{"-1", gpuaction.Unknown, false},
		{"[N/A]", gpuaction.Unknown, false},
		{"", gpuaction.Unknown, false},
		{"reset bus please", gpuaction.Unknown, false},
	} {
		got, ok := gpuaction.Parse(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	_, ok := gpuaction.FromCode(1 << 40)
	require.False(t, ok, "a code past int's range is not folded onto a known one")
}

// Every reason an action maps to is a GPURecoveryRequired reason of the
// API, and every API reason is reached by some action.
func TestReasonsAreTheAPIs(t *testing.T) {
	require.ElementsMatch(t, v1alpha1.ConditionReasons[v1alpha1.ConditionGPURecoveryRequired], gpuaction.Reasons())
	require.Empty(t, gpuaction.None.Reason())
	require.Empty(t, gpuaction.Action(8).Reason())
	require.Equal(t, "unknown action 8", gpuaction.Action(8).String())
	require.False(t, gpuaction.Action(8).Known())
	require.True(t, gpuaction.BusReset.Known())
}

// Most disruptive first: a reboot covers a bus reset, which covers a drain
// and reset, a reset, a P2P drain; the IMEX domain is not this node's.
func TestByRank(t *testing.T) {
	require.Equal(t, []gpuaction.Action{gpuaction.SystemReboot, gpuaction.NodeReboot, gpuaction.BusReset, gpuaction.DrainAndReset,
		gpuaction.GPUReset, gpuaction.DrainP2P, gpuaction.RecoverIMEXDomain}, gpuaction.ByRank())
}
