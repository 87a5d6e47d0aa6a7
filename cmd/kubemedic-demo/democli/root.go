package democli

import (
	"io"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

// Main runs kubemedic-demo with args and returns the process exit code,
// with the ops CLI's exit codes (cli.Execute).
func Main(args []string, stdout, stderr io.Writer) int {
	// The demo reads DeviceTaintRules (resource.k8s.io/v1beta2) at every
	// timeline poll, and the API server answers each read with the API's
	// deprecation warning, which client-go would print through klog and
	// controller-runtime's client through its logger (with a stack trace,
	// as no logger is set). The demo's output is the story; it says itself
	// what goes wrong.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	ctrllog.SetLogger(logr.Discard())
	return cli.Execute(newDemoCommand(stdout, stderr), args, stderr)
}
