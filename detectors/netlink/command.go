package netlink

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// deps are the check's edges to the node, replaced in tests.
type deps struct {
	// readFile reads a sysfs file by its full path.
	readFile func(string) ([]byte, error)
	// addrs gives the address source for a root, or nil where addresses
	// cannot be read.
	addrs func(root host.Root) AddrSource
}

// realAddrs reads addresses only against the real root: the kernel's address
// table belongs to our network namespace, not to a fixture tree or a bind
// mount of another one.
func realAddrs(root host.Root) AddrSource {
	if root == "" || root == "/" {
		return NetAddrs{}
	}
	return nil
}

// Command is kubemedic-detect network: the NetworkInterfaceDown condition.
func Command() *plugin.Command {
	return newCommand(deps{readFile: os.ReadFile, addrs: realAddrs})
}

func newCommand(d deps) *plugin.Command {
	return &plugin.Command{
		Name:    "network",
		Summary: "interfaces missing, link down or without an address (NetworkInterfaceDown)",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			names := fs.StringArray("interface", nil, "an interface that must exist and be up (repeatable)")
			exprs := fs.StringArray("interface-regex", nil, "RE2 expression, anchored, e.g. 'ib[0-9]+|eth[0-9]+': at least one interface must match, and all that match must be up (repeatable)")
			requireAddr := fs.Bool("require-address", true, "an up interface needs an address (checked only with --root=/, over netlink)")
			ignoreLL := fs.Bool("ignore-link-local", true, "IPv6 link-local addresses (fe80::/10) do not count as an address")
			return func(_ context.Context, env *plugin.Env) plugin.Result {
				cfg, err := parseConfig(*names, *exprs)
				if err != nil {
					return plugin.Unknown("network: %v", err)
				}
				cfg.RequireAddress = *requireAddr
				cfg.IgnoreLinkLocal = *ignoreLL
				var src AddrSource
				if cfg.RequireAddress {
					src = d.addrs(env.Root)
					if src == nil {
						env.Log.Debug("Skipping address checks: no address source for this root", "root", env.Root)
					}
				}
				obs, err := Observe(sysfs{root: env.Root, readFile: d.readFile}, cfg, src)
				if err != nil {
					return plugin.Unknown("network: %v", err)
				}
				for _, l := range obs.Links {
					env.Log.Debug("Read interface", "interface", l.Name, "operstate", l.OperState, "carrier", l.Carrier, "addrs", l.Addrs, "err", l.Err)
				}
				return Decide(cfg, obs)
			}
		},
	}
}

// parseConfig checks the interface flags.
func parseConfig(names, exprs []string) (Config, error) {
	if len(names) == 0 && len(exprs) == 0 {
		return Config{}, fmt.Errorf("give --interface NAME or --interface-regex RE")
	}
	var cfg Config
	for _, n := range names {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/ \t\n") {
			return Config{}, fmt.Errorf("--interface %q is not an interface name", n)
		}
		cfg.Names = append(cfg.Names, n)
	}
	for _, e := range exprs {
		p, err := CompilePattern(e)
		if err != nil {
			return Config{}, fmt.Errorf("--interface-regex %q: %v", e, err)
		}
		cfg.Patterns = append(cfg.Patterns, p)
	}
	return cfg, nil
}
