// Package diagnostics is what the parts of kubemedic agree on about the
// evidence kept before a repair, and nothing that does I/O: the report a
// capture pod leaves in its termination message (Report, ParseReport,
// ReportFromPod), the bundle's manifest and object keys (Manifest, Key,
// ClusterKey), the names they share (the capture pod's environment, the
// store's Secret keys and object metadata, the spool's path), the
// retention decision (Expired) and the must-gather built in memory
// (MustGather).
//
// The pure planner (remediator/plan) imports it, so it must never import
// the store's client, os/exec, or anything that reads or writes outside
// memory. The work lives beside it:
//
//   - remediator/diagnostics/capture is the node-side program
//     (kubemedic-diag): the capture's parts, the bundle, the node's spool;
//   - remediator/diagnostics/store is the S3-compatible store's client;
//   - remediator/evidence is the remediator's side: capture pods, the
//     must-gather, spooled bundles, flushes, links and retention.
//
// The flow, for one NodeOperation whose step names diagnostics:
//
//  1. The remediator creates the capture pod, named after the operation
//     (plan, phase Capturing), once.
//  2. The pod (kubemedic-diag capture) runs each part under its own
//     timeout in its own process group, writes the bundle into the spool
//     (/var/lib/kubemedic/diagnostics on the node's disk, which a reboot
//     keeps), uploads every bundle the spool holds, and removes a bundle
//     only once the store answers with the same SHA-256.
//  3. It writes a Report as its termination message; the remediator
//     records it in the operation's status.diagnostics, with a presigned
//     link, and goes on with the repair, however the capture went, unless
//     the capture is required.
package diagnostics
