package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// startupConfig is the shipped defaults: reopen window 24h, storm guard 10
// new issues in 10m, the identity and ignore labels.
const startupConfig = "defaultRepo: " + repo + "\n"

// startupResult is what the bridge process reports of its start.
type startupResult struct {
	// ReadyMillis: from New to /readyz answering that the cache is rebuilt
	// and the journal queued.
	ReadyMillis float64 `json:"ready_ms"`
	// VmHWMKiB is the process's peak resident set (/proc/self/status).
	VmHWMKiB int64 `json:"vmhwm_kib"`
	// HeapPeak is the largest Go heap in use sampled every 5 ms during the
	// start; HeapLive the heap after a GC once ready.
	HeapPeak uint64 `json:"heap_peak"`
	HeapLive uint64 `json:"heap_live"`
}

// runStartup seeds the GitHub stand-in with a year of the bridge's issues
// (closed ones bodies and all, as the bridge leaves them) and a few open
// ones, then starts the bridge in a process of its own (so its memory is
// not the stand-in's) and reports how long its start took and its peak
// memory.
func runStartup(closed, open int, seed uint64) error {
	fake := ghfake.New()
	defer fake.Close()
	fake.AddRepo(repo)
	fake.SetRateLimit(1_000_000, 1_000_000, time.Now().Add(time.Hour))

	t0 := time.Now()
	st, err := seedYear(fake, time.Now().UTC(), closed, open, rand.New(rand.NewPCG(seed, 28)))
	if err != nil {
		return err
	}
	fmt.Printf("seeded %d closed issues over the past year (%d closed within the last 24h, %d with the ignore label) and %d open ones: %d issues, bodies %.1f MiB (%.1f-%.1f KiB each), in %v\n",
		closed, st.closedInDay, st.ignored, open, closed+open, float64(st.bodyBytes)/(1<<20), float64(st.minBody)/1024, float64(st.maxBody)/1024, time.Since(t0).Round(time.Millisecond))
	fake.ResetCalls()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-startup-bridge", fake.URL())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("bridge process: %w", err)
	}
	var res startupResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &res); err != nil {
		return fmt.Errorf("bridge process answered %q: %w", out, err)
	}

	fmt.Printf("\nbridge start, until /readyz says the cache is rebuilt: %.0f ms (target <= 10 s)\n", res.ReadyMillis)
	fmt.Printf("bridge process peak RSS (VmHWM): %.1f MiB (target <= 100 MiB; the Deployment's limit is 256 MiB)\n", float64(res.VmHWMKiB)/1024)
	fmt.Printf("Go heap: peak %.1f MiB during the start, %.1f MiB live once ready\n", float64(res.HeapPeak)/(1<<20), float64(res.HeapLive)/(1<<20))
	lists := map[string]int{}
	for _, c := range fake.Calls() {
		q, _ := url.ParseQuery(c.Query)
		what := c.Method + " " + endpointOf(c.Path)
		if c.Method == http.MethodGet && strings.HasSuffix(c.Path, "/issues") {
			what += " state=" + q.Get("state") + " labels=" + q.Get("labels")
			if q.Get("since") != "" {
				what += " since=…"
			}
		}
		lists[what]++
	}
	fmt.Printf("GitHub calls of the start:\n")
	keys := make([]string, 0, len(lists))
	for k := range lists {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-90s %5d\n", k, lists[k])
	}
	return nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

type seedStats struct {
	closedInDay, ignored int
	bodyBytes            int64
	minBody, maxBody     int
}

// seedYear files closed issues spread over the year before now, each
// closed between 10 minutes and 3 days after it was filed, 1% of them
// closed by a person as not planned with the ignore label; groups recur
// (one key per node, 2,000 nodes). Then open issues filed in the last two
// days. Every body is a real one's size: the alert table, a node history
// section of 5 to 25 operations and the marker.
func seedYear(fake *ghfake.Fake, now time.Time, closed, open int, rnd *rand.Rand) (seedStats, error) {
	clk := testingclock.NewFakePassiveClock(now.Add(-365 * 24 * time.Hour))
	fake.SetClock(clk)
	defer fake.SetClock(clock.RealClock{})
	st := seedStats{minBody: 1 << 30}
	type closing struct {
		number int
		at     time.Time
		reason ghclient.StateReason
	}
	var closings []closing
	file := func(i int, created time.Time, labels ...string) (int, error) {
		node := fmt.Sprintf("gpu-%04d", i%2000)
		title := fmt.Sprintf("[critical] Node %s: GPULost — resolved", node)
		body, err := issueBody(node, i, title, created, 5+rnd.IntN(21))
		if err != nil {
			return 0, err
		}
		st.bodyBytes += int64(len(body))
		st.minBody, st.maxBody = min(st.minBody, len(body)), max(st.maxBody, len(body))
		clk.SetTime(created)
		return fake.AddIssue(repo, title, body, append([]string{config.DefaultIdentityLabel, "incident:resolved", "severity:critical"}, labels...)...), nil
	}
	year := 365 * 24 * time.Hour
	for i := range closed {
		created := now.Add(-year + year/time.Duration(closed)*time.Duration(i))
		var labels []string
		reason := ghclient.ReasonCompleted
		if i%100 == 42 {
			labels, reason = []string{config.DefaultIgnoreLabel}, ghclient.ReasonNotPlanned
			st.ignored++
		}
		n, err := file(i, created, labels...)
		if err != nil {
			return st, err
		}
		at := created.Add(10*time.Minute + time.Duration(rnd.Int64N(int64(72*time.Hour))))
		if at.After(now.Add(-time.Minute)) {
			at = now.Add(-time.Minute)
		}
		if now.Sub(at) <= 24*time.Hour {
			st.closedInDay++
		}
		closings = append(closings, closing{n, at, reason})
	}
	sort.Slice(closings, func(i, j int) bool { return closings[i].at.Before(closings[j].at) })
	for _, c := range closings {
		clk.SetTime(c.at)
		fake.CloseIssue(repo, c.number, c.reason)
	}
	for i := range open {
		if _, err := file(closed+i, now.Add(-48*time.Hour+time.Duration(i)*47*time.Hour/time.Duration(max(open, 1)))); err != nil {
			return st, err
		}
	}
	return st, nil
}

