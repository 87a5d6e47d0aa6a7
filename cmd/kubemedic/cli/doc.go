// Package cli is the command tree of the kubemedic ops CLI. Commands parse
// flags and print; the work is done by the packages they call (policies,
// remediator/plan for `policy simulate` and `status`, internal/demo for the
// demo). It must never change a cluster except the demo's own local one:
// `policy simulate`, `status` and `janitor plan` read a live cluster through
// a client whose transport refuses every request but GET; `demo scenario`
// writes only to the cluster of the demo whose state file it read.
package cli
