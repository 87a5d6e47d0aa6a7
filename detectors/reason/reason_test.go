package reason_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/reason"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestSameAsAPI keeps this package equal to policies/v1alpha1: every
// condition's reasons, in order, and no condition more or less.
func TestSameAsAPI(t *testing.T) {
	ours := map[string][]string{
		v1alpha1.ConditionGPULost:     {reason.GPUFellOffBus, reason.GPUCountMismatch},
		v1alpha1.ConditionGPUXidError: {reason.XidResetRequired, reason.XidRebootRequired},
		v1alpha1.ConditionGPUMemoryUnhealthy: {reason.RowRemapPending, reason.RetiredPagesPending, reason.VolatileDBE, reason.RepairPending,
			reason.RowRemapFailed, reason.RetiredPageLimit, reason.UnrepairableMemory, reason.SRAMThresholdExceeded},
		v1alpha1.ConditionPodProcessesStuck:    {reason.DStateOrphans},
		v1alpha1.ConditionNFSMountUnhealthy:    {reason.MountMissing, reason.MountHung, reason.ServerUnreachable},
		v1alpha1.ConditionNetworkInterfaceDown: {reason.LinkDown, reason.NoAddress},
		v1alpha1.ConditionGPURecoveryRequired:  {reason.ResetRequired, reason.RebootRequired, reason.DrainP2P, reason.DrainAndReset, reason.BusResetRequired, reason.IMEXDomainRecovery},
	}
	require.Equal(t, v1alpha1.ConditionReasons, ours)

	for _, tc := range []struct{ ours, api string }{
		{reason.GPUFellOffBus, v1alpha1.ReasonGPUFellOffBus},
		{reason.GPUCountMismatch, v1alpha1.ReasonGPUCountMismatch},
		{reason.XidResetRequired, v1alpha1.ReasonXidResetRequired},
		{reason.XidRebootRequired, v1alpha1.ReasonXidRebootRequired},
		{reason.RowRemapPending, v1alpha1.ReasonRowRemapPending},
		{reason.RetiredPagesPending, v1alpha1.ReasonRetiredPagesPending},
		{reason.VolatileDBE, v1alpha1.ReasonVolatileDBE},
		{reason.RowRemapFailed, v1alpha1.ReasonRowRemapFailed},
		{reason.RetiredPageLimit, v1alpha1.ReasonRetiredPageLimit},
		{reason.RepairPending, v1alpha1.ReasonRepairPending},
		{reason.UnrepairableMemory, v1alpha1.ReasonUnrepairableMemory},
		{reason.SRAMThresholdExceeded, v1alpha1.ReasonSRAMThresholdExceeded},
		{reason.ResetRequired, v1alpha1.ReasonResetRequired},
		{reason.RebootRequired, v1alpha1.ReasonRebootRequired},
		{reason.DrainP2P, v1alpha1.ReasonDrainP2P},
		{reason.DrainAndReset, v1alpha1.ReasonDrainAndReset},
		{reason.BusResetRequired, v1alpha1.ReasonBusResetRequired},
		{reason.IMEXDomainRecovery, v1alpha1.ReasonIMEXDomainRecovery},
		{reason.DStateOrphans, v1alpha1.ReasonDStateOrphans},
		{reason.MountMissing, v1alpha1.ReasonMountMissing},
		{reason.MountHung, v1alpha1.ReasonMountHung},
		{reason.ServerUnreachable, v1alpha1.ReasonServerUnreachable},
		{reason.LinkDown, v1alpha1.ReasonLinkDown},
		{reason.NoAddress, v1alpha1.ReasonNoAddress},
	} {
		require.Equal(t, tc.api, tc.ours)
	}
}
