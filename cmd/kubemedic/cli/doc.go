// Package cli is the command tree of the kubemedic ops CLI. Commands parse
// flags and print; the work is done by the packages they call (policies,
// remediator/plan for `policy simulate`, internal/localcluster for the demo). It must
// never change a cluster except in `demo`, which runs its own local control
// plane: `policy simulate` reads a live cluster through a client whose
// transport refuses every request but GET.
package cli
