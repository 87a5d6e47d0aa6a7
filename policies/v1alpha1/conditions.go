package v1alpha1

import "strings"

// Node condition types the kubemedic detectors set (through
// node-problem-detector), and their reasons. Types and reasons are stable
// API: RemediationPolicies match on them.
const (
	ConditionGPULost              = "GPULost"
	ConditionGPUXidError          = "GPUXidError"
	ConditionGPUMemoryUnhealthy   = "GPUMemoryUnhealthy"
	ConditionPodProcessesStuck    = "PodProcessesStuck"
	ConditionNFSMountUnhealthy    = "NFSMountUnhealthy"
	ConditionNetworkInterfaceDown = "NetworkInterfaceDown"
	ConditionGPURecoveryRequired  = "GPURecoveryRequired"
)

// Reasons of the detectors' conditions.
const (
	// GPULost: NVML or nvidia-smi says a GPU is lost, or Xid 79.
	ReasonGPUFellOffBus = "GPUFellOffBus"
	// GPULost: the node sees fewer GPUs than it should have.
	ReasonGPUCountMismatch = "GPUCountMismatch"

	// GPUXidError: an Xid whose catalog action is a GPU reset.
	ReasonXidResetRequired = "XidResetRequired"
	// GPUXidError: an Xid whose catalog action is a node reboot.
	ReasonXidRebootRequired = "XidRebootRequired"

	// GPUMemoryUnhealthy, fixed by a GPU reset: a row remap waits for it.
	ReasonRowRemapPending = "RowRemapPending"
	// GPUMemoryUnhealthy, fixed by a GPU reset: pages wait to be retired
	// (pre-Ampere GPUs, which retire pages instead of remapping rows).
	ReasonRetiredPagesPending = "RetiredPagesPending"
	// GPUMemoryUnhealthy, fixed by a GPU reset: uncorrectable ECC errors
	// since the last reset.
	ReasonVolatileDBE = "VolatileDBE"
	// GPUMemoryUnhealthy, replace the GPU: a row remap failed.
	ReasonRowRemapFailed = "RowRemapFailed"
	// GPUMemoryUnhealthy, replace the GPU: too many retired pages.
	ReasonRetiredPageLimit = "RetiredPageLimit"
	// GPUMemoryUnhealthy, replace the GPU: the driver flags its memory
	// unrepairable (NVML GetUnrepairableMemoryFlag_v1; DCGM calls it
	// DCGM_FR_FAULTY_MEMORY, severity isolate: field diagnostics, RMA).
	ReasonUnrepairableMemory = "UnrepairableMemory"
	// GPUMemoryUnhealthy, replace the GPU: an SRAM bank crossed NVIDIA's
	// uncorrectable-error threshold (DCGM_FR_SRAM_THRESHOLD, severity
	// isolate).
	ReasonSRAMThresholdExceeded = "SRAMThresholdExceeded"
	// GPUMemoryUnhealthy, fixed by a GPU reset: a channel or TPC repair
	// waits to be applied (NVML GetRepairStatus). NVIDIA's documentation
	// names no action for it; kubemedic treats it like a pending row remap,
	// which a reset applies, and the reset ladder reboots when the reset
	// does not clear it.
	ReasonRepairPending = "RepairPending"

	// GPURecoveryRequired: the driver's own recovery action for a GPU
	// (NVML field 230, DCGM_FI_DEV_GPU_RECOVERY_ACTION, nvidia-smi
	// gpu_recovery_action) is not None. The driver logs Xid 154 when it
	// changes; a GSP fault can ask for a reset with every ECC counter 0.
	// The driver asks for a GPU reset.
	ReasonResetRequired = "ResetRequired"
	// GPURecoveryRequired: the driver asks for a node reboot.
	ReasonRebootRequired = "RebootRequired"
	// GPURecoveryRequired: the driver asks to drain peer-to-peer traffic
	// (stop the GPU's P2P users, then reset).
	ReasonDrainP2P = "DrainP2P"
	// GPURecoveryRequired: the driver asks to drain the GPU's work, then
	// reset it.
	ReasonDrainAndReset = "DrainAndReset"
	// GPURecoveryRequired: the driver asks for a reset of the GPU's PCIe
	// bus (NVML 6, BUS_RESET). The shipped policies reboot, which covers
	// it.
	ReasonBusResetRequired = "BusResetRequired"
	// GPURecoveryRequired: the driver asks to recover the GPU's IMEX
	// (multi-node NVLink) domain (NVML 5, RECOVER_IMEX_DOMAIN): not a
	// repair of one node, so the shipped policies leave it to a person.
	ReasonIMEXDomainRecovery = "IMEXDomainRecovery"

	// PodProcessesStuck: processes of deleted pods stuck in state D.
	ReasonDStateOrphans = "DStateOrphans"

	// NFSMountUnhealthy: an expected mount is not mounted.
	ReasonMountMissing = "MountMissing"
	// NFSMountUnhealthy: a stat of the mount does not return in time.
	ReasonMountHung = "MountHung"
	// NFSMountUnhealthy: the server does not accept TCP connections.
	ReasonServerUnreachable = "ServerUnreachable"

	// NetworkInterfaceDown: the link is down or has no carrier.
	ReasonLinkDown = "LinkDown"
	// NetworkInterfaceDown: the link is up but has no address.
	ReasonNoAddress = "NoAddress"
)

// ConditionReasons lists, per detector condition type, the reasons the
// detectors report.
var ConditionReasons = map[string][]string{
	ConditionGPULost:     {ReasonGPUFellOffBus, ReasonGPUCountMismatch},
	ConditionGPUXidError: {ReasonXidResetRequired, ReasonXidRebootRequired},
	ConditionGPUMemoryUnhealthy: {ReasonRowRemapPending, ReasonRetiredPagesPending, ReasonVolatileDBE, ReasonRepairPending,
		ReasonRowRemapFailed, ReasonRetiredPageLimit, ReasonUnrepairableMemory, ReasonSRAMThresholdExceeded},
	ConditionPodProcessesStuck:    {ReasonDStateOrphans},
	ConditionNFSMountUnhealthy:    {ReasonMountMissing, ReasonMountHung, ReasonServerUnreachable},
	ConditionNetworkInterfaceDown: {ReasonLinkDown, ReasonNoAddress},
	ConditionGPURecoveryRequired:  {ReasonResetRequired, ReasonRebootRequired, ReasonDrainP2P, ReasonDrainAndReset, ReasonBusResetRequired, ReasonIMEXDomainRecovery},
}

// DetectReason is the reason node-problem-detector writes for every
// detector condition (the rule reason in deploy/npd). NPD gives each rule a
// fixed reason, and a second rule on the same condition would clear it
// every time it reports OK (NPD issues #566 and #664), so there is one rule
// per condition and the specific reason is the first word of the message:
// "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus". Use
// EffectiveReason to read it.
const DetectReason = "KubemedicDetect"

// EffectiveReason is the reason a policy matches for a node condition. When
// the condition is one of the detectors' and its message starts with one of
// that type's reasons followed by ": ", that reason is returned; otherwise
// the condition's own reason is. So conditions written by NPD from
// kubemedic-detect output and conditions written directly (or by tests)
// match the same policies.
func EffectiveReason(condType, reason, message string) string {
	reasons, ok := ConditionReasons[condType]
	if !ok {
		return reason
	}
	head, _, found := strings.Cut(message, ": ")
	if !found {
		return reason
	}
	for _, r := range reasons {
		if head == r {
			return r
		}
	}
	return reason
}
