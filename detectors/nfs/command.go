package nfs

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// Command is the kubemedic-detect subcommand. PLACEHOLDER: being written.
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "nfs",
		Summary: "placeholder",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			return func(context.Context, *plugin.Env) plugin.Result { return plugin.Unknown("nfs: not written yet") }
		},
	}
}

// ProbeCommand is the internal probe child. PLACEHOLDER: being written.
func ProbeCommand() *plugin.Command {
	return &plugin.Command{Name: "nfs-probe", Internal: true, Main: func([]string) int { return 2 }}
}
