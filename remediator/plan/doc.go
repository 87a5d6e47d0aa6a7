// Package plan holds the remediator's decisions as pure functions of
// (policies, nodes, operations, now):
//   - Pass: one pass of the policy reconciler, shared with `kubemedic policy
//     simulate` so the two cannot drift: the policy's status (counts, Ready,
//     Paused, the circuit breaker) and which NodeOperation to create for each
//     node (Evaluate), and, for simulate, the admission each would get in
//     ledger order;
//   - Admit: whether a waiting operation may start under the safety limits;
//   - Advance: the NodeOperation lifecycle, one step at a time: the next
//     phase and status, the one effect on the cluster that step needs
//     (reserve, cordon, drain, create the pod, ...) and its Events;
//   - SplitEvents and HoldForEvents: which of a step's Events are told as
//     soon as its effect is made and which after the status write, and when
//     a machine request waits, so that the Events keep the steps' order;
//   - Verify: whether a node passed verification;
//   - the circuit breaker and the maintenance windows (parsed by
//     policies.ParseWindow, once, in Compile).
//
// Every function returns the next time its answer can change without any
// object changing, so the controllers requeue then instead of polling.
//
// This package must never call the API server, read a clock or keep state
// between calls: the controllers pass the state they read from the API
// server, so a restart or a second leader decides the same way.
package plan
