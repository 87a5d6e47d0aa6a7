// Package drain decides the drain of one node before a NodeOperation: which
// pods to evict now, which to delete because the drain timeout passed,
// which to wait for and which to leave alone, and whether the drain is done
// or has failed.
//
// Plan is a pure function of (pods on the node, DrainSpec, drain start,
// now) that makes no API call and reads no clock, so that the NodeOperation
// controller can call it at every pass from the pods in its cache and the
// start time in the operation's status, and a restart or a second leader
// decides the same way. Runner is the one-method seam through which the
// controller has a Decision performed, and Stopped what a Runner reports;
// the acting layer that posts evictions and deletes pods is
// remediator/drain/evict.
//
// What must hold:
//
//   - The package makes no API call and imports no API client
//     (controller-runtime's client, client-go): remediator/plan, the pure
//     planner, imports it, and must link none.
//   - DaemonSet pods, mirror pods, finished pods and kubemedic's own operation
//     pods (label LabelOperation) are never evicted, deleted or waited for.
//   - A PodDisruptionBudget is only ever bypassed for pods whose mode is
//     DeleteAfterTimeout, and only once the drain timeout has passed. Evict
//     pods that a budget still protects at the timeout fail the drain; they
//     are never deleted.
//   - A Decision lists with each pod to evict or delete the UID it has now
//     (Decision.UIDs), so that its Runner can leave alone a pod recreated
//     under the same name (a StatefulSet pod, possibly on another node).
//   - The package keeps no state between calls: the drain start time belongs
//     to the caller, who stores it in the NodeOperation status.
package drain
