// Package smicsv reads nvidia-smi's CSV queries (--query-gpu=...,
// --query-remapped-rows=... with --format=csv,noheader): rows of a known
// number of fields, interleaved with nvidia-smi's own lines about GPUs it
// could not open ("Unable to determine the device handle for GPU
// 0000:02:00.0: GPU is lost. ..."), "No devices were found", warnings, and
// the whole-output failures of a broken driver.
//
// Both the node's detectors (kubemedic-detect's nvidia-smi backend) and the
// active GPU test (kubemedic-validate, which names GPUs by UUID) read these
// queries; this is the one parser of them. It is a leaf: the standard
// library only, no I/O, so that the static kubemedic-validate and the cgo
// kubemedic-detect both link it.
//
// What must hold: a driver failure, a line of the wrong shape, empty output
// (unless the caller allows it) and a non-zero exit status that no error
// line explains are errors, never an empty list of healthy GPUs.
package smicsv
