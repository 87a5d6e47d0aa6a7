// Command kubemedic-validate runs one active GPU test in the validation
// pod of a NodeOperation (or of a node that joins) and writes its report
// for the remediator's gate: kubemedic-validate dcgm|nccl|nvbandwidth
// [flags]. Exit status 0 pass, 1 fail, 2 no answer. See
// remediator/validation/run and docs/validation.md.
package main

import (
	"os"

	"github.com/kubemedic/kubemedic/remediator/validation/run"
)

func main() {
	os.Exit(run.Main(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
