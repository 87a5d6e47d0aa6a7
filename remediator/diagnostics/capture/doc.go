// Package capture is the node-side program of the diagnostics,
// kubemedic-diag (Main): "capture" runs each Part under its own timeout in
// its own process group, writes one bundle (manifest.json first) into the
// spool on the node's disk, fsynced before its rename, and uploads the
// spool; "flush" uploads the spool alone.
//
// It runs on the node, in a pod the remediator made, and must never read
// or write the API server: what it has to say goes in its Report, as the
// pod's termination message. A bundle leaves the spool only once the store
// holds it with the same SHA-256, and nothing it does overwrites an object
// with other bytes.
package capture
