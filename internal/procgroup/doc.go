// Package procgroup runs a node tool (nvidia-bug-report.sh, dcgmi,
// all_reduce_perf, nvbandwidth) so that a bound on it holds: the tool runs
// in a process group of its own, and when its context ends the whole group
// is killed, the children it started included, and Wait stops waiting for
// output pipes that an orphan still holds.
//
// Both node programs that run tools under a timeout use it: the
// diagnostics capture (kubemedic-diag) and the active GPU test
// (kubemedic-validate). It is a leaf: the standard library only.
package procgroup
