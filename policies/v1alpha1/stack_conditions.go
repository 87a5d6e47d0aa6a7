package v1alpha1

// Node condition types the remediator's cluster-side health checks set on
// GPU nodes: the stack that turns healthy hardware into schedulable GPUs.
// The remediator writes them itself (not through node-problem-detector), so
// their Reason is the specific reason. Types and reasons are stable API:
// RemediationPolicies match on them.
const (
	// ConditionGPUAllocatableMismatch: the node's allocatable nvidia.com/gpu
	// (or nvidia.com/mig-*) is below what the hardware reports.
	ConditionGPUAllocatableMismatch = "GPUAllocatableMismatch"
	// ConditionGPUStackPodNotReady: the device plugin's or dcgm-exporter's
	// DaemonSet pod on the node is missing, not Ready or crash-looping.
	ConditionGPUStackPodNotReady = "GPUStackPodNotReady"
	// ConditionPodsStuckTerminating: pods on the node have been
	// terminating far longer than their grace period.
	ConditionPodsStuckTerminating = "PodsStuckTerminating"
	// ConditionMIGConfigFailed: the GPU Operator's MIG manager failed to
	// apply the node's MIG configuration, or has not applied it in time.
	ConditionMIGConfigFailed = "MIGConfigFailed"
)

// Reasons of the cluster-side health checks' conditions.
const (
	// GPUAllocatableMismatch: allocatable GPUs below the hardware count.
	ReasonAllocatableBelowHardware = "AllocatableBelowHardware"
	// GPUAllocatableMismatch (False): allocatable matches the hardware.
	ReasonAllocatableMatches = "AllocatableMatches"

	// GPUStackPodNotReady: no device-plugin pod runs on the node.
	ReasonDevicePluginMissing = "DevicePluginMissing"
	// GPUStackPodNotReady: the device-plugin pod is not Ready or restarts.
	ReasonDevicePluginNotReady = "DevicePluginNotReady"
	// GPUStackPodNotReady: no dcgm-exporter pod runs on the node.
	ReasonDCGMExporterMissing = "DCGMExporterMissing"
	// GPUStackPodNotReady: the dcgm-exporter pod is not Ready or restarts.
	ReasonDCGMExporterNotReady = "DCGMExporterNotReady"
	// GPUStackPodNotReady (False): both pods are Ready.
	ReasonGPUStackPodsReady = "GPUStackPodsReady"

	// PodsStuckTerminating: pods past their grace period plus a threshold.
	ReasonPodsStuckTerminating = "PodsStuckTerminating"
	// PodsStuckTerminating (False): none.
	ReasonNoPodsStuckTerminating = "NoPodsStuckTerminating"

	// MIGConfigFailed: nvidia.com/mig.config.state is "failed".
	ReasonMIGConfigStateFailed = "MIGConfigStateFailed"
	// MIGConfigFailed: the desired config has not been applied within the
	// threshold (state pending or rebooting for too long).
	ReasonMIGConfigNotApplied = "MIGConfigNotApplied"
	// MIGConfigFailed (False): the desired config is applied.
	ReasonMIGConfigApplied = "MIGConfigApplied"

	// Any of them, Unknown: the evidence is missing (no hardware count, no
	// DaemonSet found, no MIG labels): never a fault.
	ReasonStackEvidenceMissing = "EvidenceMissing"
)

// StackConditionReasons lists, per cluster-side condition type, the reasons
// that mean a fault (status True). It is apart from ConditionReasons, which
// lists the node detectors' conditions that node-problem-detector writes.
var StackConditionReasons = map[string][]string{
	ConditionGPUAllocatableMismatch: {ReasonAllocatableBelowHardware},
	ConditionGPUStackPodNotReady:    {ReasonDevicePluginMissing, ReasonDevicePluginNotReady, ReasonDCGMExporterMissing, ReasonDCGMExporterNotReady},
	ConditionPodsStuckTerminating:   {ReasonPodsStuckTerminating},
	ConditionMIGConfigFailed:        {ReasonMIGConfigStateFailed, ReasonMIGConfigNotApplied},
}
