package nfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestMain lets the test binary be the probe child: Run re-executes
// env.Executable (here, this binary) as "nfs-probe ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ProbeName {
		os.Exit(probeMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const testdata = "../testdata/nfs"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	require.NoError(t, err)
	return b
}

func TestParseMountinfoFixtures(t *testing.T) {
	byMP := func(t *testing.T, name string) map[string]Mount {
		ms, err := ParseMountinfo(name, readFixture(t, name))
		require.NoError(t, err)
		out := map[string]Mount{}
		for _, m := range ms {
			out[m.MountPoint] = m
		}
		return out
	}
	t.Run("nfs4 with addr and port", func(t *testing.T) {
		ms := byMP(t, "mountinfo-nfs4.txt")
		require.Len(t, ms, 6)
		d := ms["/mnt/datasets"]
		require.Equal(t, Mount{ID: 512, Parent: 27, Major: 0, Minor: 53, Root: "/", MountPoint: "/mnt/datasets",
			Options: "rw,relatime", Optional: []string{"shared:290"}, FSType: "nfs4", Source: "fs01.example.com:/export/datasets",
			SuperOptions: "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.12,local_lock=none,addr=10.0.0.5"}, d)
		require.Equal(t, "[fd00::5]:/export/v6", ms["/mnt/v6"].Source)
		require.Equal(t, []string{"shared:12"}, ms["/proc"].Optional)
	})
	t.Run("nfs v3 with a bind root", func(t *testing.T) {
		ms := byMP(t, "mountinfo-nfs3.txt")
		require.Equal(t, "/scratch", ms["/mnt/scratch"].Root)
		require.Equal(t, "nfs", ms["/mnt/scratch"].FSType)
	})
	t.Run("escapes", func(t *testing.T) {
		ms := byMP(t, "mountinfo-escaped.txt")
		require.Contains(t, ms, "/mnt/my data")
		require.Equal(t, "fs01:/export/my data", ms["/mnt/my data"].Source)
		tab := ms["/mnt/tab\tand\\back\nnl"]
		require.Equal(t, "/sub\\dir", tab.Root)
		require.Equal(t, "tmp fs", tab.Source)
		require.Empty(t, tab.Optional)
	})
	t.Run("fuse and overlay with many optional fields", func(t *testing.T) {
		ms := byMP(t, "mountinfo-fuse-overlay.txt")
		require.Equal(t, "fuse.hangfs", ms["/mnt/hang"].FSType)
		require.Empty(t, ms["/mnt/hang"].Optional)
		ov := ms["/run/containerd/io.containerd.runtime.v2.task/k8s.io/4f1c/rootfs"]
		require.Equal(t, []string{"shared:400", "master:12", "propagate_from:3", "unbindable"}, ov.Optional)
		require.Equal(t, "overlay", ov.FSType)
	})
}

