package dstate

import (
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/kube"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/state"
)

// DefaultMinDuration is how long a process must be in D before it counts:
// long enough that slow I/O (a loaded NFS server, a GPU draining) is not
// mistaken for a stuck process.
const DefaultMinDuration = 5 * time.Minute

// maxLogged bounds the per-process log lines of one run.
const maxLogged = 10

// Command is the kubemedic-detect subcommand "dstate".
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "dstate",
		Summary: "processes of deleted pods stuck in D state (PodProcessesStuck)",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			minDuration := fs.Duration("min-duration", DefaultMinDuration, "report a process once it has been in D state this long")
			kubeOpts := kube.BindFlags(fs)
			return func(ctx context.Context, env *plugin.Env) plugin.Result {
				return Check(ctx, env, *minDuration, kube.New(*kubeOpts))
			}
		},
	}
}

// Check runs the check once: scan, decide, keep the state, log the
// orphans.
func Check(ctx context.Context, env *plugin.Env, minDuration time.Duration, pods PodSource) plugin.Result {
	if minDuration < 0 {
		return plugin.Unknown("dstate: --min-duration %s is negative", minDuration)
	}
	bootID, err := env.Root.BootID()
	if err != nil {
		return plugin.Unknown("dstate: %v", err)
	}
	st, err := state.Open(ctx, env.StateDir, "dstate")
	if err != nil {
		return plugin.Unknown("dstate: %v", err)
	}
	defer st.Close()
	var prev State
	if _, err := st.Load(&prev); err != nil {
		env.Log.Warn("Starting over, the state does not load", "err", err)
		prev = State{}
	}

	scan, err := newScanner(env.Root).scan()
	if err != nil {
		return plugin.Unknown("dstate: %v", err)
	}
	if scan.Total == 0 {
		return plugin.Unknown("dstate: no processes in %s", env.Root.Path("/proc"))
	}
	d := Decide(ctx, Input{
		BootID: bootID, Node: env.Node, Procs: scan.Procs, ScanErrs: scan.Errs, ScanErr: scan.Err,
		Prev: prev, Now: env.Now(), MinDuration: minDuration,
	}, pods)

	env.Log.Debug("Scanned processes", "processes", scan.Total, "inD", len(scan.Procs), "tracked", len(d.State.Procs),
		"young", d.Young, "live", d.Live, "orphans", len(d.Orphans), "unreadable", d.Unreadable, "podSource", d.PodSource)
	if scan.Err != nil {
		env.Log.Warn("Some processes could not be read", "count", scan.Errs, "first", scan.Err)
	}
	for i, o := range d.Orphans {
		if i == maxLogged {
			env.Log.Warn("More processes of deleted pods are stuck in D state", "more", len(d.Orphans)-maxLogged)
			break
		}
		args := []any{"pid", o.PID, "comm", o.Comm, "podUID", o.PodUID, "inDSince", o.FirstSeen.UTC().Format(time.RFC3339)}
		if o.Pod == nil {
			args = append(args, "pod", "deleted")
		} else {
			args = append(args, "pod", "Terminating past its grace period", "namespace", o.Pod.Namespace, "name", o.Pod.Name,
				"deletionTimestamp", o.Pod.DeletionTimestamp.UTC().Format(time.RFC3339))
		}
		env.Log.Warn("Process of a deleted pod is stuck in D state", args...)
	}

	if !d.State.Equal(prev) {
		if err := st.Save(d.State); err != nil {
			// Without the state, durations start over every run and a
			// stuck process would never count: say so rather than OK.
			return plugin.Unknown("dstate: %v", err)
		}
	}
	return d.Result
}
