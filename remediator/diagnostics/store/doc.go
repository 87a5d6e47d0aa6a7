// Package store is the client of the S3-compatible store that keeps the
// diagnostics bundles (minio-go): put a bundle with its SHA-256, ask
// whether the store holds exactly these bytes, list, read, link (presigned,
// the bucket stays private) and delete.
//
// It never overwrites an object with other bytes, and never puts a secret
// in an error or a log line. Both the node-side capture
// (remediator/diagnostics/capture) and the remediator's diagnostics work
// (remediator/evidence) use it; the pure planner must never link it.
package store
