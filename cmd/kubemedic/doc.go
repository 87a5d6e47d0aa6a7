// Command kubemedic is the ops CLI: `policy validate`, `policy simulate`,
// `alertbridge render` (preview the issue a webhook would file), `janitor
// plan` (the janitor's decisions, changing nothing) and `demo`; `status` is
// still to come. Installed as kubectl-medic it is also a kubectl plugin. main
// only wires the command tree in package cli.
package main
