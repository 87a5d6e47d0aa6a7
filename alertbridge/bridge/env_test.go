package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	amtemplate "github.com/prometheus/alertmanager/template"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/test/metricstest"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

const (
	repo         = "acme/gpu-oncall"
	storageRepo  = "acme/storage-oncall"
	webhookToken = "whk-SECRET-7f3a9c"
	githubToken  = "ghp-SECRET-1b2c3d"
)

const baseConfig = `
defaultRepo: acme/gpu-oncall
reopenWindow: 1h
stormGuard: {maxNewIssues: 20, window: 10m}
routes:
  - matchers: ['team="storage"']
    repo: acme/storage-oncall
    labels: [storage]
assignees:
  - matchers: ['team="gpu"']
    users: [alice, bob]
`

// env is a bridge in this process with a real journal in a temp dir, a
// GitHub stand-in and an HTTP server in front of the bridge's handler.
type env struct {
	t       *testing.T
	fake    *ghfake.Fake
	cfg     *config.Config
	dir     string
	logs    *testsupport.SyncBuffer
	tokens  string // the webhook token file
	url     string
	journal *journal.Journal
	reg     *prometheus.Registry
	opts    func(*bridge.Options)

	srv    *httptest.Server
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(t *testing.T, cfgYAML string, opts func(*bridge.Options)) *env {
	t.Helper()
	fake := ghfake.New()
	t.Cleanup(fake.Close)
	fake.AddRepo(repo)
	fake.AddRepo(storageRepo)
	fake.SetToken(githubToken)
	cfg, err := config.Parse("bridge-test.yaml", []byte(cfgYAML))
	require.NoError(t, err)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "webhook-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(webhookToken+"\n"), 0o600))
	e := &env{t: t, fake: fake, cfg: cfg, dir: dir, logs: &testsupport.SyncBuffer{}, tokens: tokenFile, opts: opts}
	e.start()
	t.Cleanup(e.stop)
	return e
}

// start runs a bridge on the env's state; stop and start again is a restart.
func (e *env) start() {
	e.t.Helper()
	ghTokenFile := filepath.Join(e.dir, "github-token")
	require.NoError(e.t, os.WriteFile(ghTokenFile, []byte(githubToken), 0o600))
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hc, err := ghclient.NewHTTPClient(ghclient.Auth{TokenFile: ghTokenFile}, e.fake.URL())
	require.NoError(e.t, err)
	e.reg = prometheus.NewRegistry()
	gh, err := ghclient.New(ghclient.Options{BaseURL: e.fake.URL(), HTTPClient: hc, Log: log,
		Metrics: ghclient.NewMetrics(e.reg), MaxBackoff: 200 * time.Millisecond})
	require.NoError(e.t, err)
	j, err := journal.Open(filepath.Join(e.dir, "journal"), log)
	require.NoError(e.t, err)
	e.journal = j
	o := bridge.Options{
		Config: e.cfg, Journal: j, GitHub: gh, Auth: bridge.Auth{BearerTokenFile: e.tokens},
		RefreshInterval: 100 * time.Millisecond, RollupDelay: 50 * time.Millisecond,
		Registry: e.reg, Gatherer: e.reg, Log: log,
	}
	if e.opts != nil {
		e.opts(&o)
	}
	b, err := bridge.New(o)
	require.NoError(e.t, err)
	e.srv = httptest.NewServer(b.Handler())
	e.url = e.srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		if err := b.Run(ctx); err != nil {
			e.t.Errorf("bridge: %v", err)
		}
	}()
}

func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.srv.Close()
	e.cancel()
	<-e.done
	require.NoError(e.t, e.journal.Close())
	e.cancel = nil
	if e.t.Failed() {
		e.t.Logf("bridge logs:\n%s", testsupport.Tail(e.logs.String(), 60))
	}
}

func (e *env) restart() {
	e.stop()
	e.start()
}

// post sends a webhook with the right token.
func (e *env) post(body []byte) int {
	e.t.Helper()
	return e.postWith(body, "Bearer "+webhookToken)
}

func (e *env) postWith(body []byte, authorization string) int {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/webhook", bytes.NewReader(body))
	require.NoError(e.t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

// settle waits until every recorded webhook is applied.
func (e *env) settle() {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.journal.Len() == 0 }, 20*time.Second, 5*time.Millisecond,
		"journal not drained: %d pending", e.journal.Len())
}

// alert is one alert of a test group.
type alert struct {
	fp       string
	resolved bool
	labels   map[string]string
}

// group builds a version-4 payload for a group with the given group labels.
func group(receiver string, groupLabels map[string]string, alerts ...alert) []byte {
	m := payload.Message{Version: "4", GroupKey: "{}:" + fmt.Sprint(groupLabels)}
	m.Receiver = receiver
	m.GroupLabels = amtemplate.KV(groupLabels)
	m.CommonLabels = amtemplate.KV{"severity": "critical"}
	for k, v := range groupLabels {
		m.CommonLabels[k] = v
	}
	m.CommonAnnotations = amtemplate.KV{"summary": "GPU lost", "runbook_url": "https://runbooks.example/gpu-lost"}
	m.ExternalURL = "http://alertmanager.example:9093"
	m.Status = payload.StatusResolved
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, a := range alerts {
		st := payload.StatusFiring
		if a.resolved {
			st = payload.StatusResolved
		} else {
			m.Status = payload.StatusFiring
		}
		lbls := amtemplate.KV{"severity": "critical"}
		for k, v := range groupLabels {
			lbls[k] = v
		}
		for k, v := range a.labels {
			lbls[k] = v
		}
		m.Alerts = append(m.Alerts, amtemplate.Alert{Status: st, Labels: lbls, Fingerprint: a.fp, StartsAt: start,
			Annotations: amtemplate.KV{"summary": "GPU lost"}})
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

func gpuLost(node string, resolved bool) []byte {
	return group("gpu-oncall", map[string]string{"alertname": "KubemedicGPULost", "node": node, "team": "gpu"},
		alert{fp: "fp-" + node, resolved: resolved})
}

// metric returns the value of a counter or gauge with the given labels.
func (e *env) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	return metricstest.Value(e.t, e.reg, name, labels)
}
