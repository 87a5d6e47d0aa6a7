package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// sh starts a /bin/sh script as a supervised process logging to the test's
// temporary directory.
func sh(t *testing.T, ctx context.Context, script string, env ...string) *localcluster.Process {
	t.Helper()
	p, err := localcluster.StartProcess(ctx, localcluster.ProcessSpec{
		Name:        "script",
		Path:        "/bin/sh",
		Args:        []string{"-c", script},
		Env:         env,
		LogPath:     filepath.Join(t.TempDir(), "script.log"),
		StopTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })
	return p
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestProcessLogsOutputAndReportsExit(t *testing.T) {
	p := sh(t, t.Context(), `echo "out $GREETING"; echo err >&2; exit 3`, "GREETING=hello")
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not exit")
	}
	err := p.Exited()
	require.Error(t, err)
	for _, want := range []string{"script exited", "exit status 3", "out hello", "err", "last lines of script.log"} {
		require.ErrorContains(t, err, want)
	}
	log, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	require.Equal(t, "out hello\nerr\n", string(log))
}

func TestProcessStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p := sh(t, ctx, `sleep 60`)
	require.NoError(t, p.Exited(), "runs before the cancel")
	cancel()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the process outlived its context")
	}
	require.ErrorContains(t, p.Exited(), "signal: terminated")
}

func TestProcessStopKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// The child ignores SIGTERM; the leader waits on it.
	p := sh(t, context.Background(), `sh -c 'trap "" TERM; echo $$ > `+pidFile+`; exec sleep 60' & wait`)
	var child int
	testsupport.Eventually(t, "the child to write its pid", 10*time.Second, 20*time.Millisecond, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return true
	}, nil)
	require.True(t, alive(child))

	require.NoError(t, p.Stop())
	require.NoError(t, p.Stop(), "Stop again")
	testsupport.Eventually(t, "the child to be gone", 10*time.Second, 20*time.Millisecond, func() bool {
		// A killed child of the leader is reparented and reaped by init (or
		// a subreaper); until then it is a zombie, which kill(0) still sees.
		b, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	}, nil)
}

func TestProcessWaitHTTPOKReportsEarlyExit(t *testing.T) {
	p := sh(t, context.Background(), `echo no server here; exit 1`)
	port, err := localcluster.FreePort()
	require.NoError(t, err)
	err = p.WaitHTTPOK(t.Context(), "http://127.0.0.1:"+strconv.Itoa(port)+"/healthz", 30*time.Second)
	require.ErrorContains(t, err, "script exited before serving")
	require.ErrorContains(t, err, "no server here")
}

func TestStartProcessFailsWithoutLogOrExecutable(t *testing.T) {
	_, err := localcluster.StartProcess(t.Context(), localcluster.ProcessSpec{Name: "x", Path: "/bin/true"})
	require.ErrorContains(t, err, "no log path")
	_, err = localcluster.StartProcess(t.Context(), localcluster.ProcessSpec{
		Path: filepath.Join(t.TempDir(), "missing"), LogPath: filepath.Join(t.TempDir(), "log"),
	})
	require.ErrorContains(t, err, "start missing")
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	port, err := localcluster.FreePort()
	require.NoError(t, err)
	require.Positive(t, port)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// The demo picks its components' ports, then starts Alertmanager, which
// picks its own: FreePort must never hand out a port twice, and never one
// the kernel would give a ":0" listener meanwhile (CI saw Alertmanager bind
// the janitor's port).
func TestFreePortNeverRepeatsAndAvoidsEphemeralRange(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("skipping the range check: %v", err)
	}
	var lo, hi int
	_, err = fmt.Sscan(string(data), &lo, &hi)
	require.NoError(t, err)
	seen := map[int]bool{}
	for range 500 {
		p, err := localcluster.FreePort()
		require.NoError(t, err)
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		if lo-20000 >= 1000 {
			require.Less(t, p, lo, "port %d is in the ephemeral range %d-%d", p, lo, hi)
		}
		// A ":0" listener opened now cannot get a port FreePort gave.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		require.False(t, seen[l.Addr().(*net.TCPAddr).Port])
		require.NoError(t, l.Close())
	}
}
