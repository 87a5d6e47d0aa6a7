package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
)

// NewPrometheus is StartPrometheus for programs that have no testing.TB (the
// scale runs under test/scale): it runs the test binaries' Prometheus with
// configYAML as its prometheus.yml in dir (which must exist; the TSDB, the
// config and prometheus.log go there) and waits, within ctx, until it answers
// /-/ready. The caller stops it with Stop and removes dir. When the binary
// is missing the error says to run `make testbin`.
func NewPrometheus(ctx context.Context, dir, configYAML string, extraArgs ...string) (*Prometheus, error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(binDir, PrometheusBinary); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		return nil, fmt.Errorf("write prometheus.yml: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.external-url=" + url,
	}, extraArgs...)
	p, err := startProcess(filepath.Join(binDir, PrometheusBinary), filepath.Join(dir, "prometheus.log"), nil, args...)
	if err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	if err := p.waitHTTPOK(ctx, url+"/-/ready", prometheusReadyTimeout); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	return &Prometheus{URL: url, Dir: dir, proc: p}, nil
}

// PID is the Prometheus process' ID, e.g. to read its memory from /proc.
func (p *Prometheus) PID() int { return p.proc.cmd.Process.Pid }

// NewDCGMExporter is StartDCGMExporter for programs that have no
// testing.TB: the caller closes it with Close.
func NewDCGMExporter() *DCGMExporter {
	d := &DCGMExporter{series: make(map[DCGMSeries]*dcgmEntry)}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", d.serveMetrics)
	d.srv = httptest.NewServer(mux)
	d.URL = d.srv.Listener.Addr().String()
	return d
}

// Close stops serving /metrics. It is for exporters from NewDCGMExporter;
// StartDCGMExporter's close when their test ends.
func (d *DCGMExporter) Close() { d.srv.Close() }
