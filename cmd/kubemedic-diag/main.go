// Command kubemedic-diag captures a node's GPU diagnostics before kubemedic
// repairs it, in the capture pod of a NodeOperation (kubemedic-diag
// capture), and uploads what the node's spool holds (kubemedic-diag
// flush). See remediator/diagnostics/capture.
package main

import (
	"os"

	"github.com/kubemedic/kubemedic/remediator/diagnostics/capture"
)

func main() {
	os.Exit(capture.Main(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
