package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/cmd/kubemedic-demo/demo"
	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// processNamed is the world's process with the name.
func processNamed(t *testing.T, w *demo.World, name string) *localcluster.Process {
	t.Helper()
	for _, p := range w.Processes() {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no process %s", name)
	return nil
}

// requireNoErrorLines fails with every error-level line of a controller's
// log: a JSON line (zap) at level error or above, or a line that is no JSON
// and reads as an error (klog's E prefix, a panic, a fatal). It returns
// the log.
func requireNoErrorLines(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	errs := errorLines(string(b))
	t.Logf("%s: %d lines, %d at error level", filepath.Base(path), strings.Count(string(b), "\n"), len(errs))
	if len(errs) > 0 {
		t.Errorf("%s logged %d error-level lines where nothing went wrong:\n%s", filepath.Base(path), len(errs), strings.Join(errs, "\n"))
	}
	return string(b)
}

// kloggedError is klog's text header of an error line ("E1128 10:02:03.123456").
var kloggedError = regexp.MustCompile(`^[EF]\d{4} \d{2}:\d{2}:\d{2}`)

// errorLines are the error-level lines of a log.
func errorLines(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		line = strings.TrimRight(line, "\n")
		var entry struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Level != "" {
			switch entry.Level {
			case "error", "dpanic", "panic", "fatal":
				out = append(out, line)
			}
			continue
		}
		if kloggedError.MatchString(line) || strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			out = append(out, line)
		}
	}
	return out
}

func TestErrorLines(t *testing.T) {
	log := `{"level":"info","ts":"2026-11-28T10:00:00Z","msg":"Starting manager"}
{"level":"debug","ts":"2026-11-28T10:00:01Z","msg":"Optimistic-concurrency conflict; reconciling again","controller":"nodeoperation"}
{"level":"error","ts":"2026-11-28T10:00:02Z","msg":"Reconciler error","error":"Operation cannot be fulfilled"}
{"level":"info","ts":"2026-11-28T10:00:03Z","msg":"an error word in an info line: error"}
E1128 10:00:04.000000   12345 leaderelection.go:436] error retrieving resource lock
I1128 10:00:05.000000   12345 leaderelection.go:257] attempting to acquire leader lease
{"level":"dpanic","ts":"2026-11-28T10:00:06Z","msg":"odd"}
panic: runtime error: invalid memory address or nil pointer dereference
not json {"level":"error"}
`
	require.Equal(t, []string{
		`{"level":"error","ts":"2026-11-28T10:00:02Z","msg":"Reconciler error","error":"Operation cannot be fulfilled"}`,
		`E1128 10:00:04.000000   12345 leaderelection.go:436] error retrieving resource lock`,
		`{"level":"dpanic","ts":"2026-11-28T10:00:06Z","msg":"odd"}`,
		`panic: runtime error: invalid memory address or nil pointer dereference`,
	}, errorLines(log))
	require.Empty(t, errorLines(""))
}
