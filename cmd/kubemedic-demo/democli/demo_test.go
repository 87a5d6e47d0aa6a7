package democli_test

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
	"github.com/kubemedic/kubemedic/test/harness"
)

// demoProc is a `kubemedic-demo` process started by a test.
type demoProc struct {
	cmd        *exec.Cmd
	lines      chan string
	transcript []string
}

// buildDemo builds kubemedic-demo and the binaries the demo runs, into one
// directory, once per test process; binDir is the testbin directory.
func buildDemo(t *testing.T) (bin, binDir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts kube-apiserver, etcd and kwok; skipped in -short mode")
	}
	binDir, err := localcluster.BinDir()
	require.NoError(t, err)
	for _, pkg := range []string{"./cmd/kubemedic-detect", "./cmd/kubemedic-remediator", "./cmd/kubemedic-alertbridge", "./cmd/kubemedic-janitor", "./cmd/kubemedic-diag"} {
		harness.GoBuild(t, pkg)
	}
	return harness.GoBuild(t, "./cmd/kubemedic-demo"), binDir
}

// startDemo starts `kubemedic-demo ARGS` from the repository root with env
// added to the environment, and reads its output.
func startDemo(t *testing.T, bin, binDir string, env []string, args ...string) *demoProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--bin-dir", filepath.Dir(bin)}, args...)...)
	cmd.Dir = "../../.."
	cmd.Env = append(append(os.Environ(), "KUBEMEDIC_TESTBIN="+binDir), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	d := &demoProc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	return d
}

// waitFor reads the demo's output until a line contains want, and returns
// the transcript so far; it fails when the demo exits or within passes.
func (d *demoProc) waitFor(t *testing.T, want string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-d.lines:
			require.True(t, ok, "demo exited before printing %q:\n%s", want, strings.Join(d.transcript, "\n"))
			d.transcript = append(d.transcript, l)
			if strings.Contains(l, want) {
				return strings.Join(d.transcript, "\n")
			}
		case <-deadline:
			t.Fatalf("demo did not print %q within %s:\n%s", want, within, strings.Join(d.transcript, "\n"))
		}
	}
}

// interrupt sends Ctrl-C and waits for the demo to exit, returning its error.
func (d *demoProc) interrupt(t *testing.T) error {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() {
		for l := range d.lines {
			d.transcript = append(d.transcript, l)
		}
		done <- d.cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not stop within 60s of Ctrl-C")
		return nil
	}
}

// TestDemo runs `kubemedic-demo` as a user would, checks the cluster it
// prints, interrupts it and checks that every process it started is gone.
func TestDemo(t *testing.T) {
	bin, binDir := buildDemo(t)
	kubeconfig := filepath.Join(t.TempDir(), "demo.kubeconfig")
	start := time.Now()
	d := startDemo(t, bin, binDir, nil, "--nodes", "16", "--kubeconfig", kubeconfig)
	transcript := d.waitFor(t, "Ready in", 2*time.Minute)
	t.Logf("demo ready in %s", time.Since(start).Round(100*time.Millisecond))
	require.Contains(t, transcript, "16 simulated GPU nodes are Ready")

	kubectl := func(args ...string) string {
		out, err := exec.Command(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		require.NoError(t, err, "kubectl %v: %s", args, out)
		return string(out)
	}
	nodes := kubectl("get", "nodes", "--no-headers")
	require.Equal(t, 16+1, strings.Count(nodes, " Ready "), "16 and the DRA node: %s", nodes)
	policies := kubectl("get", "remediationpolicies", "-o", "name")
	require.Contains(t, policies, "remediationpolicy.kubemedic.io/")
	require.Contains(t, kubectl("get", "nodeoperationtemplates", "-o", "name"), "nodeoperationtemplate.kubemedic.io/reset-gpu")

	children := descendants(d.cmd.Process.Pid)
	commands := map[string]bool{}
	for _, pid := range children {
		commands[comm(pid)] = true
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller", "kwok", "node-problem-de", "prometheus", "alertmanager", "kubemedic-remed", "kubemedic-janit", "kubemedic-alert"} {
		require.True(t, commands[want], "the demo runs %s; it runs %v", want, commands)
	}
	require.NoError(t, d.interrupt(t), "demo should exit 0 after Ctrl-C")
	for _, pid := range children {
		require.False(t, alive(pid), "process %d started by the demo is still running", pid)
	}
	_, err := os.Stat(kubeconfig)
	require.True(t, os.IsNotExist(err), "the demo kubeconfig should be removed on exit")
}

// TestTwoDemos starts two demos side by side, as two newcomers on one
// machine would: the first takes the default kubeconfig path, the second
// says so and writes its own; each answers on its own API server; stopping
// the first leaves the second answering and its kubeconfig in place. A
// third demo given the second's path refuses, naming its pid.
func TestTwoDemos(t *testing.T) {
	bin, binDir := buildDemo(t)
	tmp := t.TempDir() // the default path lives in TMPDIR, not in the user's /tmp
	env := []string{"TMPDIR=" + tmp}
	defaultPath := filepath.Join(tmp, "kubemedic-demo.kubeconfig")

	first := startDemo(t, bin, binDir, env, "--nodes", "2", "--mig-every", "0", "--dra-nodes", "0")
	require.Contains(t, first.waitFor(t, "export KUBECONFIG=", 2*time.Minute), "export KUBECONFIG="+defaultPath)
	second := startDemo(t, bin, binDir, env, "--nodes", "3", "--mig-every", "0", "--dra-nodes", "0")
	secondPath := filepath.Join(tmp, "kubemedic-demo-"+strconv.Itoa(second.cmd.Process.Pid)+".kubeconfig")
	transcript := second.waitFor(t, "export KUBECONFIG=", 2*time.Minute)
	require.Contains(t, transcript, "Another demo (pid "+strconv.Itoa(first.cmd.Process.Pid)+") is running with "+defaultPath)
	require.Contains(t, transcript, "export KUBECONFIG="+secondPath)

	nodes := func(kubeconfig string) int {
		out, err := exec.Command(filepath.Join(binDir, "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers").CombinedOutput()
		require.NoError(t, err, "kubectl get nodes with %s: %s", kubeconfig, out)
		return strings.Count(string(out), " Ready ")
	}
	require.Equal(t, 2, nodes(defaultPath), "the first demo's cluster")
	require.Equal(t, 3, nodes(secondPath), "the second demo's own cluster")

	third := startDemo(t, bin, binDir, env, "--kubeconfig", secondPath)
	require.Error(t, third.cmd.Wait(), "a demo given a running demo's kubeconfig must exit non-zero")
	for l := range third.lines {
		third.transcript = append(third.transcript, l)
	}
	require.Contains(t, strings.Join(third.transcript, "\n"), "another demo (pid "+strconv.Itoa(second.cmd.Process.Pid)+") is running with --kubeconfig "+secondPath)

	require.NoError(t, first.interrupt(t))
	_, err := os.Stat(defaultPath)
	require.True(t, os.IsNotExist(err), "the first demo removes its own kubeconfig")
	require.Equal(t, 3, nodes(secondPath), "stopping the first demo leaves the second answering")
	require.NoError(t, second.interrupt(t))
	_, err = os.Stat(secondPath)
	require.True(t, os.IsNotExist(err), "the second demo removes its own kubeconfig")
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

// comm is the command name of pid (at most 15 characters).
func comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
