// Package detectors_test runs kubemedic-detect against real faults made on
// this machine: a FUSE file system whose handlers block gives a real hung
// mount and real processes in state D, without NFS.
package detectors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/nfs"
	"github.com/kubemedic/kubemedic/detectors/procfs"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// gate blocks the hang file system's handlers, once armed, until released.
type gate struct {
	armed   atomic.Bool
	release chan struct{}
	once    sync.Once
	calls   atomic.Int64
}

func (g *gate) wait() {
	if g.armed.Load() {
		g.calls.Add(1)
		// The request's context is cancelled when the kernel sends
		// FUSE_INTERRUPT; ignoring it is what makes the wait uninterruptible.
		<-g.release
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// hangRoot is the root directory of "hangfs". Getattr, Statfs and Lookup
// block on the gate; after release, the root is an empty directory.
type hangRoot struct {
	fs.Inode
	g *gate
}

var (
	_ fs.NodeGetattrer = (*hangRoot)(nil)
	_ fs.NodeStatfser  = (*hangRoot)(nil)
	_ fs.NodeLookuper  = (*hangRoot)(nil)
)

func (r *hangRoot) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r.g.wait()
	out.Mode = syscall.S_IFDIR | 0o755
	out.SetTimeout(0)
	return 0
}

func (r *hangRoot) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	r.g.wait()
	out.Bsize = 4096
	out.NameLen = 255
	return 0
}

func (r *hangRoot) Lookup(_ context.Context, _ string, _ *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	r.g.wait()
	return nil, syscall.ENOENT
}

