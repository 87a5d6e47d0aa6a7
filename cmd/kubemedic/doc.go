// Command kubemedic is the ops CLI: `status`, `policy validate`, `policy
// simulate`, `alertbridge render` (preview the issue a webhook would file),
// `janitor plan` (the janitor's decisions, changing nothing) and `diag`.
// Installed as kubectl-medic it is also a kubectl plugin. main only wires
// the command tree in package cli. The demo is kubemedic-demo.
package main
