package nfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
	"github.com/kubemedic/kubemedic/detectors/state"
)

// Config is the check's flags.
type Config struct {
	Mountinfo      string
	Mounts         []string
	FSTypes        []string
	Fstab          bool
	ProbeTimeout   time.Duration
	ConnectTimeout time.Duration
}

// Command is `kubemedic-detect nfs`, the check behind NFSMountUnhealthy.
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "nfs",
		Summary: "NFS mounts missing, hung, or with an unreachable server (NFSMountUnhealthy)",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			c := &Config{}
			fs.StringVar(&c.Mountinfo, "mountinfo", "/proc/1/mountinfo", "mountinfo to read, a host path under --root (PID 1's: the host's mount namespace with hostPID)")
			fs.StringArrayVar(&c.Mounts, "mount", nil, "a mount point that must be mounted (repeatable)")
			fs.StringSliceVar(&c.FSTypes, "fstype", []string{"nfs", "nfs4"}, "every mount of these types is checked, and so are /etc/fstab entries of them")
			fs.BoolVar(&c.Fstab, "fstab", true, "expect the auto-mounted entries of --fstype in <root>/etc/fstab (skipped when the file does not exist)")
			fs.DurationVar(&c.ProbeTimeout, "probe-timeout", 5*time.Second, "a stat or statfs of a mount that takes longer is MountHung")
			fs.DurationVar(&c.ConnectTimeout, "connect-timeout", 2*time.Second, "timeout of the TCP connect to each NFS server")
			return c.Run
		},
	}
}

// Run is one invocation; see doc.go for the child/parent protocol.
func (c *Config) Run(ctx context.Context, env *plugin.Env) plugin.Result {
	b, err := env.Root.ReadFile(c.Mountinfo)
	if err != nil {
		return plugin.Unknown("nfs: %v", err)
	}
	mounts, err := ParseMountinfo(env.Root.Path(c.Mountinfo), b)
	if err != nil {
		return plugin.Unknown("nfs: %v", err)
	}
	var fstab []FstabEntry
	if c.Fstab {
		path := env.Root.Path("/etc/fstab")
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return plugin.Unknown("nfs: %v", err)
		default:
			if fstab, err = ParseFstab(path, b); err != nil {
				return plugin.Unknown("nfs: %v", err)
			}
		}
	}
	expected := ExpectedMounts(mounts, fstab, c.Mounts, c.FSTypes)
	in := Input{Mounts: expected, Timeout: c.ProbeTimeout}
	if len(expected) == 0 {
		return Decide(in)
	}

	// The lock serialises invocations, so the decision "no outstanding
	// probe for this mount, start one" is never taken twice. The probe
	// child never takes it (it could hang holding it) and does not inherit
	// it (Go opens files close-on-exec).
	st, err := state.Open(ctx, env.StateDir, "nfs")
	if err != nil {
		return plugin.Unknown("nfs: %v", err)
	}
	defer st.Close()
	recDir := filepath.Join(env.StateDir, RecordsDir)
	if err := os.MkdirAll(recDir, 0o755); err != nil {
		return plugin.Unknown("nfs: %v", err)
	}

	reach := c.checkServers(ctx, expected)

	probes, err := c.outstanding(ctx, env, recDir, expected)
	if err != nil {
		return plugin.Unknown("nfs: %v", err)
	}
	var toProbe []Expected
	for _, m := range expected {
		if _, busy := probes[m.MountPoint]; !busy && m.Present {
			toProbe = append(toProbe, m)
		}
	}
	if len(toProbe) > 0 {
		got, err := c.probe(ctx, env, recDir, toProbe)
		if err != nil {
			return plugin.Unknown("nfs: %v", err)
		}
		for k, v := range got {
			probes[k] = v
		}
	}
	in.Probes = probes
	in.Unreachable = reach()
	return Decide(in)
}

