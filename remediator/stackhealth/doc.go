// Package stackhealth checks, from the API server alone, the software stack
// that turns healthy GPUs into schedulable ones: allocatable GPUs against
// the hardware count, the device plugin's and dcgm-exporter's pods, pods
// stuck terminating and the MIG manager's state. It sets one node condition
// per check (policies/v1alpha1 stack_conditions.go) on GPU nodes only, so
// that RemediationPolicies can act on them like on the detectors' ones.
// It also reports, as the metric kubemedic_remediation_node_detectors_missing
// and never as a condition, GPU nodes whose detectors do not report: no
// Ready node-problem-detector pod, none of the detectors' conditions, or
// their heartbeats stale (CheckDetectors).
//
// The checks are pure functions of (node, pods, settings, now) in
// checks.go; the reconciler only reads, calls them and writes the
// conditions that changed. It must never write a condition on a node
// without GPUs, never report a fault from missing evidence (that is
// Unknown, reason EvidenceMissing), and never write a condition whose
// status, reason and message did not change: messages carry timestamps,
// never ages, so they are stable between passes.
package stackhealth
