// Package validation is what kubemedic-validate and the remediator's
// validation gate agree on about an active GPU test (DCGM diagnostics,
// NCCL all-reduce, nvbandwidth):
//
//   - the report's wire format (Report, Encode, Decode): what the test
//     found, per GPU by UUID, with the values it measured against their
//     floors, written as the test pod's termination message;
//   - the floors (Floors, ModelFor, ParseFloor): the bandwidth a healthy
//     GPU of a model reaches, from NVIDIA's published figures with a
//     stated margin, and a template's overrides;
//   - the GPUs of the node as the test pod sees them (GPU).
//
// It is pure: no I/O, no clock, no process; the standard library and
// internal/gpuwire (the one rule for a GPU's UUID) only, so that the static
// node program and the remediator both link it.
//
// What must hold:
//   - no answer is never a pass: a tool that could not run, timed out, or
//     left output that is unparseable or truncated, no GPU visible, and a
//     GPU model without a floor (and no override) are NoAnswer;
//   - a report Encode returns is at most MaxReport bytes and Decode reads
//     it back equal; shortening cuts reasons and details, never a GPU's
//     UUID or verdict;
//   - Decode is strict: an unknown field, schema or verdict, a GPU UUID
//     that is missing, malformed or repeated, a measurement that is not a
//     finite non-negative number, and a Pass with a GPU that did not pass
//     are errors naming the field; it never panics.
package validation
