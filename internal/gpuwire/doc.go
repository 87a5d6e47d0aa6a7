// Package gpuwire holds the wire formats in which GPU facts travel between
// the node and the control plane, so that the node binary (detectors) and
// the remediator share them without either importing the other:
//
//   - the GPU history annotation on a Node (Annotation): its schema
//     (History, Entry, Fault, Operation), its strict JSON encoding (Parse,
//     Encode) and its bounds (MaxEntries, MaxBytes, MaxName, MaxWord);
//   - how a GPU is named (GPUKey, NormalizeBus, NormalizeUUID) and found in
//     a condition message (GPUFromMessage);
//   - the spare-rows phrase the gpu-memory check writes into its condition
//     message and `kubemedic status --hardware` reads (FormatSpareRows,
//     ParseSpareRows).
//
// What is done with a history (adding entries, counting failures in a
// window, summaries) is the remediator's: remediator/gpuhistory. This
// package is a leaf: the standard library only, no I/O, no clock, no
// globals but compiled regexes, so that kubemedic-detect may link it.
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
//   - For every History h that Parse returns, Parse(h.Encode()) equals h,
//     and Encode is canonical: encoding that again yields the same string.
//   - GPUFromMessage extracts the bus ID with the reset-gpu template's own
//     GPU_BUS_ID regex (the tests read it from
//     policies/examples/operation-templates.yaml), so the history names the
//     GPU the reset acted on.
//   - ParseSpareRows reads exactly what FormatSpareRows writes.
package gpuwire
