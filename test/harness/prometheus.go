package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PrometheusBinary is the name of Prometheus in the test binaries' directory
// (BinDir); hack/testbin.sh builds it from its Go module with static, file
// and http service discovery only and without its web UI. promtool is next
// to it.
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
	proc *process
}

// StartPrometheus runs the test binaries' Prometheus with configYAML as its
// prometheus.yml, waits until it answers /-/ready, and stops it when the test
// ends, logging the end of its log if the test failed. extraArgs are added
// after the harness' own flags (--config.file, --storage.tsdb.path,
// --web.listen-address, --web.external-url), e.g.
// "--web.enable-remote-write-receiver" or "--web.enable-lifecycle". It fails
// the test, saying to run `make testbin`, when the binary is missing (see
// Tool).
func StartPrometheus(tb testing.TB, configYAML string, extraArgs ...string) *Prometheus {
	tb.Helper()
	bin := Tool(tb, PrometheusBinary)
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	port := FreePort(tb)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	args := append([]string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.external-url=" + url,
	}, extraArgs...)
	p, err := startProcess(bin, filepath.Join(dir, "prometheus.log"), nil, args...)
	if err != nil {
		tb.Fatalf("start prometheus: %v", err)
	}
	prom := &Prometheus{URL: url, Dir: dir, proc: p}
	// Registered after TempDir's cleanup, so it runs first: Prometheus stops
	// before its data directory is removed.
	tb.Cleanup(func() {
		if err := p.stop(); err != nil {
			tb.Errorf("stop prometheus: %v", err)
		}
		if tb.Failed() {
			tb.Logf("prometheus log:%s", p.logTail())
		}
	})
	if err := p.waitHTTPOK(context.Background(), url+"/-/ready", prometheusReadyTimeout); err != nil {
		tb.Fatalf("prometheus: %v", err)
	}
	return prom
}

// LogTail returns the last lines of Prometheus' log.
func (p *Prometheus) LogTail() string { return p.proc.logTail() }

// Stop stops Prometheus now, as an outage would; the test's cleanup then
// has nothing left to stop.
func (p *Prometheus) Stop() error { return p.proc.stop() }
