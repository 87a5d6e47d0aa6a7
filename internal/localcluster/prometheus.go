package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// PrometheusBinary is the name of Prometheus in the testbin directory
// (BinDir); hack/testbin.sh builds it from its Go module with static, file
// and http service discovery only and without its web UI. promtool is next
// to it.
const PrometheusBinary = "prometheus"

// prometheusReadyTimeout bounds Prometheus' start (opening its empty TSDB
// takes well under a second; the margin is for a loaded 2-core CI machine).
const prometheusReadyTimeout = 60 * time.Second

// Prometheus is a real Prometheus process on a 127.0.0.1 port with its
// data in a directory the caller gives.
type Prometheus struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234, for the HTTP API
	// (/api/v1/query) and /-/ready.
	URL string
	// Dir is the directory holding prometheus.yml, the TSDB (data/) and
	// prometheus.log; rule files a config names may be written there.
	Dir  string
	proc *Process
}

// NewPrometheus runs the testbin Prometheus with configYAML as its
// prometheus.yml in dir (which must exist; the TSDB, the config and
// prometheus.log go there) and waits, within ctx, until it answers
// /-/ready. extraArgs are added after its own flags (--config.file,
// --storage.tsdb.path, --web.listen-address, --web.external-url), e.g.
// "--web.enable-remote-write-receiver" or "--web.enable-lifecycle". ctx
// bounds only the wait: the process runs until Stop (or until this program
// dies). The caller stops it with Stop and removes dir. When the binary is
// missing the error says to run `make testbin`.
func NewPrometheus(ctx context.Context, dir, configYAML string, extraArgs ...string) (*Prometheus, error) {
	bin, err := Binary(PrometheusBinary)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		return nil, fmt.Errorf("write prometheus.yml: %w", err)
	}
	port, err := FreePort()
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
	p, err := StartProcess(context.Background(), ProcessSpec{
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

// LogTail returns the last lines of Prometheus' log, formatted to be
// appended to a message ("" when the log is empty).
func (p *Prometheus) LogTail() string { return p.proc.LogTail(20) }

// Stop stops Prometheus (SIGTERM, then SIGKILL) and waits for it to exit.
// Stopping it again does nothing.
func (p *Prometheus) Stop() error { return p.proc.Stop() }
