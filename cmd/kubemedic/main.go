// Command kubemedic is the ops CLI: `policy validate` today; `policy
// simulate`, `status` and `demo` grow here. Installed as kubectl-medic it is
// also a kubectl plugin.
package main

import (
	"os"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