// ExpectedMounts lists the mounts to check: mountinfo entries of fstypes,
// the --mount paths, and fstab entries of fstypes without noauto. When a
// mount point is mounted more than once, the last (topmost) entry counts.
func ExpectedMounts(mounts []Mount, fstab []FstabEntry, paths, fstypes []string) []Expected {
	types := map[string]bool{}
	for _, t := range fstypes {
		types[t] = true
	}
	top := map[string]Mount{}
	for _, m := range mounts {
		top[m.MountPoint] = m
	}
	byPath := map[string]*Expected{}
	var order []string
	add := func(mp, source, superOpts string, present bool) {
		if _, ok := byPath[mp]; ok {
			return
		}
		e := &Expected{MountPoint: mp, Present: present}
		e.Server, e.Dial = server(source, superOpts)
		byPath[mp] = e
		order = append(order, mp)
	}
	for _, m := range mounts {
		if types[m.FSType] && top[m.MountPoint].ID == m.ID {
			add(m.MountPoint, m.Source, m.SuperOptions, true)
		}
	}
	for _, p := range paths {
		p = filepath.Clean(p)
		if m, ok := top[p]; ok {
			add(p, m.Source, m.SuperOptions, true)
		} else {
			add(p, "", "", false)
		}
	}
	for _, e := range fstab {
		if !types[e.FSType] || e.NoAuto() {
			continue
		}
		mp := filepath.Clean(e.MountPoint)
		if m, ok := top[mp]; ok {
			add(mp, m.Source, m.SuperOptions, true)
		} else {
			add(mp, e.Source, strings.Join(e.Options, ","), false)
		}
	}
	out := make([]Expected, 0, len(order))
	for _, mp := range order {
		out = append(out, *byPath[mp])
	}
	return out
}

// server parses an NFS source "host:/export" or "[v6addr]:/export" and the
// mount options (port=, addr=, proto=) into the name for messages and the
// address to dial. Sources that are not host:path, and UDP or RDMA mounts
// (a TCP connect says nothing about them), get "".
func server(source, opts string) (name, dial string) {
	var hostPart string
	if strings.HasPrefix(source, "[") {
		end := strings.Index(source, "]:")
		if end < 0 {
			return "", ""
		}
		hostPart = source[1:end]
	} else {
		h, path, ok := strings.Cut(source, ":")
		if !ok || !strings.HasPrefix(path, "/") || h == "" {
			return "", ""
		}
		hostPart = h
	}
	if hostPart == "" || strings.ContainsAny(hostPart, " /") {
		return "", ""
	}
	port, addr := "2049", ""
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "port":
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65536 {
				port = v
			}
		case "addr":
			addr = v
		case "proto":
			if v != "tcp" && v != "tcp6" {
				return "", ""
			}
		}
	}
	name = net.JoinHostPort(hostPart, port)
	if addr == "" {
		addr = hostPart
	}
	return name, net.JoinHostPort(addr, port)
}

// checkServers connects to every distinct server once, in parallel, and
// returns a func that waits for the answers: the unreachable ones.
func (c *Config) checkServers(ctx context.Context, mounts []Expected) func() map[string]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	bad := map[string]error{}
	seen := map[string]bool{}
	d := net.Dialer{Timeout: c.ConnectTimeout}
	for _, m := range mounts {
		if m.Dial == "" || seen[m.Dial] {
			continue
		}
		seen[m.Dial] = true
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				mu.Lock()
				bad[addr] = err
				mu.Unlock()
				return
			}
			conn.Close()
		}(m.Dial)
	}
	return func() map[string]error {
		wg.Wait()
		return bad
	}
}