// mountHangFS mounts hangfs on a new temp dir as root, with go-fuse's own
// mount(2) (there is no fusermount here). Cleanup releases the handlers and
// unmounts, so a failing test never leaves a hung mount behind.
func mountHangFS(t *testing.T) (string, *gate, func()) {
	t.Helper()
	mnt := t.TempDir()
	g := &gate{release: make(chan struct{})}
	srv, err := fs.Mount(mnt, &hangRoot{g: g}, &fs.Options{MountOptions: fuse.MountOptions{
		Name: "hangfs", FsName: "hangfs", DirectMountStrict: true,
	}})
	require.NoError(t, err, "mount hangfs")
	var once sync.Once
	unmount := func() {
		once.Do(func() {
			g.open()
			if err := srv.Unmount(); err != nil {
				t.Logf("unmount %s: %v; detaching", mnt, err)
				_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
	}
	t.Cleanup(unmount)
	g.armed.Store(true)
	return mnt, g, unmount
}

func procStat(t *testing.T, pid int) (procfs.Stat, bool) {
	t.Helper()
	s, err := procfs.ReadStat(host.Root("/"), pid)
	if errors.Is(err, os.ErrNotExist) {
		return procfs.Stat{}, false
	}
	require.NoError(t, err)
	return s, true
}

// probeChildren lists this process's children (orphans come back to it as
// a subreaper) named nfs-probe. It reads only /proc/<pid>/stat, which does
// not hang on a process in state D (cmdline could).
func probeChildren(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, ok := procStat(t, pid)
		if ok && s.PPID == os.Getpid() && s.Comm == nfs.ProbeName && s.State != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

func records(t *testing.T, stateDir string) []nfs.Record {
	t.Helper()
	recs, err := nfs.ReadRecords(filepath.Join(stateDir, nfs.RecordsDir))
	require.NoError(t, err)
	var out []nfs.Record
	for _, r := range recs {
		out = append(out, r)
	}
	return out
}

type runResult struct {
	code    int
	line    string
	elapsed time.Duration
}

// detect runs the binary and reads its stdout to EOF. EOF can only come
// when every process holding the pipe is gone: a probe child that kept it
// would make this time out, which is the NPD wedge (issue #1050).
func detect(t *testing.T, bin string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	type read struct {
		b   []byte
		err error
	}
	ch := make(chan read, 1)
	go func() { b, err := io.ReadAll(stdout); ch <- read{b, err} }()
	var out read
	select {
	case out = <-ch:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%v: stdout not closed after 30s (a child holds it?)", args)
	}
	elapsed := time.Since(start)
	require.NoError(t, out.err)
	err = cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	r := runResult{code: code, line: strings.TrimSpace(string(out.b)), elapsed: elapsed}
	t.Logf("%s %s -> exit %d in %s: %q; stderr: %s", filepath.Base(bin), args[0], code, elapsed.Round(time.Millisecond), r.line, strings.TrimSpace(stderr.String()))
	return r
}

// podCgroup creates a pod-named cgroup the way the kubelet names them
// (cgroupfs driver on v1, systemd driver on v2) and moves pid into it.
// Cleanup moves pid back (if it still exists) and removes what it made.
func podCgroup(t *testing.T, pid int, podUID string) {
	t.Helper()
	var base, dir string
	switch {
	case isDir("/sys/fs/cgroup/pids"):
		base = "/sys/fs/cgroup/pids"
		dir = filepath.Join(base, "kubepods", "besteffort", "pod"+podUID)
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		base = "/sys/fs/cgroup"
		u := strings.ReplaceAll(podUID, "-", "_")
		dir = filepath.Join(base, "kubepods.slice", "kubepods-besteffort.slice", "kubepods-besteffort-pod"+u+".slice")
	default:
		t.Skip("no cgroup v1 pids hierarchy and no cgroup v2 at /sys/fs/cgroup")
	}
	// Remove only the directories this test creates, deepest first.
	var made []string
	for d := dir; d != base; d = filepath.Dir(d) {
		if isDir(d) {
			break
		}
		made = append(made, d)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			_ = os.WriteFile(filepath.Join(base, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		}
		for _, d := range made {
			if err := os.Remove(d); err != nil {
				t.Logf("remove cgroup %s: %v", d, err)
			}
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	require.Contains(t, string(b), "pod", "pid %d cgroup after the move", pid)
}

func isDir(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() }

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestHungMount makes a real hung mount and real D-state process, and checks
// what the dstate and nfs checks report, that the nfs check returns on time
// without leaving anything on its stdout, keeps at most one probe per mount,
// and that the probe child exits and cleans up once the mount answers.
func TestHungMount(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: mounts a FUSE file system and runs the real binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: mounting FUSE without fusermount needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	// Orphans (the probe child, once kubemedic-detect exits) come back to
	// this process, so the test can see and reap them.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	bin := harness.GoBuild(t, "./cmd/kubemedic-detect")

	mnt, g, unmount := mountHangFS(t)
	stateDir := t.TempDir()

	// 1. A reader stuck in the hung mount, in state D.
	stat := exec.Command("stat", filepath.Join(mnt, "x"))
	require.NoError(t, stat.Start())
	statDone := make(chan struct{})
	go func() { _ = stat.Wait(); close(statDone) }()
	t.Cleanup(func() {
		g.open()
		select {
		case <-statDone:
		case <-time.After(10 * time.Second):
			t.Errorf("stat %d did not exit after the release", stat.Process.Pid)
		}
	})
	statPID := stat.Process.Pid
	stateOf := func() byte { s, _ := procStat(t, statPID); return s.State }
	// The kernel first waits for the FUSE answer interruptibly (S). A
	// signal moves it on: it sends FUSE_INTERRUPT, which hangfs ignores, and
	// then waits killably, which /proc shows as D. SIGSTOP wakes it without
	// killing it; SIGCONT then drops the pending stop.
	testsupport.Eventually(t, "stat to block in hangfs", 10*time.Second, 20*time.Millisecond, func() bool {
		st := stateOf()
		return (st == 'S' || st == 'D') && g.calls.Load() > 0
	}, nil)
	firstState := stateOf()
	if firstState != 'D' {
		require.NoError(t, stat.Process.Signal(syscall.SIGSTOP))
		testsupport.Eventually(t, "stat in state D after SIGSTOP", 10*time.Second, 20*time.Millisecond, func() bool { return stateOf() == 'D' }, nil)
		require.NoError(t, stat.Process.Signal(syscall.SIGCONT))
	}
	t.Logf("stat pid %d: state %c while blocked, D after the signal", statPID, firstState)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, byte('D'), stateOf(), "stat stays in D after SIGCONT")

	t.Run("dstate names the pod of the D-state process", func(t *testing.T) {
		kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/pods" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`)
		}))
		defer kubelet.Close()
		token := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(token, []byte("test-token"), 0o600))
		podUID := uuid.NewString()
		podCgroup(t, statPID, podUID)
		r := detect(t, bin, "dstate", "--root=/", "--state-dir="+t.TempDir(), "--min-duration=0s",
			"--kubelet-url="+kubelet.URL, "--token-file="+token, "--node=n", "--verbose")
		require.Equal(t, 1, r.code, r.line)
		require.Contains(t, r.line, podUID)
	})

	nfsArgs := []string{"nfs", "--root=/", "--state-dir=" + stateDir, "--mountinfo=/proc/self/mountinfo",
		"--fstype=fuse.hangfs", "--fstab=false", "--probe-timeout=1s"}

	// 3. The first run reports the hang on time and leaves one probe behind.
	r1 := detect(t, bin, nfsArgs...)
	require.Equal(t, 1, r1.code, r1.line)
	require.Contains(t, r1.line, "MountHung: "+mnt+" stat hung >1s")
	require.GreaterOrEqual(t, r1.elapsed, time.Second)
	require.Less(t, r1.elapsed, 2500*time.Millisecond, "the check must return at --probe-timeout, not wait for the probe")
	var probePID int
	testsupport.Eventually(t, "the orphaned probe to come back to the test", 5*time.Second, 20*time.Millisecond, func() bool {
		return len(probeChildren(t)) == 1
	}, nil)
	probePID = probeChildren(t)[0]
	recs := records(t, stateDir)
	require.Len(t, recs, 1)
	require.Equal(t, mnt, recs[0].Mount)
	require.Equal(t, probePID, recs[0].PID)
	s, _ := procStat(t, probePID)
	t.Logf("probe child pid %d state %c, session leader: %v", probePID, s.State, mustSID(t, probePID) == probePID)
	require.Equal(t, probePID, mustSID(t, probePID), "the probe runs in a session of its own")

	// 4. The second run says "still hung" and starts no second probe.
	r2 := detect(t, bin, nfsArgs...)
	require.Equal(t, 1, r2.code, r2.line)
	require.Contains(t, r2.line, "MountHung: "+mnt+" still hung >1s")
	require.Less(t, r2.elapsed, time.Second, "a still-hung mount is reported from the record, without waiting")
	require.Equal(t, []int{probePID}, probeChildren(t), "no second probe child")
	recs = records(t, stateDir)
	require.Len(t, recs, 1)
	require.Equal(t, probePID, recs[0].PID)

	// 5. Release: the stuck reader and the probe finish, the probe removes
	// its record, and nothing is left to reap.
	g.open()
	select {
	case <-statDone:
	case <-time.After(10 * time.Second):
		t.Fatal("stat did not exit after the release")
	}
	testsupport.Eventually(t, "the probe child to exit", 10*time.Second, 20*time.Millisecond, func() bool {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(probePID, &ws, unix.WNOHANG, nil)
		return pid == probePID || errors.Is(err, unix.ECHILD)
	}, nil)
	require.Empty(t, records(t, stateDir), "the probe removed its record")
	require.Empty(t, probeChildren(t))

	r3 := detect(t, bin, nfsArgs...)
	require.Equal(t, 0, r3.code, r3.line)
	require.Equal(t, "1 NFS mount healthy", r3.line)
	require.Empty(t, probeChildren(t), "a probe that returns in time is reaped by the check")

	// 6. Unmounted: a --mount that is gone is MountMissing.
	unmount()
	r4 := detect(t, bin, append(nfsArgs, "--mount="+mnt)...)
	require.Equal(t, 1, r4.code, r4.line)
	require.Equal(t, "MountMissing: "+mnt+" missing", r4.line)
	require.Empty(t, records(t, stateDir))
}

func mustSID(t *testing.T, pid int) int {
	t.Helper()
	sid, err := unix.Getsid(pid)
	require.NoError(t, err)
	return sid
}
