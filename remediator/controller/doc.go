// Package controller holds the remediator's two reconcilers and their wiring:
//
//   - the policy reconciler evaluates each RemediationPolicy (plan.Evaluate),
//     records its counts and circuit breaker in its status, and creates the
//     NodeOperation for each target node's next ladder step;
//   - the operation reconciler drives each NodeOperation through its
//     lifecycle: admission under the safety limits (plan.Admit, serialised by
//     the admission ledger), cordon, drain, the operation pod, verification,
//     uncordon, quarantine, and garbage collection after the retention period.
//     When its drain stops a pod, it queues a Slack message to the pod's
//     owner (notice.go); a sender Runnable posts them (sender.go), so that
//     no reconcile ever waits for Slack. These messages are the one thing
//     kept in memory, and they are best effort: at most once per pod.
//
// Decisions live in remediator/plan and are pure; this package only reads
// state, calls them and acts. It must never keep a safety-relevant count in
// memory: every limit is computed from objects in the API server, so that a
// restart or a second leader never exceeds a budget.
package controller
