// Command kubemedic-detect runs one node check as a node-problem-detector
// custom plugin: kubemedic-detect <check> [flags]. Exit 0 OK, 1 NonOK,
// 2 Unknown, and one line of at most plugin.MaxLine (160) bytes on stdout.
package main

import (
	"os"

	"github.com/kubemedic/kubemedic/detectors/dstate"
	"github.com/kubemedic/kubemedic/detectors/gpu"
	"github.com/kubemedic/kubemedic/detectors/netlink"
	"github.com/kubemedic/kubemedic/detectors/nfs"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/xid"
)

func main() {
	os.Exit(plugin.Main(commands(), os.Args[1:], os.Stdout, os.Stderr))
}

func commands() []*plugin.Command {
	return []*plugin.Command{
		gpu.Command(),
		gpu.MemoryCommand(),
		gpu.RecoveryCommand(),
		xid.Command(),
		dstate.Command(),
		nfs.Command(),
		nfs.ProbeCommand(),
		netlink.Command(),
	}
}
