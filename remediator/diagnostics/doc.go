// Package diagnostics is the evidence kubemedic keeps before it repairs a
// node: the bundle a capture pod makes on the node (a .tar.gz with a
// manifest.json), the node's spool that holds it until the store confirms
// it, the S3-compatible store (minio-go), and the report the capture pod
// leaves in its termination message for the remediator.
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
