package xid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/state"
)

// stateName is the state file's name in --state-dir (xid.json).
const stateName = "xid"

// ResetsDir is the directory in --state-dir where the reset-gpu operation
// drops reset records (see the package doc).
const ResetsDir = "xid-resets"

// maxResetFile bounds what is read of one reset record.
const maxResetFile = 4 << 10

type config struct {
	kmsg        string
	unknown     string
	recordReset string
}

// Command is the kubemedic-detect subcommand "xid".
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "xid",
		Summary: "NVIDIA Xid errors that need a GPU reset or a reboot (GPUXidError)",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			c := &config{}
			fs.StringVar(&c.kmsg, "kmsg", "/dev/kmsg", "kernel log, a host path under --root: /dev/kmsg, or a file of kmsg records or dmesg lines")
			fs.StringVar(&c.unknown, "unknown-xid", "ignore", "Xids not in the catalog: ignore (and log) or reset")
			fs.StringVar(&c.recordReset, "record-reset", "", "record that the GPU with this PCI bus ID was reset now, print OK and exit")
			return c.run
		},
	}
}

func (c *config) run(ctx context.Context, env *plugin.Env) plugin.Result {
	var unknown UnknownPolicy
	switch c.unknown {
	case "ignore":
		unknown = UnknownIgnore
	case "reset":
		unknown = UnknownReset
	default:
		return plugin.Unknown("xid: --unknown-xid=%q: want ignore or reset", c.unknown)
	}
	var resetBus string
	if c.recordReset != "" {
		bus, ok := NormalizeBus([]byte(c.recordReset))
		if !ok {
			return plugin.Unknown("xid: --record-reset=%q is not a PCI bus ID", c.recordReset)
		}
		resetBus = bus
	}

	bootID, err := env.Root.BootID()
	if err != nil {
		return unknownErr(err)
	}
	store, err := state.Open(ctx, env.StateDir, stateName)
	if err != nil {
		return unknownErr(err)
	}
	defer store.Close()
	st, changed := loadState(env, store, bootID)
	if mergeResetFiles(env, st, filepath.Join(env.StateDir, ResetsDir)) {
		changed = true
	}

	if resetBus != "" {
		up, err := env.Root.Uptime()
		if err != nil {
			return unknownErr(err)
		}
		env.Log.Info("Recording GPU reset", "bus", resetBus, "uptime", up)
		st.AddReset(resetBus, secondsToUsec(up))
		if err := store.Save(st); err != nil {
			return unknownErr(err)
		}
		return plugin.OK("recorded GPU reset of %s", resetBus)
	}

	path := env.Root.Path(c.kmsg)
	var found []Found
	if err := readLog(ctx, path, func(f Found) { found = append(found, f) }); err != nil {
		return unknownErr(err)
	}
	added := st.AddEvents(found)
	for _, f := range added {
		if _, ok := Lookup(f.Xid); !ok {
			env.Log.Warn("Found Xid not in the catalog", "xid", f.Xid, "bus", f.Bus, "usec", f.Usec, "policy", c.unknown)
		} else {
			env.Log.Info("Found Xid", "xid", f.Xid, "bus", f.Bus, "usec", f.Usec)
		}
	}
	if len(added) > 0 {
		st.Compact(unknown)
		changed = true
	}
	if changed {
		if err := store.Save(st); err != nil {
			return unknownErr(err)
		}
	}
	return Decide(st, unknown).Result()
}

// unknownErr is Unknown for err. A file error is shown as "<path>: <errno>"
// so that the path survives the cut to plugin.MaxLine bytes.
func unknownErr(err error) plugin.Result {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return plugin.Unknown("%s: %v", pe.Path, pe.Err)
	}
	return plugin.Unknown("%v", err)
}

// loadState returns the stored state for this boot, or a new one (changed
// true) when there is none, it is from another boot, or it does not decode.
func loadState(env *plugin.Env, store *state.Store, bootID string) (*State, bool) {
	var st State
	found, err := store.Load(&st)
	switch {
	case err != nil:
		env.Log.Warn("Discarding unreadable state", "err", err)
	case !found:
	case st.Version != stateVersion:
		env.Log.Warn("Discarding state of another version", "path", store.Path(), "version", st.Version)
	case st.BootID != bootID:
		env.Log.Info("Discarding state of a previous boot", "path", store.Path(), "bootID", st.BootID)
	default:
		if st.GPUs == nil {
			st.GPUs = map[string]*GPU{}
		}
		return &st, false
	}
	return NewState(bootID), true
}

// mergeResetFiles merges the reset records in dir into st and reports
// whether anything was new. A record from another boot is skipped; a
// malformed one is logged and skipped. Files are left in place: merging is
// idempotent, and the reset-gpu pod overwrites its file at the next reset.
func mergeResetFiles(env *plugin.Env, st *State, dir string) bool {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		env.Log.Warn("Skipping GPU reset records", "dir", dir, "err", err)
		return false
	}
	changed := false
	for _, ent := range entries {
		path := filepath.Join(dir, ent.Name())
		if !ent.Type().IsRegular() || strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		bus, ok := NormalizeBus([]byte(ent.Name()))
		if !ok {
			env.Log.Warn("Skipping GPU reset record: name is not a PCI bus ID", "path", path)
			continue
		}
		data, err := readAtMost(path, maxResetFile)
		if err != nil {
			env.Log.Warn("Skipping GPU reset record", "path", path, "err", err)
			continue
		}
		bootID, usec, err := ParseResetRecord(data)
		if err != nil {
			env.Log.Warn("Skipping malformed GPU reset record", "path", path, "err", err)
			continue
		}
		if bootID != st.BootID {
			env.Log.Debug("Skipping GPU reset record of another boot", "path", path, "bootID", bootID)
			continue
		}
		if st.AddReset(bus, usec) {
			env.Log.Info("Merged GPU reset record", "path", path, "bus", bus, "usec", usec)
			changed = true
		}
	}
	return changed
}

func readAtMost(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// ParseResetRecord parses a reset record: "<boot_id> <uptime_seconds>\n",
// the boot ID and the first field of /proc/uptime at the reset.
func ParseResetRecord(data []byte) (bootID string, usec int64, err error) {
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return "", 0, fmt.Errorf("want %q, got %d fields", "<boot_id> <uptime_seconds>", len(f))
	}
	up, err := strconv.ParseFloat(f[1], 64)
	if err != nil || up < 0 || math.IsInf(up, 0) || math.IsNaN(up) || up > 1e12 {
		return "", 0, fmt.Errorf("uptime %q is not a number of seconds", f[1])
	}
	return f[0], secondsToUsec(up), nil
}

func secondsToUsec(s float64) int64 {
	return int64(math.Round(s * 1e6))
}
