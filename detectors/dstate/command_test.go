package dstate

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/dstate/dstatetest"
	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// kubelet is an httptest kubelet serving /pods from a PodList file and
// checking the bearer token.
type kubelet struct {
	*httptest.Server
	requests atomic.Int32
}

func newKubelet(t *testing.T, podList string, status int) *kubelet {
	t.Helper()
	body, err := os.ReadFile(podList)
	require.NoError(t, err)
	k := &kubelet{}
	k.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.requests.Add(1)
		if r.URL.Path != "/pods" || r.Header.Get("Authorization") != "Bearer test-token" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if status != http.StatusOK {
			http.Error(w, "kubelet is sick", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(k.Close)
	return k
}

func tokenFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(f, []byte("test-token"), 0o600))
	return f
}

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := plugin.Main([]*plugin.Command{Command()}, append([]string{"dstate"}, args...), &out, &errOut)
	return code, strings.TrimSuffix(out.String(), "\n"), errOut.String()
}

func TestCommandEndToEnd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the zombie leader's thread is looked into only on Linux")
	}
	k := newKubelet(t, "../testdata/dstate/pods.json", http.StatusOK)
	stateDir := t.TempDir()
	common := []string{"--root=" + fixtureRoot, "--state-dir=" + stateDir, "--node=gpu-1",
		"--kubelet-url=" + k.URL, "--token-file=" + tokenFile(t), "--kubeconfig=/nonexistent"}

	// A fresh state: with the default 5m nothing has been in D long
	// enough, and the kubelet is not asked.
	code, line, stderr := runMain(t, common...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "no D-state processes of deleted pods; 4 in D under 5m0s", line)
	require.Zero(t, k.requests.Load())

	var st State
	b, err := os.ReadFile(filepath.Join(stateDir, "dstate.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	require.Equal(t, "1d9a7c3e-4b5f-4e6d-8c7b-9a0f1e2d3c4b", st.BootID)
	var pids []int
	for _, s := range st.Procs {
		pids = append(pids, s.PID)
	}
	require.Equal(t, []int{4242, 4300, 4400, 7000}, pids, "pod processes in D; not rsync, not the kernel worker")
	first := st.Procs[0].FirstSeen

	// With --min-duration=0s they count: pod A is gone, B is Terminating
	// past its grace period, C runs, D (a zombie leader with a thread in
	// D) is gone. The first seen are all equal, so the lowest PID is named.
	code, line, stderr = runMain(t, append(common, "--min-duration=0s")...)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, "DStateOrphans: 3 procs in D; pod 74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77 python3", line)
	require.Equal(t, int32(1), k.requests.Load())
	require.Contains(t, stderr, "pod=deleted")
	require.Contains(t, stderr, `pod="Terminating past its grace period" namespace=ml name=train-1`)
	require.Contains(t, stderr, "pid=7000")

	// The same again: the same line, and the first sightings are kept.
	code, line2, _ := runMain(t, append(common, "--min-duration=0s")...)
	require.Equal(t, 1, code)
	require.Equal(t, line, line2)
	b, err = os.ReadFile(filepath.Join(stateDir, "dstate.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	require.True(t, first.Equal(st.Procs[0].FirstSeen))
}

func TestCommandPodsUnknown(t *testing.T) {
	k := newKubelet(t, "../testdata/dstate/pods.json", http.StatusInternalServerError)
	code, line, stderr := runMain(t, "--root="+fixtureRoot, "--state-dir="+t.TempDir(), "--node=gpu-1", "--min-duration=0s",
		"--kubelet-url="+k.URL, "--token-file="+tokenFile(t), "--kubeconfig=/nonexistent")
	require.Equal(t, 2, code, stderr)
	require.True(t, strings.HasPrefix(line, "dstate: pods unknown: kubelet https://127.0.0.1:"), line)
	require.Contains(t, line, "HTTP 500")
}

func TestCommandUnknownWithoutEvidence(t *testing.T) {
	noBootID := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(noBootID, "proc/1"), 0o755))
	emptyProc := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(emptyProc, "proc/sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(emptyProc, "proc/sys/kernel/random/boot_id"), []byte("b\n"), 0o644))
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"no boot ID", []string{"--root=" + noBootID}, "dstate: read boot ID: open " + noBootID + "/proc/sys/kernel/random/boot_id"},
		{"no processes", []string{"--root=" + emptyProc}, "dstate: no processes in " + emptyProc + "/proc"},
		{"negative min duration", []string{"--root=" + fixtureRoot, "--min-duration=-1s"}, "dstate: --min-duration -1s is negative"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, line, _ := runMain(t, append(tc.args, "--state-dir="+t.TempDir(), "--kubelet-url=")...)
			require.Equal(t, 2, code)
			require.True(t, strings.HasPrefix(line, tc.want[:min(len(tc.want), plugin.MaxLine)]), line)
		})
	}
}

func TestCheckStartsOverOnCorruptState(t *testing.T) {
	stateDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(stateDir, "dstate.json"), []byte("{not json"), 0o644))
	var logs bytes.Buffer
	env := &plugin.Env{Root: host.Root(fixtureRoot), StateDir: stateDir, Node: "gpu-1", Now: time.Now,
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	r := Check(context.Background(), env, time.Hour, &fakePods{})
	require.Equal(t, plugin.StatusOK, r.Status, r.Line())
	require.Contains(t, logs.String(), "Starting over")
	b, err := os.ReadFile(filepath.Join(stateDir, "dstate.json"))
	require.NoError(t, err)
	require.Contains(t, string(b), `"bootID"`)
}

func BenchmarkDState10k(b *testing.B) {
	root := b.TempDir()
	require.NoError(b, dstatetest.WriteFixture(root, 10000, 5))
	env := &plugin.Env{Root: host.Root(root), StateDir: b.TempDir(), Node: "gpu-1", Now: time.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pods := &fakePods{}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	minWall := time.Duration(1<<63 - 1)
	for b.Loop() {
		start := time.Now()
		if r := Check(context.Background(), env, 0, pods); r.Status != plugin.StatusNonOK {
			b.Fatal(r.Line())
		}
		minWall = min(minWall, time.Since(start))
	}
	// On a busy machine ns/op is mostly waiting for a CPU: the CPU time
	// (user+system) and the fastest run say more.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(minWall), "min-ns/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkScan10k(b *testing.B) {
	root := b.TempDir()
	require.NoError(b, dstatetest.WriteFixture(root, 10000, 5))
	s := newScanner(host.Root(root))
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.scan()
		if err != nil || len(res.Procs) != 5 {
			b.Fatal(err, len(res.Procs))
		}
	}
}
