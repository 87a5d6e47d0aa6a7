package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitInvalid = 1 // problems found: invalid policies, missing or empty files
	ExitUsage   = 2 // bad flags or arguments
)

// ExitError carries an exit code out of a command whose output is printed.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// Main runs the CLI with args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return Execute(NewRootCommand(stdout, stderr), args, stderr)
}

// Execute runs a command tree with args and returns the process exit code:
// ExitOK, the code of an ExitError, or ExitUsage with the error and a hint
// printed to stderr. kubemedic and kubemedic-demo share it.
func Execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	var ee ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	default:
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", root.Name(), err, root.Name())
		return ExitUsage
	}
}

// NewRootCommand builds the kubemedic command tree.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubemedic",
		Short: "Operate kubemedic, the self-healing layer for Kubernetes GPU clusters",
		Long: `kubemedic keeps GPU nodes healthy: node detectors set conditions (GPULost,
GPUXidError, GPUMemoryUnhealthy, PodProcessesStuck, NFSMountUnhealthy,
NetworkInterfaceDown), the remediator turns them into audited NodeOperations
behind safety limits, the alertbridge files GitHub issues, and the janitor
reclaims idle GPU pods.

This CLI checks the policy files ops write before they reach a cluster and
shows what a policy would do on the live cluster without changing it. The
local demo cluster of simulated GPU nodes is its own binary, kubemedic-demo
(make demo), so that this one links no test stand-in.`,
		Example: `  # The fleet on one screen: unhealthy nodes, operations, breakers, quarantine
  kubemedic status        # or, installed as kubectl-medic: kubectl medic status

  # Check every policy in a directory, as CI would
  kubemedic policy validate -f policies/examples/

  # What would this policy do on the cluster now? (reads only)
  kubemedic policy simulate -f gpu-xid.yaml

  # Which GPU pods would the janitor notify or reclaim, and why? (reads only)
  kubemedic janitor plan --prometheus-url http://localhost:9090

  # A local control plane with 16 simulated GPU nodes and the examples
  make demo               # or: kubemedic-demo`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newPolicyCommand(stdout, stderr))
	root.AddCommand(newAlertbridgeCommand(stdout, stderr), newJanitorCommand(stdout, stderr))
	root.AddCommand(newStatusCommand(stdout, stderr), newDiagCommand(stdout, stderr))
	return root
}

func newPolicyCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with kubemedic policy files",
	}
	cmd.AddCommand(newValidateCommand(stdout, stderr), newSimulateCommand(stdout, stderr))
	return cmd
}
