package democli

import (
	"io"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

// Main runs kubemedic-demo with args and returns the process exit code,
// with the ops CLI's exit codes (cli.Execute).
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newDemoCommand(stdout, stderr), args, stderr)
}
