// Package drain decides and performs the drain of one node before a
// NodeOperation: which pods to evict now, which to delete because the drain
// timeout passed, which to wait for and which to leave alone, and whether the
// drain is done or has failed.
//
// It is split like every remediator decision: Plan is a pure function of
// (pods on the node, DrainSpec, drain start, now) that makes no API call and
// reads no clock, so that the NodeOperation controller can call it at every
// pass from the pods in its cache and the start time in the operation's
// status, and a restart or a second leader decides the same way. Evictor and
// Run are the thin acting layer: they post the Eviction subresource (which
// honours PodDisruptionBudgets) or delete pods, and report a budget's refusal
// as an expected outcome rather than an error. Their client should come from
// EvictionConfig (NewEvictor does that): otherwise client-go sleeps inside
// one eviction call for up to 100 s on the Retry-After of a budget whose
// status is behind its spec.
//
// What must hold:
//
//   - DaemonSet pods, mirror pods, finished pods and kubemedic's own operation
//     pods (label LabelOperation) are never evicted, deleted or waited for.
//   - A PodDisruptionBudget is only ever bypassed for pods whose mode is
//     DeleteAfterTimeout, and only once the drain timeout has passed. Evict
//     pods that a budget still protects at the timeout fail the drain; they
//     are never deleted.
//   - A pod is evicted or deleted only while it still has the UID it had when
//     the decision was made, so a pod recreated under the same name (a
//     StatefulSet pod, possibly on another node) is never touched.
//   - The package keeps no state between calls: the drain start time belongs
//     to the caller, who stores it in the NodeOperation status.
package drain
