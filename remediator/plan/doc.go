// Package plan holds the remediator's decisions as pure functions of
// (policies, nodes, operations, now): which nodes a RemediationPolicy targets
// and which NodeOperation to create for each (Evaluate), whether a waiting
// operation may start under the safety limits (Admit), whether a node passed
// verification (Verify), the circuit breaker and the maintenance windows.
//
// Every function returns the next time its answer can change without any
// object changing, so the controllers requeue then instead of polling.
//
// This package must never call the API server, read a clock or keep state
// between calls: the controllers pass the state they read from the API
// server, so a restart or a second leader decides the same way.
package plan
