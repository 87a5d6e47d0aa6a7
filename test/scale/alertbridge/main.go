// Command alertbridge measures kubemedic-alertbridge: alert groups fire,
// resolve and fire again, as webhooks on the bridge's HTTP endpoint, with
// issues on the GitHub stand-in (alertbridge/ghfake).
//
//	go run ./test/scale/alertbridge [-groups 1000] [-concurrency 8]
//	go run ./test/scale/alertbridge -startup-closed 20000 [-startup-open 50]
//
// It prints, against the alertbridge issue's targets:
//
//   - GitHub calls per transition, by endpoint (target <= 1.2) and Search
//     API calls (target 0). Every call counts: the list calls of the cache
//     rebuild and refresh included.
//   - webhook acknowledgement latency, p50 / p99 / max (target p99 <= 20 ms):
//     the time until the bridge answered 200, which is after the webhook is
//     on disk (fsync).
//
// With -startup-closed it measures the bridge's start instead (startup.go):
// a year of closed issues and a few open ones on the stand-in, the time
// until the bridge is ready and its peak memory (target <= 10 s, <= 100 MiB).
//
// The bridge runs in this process with its real journal in a temp dir on
// the machine's disk; the storm guard is off (a storm is not what this
// measures) and the reopen window is 1h, so the re-fire reopens.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	amtemplate "github.com/prometheus/alertmanager/template"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

const repo = "acme/gpu-oncall"

func main() {
	groups := flag.Int("groups", 1000, "alert groups")
	concurrency := flag.Int("concurrency", 8, "webhooks in flight at once (Alertmanager sends groups in parallel)")
	startupClosed := flag.Int("startup-closed", 0, "measure the start instead: this many closed issues over the past year on the stand-in")
	startupOpen := flag.Int("startup-open", 50, "with -startup-closed: this many open issues")
	startupSeed := flag.Uint64("startup-seed", 1, "with -startup-closed: the seed of the issues' close times and sizes")
	startupBridge := flag.String("startup-bridge", "", "internal: run the bridge against this GitHub URL and report its start")
	flag.Parse()
	var err error
	switch {
	case *startupBridge != "":
		err = runStartupBridge(*startupBridge)
	case *startupClosed > 0:
		err = runStartup(*startupClosed, *startupOpen, *startupSeed)
	default:
		err = run(*groups, *concurrency)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "alertbridge scale:", err)
		os.Exit(1)
	}
}

func run(groups, concurrency int) error {
	fake := ghfake.New()
	defer fake.Close()
	fake.AddRepo(repo)
	fake.SetRateLimit(1_000_000, 1_000_000, time.Now().Add(time.Hour))

	dir, err := os.MkdirTemp("", "alertbridge-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg, err := config.Parse("scale.yaml", []byte("defaultRepo: "+repo+"\nreopenWindow: 1h\nstormGuard: {maxNewIssues: 0}\n"))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	j, err := journal.Open(filepath.Join(dir, "journal"), log)
	if err != nil {
		return err
	}
	defer j.Close()
	gh, err := ghclient.New(ghclient.Options{BaseURL: fake.URL(), Log: log})
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Options{Config: cfg, Journal: j, GitHub: gh, Auth: bridge.Auth{Insecure: true}, Log: log})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Run(ctx) }()

	var latencies []time.Duration
	var mu sync.Mutex
	phase := func(name string, firing bool) error {
		start := time.Now()
		sem := make(chan struct{}, concurrency)
		errs := make(chan error, groups)
		var wg sync.WaitGroup
		for i := range groups {
			body := webhook(i, firing)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				t0 := time.Now()
				resp, err := http.Post(srv.URL+"/webhook", "application/json", bytes.NewReader(body))
				d := time.Since(t0)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("webhook: %s", resp.Status)
					return
				}
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		acked := time.Since(start)
		for j.Len() > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Printf("%-8s %d webhooks acknowledged in %v, applied in %v\n", name, groups, acked.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		return nil
	}
	if err := phase("fire", true); err != nil {
		return err
	}
	if err := phase("resolve", false); err != nil {
		return err
	}
	if err := phase("re-fire", true); err != nil {
		return err
	}

	issues := fake.Issues(repo)
	open := 0
	for _, is := range issues {
		if is.State == ghclient.StateOpen {
			open++
		}
	}
	if len(issues) != groups || open != groups {
		return fmt.Errorf("want %d open issues, have %d issues, %d open", groups, len(issues), open)
	}
	byEndpoint := map[string]int{}
	total, search := 0, 0
	for _, c := range fake.Calls() {
		key := c.Method + " " + endpointOf(c.Path)
		byEndpoint[key]++
		total++
		if strings.HasPrefix(c.Path, "/search/") {
			search++
		}
	}
	transitions := 3 * groups
	fmt.Printf("\nGitHub calls: %d for %d transitions = %.2f per transition (target <= 1.2); search API calls: %d\n",
		total, transitions, float64(total)/float64(transitions), search)
	keys := make([]string, 0, len(byEndpoint))
	for k := range byEndpoint {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-40s %6d\n", k, byEndpoint[k])
	}
	slices.Sort(latencies)
	q := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("\nwebhook acknowledgement (%d webhooks, %d in flight): p50 %v  p99 %v  max %v (target p99 <= 20ms)\n",
		len(latencies), concurrency, q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), latencies[len(latencies)-1].Round(10*time.Microsecond))
	return nil
}

func endpointOf(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := range parts {
		if i >= 3 && parts[i] != "" && parts[i][0] >= '0' && parts[i][0] <= '9' {
			parts[i] = "{n}"
		}
	}
	return "/" + strings.Join(parts, "/")
}

func webhook(i int, firing bool) []byte {
	node := fmt.Sprintf("gpu-%04d", i)
	st := payload.StatusFiring
	if !firing {
		st = payload.StatusResolved
	}
	m := payload.Message{Version: "4", GroupKey: fmt.Sprintf(`{}:{alertname="KubemedicGPULost", node=%q}`, node)}
	m.Receiver, m.Status = "gpu-oncall", st
	m.GroupLabels = amtemplate.KV{"alertname": "KubemedicGPULost", "node": node}
	m.CommonLabels = amtemplate.KV{"alertname": "KubemedicGPULost", "node": node, "severity": "critical", "condition": "GPULost"}
	m.CommonAnnotations = amtemplate.KV{"summary": "GPU lost on " + node, "message": "7 of 8 GPUs visible",
		"runbook_url": "https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicgpulost"}
	m.ExternalURL = "http://alertmanager.example:9093"
	m.Alerts = amtemplate.Alerts{{Status: st, Labels: m.CommonLabels, Annotations: m.CommonAnnotations,
		StartsAt: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Fingerprint: fmt.Sprintf("%016x", i)}}
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}