// outstanding classifies the records left by earlier probe children.
// Records of dead children are removed. A live record older than the
// timeout makes its mount ProbeStillHung, and no new probe starts for it. A
// live record younger than that (an earlier invocation was cut short) is
// waited for until it is as old as the timeout: if it goes, the mount is
// probed anew; if not, it is still hung.
func (c *Config) outstanding(ctx context.Context, env *plugin.Env, dir string, expected []Expected) (map[string]Probe, error) {
	recs, err := ReadRecords(dir)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, m := range expected {
		want[m.MountPoint] = true
	}
	probes := map[string]Probe{}
	young := map[string]Record{}
	for path, r := range recs {
		alive := false
		if r.PID > 0 {
			// The child's PID is in this process's PID namespace: our /proc.
			if alive, err = procfs.Alive(host.Root("/"), r.PID, r.StartTicks); err != nil {
				return nil, fmt.Errorf("probe record %s: %w", path, err)
			}
		}
		if !alive {
			env.Log.Debug("Removing the record of a dead probe", "mount", r.Mount, "pid", r.PID)
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remove stale probe record: %w", err)
			}
			continue
		}
		if !want[r.Mount] {
			continue
		}
		if env.Now().Sub(r.Started) >= c.ProbeTimeout {
			probes[r.Mount] = Probe{State: ProbeStillHung}
		} else {
			young[path] = r
		}
	}
	for path, r := range young {
		deadline := r.Started.Add(c.ProbeTimeout)
		for {
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				break
			}
			if !env.Now().Before(deadline) {
				probes[r.Mount] = Probe{State: ProbeStillHung}
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("wait for the probe of %s: %w", r.Mount, ctx.Err())
			case <-time.After(25 * time.Millisecond):
			}
		}
	}
	return probes, nil
}

// probe starts one child for all of mounts and collects its results until
// the timeout. Mounts without a final result are ProbeHung; the child is
// then left running (it may be unkillable) with its records in place.
func (c *Config) probe(ctx context.Context, env *plugin.Env, dir string, mounts []Expected) (map[string]Probe, error) {
	args := []string{ProbeName, "--records=" + dir, "--"}
	for _, m := range mounts {
		args = append(args, m.MountPoint, env.Root.Path(m.MountPoint))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(env.Executable, args...)
	// Stdin, Stdout and Stderr stay nil: /dev/null. A child that hangs must
	// never hold the plugin's stdout or stderr (NPD issue #1050).
	cmd.ExtraFiles = []*os.File{w}
	// A session of its own: NPD's timeout kills the plugin's process group,
	// and this child must outlive that with its records intact.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := env.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("start probe: %w", err)
	}
	env.Log.Debug("Started probe", "pid", cmd.Process.Pid, "mounts", len(mounts))

	deadline := start.Add(c.ProbeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = r.SetReadDeadline(deadline)
	got := map[string]Probe{}
	statDone := map[int]bool{}
	sc := bufio.NewScanner(r)
	var recordErr error
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 3)
		if len(f) != 3 {
			continue
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 || idx >= len(mounts) {
			continue
		}
		mp := mounts[idx].MountPoint
		switch op, res := f[1], f[2]; {
		case op == "record":
			got[mp] = Probe{State: ProbeError, Op: "record", Err: "failed"}
			recordErr = fmt.Errorf("probe %s: %s", mp, res)
		case res == "ok" && op == "stat":
			statDone[idx] = true
		case res == "ok":
			got[mp] = Probe{State: ProbeOK}
		case res == "ENOENT":
			got[mp] = Probe{State: ProbeMissing, Op: op}
		case res == "ESTALE" || res == "EIO" || res == "ENOTCONN" || res == "ETIMEDOUT" || res == "EHOSTDOWN":
			got[mp] = Probe{State: ProbeFailed, Op: op, Err: res}
		default:
			got[mp] = Probe{State: ProbeError, Op: op, Err: res}
		}
	}
	if recordErr != nil {
		env.Log.Warn("Probe bookkeeping failed", "err", recordErr)
	}
	eof := sc.Err() == nil
	if eof {
		// EOF: the child closed fd 3, so it is exiting; reap it, but never
		// wait past the deadline on it.
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Until(deadline)):
		}
	} else {
		env.Log.Debug("Leaving the probe running", "pid", cmd.Process.Pid, "err", sc.Err())
		_ = cmd.Process.Release()
	}
	for i, m := range mounts {
		if _, ok := got[m.MountPoint]; ok {
			continue
		}
		op := "stat"
		if statDone[i] {
			op = "statfs"
		}
		if eof {
			// The child is gone without an answer: it crashed.
			got[m.MountPoint] = Probe{State: ProbeError, Op: op, Err: "probe exited"}
			continue
		}
		got[m.MountPoint] = Probe{State: ProbeHung, Op: op}
	}
	return got, nil
}
