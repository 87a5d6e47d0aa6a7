package gpu

import (
	"context"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// DecideRecovery is the GPURecoveryRequired verdict: the driver's own
// recovery action. Any GPU whose action is not None is NonOK with the
// reason of the most disruptive action asked (gpuaction's rank), naming the first such GPU by
// bus ID (the form the reset-gpu template extracts) and UUID. With no
// action asked, a GPU that is lost or whose action could not be read makes
// the verdict Unknown: the action is the driver's evidence, and its
// absence is not health. A GPU or driver that does not support the signal
// (Unsupported) is judged by what it does report: OK, saying so.
func DecideRecovery(backend string, devs []Device) plugin.Result {
	if len(devs) == 0 {
		return plugin.Unknown("no GPUs visible (%s)", backend)
	}
	sorted := append([]Device(nil), devs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].name() < sorted[j].name() })
	for _, action := range gpuaction.ByRank() {
		var hits []string
		for _, d := range sorted {
			if d.RecoveryAction.Known && d.RecoveryAction.Action == action {
				hits = append(hits, d.nameAndUUID())
			}
		}
		if len(hits) > 0 {
			return plugin.NonOK(action.Reason(), "driver asks to %s: %s on %s%s", action.Do(), action, hits[0], more(len(hits)-1))
		}
	}
	var bad []Device
	unsupported := 0
	for _, d := range sorted {
		switch {
		case !d.Usable():
			bad = append(bad, d)
		case d.RecoveryAction.Known && d.RecoveryAction.Action != gpuaction.None:
			// An action this code does not know: not None, so not health.
			bad = append(bad, d)
		case d.RecoveryAction.Known:
		case unsupportedSignal(d, SignalRecoveryAction):
			unsupported++
		default:
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		why := bad[0].Err
		if why == "" {
			why = bad[0].ReadErr
		}
		if why == "" && bad[0].RecoveryAction.Known {
			why = "recovery action " + bad[0].RecoveryAction.Action.String()
		}
		if why == "" {
			why = "recovery action not read"
		}
		return plugin.Unknown("cannot read the recovery action of %s%s: %s", bad[0].name(), more(len(bad)-1), why)
	}
	if unsupported == len(sorted) {
		return plugin.OK("%d GPUs; the driver reports no recovery action (not supported) (%s)", len(sorted), backend)
	}
	if unsupported > 0 {
		return plugin.OK("%d GPUs, the driver asks no recovery (%d do not report it) (%s)", len(sorted), unsupported, backend)
	}
	return plugin.OK("%d GPUs, the driver asks no recovery (%s)", len(sorted), backend)
}

// Signal names, as the backends put them in Device.Unsupported.
const (
	SignalRecoveryAction     = "recovery action"
	SignalUnrepairableMemory = "unrepairable memory"
	SignalSRAMThreshold      = "SRAM threshold"
	SignalRepairStatus       = "repair status"
	SignalRowRemapHistogram  = "row remapper histogram"
)

func unsupportedSignal(d Device, name string) bool {
	for _, u := range d.Unsupported {
		if u == name {
			return true
		}
	}
	return false
}

// logUnsupported logs, once per run, the signals some GPU or the driver
// does not support: not a fault, and seen only with --verbose.
func logUnsupported(env *plugin.Env, devs []Device) {
	seen := map[string]bool{}
	var names []string
	for _, d := range devs {
		for _, u := range d.Unsupported {
			if !seen[u] {
				seen[u] = true
				names = append(names, u)
			}
		}
	}
	if len(names) > 0 {
		env.Log.Debug("Signals this GPU or driver does not support (not faults)", "signals", strings.Join(names, ", "))
	}
}

// RecoveryCommand is the "gpu-recovery" check: condition
// GPURecoveryRequired.
func RecoveryCommand() *plugin.Command {
	return &plugin.Command{
		Name:    "gpu-recovery",
		Summary: "GPURecoveryRequired: the driver's own recovery action (reset, reboot, drain P2P, drain and reset)",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			bo := bindBackendFlags(fs)
			return func(ctx context.Context, env *plugin.Env) plugin.Result {
				bs, err := bo.backends(env)
				if err != nil {
					return plugin.Unknown("gpu-recovery: %v", err)
				}
				return checkRecovery(ctx, env, bs)
			}
		},
	}
}

func checkRecovery(ctx context.Context, env *plugin.Env, bs []Backend) plugin.Result {
	devs, name, err := listDevices(ctx, env, bs, ReadRecovery)
	if err != nil {
		return plugin.Unknown("gpu-recovery: %v", err)
	}
	logUnsupported(env, devs)
	return DecideRecovery(name, devs)
}
