// Package gpuhistory models a bounded per-node history of GPU faults and of
// the operations run on them, kept as JSON in one Node annotation
// (Annotation). It is the foundation of per-GPU history (issue 14): a
// per-GPU attempt cap (FailuresInWindow) and `kubemedic status --hardware`
// (Summary). It is pure: no API calls, no clock (time is an argument), no
// globals; the controller reads and writes the annotation.
//
// # Why an annotation
//
// NodeOperations are deleted after their retention, so the history of a GPU
// cannot be read back from them; a Node annotation survives it and lives as
// long as the Node. It needs no new CRD (nothing to install, convert or
// garbage-collect) and is read with the Node the controller already caches.
// Its size is bounded, so it never pushes the Node towards the API server's
// 256 KiB limit on all annotations together: at most MaxEntries entries and
// at most MaxBytes bytes encoded, the oldest entries dropped first.
//
// # Identifying a GPU
//
// A GPU is identified by its UUID when known, else by its PCI bus ID
// (GPUKey). The UUID moves with the card; a bus ID names a slot and can
// point at another card after a reseat or a swap, so history keyed by a bus
// ID alone could blame a new card for its predecessor's faults.
//
// # What must hold
//
//   - Parse is strict: unknown fields, a wrong version, an unknown kind or
//     outcome, a bus ID or UUID not in normalised form, a missing or
//     unordered time, a string over its bound, and more entries than
//     MaxEntries are errors naming the field. An empty string is an empty
//     history. Parse never panics.
//   - Entries are ordered by time, oldest first; Add keeps that order and
//     drops from the front.
//   - Every History returned by Add encodes (Encode returns no error) in at
//     most MaxBytes bytes with at most MaxEntries entries.
//   - For every History h that Parse returns, Parse(h.Encode()) equals h,
//     and Encode is canonical: encoding that again yields the same string.
//   - GPUFromMessage extracts the bus ID with the reset-gpu template's own
//     GPU_BUS_ID regex (the tests read it from
//     policies/examples/operation-templates.yaml), so the history names the
//     GPU the reset acted on.
package gpuhistory
