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
//     Before its drain stops a pod, it writes the Slack message owed to the
//     pod's owner into the operation's status (notice.go; owed.go holds the
//     pure decisions of the claim → send → record model); a sender
//     Runnable claims, posts and records them (sender.go), so that no
//     reconcile ever waits for Slack, and a crash or a second leader
//     repeats a message at worst and never loses one.
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