// issueBody is a body as the bridge writes it for a node incident: the
// alert table, the node's operation history and the marker.
func issueBody(node string, i int, title string, at time.Time, ops int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "### Resolved: KubemedicGPULost on `%s`\n\nGPU lost\n\n| | |\n|---|---|\n| **Status** | resolved (0 of 2 alerts firing) |\n| **Severity** | critical |\n| **Since** | %s |\n| **Node** | %s |\n| **Alert group** | {node=%q} (receiver gpu-oncall) |\n\n",
		node, at.Format("2006-01-02 15:04:05 UTC"), node, node)
	b.WriteString("**Links:**\n- Runbook: https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicgpulost\n- [Silence this group in Alertmanager](http://alertmanager.example:9093/#/silences/new?filter=%7Bnode%3D%22" + node + "%22%7D)\n\n")
	b.WriteString("### Alerts (2)\n\n| Fingerprint | Status | Started | Ended | Source |\n|---|---|---|---|---|\n")
	for a := range 2 {
		fmt.Fprintf(&b, "| `%016x` | resolved | %s | %s | |\n", i*2+a, at.Format("2006-01-02 15:04:05 UTC"), at.Add(time.Hour).Format("2006-01-02 15:04:05 UTC"))
	}
	b.WriteString("\n<!-- kubemedic-alertbridge history -->\n### Operation history on node " + node + "\n\n| Operation | Policy | Step | Does | GPU, exclusion, machine request | Phase | Created | Started | Finished | Message |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for o := range ops {
		t := at.Add(time.Duration(o) * 7 * time.Minute)
		fmt.Fprintf(&b, "| `gpu-lost.%s.%x-%d` | gpu-lost | reset-gpu | reset-gpu | GPU `GPU-3f2a9c1e-%08x` at bus `00000000:3B:00.0`<br>Exclusion: Cordon — cordoned the node: the operation acts on the whole node | Failed | %s | %s | %s | nvidia-smi --gpu-reset exited 255: GPU 00000000:3B:00.0 is in use by another client |\n",
			node, i, o, o, t.Format("2006-01-02 15:04:05 UTC"), t.Add(time.Minute).Format("2006-01-02 15:04:05 UTC"), t.Add(4*time.Minute).Format("2006-01-02 15:04:05 UTC"))
	}
	b.WriteString("\n`kubectl get nodeoperations -l kubemedic.io/node=" + node + "` · `kubectl describe node " + node + "`\n<!-- /kubemedic-alertbridge history -->\n")
	key := fmt.Sprintf("%032x", i%2000+1)
	return marker.Append(b.String(), key, marker.State{Applied: fmt.Sprintf("%020d", i), Nodes: []string{node},
		TitleDigest: marker.TitleDigest(title), Labels: []string{config.DefaultIdentityLabel, "incident:resolved", "severity:critical"},
		LastComment: fmt.Sprintf("%016x", i)})
}

// runStartupBridge is the bridge's process: it starts a bridge against the
// GitHub at githubURL, waits until it is ready and prints a startupResult
// as one JSON line.
func runStartupBridge(githubURL string) error {
	dir, err := os.MkdirTemp("", "alertbridge-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg, err := config.Parse("startup.yaml", []byte(startupConfig))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	j, err := journal.Open(filepath.Join(dir, "journal"), log)
	if err != nil {
		return err
	}
	defer j.Close()

	peak := make(chan uint64)
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		var top uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapInuse)
			select {
			case <-stop:
				peak <- top
				return
			case <-t.C:
			}
		}
	}()

	start := time.Now()
	gh, err := ghclient.New(ghclient.Options{BaseURL: githubURL, Log: log})
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Options{Config: cfg, Journal: j, GitHub: gh, Auth: bridge.Auth{Insecure: true}, Log: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	h := b.Handler()
	for {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Body.String() == "ok\n" {
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("bridge stopped before it was ready: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	ready := time.Since(start)
	close(stop)
	res := startupResult{ReadyMillis: float64(ready.Microseconds()) / 1000, HeapPeak: <-peak}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	res.HeapLive = m.HeapInuse
	if res.VmHWMKiB, err = vmHWM(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// vmHWM reads the process's peak resident set size in KiB.
func vmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/self/status has no VmHWM")
}