func TestParseMountinfoErrors(t *testing.T) {
	_, err := ParseMountinfo("/proc/1/mountinfo", readFixture(t, "mountinfo-malformed.txt"))
	require.ErrorContains(t, err, "/proc/1/mountinfo:2: ")
	for _, tc := range []struct{ desc, line, want string }{
		{"no separator", "1 2 0:1 / /a rw shared:1 ext4 /dev/x rw", "got 10 fields"},
		{"too few after separator", "1 2 0:1 / /a rw - ext4 /dev/x", "got 9 fields"},
		{"too many after separator", "1 2 0:1 / /a rw - ext4 /dev/x rw extra", "got 11 fields"},
		{"bad ID", "x 2 0:1 / /a rw - ext4 /dev/x rw", `mount ID "x"`},
		{"bad major:minor", "1 2 01 / /a rw - ext4 /dev/x rw", `major:minor "01"`},
		{"relative mount point", "1 2 0:1 / a rw - ext4 /dev/x rw", "not absolute"},
		{"truncated escape", `1 2 0:1 / /a\04 rw - ext4 /dev/x rw`, "truncated escape"},
		{"bad escape", `1 2 0:1 / /a\999 rw - ext4 /dev/x rw`, "bad escape"},
		{"escape out of range", `1 2 0:1 / /a\400 rw - ext4 /dev/x rw`, "bad escape"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ParseMountinfo("mi", []byte("27 1 259:2 / / rw - ext4 /dev/root rw\n"+tc.line+"\n"))
			require.ErrorContains(t, err, "mi:2: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseFstab(t *testing.T) {
	es, err := ParseFstab("/etc/fstab", readFixture(t, "fstab"))
	require.NoError(t, err)
	require.Len(t, es, 6)
	require.Equal(t, FstabEntry{Source: "fs02:/export/models", MountPoint: "/mnt/models", FSType: "nfs",
		Options: []string{"rw", "hard", "vers=3", "_netdev"}}, es[3])
	require.True(t, es[4].NoAuto())
	require.False(t, es[3].NoAuto())
	_, err = ParseFstab("/etc/fstab", []byte("# c\n\nfs01:/x /mnt/x\n"))
	require.ErrorContains(t, err, "/etc/fstab:3: ")
}

func TestExpectedMounts(t *testing.T) {
	ms, err := ParseMountinfo("mi", readFixture(t, "mountinfo-nfs4.txt"))
	require.NoError(t, err)
	fstab, err := ParseFstab("fstab", readFixture(t, "fstab"))
	require.NoError(t, err)
	got := ExpectedMounts(ms, fstab, []string{"/mnt/extra/", "/proc"}, []string{"nfs", "nfs4"})
	require.Equal(t, []Expected{
		{MountPoint: "/mnt/datasets", Present: true, Server: "fs01.example.com:2049", Dial: "10.0.0.5:2049"},
		{MountPoint: "/mnt/checkpoints", Present: true, Server: "10.0.0.7:2050", Dial: "10.0.0.7:2050"},
		{MountPoint: "/mnt/v6", Present: true, Server: "[fd00::5]:2049", Dial: "[fd00::5]:2049"},
		{MountPoint: "/mnt/extra", Present: false},
		{MountPoint: "/proc", Present: true},
		// fstab: models is missing; manual is noauto; tmpfs is not NFS.
		{MountPoint: "/mnt/models", Present: false, Server: "fs02:2049", Dial: "fs02:2049"},
	}, got)

	t.Run("the topmost of stacked mounts counts", func(t *testing.T) {
		ms, err := ParseMountinfo("mi", []byte("27 1 259:2 / / rw - ext4 /dev/root rw\n"+
			"30 27 0:50 / /data rw - nfs4 a:/x rw,addr=10.0.0.1\n"+
			"31 30 0:51 / /data rw - tmpfs tmpfs rw\n"))
		require.NoError(t, err)
		require.Empty(t, ExpectedMounts(ms, nil, nil, []string{"nfs4"}))
		require.Equal(t, []Expected{{MountPoint: "/data", Present: true}}, ExpectedMounts(ms, nil, []string{"/data"}, []string{"nfs4"}))
	})
}

func TestServer(t *testing.T) {
	for _, tc := range []struct{ source, opts, name, dial string }{
		{"fs01:/export", "rw,addr=10.0.0.5", "fs01:2049", "10.0.0.5:2049"},
		{"fs01:/export", "rw,port=2050", "fs01:2050", "fs01:2050"},
		{"fs01:/export", "rw,port=0,proto=tcp", "fs01:2049", "fs01:2049"},
		{"[fd00::5]:/export", "addr=fd00::5,proto=tcp6", "[fd00::5]:2049", "[fd00::5]:2049"},
		{"fs01:/export", "proto=udp", "", ""},
		{"fs01:/export", "proto=rdma", "", ""},
		{"hangfs", "rw", "", ""},
		{"/dev/sda1", "rw", "", ""},
		{"fs01:export", "rw", "", ""},
		{"[fd00::5/export", "rw", "", ""},
	} {
		t.Run(tc.source+" "+tc.opts, func(t *testing.T) {
			name, dial := server(tc.source, tc.opts)
			require.Equal(t, tc.name, name)
			require.Equal(t, tc.dial, dial)
		})
	}
}

func TestDecide(t *testing.T) {
	ds := Expected{MountPoint: "/mnt/datasets", Present: true, Server: "fs01:2049", Dial: "10.0.0.5:2049"}
	ck := Expected{MountPoint: "/mnt/ckpt", Present: true, Server: "fs02:2049", Dial: "10.0.0.6:2049"}
	fu := Expected{MountPoint: "/mnt/hang", Present: true}
	missing := Expected{MountPoint: "/mnt/models", Server: "fs03:2049", Dial: "fs03:2049"}
	ok := Probe{State: ProbeOK}
	down := map[string]error{"10.0.0.5:2049": errors.New("connection refused")}
	for _, tc := range []struct {
		desc   string
		in     Input
		status plugin.Status
		reason string
		line   string
	}{
		{"no mounts expected", Input{}, plugin.StatusOK, "", "no NFS mounts expected"},
		{"one healthy", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: ok}},
			plugin.StatusOK, "", "1 NFS mount healthy"},
		{"three healthy", Input{Mounts: []Expected{ds, ck, fu}, Probes: map[string]Probe{ds.MountPoint: ok, ck.MountPoint: ok, fu.MountPoint: ok}},
			plugin.StatusOK, "", "3 NFS mounts healthy"},
		{"missing", Input{Mounts: []Expected{ds, missing}, Probes: map[string]Probe{ds.MountPoint: ok}},
			plugin.StatusNonOK, v1alpha1.ReasonMountMissing, "MountMissing: /mnt/models missing"},
		{"ENOENT on the mount point is missing", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeMissing, Op: "stat"}}},
			plugin.StatusNonOK, v1alpha1.ReasonMountMissing, "MountMissing: /mnt/datasets missing"},
		{"hung in stat", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeHung, Op: "stat"}}, Timeout: 5 * time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/datasets stat hung >5s"},
		{"hung in statfs", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeHung, Op: "statfs"}}, Timeout: 5 * time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/datasets statfs hung >5s"},
		{"still hung", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeStillHung}}, Timeout: 5 * time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/datasets still hung >5s"},
		{"stale handle", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeFailed, Op: "stat", Err: "ESTALE"}}},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/datasets stat ESTALE"},
		{"hung beats missing, names the hung one", Input{Mounts: []Expected{missing, ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeHung, Op: "stat"}}, Timeout: time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/datasets stat hung >1s (+1 mount)"},
		{"first hung mount by path, others counted", Input{Mounts: []Expected{fu, ds, ck, missing}, Probes: map[string]Probe{
			ds.MountPoint: {State: ProbeHung, Op: "stat"}, ck.MountPoint: {State: ProbeStillHung}, fu.MountPoint: {State: ProbeHung, Op: "stat"}}, Timeout: time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonMountHung, "MountHung: /mnt/ckpt still hung >1s (+3 mounts)"},
		{"unreachable server beats a hang on its own mount", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeHung, Op: "stat"}}, Unreachable: down},
			plugin.StatusNonOK, v1alpha1.ReasonServerUnreachable, "ServerUnreachable: /mnt/datasets server fs01:2049 unreachable"},
		{"any unreachable server beats hangs elsewhere", Input{Mounts: []Expected{ds, ck}, Probes: map[string]Probe{ds.MountPoint: ok, ck.MountPoint: {State: ProbeHung, Op: "stat"}}, Unreachable: down, Timeout: time.Second},
			plugin.StatusNonOK, v1alpha1.ReasonServerUnreachable, "ServerUnreachable: /mnt/datasets server fs01:2049 unreachable (+1 mount)"},
		{"missing fstab mount with its server down", Input{Mounts: []Expected{missing}, Unreachable: map[string]error{"fs03:2049": errors.New("i/o timeout")}},
			plugin.StatusNonOK, v1alpha1.ReasonServerUnreachable, "ServerUnreachable: /mnt/models server fs03:2049 unreachable"},
		{"fuse mounts skip the server check", Input{Mounts: []Expected{fu}, Probes: map[string]Probe{fu.MountPoint: ok}, Unreachable: down},
			plugin.StatusOK, "", "1 NFS mount healthy"},
		{"unprobeable alone is Unknown", Input{Mounts: []Expected{ds}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeError, Op: "stat", Err: "EACCES"}}},
			plugin.StatusUnknown, "", "/mnt/datasets stat EACCES"},
		{"a fault beats Unknown", Input{Mounts: []Expected{ds, missing}, Probes: map[string]Probe{ds.MountPoint: {State: ProbeError, Op: "record", Err: "failed"}}},
			plugin.StatusNonOK, v1alpha1.ReasonMountMissing, "MountMissing: /mnt/models missing (+1 mount)"},
		{"a present mount without a probe is Unknown", Input{Mounts: []Expected{ds}},
			plugin.StatusUnknown, "", "/mnt/datasets not probed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := Decide(tc.in)
			require.Equal(t, tc.status, r.Status)
			require.Equal(t, tc.reason, r.Reason)
			require.Equal(t, tc.line, r.Line())
			require.LessOrEqual(t, len(r.Line()), plugin.MaxLine)
			if r.Status == plugin.StatusNonOK {
				require.Equal(t, remountTarget(r.Message), firstMount(tc.in, r.Message), "remount-nfs extracts the mount point")
			}
		})
	}
}

