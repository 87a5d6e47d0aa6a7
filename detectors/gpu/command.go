package gpu

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// Command is the kubemedic-detect subcommand. PLACEHOLDER: being written.
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "gpu",
		Summary: "placeholder",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			return func(context.Context, *plugin.Env) plugin.Result { return plugin.Unknown("gpu: not written yet") }
		},
	}
}

// MemoryCommand is the gpu-memory subcommand. PLACEHOLDER: being written.
func MemoryCommand() *plugin.Command {
	return &plugin.Command{Name: "gpu-memory", Summary: "placeholder", Bind: func(fs *pflag.FlagSet) plugin.Runner {
		return func(context.Context, *plugin.Env) plugin.Result { return plugin.Unknown("gpu-memory: not written yet") }
	}}
}
