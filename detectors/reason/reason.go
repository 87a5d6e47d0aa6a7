// Package reason holds the reasons kubemedic-detect starts a NonOK line
// with. They are API, defined in policies/v1alpha1 (conditions.go), where
// RemediationPolicies match them; this package repeats them so that the
// detect binary does not import the API package, whose dependencies
// (apimachinery, k8s.io/api) cost every short-lived check invocation
// their init functions and memory. It must import nothing. reason_test.go
// fails when the two disagree.
package reason

// GPULost.
const (
	GPUFellOffBus    = "GPUFellOffBus"
	GPUCountMismatch = "GPUCountMismatch"
)

// GPUXidError.
const (
	XidResetRequired  = "XidResetRequired"
	XidRebootRequired = "XidRebootRequired"
)

// GPUMemoryUnhealthy: the first four are fixed by a GPU reset, the last
// four by replacing the GPU.
const (
	RowRemapPending       = "RowRemapPending"
	RetiredPagesPending   = "RetiredPagesPending"
	VolatileDBE           = "VolatileDBE"
	RepairPending         = "RepairPending"
	RowRemapFailed        = "RowRemapFailed"
	RetiredPageLimit      = "RetiredPageLimit"
	UnrepairableMemory    = "UnrepairableMemory"
	SRAMThresholdExceeded = "SRAMThresholdExceeded"
)

// GPURecoveryRequired: the driver's recovery action.
const (
	ResetRequired  = "ResetRequired"
	RebootRequired = "RebootRequired"
	DrainP2P       = "DrainP2P"
	DrainAndReset  = "DrainAndReset"
	// BusResetRequired: the driver asks for a reset of the GPU's PCIe bus.
	BusResetRequired = "BusResetRequired"
	// IMEXDomainRecovery: the driver asks to recover the GPU's IMEX
	// (multi-node NVLink) domain.
	IMEXDomainRecovery = "IMEXDomainRecovery"
)

// PodProcessesStuck.
const DStateOrphans = "DStateOrphans"

// NFSMountUnhealthy.
const (
	MountMissing      = "MountMissing"
	MountHung         = "MountHung"
	ServerUnreachable = "ServerUnreachable"
)

// NetworkInterfaceDown.
const (
	LinkDown  = "LinkDown"
	NoAddress = "NoAddress"
)
