// Package evidence is the remediator's diagnostics work, beside its two
// reconcilers: it keeps the evidence of what went wrong on a node before
// the node is repaired. A Keeper, which the operation reconciler holds,
//
//   - builds the capture pod an operation's Capturing phase creates, with
//     the store's settings when the store can be used;
//   - puts the cluster's must-gather (the Node, its Events, its
//     NodeOperations, the GPU Operator's logs) beside the node's bundle;
//   - records a bundle that waited in a node's spool as stored once the
//     store holds it, and presigns the links recorded in the status;
//
// and sets up the FlushReconciler (kubemedic diag flush) and the retention
// sweep of the store, on the leader.
//
// It holds one client of the store, built from the store's Secret once and
// built again when the Secret changes (its UID or resourceVersion); the
// Secret itself is read from the API server at each use, never cached.
//
// It must never hold a repair: every call fails soft, saying why in the
// operation's status or a Warning Event, and the repair goes on; a
// capture's result is decided by remediator/plan, not here. It must never
// put the store's credentials in a pod spec's values, a status, an Event
// or a log line, and never overwrite an object in the store with other
// bytes.
package evidence
