package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// PrometheusBinary is the name of Prometheus in the testbin directory
// (localcluster.BinDir); hack/testbin.sh builds it from its Go module with
// static, file and http service discovery only and without its web UI.
// promtool is next to it.
const PrometheusBinary = "prometheus"

// prometheusReadyTimeout bounds Prometheus' start (opening its empty TSDB
// takes well under a second; the margin is for a loaded 2-core CI machine).
const prometheusReadyTimeout = 60 * time.Second

// Prometheus is a real Prometheus process on a 127.0.0.1 port with a
// temporary data directory.
type Prometheus struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234, for the HTTP API
	// (/api/v1/query) and /-/ready.
	URL string
	// Dir is the temporary directory holding prometheus.yml, the TSDB
	// (data/) and the log; rule files a config names may be written there.
	Dir  string
	proc *localcluster.Process
}

// StartPrometheus runs the testbin Prometheus with configYAML as its
// prometheus.yml, waits until it answers /-/ready, and stops it when the test
// ends, logging the end of its log if the test failed. extraArgs are added
// after the harness' own flags (--config.file, --storage.tsdb.path,
// --web.listen-address, --web.external-url), e.g.
// "--web.enable-remote-write-receiver" or "--web.enable-lifecycle". It fails
// the test, saying to run `make testbin`, when the binary is missing, and
// skips it in -short mode (see Tool).
func StartPrometheus(tb testing.TB, configYAML string, extraArgs ...string) *Prometheus {
	tb.Helper()
	Tool(tb, PrometheusBinary)
	prom, err := NewPrometheus(context.Background(), tb.TempDir(), configYAML, extraArgs...)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	// Registered after TempDir's cleanup, so it runs first: Prometheus stops
	// before its data directory is removed.
	tb.Cleanup(func() {
		if err := prom.Stop(); err != nil {
			tb.Errorf("harness: %v", err)
		}
		if tb.Failed() {
			tb.Logf("prometheus log:%s", prom.LogTail())
		}
	})
	return prom
}

// NewPrometheus is StartPrometheus for programs that have no testing.TB (the
// scale runs under test/scale): it runs the testbin Prometheus with
// configYAML as its prometheus.yml in dir (which must exist; the TSDB, the
// config and prometheus.log go there) and waits, within ctx, until it answers
// /-/ready. The caller stops it with Stop and removes dir. When the binary
// is missing the error says to run `make testbin`.
func NewPrometheus(ctx context.Context, dir, configYAML string, extraArgs ...string) (*Prometheus, error) {
	bin, err := localcluster.Binary(PrometheusBinary)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		return nil, fmt.Errorf("write prometheus.yml: %w", err)
	}
	port, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.external-url=" + url,
	}, extraArgs...)
	p, err := localcluster.StartProcess(context.Background(), localcluster.ProcessSpec{
		Name:    "prometheus",
		Path:    bin,
		Args:    args,
		LogPath: filepath.Join(dir, "prometheus.log"),
	})
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTPOK(ctx, url+"/-/ready", prometheusReadyTimeout); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return &Prometheus{URL: url, Dir: dir, proc: p}, nil
}

// PID is the Prometheus process' ID, e.g. to read its memory from /proc.
func (p *Prometheus) PID() int { return p.proc.PID() }

// LogTail returns the last lines of Prometheus' log.
func (p *Prometheus) LogTail() string { return p.proc.LogTail(20) }

// Stop stops Prometheus now, as an outage would; the test's cleanup then
// has nothing left to stop.
func (p *Prometheus) Stop() error { return p.proc.Stop() }
