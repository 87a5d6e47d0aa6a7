// Package controller holds the remediator's two reconcilers and their wiring:
//
//   - the policy reconciler evaluates each RemediationPolicy (plan.Evaluate),
//     records its counts and circuit breaker in its status, and creates the
//     NodeOperation for each target node's next ladder step;
//   - the operation reconciler drives each NodeOperation through its
//     lifecycle: admission under the safety limits (plan.Admit, serialised by
//     the admission ledger), cordon, the diagnostics capture, drain, the
//     operation pod, verification, uncordon, quarantine, and garbage
//     collection after the retention period.
//     When its drain stops a pod, it queues a Slack message to the pod's
//     owner (notice.go); a sender Runnable posts them (sender.go), so that
//     no reconcile ever waits for Slack. These messages are the one thing
//     kept in memory, and they are best effort: at most once per pod.
//
// Beside them, Setup wires the diagnostics keeper (remediator/evidence),
// which the operation reconciler calls for the capture pod, the
// must-gather, spooled bundles and links, and whose Runnables (the flush
// reconciler, the store's retention sweep) it adds to the manager; the
// DeviceTaintRule check (gpurules.go) and the GPU stack health checks
// (remediator/stackhealth).
//
// Decisions live in remediator/plan and are pure; this package only reads
// state, calls them and acts. It must never keep a safety-relevant count in
// memory: every limit is computed from objects in the API server, so that a
// restart or a second leader never exceeds a budget.
package controller
