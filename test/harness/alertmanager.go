package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// AlertmanagerBinary is the name of Alertmanager in the testbin directory
// (localcluster.BinDir); hack/testbin.sh builds it from its Go module, without
// its web UI.
const AlertmanagerBinary = "alertmanager"

// Alertmanager is a real Alertmanager process on a 127.0.0.1 port with a
// temporary data directory.
type Alertmanager struct {
	URL  string
	proc *localcluster.Process
}

// StartAlertmanager runs the test binaries' Alertmanager with the given
// alertmanager.yml and stops it when the test ends. It fails the test, saying
// to run `make testbin`, when the binary is missing (see Tool).
func StartAlertmanager(tb testing.TB, configYAML string) *Alertmanager {
	tb.Helper()
	bin := Tool(tb, AlertmanagerBinary)
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	port := FreePort(tb)
	p, err := localcluster.StartProcess(context.Background(), localcluster.ProcessSpec{
		Name:    "alertmanager",
		Path:    bin,
		LogPath: filepath.Join(dir, "alertmanager.log"),
		Args: []string{
			"--config.file=" + cfg,
			"--storage.path=" + filepath.Join(dir, "data"),
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
			fmt.Sprintf("--web.external-url=http://127.0.0.1:%d", port),
			"--cluster.listen-address=", // no gossip: one instance, no port 9094
			"--log.level=debug",
		},
	})
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	am := &Alertmanager{URL: fmt.Sprintf("http://127.0.0.1:%d", port), proc: p}
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("harness: %v", err)
		}
		if tb.Failed() {
			tb.Logf("alertmanager log:%s", p.LogTail(20))
		}
	})
	if err := p.WaitHTTPOK(context.Background(), am.URL+"/-/ready", 30*time.Second); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	return am
}

// PostableAlert is an alert as /api/v2/alerts takes it.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Post pushes alerts; an EndsAt in the past resolves them.
func (a *Alertmanager) Post(ctx context.Context, alerts ...PostableAlert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post alerts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("post alerts: %s: %s", resp.Status, b.String())
	}
	return nil
}

// LogTail returns the last lines of Alertmanager's log.
func (a *Alertmanager) LogTail() string { return a.proc.LogTail(20) }
