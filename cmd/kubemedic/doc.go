// Command kubemedic is the ops CLI: `policy validate` and `demo` today;
// `policy simulate` and `status` grow here. Installed as kubectl-medic it is
// also a kubectl plugin. main only wires the command tree in package cli.
package main
