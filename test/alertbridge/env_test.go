package alertbridge_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

const (
	repo         = "acme/gpu-oncall"
	webhookToken = "e2e-webhook-TOKEN-5e1f"
	githubToken  = "e2e-github-TOKEN-77aa"
)

// world is one Alertmanager, one GitHub stand-in and the files a bridge
// needs; the bridge runs in this process (startInProcess) or as the real
// binary (startProcess).
type world struct {
	t         *testing.T
	fake      *ghfake.Fake
	am        *harness.Alertmanager
	dir       string
	port      int
	cfgFile   string
	stateDir  string
	tokenFile string
	ghToken   string
	logs      *testsupport.SyncBuffer
	// kubeconfig, when set before startInProcess, is the bridge's
	// --kubeconfig (for nodeHistory).
	kubeconfig string
}

// newWorld starts Alertmanager with webhooks (copies of the bridge's
// receiver) to the bridge's port, and writes the bridge's config.
func newWorld(t *testing.T, bridgeConfig string, webhooks int) *world {
	t.Helper()
	harness.Tool(t, harness.AlertmanagerBinary) // fail before starting anything when it is missing
	w := &world{t: t, fake: ghfake.New(), dir: t.TempDir(), port: harness.FreePort(t), logs: &testsupport.SyncBuffer{}}
	t.Cleanup(w.fake.Close)
	w.fake.AddRepo(repo)
	w.fake.SetToken(githubToken)
	w.cfgFile = filepath.Join(w.dir, "alertbridge.yaml")
	w.stateDir = filepath.Join(w.dir, "state")
	w.tokenFile = filepath.Join(w.dir, "webhook-token")
	w.ghToken = filepath.Join(w.dir, "github-token")
	require.NoError(t, os.WriteFile(w.cfgFile, []byte(bridgeConfig), 0o600))
	require.NoError(t, os.WriteFile(w.tokenFile, []byte(webhookToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(w.ghToken, []byte(githubToken+"\n"), 0o600))

	var hooks strings.Builder
	for range webhooks {
		fmt.Fprintf(&hooks, `
      - url: http://127.0.0.1:%d/webhook
        send_resolved: true
        max_alerts: 0
        http_config:
          authorization:
            type: Bearer
            credentials_file: %s`, w.port, w.tokenFile)
	}
	w.am = harness.StartAlertmanager(t, fmt.Sprintf(`
route:
  receiver: bridge
  group_by: [alertname, node]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: bridge
    webhook_configs:%s
`, hooks.String()))
	return w
}

// startInProcess runs bridge.Serve, the binary's own wiring, until the
// returned stop is called.
func (w *world) startInProcess() (stop func()) {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- bridge.Serve(ctx, bridge.ServeConfig{
			ConfigFile: w.cfgFile, Listen: fmt.Sprintf("127.0.0.1:%d", w.port), StateDir: w.stateDir,
			Auth:      bridge.Auth{BearerTokenFile: w.tokenFile},
			GitHubURL: w.fake.URL(), GitHubAuth: ghclient.Auth{TokenFile: w.ghToken},
			Log:             slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			RefreshInterval: 200 * time.Millisecond,
			Kubeconfig:      w.kubeconfig,
			Ready:           ready,
		})
	}()
	select {
	case <-ready:
	case err := <-done:
		w.t.Fatalf("bridge: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				w.t.Errorf("bridge: %v", err)
			}
		})
	}
	w.t.Cleanup(func() {
		stop()
		if w.t.Failed() {
			w.t.Logf("bridge log tail:\n%s\nalertmanager:%s", testsupport.Tail(w.logs.String(), 80), w.am.LogTail())
		}
	})
	return stop
}

// startProcess runs the real kubemedic-alertbridge binary.
func (w *world) startProcess(bin string) *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(bin,
		"--config", w.cfgFile, "--listen", fmt.Sprintf("127.0.0.1:%d", w.port), "--state-dir", w.stateDir,
		"--auth-bearer-token-file", w.tokenFile, "--github-url", w.fake.URL(), "--github-token-file", w.ghToken,
		"--refresh-interval", "200ms", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = w.logs, w.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(w.t, cmd.Start())
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if w.t.Failed() {
			w.t.Logf("bridge log tail:\n%s\nalertmanager:%s", testsupport.Tail(w.logs.String(), 80), w.am.LogTail())
		}
	})
	testsupport.Eventually(w.t, "the bridge to serve /healthz", 20*time.Second, 20*time.Millisecond, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", w.port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, func() string { return "bridge log:\n" + testsupport.Tail(w.logs.String(), 20) })
	return cmd
}

func gpuLost(node string) harness.PostableAlert {
	return harness.PostableAlert{
		Labels: map[string]string{"alertname": "KubemedicGPULost", "node": node, "condition": "GPULost",
			"severity": "critical", "team": "gpu"},
		Annotations: map[string]string{
			"summary": "GPU lost on " + node, "message": "2 of 8 GPUs visible (nvidia-smi: GPU is lost)",
			"reason": "GPULost", "runbook_url": "https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicgpulost",
		},
		StartsAt: time.Now().Add(-time.Minute),
	}
}

func resolved(a harness.PostableAlert) harness.PostableAlert {
	// Now is in the past by the time Alertmanager looks at it, and after
	// any StartsAt the test set.
	a.EndsAt = time.Now()
	return a
}

func (w *world) fire(alerts ...harness.PostableAlert) {
	w.t.Helper()
	require.NoError(w.t, w.am.Post(context.Background(), alerts...))
}

func (w *world) resolve(alerts ...harness.PostableAlert) {
	w.t.Helper()
	var rs []harness.PostableAlert
	for _, a := range alerts {
		rs = append(rs, resolved(a))
	}
	require.NoError(w.t, w.am.Post(context.Background(), rs...))
}

// eventually waits for cond, describing the fake's issues on failure.
func (w *world) eventually(cond func() bool, waitFor time.Duration, what string) {
	w.t.Helper()
	require.Eventually(w.t, cond, waitFor, 50*time.Millisecond, "%s; issues now:\n%s", what, w.describe())
}

func (w *world) describe() string {
	var sb strings.Builder
	for _, is := range w.fake.Issues(repo) {
		fmt.Fprintf(&sb, "#%d %s [%s %s] labels=%v assignees=%v comments=%d\n", is.Number, is.Title, is.State, is.StateReason,
			is.Labels, is.Assignees, len(w.fake.Comments(repo, is.Number)))
	}
	return sb.String()
}

// metric scrapes the bridge's /metrics and returns the first sample of name
// whose labels contain labels ("" for any); -1 when there is none.
func (w *world) metric(name, labels string) float64 {
	w.t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", w.port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // a longer metric name
		}
		if labels != "" && !strings.Contains(rest, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err == nil {
			return v
		}
	}
	return -1
}
