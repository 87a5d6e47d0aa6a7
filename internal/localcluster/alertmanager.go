package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// AlertmanagerBinary is the name of Alertmanager in the testbin directory
// (BinDir); hack/testbin.sh builds it from its Go module, without its web
// UI. amtool is next to it.
const AlertmanagerBinary = "alertmanager"

// alertmanagerReadyTimeout bounds Alertmanager's start.
const alertmanagerReadyTimeout = 30 * time.Second

// Alertmanager is a real Alertmanager process on a 127.0.0.1 port, alone
// (no gossip cluster), with its data in a directory the caller gives.
type Alertmanager struct {
	// URL is the base URL, e.g. http://127.0.0.1:41235, for the v2 API and
	// /-/ready; it is also the --web.external-url that notifications link to.
	URL string
	// Dir is the directory holding alertmanager.yml, its data (data/) and
	// alertmanager.log.
	Dir  string
	proc *Process
}

// NewAlertmanager runs the testbin Alertmanager with configYAML as its
// alertmanager.yml in dir (which must exist; the config, the data and
// alertmanager.log go there) and waits, within ctx, until it answers
// /-/ready. It logs at debug level and does not gossip (no port 9094).
// extraArgs are added after its own flags (--config.file, --storage.path,
// --web.listen-address, --web.external-url, --cluster.listen-address,
// --log.level). ctx bounds only the wait: the process runs until Stop (or
// until this program dies). The caller stops it with Stop and removes dir.
// When the binary is missing the error says to run `make testbin`.
func NewAlertmanager(ctx context.Context, dir, configYAML string, extraArgs ...string) (*Alertmanager, error) {
	url, p, err := startConfigured(ctx, configuredServer{
		binary: AlertmanagerBinary, dir: dir, configFile: "alertmanager.yml", configYAML: configYAML,
		storageFlag: "--storage.path", readyTimeout: alertmanagerReadyTimeout,
		ownArgs: []string{
			"--cluster.listen-address=", // no gossip: one instance, no port 9094
			"--log.level=debug",
		},
	}, extraArgs)
	if err != nil {
		return nil, err
	}
	return &Alertmanager{URL: url, Dir: dir, proc: p}, nil
}

// PostableAlert is an alert as /api/v2/alerts takes it.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Post pushes alerts, as Prometheus does; an EndsAt in the past resolves
// them.
func (a *Alertmanager) Post(ctx context.Context, alerts ...PostableAlert) error {
	body, err := json.Marshal(alerts)
	if err != nil {
		return fmt.Errorf("post alerts: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post alerts: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post alerts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("post alerts: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// PID is the Alertmanager process' ID.
func (a *Alertmanager) PID() int { return a.proc.PID() }

// LogTail returns the last lines of Alertmanager's log, formatted to be
// appended to a message ("" when the log is empty).
func (a *Alertmanager) LogTail() string { return a.proc.LogTail(20) }

// Stop stops Alertmanager (SIGTERM, then SIGKILL) and waits for it to exit.
// Stopping it again does nothing.
func (a *Alertmanager) Stop() error { return a.proc.Stop() }
