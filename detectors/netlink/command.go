package netlink

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// Command is the kubemedic-detect subcommand. PLACEHOLDER: being written.
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "network",
		Summary: "placeholder",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			return func(context.Context, *plugin.Env) plugin.Result { return plugin.Unknown("netlink: not written yet") }
		},
	}
}
