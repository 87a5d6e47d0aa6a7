// Package gpuhistory models a bounded per-node history of GPU faults and of
// the operations run on them, kept as JSON in one Node annotation. The
// annotation's name, schema and encoding are the wire format in
// internal/gpuwire; this package holds what the remediator does with a
// history: Add an entry within the bounds, count a GPU's failures and
// incidents in a window for the per-GPU attempt cap (FailuresInWindow,
// FaultsInWindow), tell a retried write from a new one (Has), and sum it up
// per GPU for `kubemedic status --hardware` (Summary). It is pure: no API
// calls, no clock (time is an argument), no globals; the controller reads
// and writes the annotation.
//
// # Why an annotation
//
// NodeOperations are deleted after their retention, so the history of a GPU
// cannot be read back from them; a Node annotation survives it and lives as
// long as the Node. It needs no new CRD (nothing to install, convert or
// garbage-collect) and is read with the Node the controller already caches.
// Its size is bounded, so it never pushes the Node towards the API server's
// 256 KiB limit on all annotations together: at most gpuwire.MaxEntries
// entries and at most gpuwire.MaxBytes bytes encoded, the oldest entries
// dropped first.
//
// # What must hold
//
//   - Entries are ordered by time, oldest first; Add keeps that order and
//     drops from the front.
//   - Every History returned by Add encodes (Encode returns no error) in at
//     most gpuwire.MaxBytes bytes with at most gpuwire.MaxEntries entries.
package gpuhistory
