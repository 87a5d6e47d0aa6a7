// Package remediator is the controller-runtime manager that turns node
// conditions into NodeOperations under RemediationPolicies, and runs each
// operation through its lifecycle (cordon, drain, run, verify, escalate).
//
// Every safety limit is computed from objects in the API server at each
// decision, never from counters kept in memory, so a restart or a second
// leader never exceeds a budget. Decisions are pure functions of (nodes,
// operations, policy, now).
package remediator
