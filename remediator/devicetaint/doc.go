// Package devicetaint takes one faulty GPU out of scheduling instead of the
// whole node, with a Dynamic Resource Allocation DeviceTaintRule.
//
// A node with eight GPUs and one broken one (an XID 79, a row-remap failure)
// still has seven good GPUs. Cordoning it takes all eight away from new work;
// a DeviceTaintRule that selects only the broken device lets the scheduler
// keep placing ResourceClaims on the other seven. The package is the
// decision (Find, Rule: pure functions, no API calls) and a thin acting
// layer (Served, Apply, Remove).
//
// # How a GPU UUID maps to a device
//
// Detectors name a GPU by its UUID as NVML and nvidia-smi print it
// ("GPU-8f2c…"). DRA drivers publish devices in ResourceSlices
// (resource.k8s.io/v1) as (driver, pool, device name), and the NVIDIA DRA
// driver, like most, puts the UUID in a string attribute "uuid", qualified
// with its domain ("gpu.nvidia.com/uuid") or bare (which means the
// driver's own domain). Find looks through the slices published for the
// node (spec.nodeName, or a device's own nodeName with per-device node
// selection), in the newest generation of each pool only, for a device
// whose uuid attribute equals the UUID, ignoring case and a "GPU-" prefix
// on either side. Zero matches or more than one is an error: a rule must
// select exactly the GPU that failed, never a guess.
//
// # Why NoSchedule, not NoExecute
//
// The rule's taint (key kubemedic.io/unhealthy, the reason as its value)
// has the effect NoSchedule: no new claim is allocated the device, and
// claims already allocated to it keep running. NoExecute would make the
// kube-controller-manager evict every pod using the device at once, outside
// kubemedic's own safety limits (disruption budgets, drain timeouts, the
// per-policy concurrency limits, the maintenance window); a workload that
// is still making progress on a degraded GPU is better drained by the
// remediator's own, rate-limited operation than killed by a taint. The
// rule is named deterministically from (node, UUID), so applying it again
// is a no-op and Remove needs only the node and the UUID.
//
// # Rules follow their GPU
//
// A rule selects a device by name, which a driver may give another GPU
// after a reboot, or a new card in the same slot. Check compares a rule
// with what its node publishes now: Move when the GPU has another device
// name, Release when the rule's device is another GPU (and the rule's GPU
// is listed nowhere) or the node has been gone for NodeGoneGrace, Keep or
// Unknown otherwise. Missing evidence (no slice of the driver published
// yet, a pool published in part, a device without a uuid) is Unknown and
// never releases a rule. The remediator applies the verdicts every minute.
//
// # Without DRA
//
// DeviceTaintRule is a beta API that Kubernetes 1.36 serves only as
// resource.k8s.io/v1beta2 with the DRADeviceTaintRules feature gate and
// that group version enabled, and only clusters whose GPUs are allocated
// through a DRA driver have ResourceSlices at all. Served tells by
// discovery whether the API server serves it; when it does not, or when
// Find finds no device (a device-plugin node), the caller falls back to
// cordoning the node. A discovery error is returned as an error, never
// read as "not served", so that a flaky API server does not turn a
// one-GPU exclusion into a cordon.
//
// What it must never do: taint a device it did not identify uniquely,
// evict anything, or touch the Node object.
package devicetaint
