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
	url, p, err := startConfigured(ctx, configuredServer{
		binary: PrometheusBinary, dir: dir, configFile: "prometheus.yml", configYAML: configYAML,
		storageFlag: "--storage.tsdb.path", readyTimeout: prometheusReadyTimeout,
	}, extraArgs)
	if err != nil {
		return nil, err
	}
	return &Prometheus{URL: url, Dir: dir, proc: p}, nil
}

// configuredServer is a Prometheus-style server: a config file, a data
// directory, --web.listen-address, --web.external-url and /-/ready, as
// Prometheus and Alertmanager both have.
type configuredServer struct {
	binary, dir, configFile, configYAML string
	// storageFlag names the data directory flag (--storage.tsdb.path,
	// --storage.path).
	storageFlag string
	// ownArgs come after the common flags and before the caller's.
	ownArgs      []string
	readyTimeout time.Duration
}

// startConfigured writes the config into dir, starts the binary on a free
// 127.0.0.1 port with its data in dir/data and its log in dir/<binary>.log,
// and waits, within ctx, until it answers /-/ready. It returns the base URL.
func startConfigured(ctx context.Context, s configuredServer, extraArgs []string) (string, *Process, error) {
	bin, err := Binary(s.binary)
	if err != nil {
		return "", nil, err
	}
	cfg := filepath.Join(s.dir, s.configFile)
	if err := os.WriteFile(cfg, []byte(s.configYAML), 0o600); err != nil {
		return "", nil, fmt.Errorf("write %s: %w", s.configFile, err)
	}
	port, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := append([]string{
		"--config.file=" + cfg,
		s.storageFlag + "=" + filepath.Join(s.dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.external-url=" + url,
	}, s.ownArgs...)
	args = append(args, extraArgs...)
	p, err := StartProcess(context.Background(), ProcessSpec{
		Name:    s.binary,
		Path:    bin,
		Args:    args,
		LogPath: filepath.Join(s.dir, s.binary+".log"),
	})
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitHTTPOK(ctx, url+"/-/ready", s.readyTimeout); err != nil {
		_ = p.Stop()
		return "", nil, err
	}
	return url, p, nil
}

// PID is the Prometheus process' ID, e.g. to read its memory from /proc.
func (p *Prometheus) PID() int { return p.proc.PID() }

// LogTail returns the last lines of Prometheus' log, formatted to be
// appended to a message ("" when the log is empty).
func (p *Prometheus) LogTail() string { return p.proc.LogTail(20) }

// Stop stops Prometheus (SIGTERM, then SIGKILL) and waits for it to exit.
// Stopping it again does nothing.
func (p *Prometheus) Stop() error { return p.proc.Stop() }
