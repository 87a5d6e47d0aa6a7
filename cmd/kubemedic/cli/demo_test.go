package cli_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// TestDemo runs `kubemedic demo` as a user would, checks the cluster it
// prints, interrupts it and checks that every process it started is gone.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts kube-apiserver, etcd and kwok; skipped in -short mode")
	}
	binDir, err := localcluster.BinDir()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "kubemedic")
	out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput()
	require.NoError(t, err, "%s", out)

	kubeconfig := filepath.Join(t.TempDir(), "demo.kubeconfig")
	cmd := exec.Command(bin, "demo", "--nodes", "16", "--kubeconfig", kubeconfig)
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "KUBEMEDIC_TESTBIN="+binDir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var transcript []string
	deadline := time.After(2 * time.Minute)
wait:
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "demo exited before it was ready:\n%s", strings.Join(transcript, "\n"))
			transcript = append(transcript, l)
			if strings.Contains(l, "Ready in") {
				break wait
			}
		case <-deadline:
			t.Fatalf("demo not ready within 2 minutes:\n%s", strings.Join(transcript, "\n"))
		}
	}
	t.Logf("demo ready in %s", time.Since(start).Round(100*time.Millisecond))
	require.Contains(t, strings.Join(transcript, "\n"), "16 simulated GPU nodes are Ready")

	kubectl := func(args ...string) string {
		out, err := exec.Command(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		require.NoError(t, err, "kubectl %v: %s", args, out)
		return string(out)
	}
	nodes := kubectl("get", "nodes", "--no-headers")
	require.Equal(t, 16, strings.Count(nodes, " Ready "), nodes)
	policies := kubectl("get", "remediationpolicies", "-o", "name")
	require.Contains(t, policies, "remediationpolicy.kubemedic.io/")
	require.Contains(t, kubectl("get", "nodeoperationtemplates", "-o", "name"), "nodeoperationtemplate.kubemedic.io/reset-gpu")

	children := descendants(cmd.Process.Pid)
	require.NotEmpty(t, children, "the demo should have started etcd, kube-apiserver and kwok")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "demo should exit 0 after Ctrl-C")
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not stop within 60s of Ctrl-C")
	}
	for _, pid := range children {
		require.False(t, alive(pid), "process %d started by the demo is still running", pid)
	}
	_, err = os.Stat(kubeconfig)
	require.True(t, os.IsNotExist(err), "the demo kubeconfig should be removed on exit")
}

// descendants lists the PIDs of every process below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command may contain spaces and parentheses: fields start after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
