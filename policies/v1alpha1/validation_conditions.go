package v1alpha1

// The node condition the remediator sets from an active GPU test
// (kubemedic-validate: DCGM diagnostics, NCCL all-reduce, nvbandwidth): a
// GPU that shows no fault to any passive check but fails a test. The
// remediator writes it itself, so its Reason is the specific reason.
// RemediationPolicies match on it like on any detector's condition, so a
// failed test escalates along a ladder (reset, reboot, quarantine) and a
// node that joins and fails is acted on.
const (
	// ConditionGPUValidationFailed is True when the node's last active GPU
	// test failed, False once one passed.
	ConditionGPUValidationFailed = "GPUValidationFailed"
)

// Reasons of GPUValidationFailed: True names the test that failed, or that
// there was no answer twice; False that the last test passed.
const (
	ReasonDCGMDiagFailed        = "DCGMDiagFailed"
	ReasonNCCLBelowFloor        = "NCCLBelowFloor"
	ReasonNVBandwidthBelowFloor = "NVBandwidthBelowFloor"
	ReasonTestFailed            = "TestFailed"
	ReasonNoValidationAnswer    = "NoValidationAnswer"
	ReasonValidated             = "Validated"
)

// ValidationFailedReason is GPUValidationFailed's reason for a test that
// failed: test is a kubemedic-validate report's test name.
func ValidationFailedReason(test string) string {
	switch test {
	case "dcgm":
		return ReasonDCGMDiagFailed
	case "nccl":
		return ReasonNCCLBelowFloor
	case "nvbandwidth":
		return ReasonNVBandwidthBelowFloor
	}
	return ReasonTestFailed
}

// Events of the tests outside of a repair (ValidationPolicy), on the Node.
const (
	// EventUnvalidatedTainted: a node that joined without the taint
	// kubemedic.io/unvalidated got it (join.taintNewNodes).
	EventUnvalidatedTainted = "UnvalidatedTainted"
	// EventValidationPreempted: a background test was preempted (or its
	// pod deleted) before it ended: no result, tried again later.
	EventValidationPreempted = "ValidationPreempted"
	// EventValidationPutOff: a background test found the node's GPUs
	// busy for its whole wait: no result, tried again later.
	EventValidationPutOff = "ValidationPutOff"
)
