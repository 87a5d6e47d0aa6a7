package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

// remediator is the kubemedic-remediator process.
type remediator struct {
	proc                 *localcluster.Process
	logPath              string
	metricsURL, readyURL string
	// pprofAddr is host:port of net/http/pprof, empty without -profile.
	pprofAddr string
}

// startRemediator starts bin as name, logging to dir/name.log, with pprof
// on a free port when profileDir is set and GOMEMLIMIT=gomemlimit (empty:
// the runtime's default, no limit).
func startRemediator(ctx context.Context, bin, kubeconfig, dir, name, profileDir, gomemlimit string, extra ...string) (*remediator, error) {
	addr := func() (string, error) {
		port, err := localcluster.FreePort()
		if err != nil {
			return "", err
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
	}
	maddr, err := addr()
	if err != nil {
		return nil, err
	}
	paddr, err := addr()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=" + maddr,
		"--health-probe-bind-address=" + paddr,
		"--namespace=" + opNamespace,
	}
	pprofAddr := ""
	if profileDir != "" {
		if pprofAddr, err = addr(); err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	proc, err := localcluster.StartProcess(ctx, localcluster.ProcessSpec{
		Name:        name,
		Path:        bin,
		Args:        append(args, extra...),
		Env:         []string{"GOMEMLIMIT=" + gomemlimit},
		LogPath:     filepath.Join(dir, name+".log"),
		StopTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &remediator{proc: proc, logPath: proc.LogPath(), metricsURL: "http://" + maddr + "/metrics", readyURL: "http://" + paddr + "/readyz", pprofAddr: pprofAddr}, nil
}

func (r *remediator) pid() int { return r.proc.PID() }

func (r *remediator) waitReady(ctx context.Context, timeout time.Duration) error {
	return r.proc.WaitHTTPOK(ctx, r.readyURL, timeout)
}

func (r *remediator) stop() { _ = r.proc.Stop() }

// memoryUse is the remediator's memory at one moment.
type memoryUse struct {
	rss, hwm, resident, heapInuse, heapLive int64
}

func (m memoryUse) String() string {
	return fmt.Sprintf("VmRSS %s, VmHWM (peak RSS) %s, process_resident_memory_bytes %s, go_memstats_heap_inuse_bytes %s, go_gc_heap_live_bytes %s",
		scaleutil.MiB(m.rss), scaleutil.MiB(m.hwm), scaleutil.MiB(m.resident), scaleutil.MiB(m.heapInuse), scaleutil.MiB(m.heapLive))
}

// memory reads the remediator's /proc status and its memory metrics.
func (r *remediator) memory(ctx context.Context) (memoryUse, error) {
	var m memoryUse
	var err error
	if m.hwm, err = scaleutil.ProcStatus(r.pid(), "VmHWM"); err != nil {
		return m, err
	}
	if m.rss, err = scaleutil.ProcStatus(r.pid(), "VmRSS"); err != nil {
		return m, err
	}
	s, err := r.metrics(ctx)
	if err != nil {
		return m, err
	}
	m.resident = int64(s.sum("process_resident_memory_bytes", nil))
	m.heapInuse = int64(s.sum("go_memstats_heap_inuse_bytes", nil))
	m.heapLive = int64(s.sum("go_gc_heap_live_bytes", nil))
	return m, nil
}

// cpuTime is the remediator's user+system CPU time.
func (r *remediator) cpuTime() (time.Duration, error) { return scaleutil.CPUTime(r.pid()) }

func (r *remediator) metrics(ctx context.Context) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("remediator metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("remediator metrics: %s", resp.Status)
	}
	return parseMetrics(string(b)), nil
}

// logSize is the size of the remediator's log now: logErrors counts the
// lines after it apart.
func (r *remediator) logSize() int64 {
	info, err := os.Stat(r.logPath)
	if err != nil {
		return 0
	}
	return info.Size()
}

// logErrors are the error lines of a part of the log, by message.
type logErrors struct {
	n     int
	byMsg map[string]int
	first map[string]string // message: its first line's error
}

// lines formats up to five messages with their counts, most frequent first.
func (e logErrors) lines(when string) []string {
	msgs := slices.SortedFunc(func(yield func(string) bool) {
		for m := range e.byMsg {
			if !yield(m) {
				return
			}
		}
	}, func(a, b string) int {
		if e.byMsg[a] != e.byMsg[b] {
			return e.byMsg[b] - e.byMsg[a]
		}
		return strings.Compare(a, b)
	})
	var out []string
	for i, m := range msgs {
		if i == 5 {
			out = append(out, fmt.Sprintf("%s: %d more messages", when, len(msgs)-5))
			break
		}
		out = append(out, fmt.Sprintf("%s: %dx %q, the first: %s", when, e.byMsg[m], m, e.first[m]))
	}
	return out
}

// logErrors counts the error-level lines of the remediator's log before
// and after offset (logSize before it was stopped).
func (r *remediator) logErrors(offset int64) (before, after logErrors) {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return before, after
	}
	count := func(text string) logErrors {
		e := logErrors{byMsg: map[string]int{}, first: map[string]string{}}
		for line := range strings.Lines(text) {
			if !strings.Contains(line, `"level":"error"`) {
				continue
			}
			e.n++
			var l struct{ Msg, Error string }
			if json.Unmarshal([]byte(line), &l) != nil {
				l.Msg = scaleutil.Truncate(strings.TrimSpace(line), 120)
			}
			e.byMsg[l.Msg]++
			if _, ok := e.first[l.Msg]; !ok {
				e.first[l.Msg] = scaleutil.Truncate(l.Error, 200)
			}
		}
		return e
	}
	offset = min(offset, int64(len(b)))
	return count(string(b[:offset])), count(string(b[offset:]))
}