// remountPath is how the remount-nfs template finds the mount point in the
// condition message.
var remountPath = regexp.MustCompile(`(?:^|\s)(/[^\s:;,()]+)`)

func remountTarget(msg string) string {
	m := remountPath.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	return m[1]
}

func firstMount(in Input, msg string) string {
	for _, m := range in.Mounts {
		if strings.HasPrefix(msg, m.MountPoint+" ") {
			return m.MountPoint
		}
	}
	return "?"
}

// fixtureEnv is a host root in a temp dir with the given mountinfo as PID
// 1's, and mount point directories made for present.
func fixtureEnv(t *testing.T, mountinfo string, dirs ...string) *plugin.Env {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/1/mountinfo"), []byte(mountinfo), 0o644))
	for _, d := range dirs {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	return &plugin.Env{Root: host.Root(root), StateDir: t.TempDir(), Now: time.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Executable: exe}
}

func defaultConfig() *Config {
	return &Config{Mountinfo: "/proc/1/mountinfo", FSTypes: []string{"nfs", "nfs4"}, Fstab: true,
		ProbeTimeout: 5 * time.Second, ConnectTimeout: 2 * time.Second}
}

// TestRun runs the whole check with this test binary as the probe child,
// against a fixture root and real TCP listeners as NFS servers.
func TestRun(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer up.Close()
	upPort := up.Addr().(*net.TCPAddr).Port
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gonePort := gone.Addr().(*net.TCPAddr).Port
	gone.Close()
	base := "27 1 259:2 / / rw - ext4 /dev/root rw\n"
	nfsLine := func(id int, mp string, port int) string {
		return fmt.Sprintf("%d 27 0:%d / %s rw,relatime shared:%d - nfs4 fs01:/export%d rw,vers=4.2,hard,proto=tcp,port=%d,addr=127.0.0.1\n", id, id, mp, id, id, port)
	}

	for _, tc := range []struct {
		desc      string
		mountinfo string
		dirs      []string
		fstab     string
		flags     func(*Config)
		status    plugin.Status
		line      string
	}{
		{"healthy", base + nfsLine(30, "/mnt/a", upPort) + nfsLine(31, "/mnt/b", upPort), []string{"/mnt/a", "/mnt/b"}, "", nil,
			plugin.StatusOK, "2 NFS mounts healthy"},
		{"no NFS", base, nil, "", nil, plugin.StatusOK, "no NFS mounts expected"},
		{"mount point gone under the root", base + nfsLine(30, "/mnt/a", upPort), nil, "", nil,
			plugin.StatusNonOK, "MountMissing: /mnt/a missing"},
		{"server down", base + nfsLine(30, "/mnt/a", upPort) + nfsLine(31, "/mnt/b", gonePort), []string{"/mnt/a", "/mnt/b"}, "", nil,
			plugin.StatusNonOK, fmt.Sprintf("ServerUnreachable: /mnt/b server fs01:%d unreachable", gonePort)},
		{"fstab mount missing", base + nfsLine(30, "/mnt/a", upPort), []string{"/mnt/a"},
			fmt.Sprintf("fs01:/x /mnt/a nfs4 port=%d 0 0\nfs01:/y /mnt/c nfs4 rw,port=%d,addr=127.0.0.1 0 0\nfs01:/z /mnt/d nfs4 noauto 0 0\n", upPort, upPort), nil,
			plugin.StatusNonOK, "MountMissing: /mnt/c missing"},
		{"fstab ignored with --fstab=false", base + nfsLine(30, "/mnt/a", upPort), []string{"/mnt/a"},
			"fs01:/y /mnt/c nfs4 rw 0 0\n", func(c *Config) { c.Fstab = false },
			plugin.StatusOK, "1 NFS mount healthy"},
		{"--mount missing", base, nil, "", func(c *Config) { c.Mounts = []string{"/data"} },
			plugin.StatusNonOK, "MountMissing: /data missing"},
		{"malformed mountinfo is Unknown", base + "garbage\n", nil, "", nil,
			plugin.StatusUnknown, "nfs: "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			env := fixtureEnv(t, tc.mountinfo, tc.dirs...)
			if tc.fstab != "" {
				require.NoError(t, os.MkdirAll(env.Root.Path("/etc"), 0o755))
				require.NoError(t, os.WriteFile(env.Root.Path("/etc/fstab"), []byte(tc.fstab), 0o644))
			}
			c := defaultConfig()
			if tc.flags != nil {
				tc.flags(c)
			}
			r := c.Run(context.Background(), env)
			require.Equal(t, tc.status, r.Status, r.Line())
			if tc.status == plugin.StatusUnknown {
				require.Contains(t, r.Line(), tc.line)
			} else {
				require.Equal(t, tc.line, r.Line())
			}
			recs, err := ReadRecords(filepath.Join(env.StateDir, RecordsDir))
			require.NoError(t, err)
			require.Empty(t, recs, "every probe returned, so no record is left")
		})
	}
}

// TestRunRecords covers the bookkeeping without a hung mount: a live
// record older than the timeout is still hung and gets no new probe; a
// dead one is removed and the mount probed; a young live one is waited for.
func TestRunRecords(t *testing.T) {
	mi := "27 1 259:2 / / rw - ext4 /dev/root rw\n30 27 0:30 / /mnt/a rw - fuse.test t rw\n"
	st, err := procfs.ReadStat(host.Root("/"), os.Getpid())
	require.NoError(t, err)
	me := st.StartTicks

	t.Run("live and old: still hung, no probe", func(t *testing.T) {
		env := fixtureEnv(t, mi, "/mnt/a")
		dir := filepath.Join(env.StateDir, RecordsDir)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		rec := Record{Mount: "/mnt/a", PID: os.Getpid(), StartTicks: me, Started: time.Now().Add(-time.Minute)}
		require.NoError(t, writeRecord(dir, rec))
		c := defaultConfig()
		c.FSTypes = []string{"fuse.test"}
		r := c.Run(context.Background(), env)
		require.Equal(t, "MountHung: /mnt/a still hung >5s", r.Line())
		recs, err := ReadRecords(dir)
		require.NoError(t, err)
		require.Len(t, recs, 1, "the outstanding record stays")
	})
	t.Run("dead: removed, probed anew", func(t *testing.T) {
		env := fixtureEnv(t, mi, "/mnt/a")
		dir := filepath.Join(env.StateDir, RecordsDir)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, writeRecord(dir, Record{Mount: "/mnt/a", PID: os.Getpid(), StartTicks: me + 1, Started: time.Now().Add(-time.Minute)}))
		require.NoError(t, writeRecord(dir, Record{Mount: "/mnt/gone", PID: 1 << 30, StartTicks: 1, Started: time.Now()}))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{"), 0o644))
		c := defaultConfig()
		c.FSTypes = []string{"fuse.test"}
		r := c.Run(context.Background(), env)
		require.Equal(t, "1 NFS mount healthy", r.Line())
		recs, err := ReadRecords(dir)
		require.NoError(t, err)
		require.Empty(t, recs)
	})
	t.Run("live and young: waited for, then probed", func(t *testing.T) {
		env := fixtureEnv(t, mi, "/mnt/a")
		dir := filepath.Join(env.StateDir, RecordsDir)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, writeRecord(dir, Record{Mount: "/mnt/a", PID: os.Getpid(), StartTicks: me, Started: time.Now()}))
		time.AfterFunc(200*time.Millisecond, func() { os.Remove(recordFile(dir, "/mnt/a")) })
		c := defaultConfig()
		c.FSTypes = []string{"fuse.test"}
		start := time.Now()
		r := c.Run(context.Background(), env)
		require.Equal(t, "1 NFS mount healthy", r.Line())
		require.Less(t, time.Since(start), 4*time.Second)
	})
	t.Run("live and young past the timeout: still hung", func(t *testing.T) {
		env := fixtureEnv(t, mi, "/mnt/a")
		dir := filepath.Join(env.StateDir, RecordsDir)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, writeRecord(dir, Record{Mount: "/mnt/a", PID: os.Getpid(), StartTicks: me, Started: time.Now()}))
		c := defaultConfig()
		c.FSTypes = []string{"fuse.test"}
		c.ProbeTimeout = 300 * time.Millisecond
		r := c.Run(context.Background(), env)
		require.Equal(t, "MountHung: /mnt/a still hung >300ms", r.Line())
	})
}

// TestRunProbeFailures: a probe child that cannot start, or that exits
// without answering, is Unknown, never OK (there is no evidence), and a
// mount is never called hung on its account.
func TestRunProbeFailures(t *testing.T) {
	mi := "27 1 259:2 / / rw - ext4 /dev/root rw\n30 27 0:30 / /mnt/a rw - fuse.test t rw\n"
	for _, tc := range []struct {
		desc, exe, want string
	}{
		{"child cannot start", "/nonexistent/kubemedic-detect", "nfs: start probe"},
		{"child exits without an answer", "/bin/true", "probe exited"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			env := fixtureEnv(t, mi, "/mnt/a")
			env.Executable = tc.exe
			c := defaultConfig()
			c.FSTypes = []string{"fuse.test"}
			r := c.Run(context.Background(), env)
			require.Equal(t, plugin.StatusUnknown, r.Status, r.Line())
			require.Contains(t, r.Line(), tc.want)
		})
	}
}
