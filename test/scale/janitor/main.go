// Command janitor measures the janitor at cluster scale: a real
// kube-apiserver and etcd with kwok playing 2,000 GPU nodes and 50,000
// Running GPU pods in a few hundred namespaces, a real Prometheus scraping
// their dcgm-exporter series (the harness' stand-in, one series per pod
// GPU), and the kubemedic-janitor binary as its own process.
//
//	go run ./test/scale/janitor [-nodes 2000] [-pods 50000] [-steady 2m] [-window 2m]
//
// Run it from the repository root after `make testbin`. It prints, against
// the goals of the janitor's scale issue:
//
//   - cycle time (goal <= 2 s): the mean of kubemedic_janitor_cycle_duration_seconds
//     (sum/count over the steady state) and the p50 and max of the `took` of
//     the janitor's "Janitor cycle done" log lines of the same cycles. The
//     janitor runs with --log-level=1, which turns that V(1) line on without
//     the V(2) "No action" line that --log-level=debug writes for every pod
//     in every cycle (50,000 lines a cycle would measure the logger). The
//     log gives each cycle's own duration; timing consecutive
//     kubemedic_janitor_last_cycle_timestamp_seconds would not (whole
//     seconds, and the interval in between).
//   - Prometheus queries per cycle (goal <= 1 per distinct (metric, window)):
//     the delta of kubemedic_janitor_prometheus_query_duration_seconds_count
//     over the cycles, and as a cross-check Prometheus' own
//     prometheus_http_requests_total{handler="/api/v1/query"} and
//     prometheus_engine_query_duration_seconds_count{slice="inner_eval"}
//     (it has no rules, and this program sends no query in that time).
//   - memory: the janitor's peak RSS (VmHWM, goal <= 200 MiB), and its
//     process_resident_memory_bytes and go_memstats_heap_inuse_bytes.
//   - API writes per cycle when nothing changes (goal 0): the deltas of
//     kubemedic_janitor_api_writes_total and of the janitor's client-side
//     rest_client_requests_total for every method but GET.
//
// Then one busy cycle: -idle-percent of the pods go idle (utilisation 0)
// and the cycle in which they become candidates is timed. Without a Slack
// token each of them gets one Event and nothing else: ReclaimNoticeFailed,
// or ReclaimUnsupportedOwner for the PyTorchJob pods.
//
// Every pod is busy (50 % utilisation) until then, so nothing is noticed;
// the policy's maxLifetime (1 year) and maxPending (24h) never hold. The idle
// window is -window (2m) with a -scrape (5s) scrape interval, so that the
// series cover a whole window minutes after they appear; the series are
// created before the pods, and cover the window long before the janitor
// starts. A pod has one whole GPU; a node has pods/nodes GPUs (25 at the
// default sizes), so no node is over-committed.
//
// Building the cluster takes most of the time: creating the pods and
// waiting for kwok to mark them Running and then stop patching their
// status (about 16 minutes in all at the defaults on 2 cores).
// -nodes 200 -pods 2000 -namespaces 50 -steady 30s takes about 6 minutes,
// most of it waiting for the series to cover the window. -pprof saves the
// janitor's CPU, heap and allocation profiles. The numbers are
// measurements, not a gate: CI does not run this. See docs/janitor.md for
// what was measured.
package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

const (
	janitorNS  = "kubemedic-system"
	policyName = "bench-idle"
	// workloadSize is the number of pods of one workload (a Deployment, a
	// StatefulSet or a PyTorchJob).
	workloadSize = 8
	// idleBelow is the policy's utilizationBelowPercent; busyPercent the
	// utilisation of every GPU in the steady state.
	idleBelow   = 5
	busyPercent = 50
)

type config struct {
	nodes, pods, namespaces int
	steady, window          time.Duration
	interval, scrape        time.Duration
	staleness               time.Duration
	historyLead             time.Duration
	idlePct                 float64
	workers                 int
	bin                     string
	keep, pprof             bool
	gomemlimit              string
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 2000, "kwok GPU nodes")
	flag.IntVar(&c.pods, "pods", 50000, "Running GPU pods, one GPU each, spread evenly over the nodes")
	flag.IntVar(&c.namespaces, "namespaces", 250, "namespaces the pods are spread over")
	flag.DurationVar(&c.steady, "steady", 2*time.Minute, "length of the steady state whose cycles, queries and writes are counted")
	flag.DurationVar(&c.window, "window", 2*time.Minute, "the policy's idle window")
	flag.DurationVar(&c.interval, "interval", 10*time.Second, "the janitor's --interval")
	flag.DurationVar(&c.scrape, "scrape", 5*time.Second, "Prometheus' scrape interval of the dcgm-exporter stand-in")
	flag.DurationVar(&c.staleness, "staleness", 30*time.Second, "the janitor's --metrics-staleness (a few scrape intervals)")
	flag.Float64Var(&c.idlePct, "idle-percent", 1, "percentage of the pods that go idle for the busy cycle; 0 skips it")
	flag.IntVar(&c.workers, "workers", 32, "concurrent creates")
	flag.DurationVar(&c.historyLead, "history-lead", 8*time.Minute, "for a window of 30m or more: how far ahead of now the backfilled past ends, where Prometheus starts; it must cover writing the past and promtool's blocks")
	flag.StringVar(&c.bin, "bin", "", "kubemedic-janitor binary (default: go build ./cmd/kubemedic-janitor)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (janitor and Prometheus logs) and print its path")
	flag.StringVar(&c.gomemlimit, "gomemlimit", "", "the janitor's GOMEMLIMIT (e.g. 230MiB, as deploy/janitor/deployment.yaml sets); empty: unset")
	flag.BoolVar(&c.pprof, "pprof", false, "run the janitor with --pprof-bind-address and save a CPU profile of a few cycles and a heap profile at the end (implies -keep)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if gpuutil.UsesBuckets(c.window) {
		// A long window is backfilled at dcgm-exporter's default
		// collection interval, with a staleness of a few of them.
		if !set["scrape"] {
			c.scrape = 30 * time.Second
		}
		if !set["staleness"] {
			c.staleness = 2 * time.Minute
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "janitor scale:", err)
		os.Exit(1)
	}
}

// report collects what is printed at the end.
type report struct {
	rows     [][2]string
	verdicts []string
}

func (r *report) add(name, format string, args ...any) {
	r.rows = append(r.rows, [2]string{name, fmt.Sprintf(format, args...)})
}

func (r *report) verdict(met bool, format string, args ...any) {
	s := "MISSED"
	if met {
		s = "met   "
	}
	r.verdicts = append(r.verdicts, s+"  "+fmt.Sprintf(format, args...))
}

func (r *report) print(c config) {
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Printf("\nkubemedic-janitor at scale: %d nodes, %d GPU pods in %d namespaces, idle window %s, scrape %s, --interval %s, %d CPUs (GOMAXPROCS %d), load %s\n",
		c.nodes, c.pods, c.namespaces, c.window, c.scrape, c.interval, runtime.NumCPU(), runtime.GOMAXPROCS(0), load)
	fmt.Println()
	for _, row := range r.rows {
		fmt.Printf("%-16s %s\n", row[0], row[1])
	}
	fmt.Println()
	for _, v := range r.verdicts {
		fmt.Println(v)
	}
}

func run(ctx context.Context, c config) error {
	if c.nodes < 1 || c.pods < 1 || c.namespaces < 1 || c.workers < 1 {
		return errors.New("-nodes, -pods, -namespaces and -workers must be at least 1")
	}
	if c.window < 10*c.scrape {
		return fmt.Errorf("-window %s must be at least 10 scrape intervals (%s)", c.window, 10*c.scrape)
	}
	if c.pprof {
		c.keep = true
	}
	rep := &report{}
	work, err := os.MkdirTemp("", "kubemedic-janitor-scale-")
	if err != nil {
		return err
	}
	if c.keep {
		defer scaleutil.Logf("kept %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	built := c.bin == ""
	if built {
		c.bin = filepath.Join(work, "kubemedic-janitor")
		scaleutil.Logf("building ./cmd/kubemedic-janitor")
		cmd := exec.Command("go", "build", "-o", c.bin, "./cmd/kubemedic-janitor")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build (run from the repository root): %w", err)
		}
	}

	rep.add("binary", "%s", describeBinary(c.bin, built))

	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := localcluster.New(startCtx, localcluster.Options{Kwok: true, Logf: scaleutil.Logf})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			scaleutil.Logf("stop: %v", err)
		}
	}()
	// The harness' clients keep envtest's QPS of 1000; creating 50,000
	// pods wants no client-side limit at all.
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}

	w := newWorld(c)

	// The series first, so that Prometheus holds a whole window of them
	// long before the janitor starts: scraped for a short window, a
	// backfilled past for a window read from the recorded buckets, where
	// the idle pods are idle over the whole past (history.go).
	backfill := gpuutil.UsesBuckets(c.window)
	idle := func(int) bool { return false }
	if backfill && c.idlePct > 0 {
		n := max(1, int(math.Round(float64(c.pods)*c.idlePct/100)))
		stride := c.pods / n
		idle = func(i int) bool { return i%stride == 0 && i/stride < n }
	}
	dcgm := harness.NewDCGMExporter()
	defer dcgm.Close()
	for i := range c.pods {
		v := float64(busyPercent)
		if idle(i) {
			v = 0
		}
		dcgm.Set(w.series(i), v)
	}
	promDir := filepath.Join(work, "prometheus")
	if err := os.Mkdir(promDir, 0o755); err != nil {
		return err
	}
	promConfig := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: dcgm-exporter
    static_configs:
      - targets: [%q]
`, c.scrape, c.scrape, dcgm.URL)
	var past *history
	if backfill {
		if past, err = writeHistory(ctx, c, w, promDir, strings.TrimPrefix(dcgm.URL, "http://"), idle); err != nil {
			return err
		}
		promConfig += fmt.Sprintf("rule_files:\n  - %q\n", past.rules)
	}
	seriesSince := time.Now()
	promCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	// The sample limit lets compareRaw's raw query of a long window run.
	prom, err := harness.NewPrometheus(promCtx, promDir, promConfig, "--query.max-samples=500000000")
	cancel()
	if err != nil {
		return err
	}
	if past != nil {
		seriesSince = past.start
		if err := past.backfillRules(ctx, c, prom); err != nil {
			_ = prom.Stop()
			return err
		}
		rep.add("history", "%d series x %s at %s backfilled: %s of OpenMetrics written in %s, TSDB blocks by promtool in %s, the recording rules by promtool in %s",
			c.pods, past.end.Sub(past.start), c.scrape, scaleutil.MiB(past.size), past.took.write.Round(time.Second), past.took.blocks.Round(time.Second), past.took.rules.Round(time.Second))
	}
	defer func() {
		if err := prom.Stop(); err != nil {
			scaleutil.Logf("stop prometheus: %v", err)
		}
	}()
	scaleutil.Logf("prometheus at %s scraping %d dcgm-exporter series every %s", prom.URL, c.pods, c.scrape)

	// Cluster.
	t0 := time.Now()
	nodeCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	_, err = env.CreateGPUNodes(nodeCtx, c.nodes, w.nodeSpec)
	cancel()
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	nodesTook := time.Since(t0)
	scaleutil.Logf("%d nodes with %d GPUs each created and Ready in %s", c.nodes, w.nodeSpec.GPUs, nodesTook.Round(time.Second))
	rep.add("cluster", "%d kwok GPU nodes (%d GPUs each), created and Ready in %s", c.nodes, w.nodeSpec.GPUs, nodesTook.Round(time.Second))

	t0 = time.Now()
	if err := w.createNamespaces(ctx, cs); err != nil {
		return err
	}
	owners, err := w.createOwners(ctx, cs)
	if err != nil {
		return err
	}
	scaleutil.Logf("%d namespaces and %d workload objects created in %s", c.namespaces, owners, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	if err := parallel(ctx, "pods", c.pods, c.workers, func(ctx context.Context, i int) error {
		pod := w.pod(i)
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	podsTook := time.Since(t0)
	scaleutil.Logf("%d pods created in %s", c.pods, podsTook.Round(time.Second))
	t0 = time.Now()
	if err := scaleutil.WaitPodsRunning(ctx, cs, 60*time.Minute); err != nil {
		return err
	}
	runningTook := time.Since(t0)
	t0 = time.Now()
	extra, err := waitPodWritesQuiet(ctx, cs, 60*time.Minute)
	if err != nil {
		return err
	}
	rep.add("", "%d GPU pods in %d namespaces (%d-pod workloads: Deployments, StatefulSets, PyTorchJobs; %d workload objects), created in %s (%.0f/s, %d workers); all Running %s later",
		c.pods, c.namespaces, workloadSize, owners, podsTook.Round(time.Second), float64(c.pods)/podsTook.Seconds(), c.workers, runningTook.Round(time.Second))
	if extra > 0 {
		rep.add("", "kwok went on patching pod status after all were Running: %.0f more patches, quiet %s later", extra, time.Since(t0).Round(time.Second))
	}

	if past != nil {
		t0 = time.Now()
		if err := backdatePods(ctx, c, cs, w, past.start); err != nil {
			return err
		}
		if err := startTimes(ctx, cs, w, past.start); err != nil {
			return err
		}
		rep.add("", "every pod's status.startTime set to the past's start, %s (kwok starts them now), in %s", past.start.UTC().Format(time.RFC3339), time.Since(t0).Round(time.Second))
	}

	if err := createPolicy(ctx, env, c.window); err != nil {
		return err
	}

	// Prometheus must hold a whole window of every series (and a few
	// scrapes more) before the janitor judges anyone.
	if d := c.window + 3*c.scrape - time.Since(seriesSince); d > 0 {
		scaleutil.Logf("waiting %s until Prometheus holds a whole %s window of the series", d.Round(time.Second), c.window)
		if err := scaleutil.Sleep(ctx, d); err != nil {
			return err
		}
	}
	n, err := promQuery(ctx, prom.URL, fmt.Sprintf(`count(sum by (namespace, pod, UUID) (count_over_time(DCGM_FI_DEV_GPU_UTIL[%ds])) >= %d)`,
		int(c.window/time.Second), int(c.window/c.scrape)*9/10))
	if err != nil {
		return err
	}
	scaleutil.Logf("prometheus: %.0f of %d series have at least 90%% of a window's samples", n, c.pods)
	promRSS, _ := scaleutil.ProcStatus(prom.PID(), "VmRSS")
	rep.add("prometheus", "%.0f of %d series with >= 90%% of the %s window's samples before the janitor started; Prometheus RSS %s",
		n, c.pods, c.window, scaleutil.MiB(promRSS))

	// The janitor, as its own process.
	jan, err := startJanitor(c, env.Kubeconfig, prom.URL, work)
	if err != nil {
		return err
	}
	defer jan.stop()
	t0 = time.Now()
	if err := jan.waitCycles(ctx, 1, 10*time.Minute); err != nil {
		return err
	}
	firstTook := time.Since(t0)
	hwmFirst, _ := scaleutil.ProcStatus(jan.pid(), "VmHWM")
	firstCycle := ""
	if cy := jan.cycles(0, -1); len(cy) > 0 {
		firstCycle = fmt.Sprintf("; the first cycle took %s (%d GPU pods, %d queries)", ms(cy[0].took), cy[0].pods, cy[0].queries)
	}
	scaleutil.Logf("janitor (pid %d): first cycle done %s after exec%s; VmHWM %s", jan.pid(), firstTook.Round(time.Millisecond), firstCycle, scaleutil.MiB(hwmFirst))
	rep.add("janitor", "pid %d, --interval %s --metrics-staleness %s --log-level=1, no Slack; first cycle done %s after exec (cache sync of every pod included)%s; VmHWM then %s",
		jan.pid(), c.interval, c.staleness, firstTook.Round(time.Millisecond), firstCycle, scaleutil.MiB(hwmFirst))

	// Two more cycles before counting: the first one started the informers
	// of the workload objects.
	if err := jan.waitCycles(ctx, 3, 2*time.Minute+3*c.interval); err != nil {
		return err
	}

	if err := steadyState(ctx, c, jan, prom, rep); err != nil {
		return err
	}
	if err := queryStats(ctx, c, prom.URL, rep); err != nil {
		return err
	}
	if past != nil {
		// The idle pods were idle over the whole past: candidates from the
		// first cycle on, and every other pod measured.
		m, err := jan.metrics(ctx)
		if err != nil {
			return err
		}
		want := 0
		for i := range c.pods {
			if idle(i) {
				want++
			}
		}
		got := m.value("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "candidate"})
		unknown := m.value("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "unknown"})
		rep.verdict(got == float64(want) && unknown == 0, "verdicts on the recorded buckets: %.0f idle candidates (%d pods idle over the whole past), %.0f Unknown", got, want, unknown)
		if err := compareRaw(ctx, c, prom.URL, rep); err != nil {
			return err
		}
	}
	if c.idlePct > 0 && past == nil {
		if err := busyCycle(ctx, c, w, dcgm, cs, jan, rep); err != nil {
			return err
		}
	}

	if c.pprof {
		if err := jan.profiles(ctx, c, work, rep); err != nil {
			return err
		}
	}

	hwm, err := scaleutil.ProcStatus(jan.pid(), "VmHWM")
	if err != nil {
		return err
	}
	rss, _ := scaleutil.ProcStatus(jan.pid(), "VmRSS")
	m, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	rep.add("memory", "janitor VmHWM (peak RSS) %s; VmRSS now %s; process_resident_memory_bytes %s, go_memstats_heap_inuse_bytes %s",
		scaleutil.MiB(hwm), scaleutil.MiB(rss), scaleutil.MiB(int64(m.value("process_resident_memory_bytes", nil))), scaleutil.MiB(int64(m.value("go_memstats_heap_inuse_bytes", nil))))
	rep.verdict(hwm <= 200<<20, "janitor peak RSS (VmHWM) %s <= 200 MiB", scaleutil.MiB(hwm))

	if errs, first := jan.logErrors(); errs > 0 {
		rep.add("janitor log", "%d error lines; the first: %s", errs, first)
	}
	if c.keep {
		rep.add("logs", "%s (janitor), %s", jan.logPath, filepath.Join(promDir, "prometheus.log"))
	}
	rep.print(c)
	return nil
}

// world lays the pods out: pod i runs on node i%nodes with GPU i/nodes, in
// workload i/workloadSize, whose namespace is team-<workload%namespaces>.
type world struct {
	c        config
	nodeSpec localcluster.NodeSpec
	// uids of the pods' controllers, by workload; set by createOwners.
	uids []types.UID
}

func newWorld(c config) *world {
	gpus := max(8, (c.pods+c.nodes-1)/c.nodes)
	return &world{
		c:        c,
		nodeSpec: localcluster.NodeSpec{GPUs: gpus, InstanceType: fmt.Sprintf("bench-%dgpu", gpus)},
		uids:     make([]types.UID, (c.pods+workloadSize-1)/workloadSize),
	}
}

func (w *world) namespace(wl int) string { return fmt.Sprintf("team-%03d", wl%w.c.namespaces) }

// kind is the workload's controller: two in four are Deployments, one a
// StatefulSet, one a Kubeflow PyTorchJob (no object: no CRD is installed,
// and the janitor does not read it).
func kind(wl int) string {
	switch wl % 4 {
	case 0, 1:
		return "Deployment"
	case 2:
		return "StatefulSet"
	}
	return "PyTorchJob"
}

func workloadName(wl int) string {
	switch kind(wl) {
	case "Deployment":
		return fmt.Sprintf("infer-%05d", wl)
	case "StatefulSet":
		return fmt.Sprintf("eval-%05d", wl)
	}
	return fmt.Sprintf("train-%05d", wl)
}

// templateHash stands in for the pod-template-hash of a Deployment's
// ReplicaSet.
func templateHash(wl int) string { return strconv.FormatInt(int64(wl)*7919+1_000_000_007, 36) }

func (w *world) replicaSetName(wl int) string { return workloadName(wl) + "-" + templateHash(wl) }

func (w *world) podName(i int) string {
	wl, r := i/workloadSize, i%workloadSize
	switch kind(wl) {
	case "Deployment":
		return w.replicaSetName(wl) + "-" + podSuffix(i)
	case "StatefulSet":
		return fmt.Sprintf("%s-%d", workloadName(wl), r)
	}
	return fmt.Sprintf("%s-worker-%d", workloadName(wl), r)
}

// podSuffix stands in for the five random characters of a ReplicaSet's
// pod names (the alphabet of k8s.io/apimachinery/pkg/util/rand); distinct
// for distinct i below 27^5.
func podSuffix(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	v := i * 104729 % 14348907 // 104729 is prime: i -> v is one to one
	b := make([]byte, 5)
	for k := range b {
		b[k] = alphabet[v%27]
		v /= 27
	}
	return string(b)
}

func (w *world) nodeName(i int) string { return w.nodeSpec.NodeName(i % w.c.nodes) }

// series is pod i's GPU as dcgm-exporter labels it.
func (w *world) series(i int) harness.DCGMSeries {
	wl := i / workloadSize
	return harness.DCGMSeries{
		Namespace: w.namespace(wl), Pod: w.podName(i), Container: "main", Hostname: w.nodeName(i),
		UUID: fmt.Sprintf("GPU-%08x-%04x-4%03x-8%03x-%012x", uint32(i)*2654435761, i%w.c.nodes&0xffff, (i/w.c.nodes)&0xfff, i&0xfff, i),
		GPU:  i / w.c.nodes,
	}
}

func (w *world) createNamespaces(ctx context.Context, cs kubernetes.Interface) error {
	for _, name := range []string{janitorNS} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return parallel(ctx, "namespaces", w.c.namespaces, w.c.workers, func(ctx context.Context, i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        w.namespace(i),
			Labels:      map[string]string{"kubemedic.io/bench": "true"},
			Annotations: map[string]string{notify.AnnotationOwner: fmt.Sprintf("lead-%03d@example.com", i)},
		}}
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// createOwners creates each workload's Deployment and ReplicaSet, or
// StatefulSet, as their controllers would have (no controller runs), and
// returns how many objects it created.
func (w *world) createOwners(ctx context.Context, cs kubernetes.Interface) (int, error) {
	var objects atomic.Int64
	err := parallel(ctx, "workloads", len(w.uids), w.c.workers, func(ctx context.Context, wl int) error {
		ns, name := w.namespace(wl), workloadName(wl)
		labels := map[string]string{localcluster.LabelAppName: name}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: w.podSpec(0)}
		tmpl.Spec.NodeName = ""
		sel := &metav1.LabelSelector{MatchLabels: labels}
		switch kind(wl) {
		case "Deployment":
			d, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](workloadSize), Selector: sel, Template: tmpl},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			hash := templateHash(wl)
			rsLabels := map[string]string{localcluster.LabelAppName: name, localcluster.LabelPodTemplateHash: hash}
			rsTmpl := tmpl
			rsTmpl.Labels = rsLabels
			rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: w.replicaSetName(wl), Labels: rsLabels,
					OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", d.Name, d.UID)}},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](workloadSize), Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: rsTmpl},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			w.uids[wl] = rs.UID
			objects.Add(2)
		case "StatefulSet":
			s, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](workloadSize), Selector: sel, Template: tmpl, ServiceName: name},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			w.uids[wl] = s.UID
			objects.Add(1)
		default:
			w.uids[wl] = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", wl))
		}
		return nil
	})
	return int(objects.Load()), err
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// podSpec is the spec of pod i (bound to its node, one GPU).
func (w *world) podSpec(i int) corev1.PodSpec {
	gpu := resource.MustParse("1")
	return corev1.PodSpec{
		NodeName:    w.nodeName(i),
		Tolerations: []corev1.Toleration{{Key: string(localcluster.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{
			Name: "main", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
			Env: []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "WARN"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"), localcluster.ResourceGPU: gpu},
				Limits:   corev1.ResourceList{localcluster.ResourceGPU: gpu},
			},
		}},
	}
}

// pod is pod i as its workload's controller would have made it.
func (w *world) pod(i int) *corev1.Pod {
	wl, r := i/workloadSize, i%workloadSize
	name := workloadName(wl)
	labels := map[string]string{localcluster.LabelAppName: name, "kubemedic.io/bench": "true"}
	spec := w.podSpec(i)
	var ref metav1.OwnerReference
	switch kind(wl) {
	case "Deployment":
		labels[localcluster.LabelPodTemplateHash] = templateHash(wl)
		ref = controllerRef("apps/v1", "ReplicaSet", w.replicaSetName(wl), w.uids[wl])
	case "StatefulSet":
		labels["statefulset.kubernetes.io/pod-name"] = w.podName(i)
		labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(r)
		spec.Hostname, spec.Subdomain = w.podName(i), name
		ref = controllerRef("apps/v1", "StatefulSet", name, w.uids[wl])
	default:
		labels["training.kubeflow.org/job-name"] = name
		labels["training.kubeflow.org/replica-type"] = "worker"
		labels["training.kubeflow.org/replica-index"] = strconv.Itoa(r)
		spec.RestartPolicy = corev1.RestartPolicyNever
		ref = controllerRef("kubeflow.org/v1", "PyTorchJob", name, w.uids[wl])
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace(wl), Name: w.podName(i), Labels: labels, OwnerReferences: []metav1.OwnerReference{ref}},
		Spec:       spec,
	}
}

func createPolicy(ctx context.Context, env *localcluster.Cluster, window time.Duration) error {
	p := &v1alpha1.ClusterReclaimPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: v1alpha1.ClusterReclaimPolicySpec{
			ReclaimRules: v1alpha1.ReclaimRules{
				Description: "scale benchmark: idle below 5% for the window; lifetime and pending limits that never hold",
				Idle:        &v1alpha1.IdleRule{UtilizationBelowPercent: idleBelow, Window: metav1.Duration{Duration: window}},
				MaxLifetime: &metav1.Duration{Duration: 365 * 24 * time.Hour},
				MaxPending:  &metav1.Duration{Duration: 24 * time.Hour},
				GracePeriod: &metav1.Duration{Duration: time.Hour},
			},
			ExemptNamespaces: []string{"kube-system", janitorNS},
		},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		return fmt.Errorf("create ClusterReclaimPolicy: %w", err)
	}
	return nil
}

// parallel runs f(0..n-1) on workers goroutines, retrying each up to five
// times, logging progress every 15 s. It stops at the first error.
func parallel(ctx context.Context, what string, n, workers int, f func(ctx context.Context, i int) error) error {
	var (
		done     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int, workers)
	for range workers {
		wg.Go(func() {
			for i := range work {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = f(ctx, i); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("create %s #%d: %w", what, i, err); cancel() })
					continue
				}
				done.Add(1)
			}
		})
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	start := time.Now()
feed:
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		case <-tick.C:
			d := done.Load()
			scaleutil.Logf("%s: %d/%d created (%.0f/s)", what, d, n, float64(d)/time.Since(start).Seconds())
			select {
			case work <- i:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// waitPodWritesQuiet waits until no pod status is written for 15 s: kwok
// goes on patching pod status for minutes after it has marked them all
// Running, and the janitor must not start (nor the steady state count)
// while the pods still change. It returns the patches it saw.
func waitPodWritesQuiet(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	count := func() (float64, error) {
		b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return 0, fmt.Errorf("kube-apiserver /metrics: %w", err)
		}
		m, err := parseMetrics(string(b))
		if err != nil {
			return 0, fmt.Errorf("kube-apiserver /metrics: %w", err)
		}
		return m.value("apiserver_request_total", map[string]string{"resource": "pods", "subresource": "status"}), nil
	}
	first, err := count()
	if err != nil {
		return 0, err
	}
	prev, last := first, time.Now()
	for {
		if err := scaleutil.Sleep(ctx, 15*time.Second); err != nil {
			return 0, fmt.Errorf("wait for kwok to stop writing pod status: %w", err)
		}
		n, err := count()
		if err != nil {
			return 0, err
		}
		if n == prev {
			return n - first, nil
		}
		scaleutil.Logf("pods: kwok still writing pod status (%.0f/s)", (n-prev)/time.Since(last).Seconds())
		prev, last = n, time.Now()
	}
}

// promQuery runs an instant query whose answer is one number (0 for an
// empty vector).
func promQuery(ctx context.Context, base, expr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", expr, err)
	}
	defer resp.Body.Close()
	var ans struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return 0, fmt.Errorf("query %s: %s: %w", expr, resp.Status, err)
	}
	if ans.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", expr, ans.Error)
	}
	if len(ans.Data.Result) == 0 {
		return 0, nil
	}
	s, _ := ans.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

func promMetrics(ctx context.Context, base string) (metrics, error) {
	return getMetrics(ctx, base+"/metrics")
}

// steadyState counts cycles, queries and writes while nothing changes.
func steadyState(ctx context.Context, c config, jan *janitor, prom *harness.Prometheus, rep *report) error {
	scaleutil.Logf("steady state: counting the janitor's cycles, queries and writes for %s", c.steady)
	jBefore, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	pBefore, err := promMetrics(ctx, prom.URL)
	if err != nil {
		return err
	}
	cpuBefore, err := scaleutil.CPUTime(jan.pid())
	if err != nil {
		return err
	}
	promCPUBefore, err := scaleutil.CPUTime(prom.PID())
	if err != nil {
		return err
	}
	logFrom := jan.logSize()
	if err := scaleutil.Sleep(ctx, c.steady); err != nil {
		return err
	}
	logTo := jan.logSize()
	promCPUAfter, err := scaleutil.CPUTime(prom.PID())
	if err != nil {
		return err
	}
	cpuAfter, err := scaleutil.CPUTime(jan.pid())
	if err != nil {
		return err
	}
	jAfter, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	pAfter, err := promMetrics(ctx, prom.URL)
	if err != nil {
		return err
	}

	d := func(m func(metrics) float64) float64 { return m(jAfter) - m(jBefore) }
	cycles := d(func(m metrics) float64 { return m.value("kubemedic_janitor_cycle_duration_seconds_count", nil) })
	if cycles < 1 {
		return fmt.Errorf("no janitor cycle in %s of steady state (log %s)", c.steady, jan.logPath)
	}
	cycleSum := d(func(m metrics) float64 { return m.value("kubemedic_janitor_cycle_duration_seconds_sum", nil) })
	mean := time.Duration(cycleSum / cycles * float64(time.Second))
	logged := jan.cycles(logFrom, logTo)
	took := make([]time.Duration, len(logged))
	distinct := 0
	for i, cy := range logged {
		took[i] = cy.took
		distinct = max(distinct, cy.queries)
	}
	slices.Sort(took)
	var p50, mx time.Duration
	if len(took) > 0 {
		p50, mx = scaleutil.Pct(took, 50), took[len(took)-1]
	}
	judged, withState := 0, 0
	if len(logged) > 0 {
		judged, withState = logged[len(logged)-1].pods, logged[len(logged)-1].withState
	}
	rep.add("steady state", "%s, every pod busy (%d%%): %.0f cycles (histogram), %d logged", c.steady, busyPercent, cycles, len(logged))
	rep.add("cycle time", "mean %s (kubemedic_janitor_cycle_duration_seconds sum/count); from the log: p50 %s, max %s (the last cycle judged %d GPU pods, %d with something to do)",
		ms(mean), ms(p50), ms(mx), judged, withState)
	rep.verdict(mx <= 2*time.Second && mean <= 2*time.Second, "cycle time: mean %s, max %s <= 2 s", ms(mean), ms(mx))

	queries := d(func(m metrics) float64 {
		return m.value("kubemedic_janitor_prometheus_query_duration_seconds_count", nil)
	})
	qSum := d(func(m metrics) float64 {
		return m.value("kubemedic_janitor_prometheus_query_duration_seconds_sum", nil)
	})
	qErrs := d(func(m metrics) float64 { return m.value("kubemedic_janitor_prometheus_query_errors_total", nil) })
	pd := func(name string, match map[string]string) float64 {
		return pAfter.value(name, match) - pBefore.value(name, match)
	}
	httpQueries := pd("prometheus_http_requests_total", map[string]string{"handler": "/api/v1/query"})
	evals := pd("prometheus_engine_query_duration_seconds_count", map[string]string{"slice": "inner_eval"})
	evalSum := pd("prometheus_engine_query_duration_seconds_sum", map[string]string{"slice": "inner_eval"})
	perCycle := queries / cycles
	qMean, evalMean := time.Duration(0), time.Duration(0)
	if queries > 0 {
		qMean = time.Duration(qSum / queries * float64(time.Second))
	}
	if evals > 0 {
		evalMean = time.Duration(evalSum / evals * float64(time.Second))
	}
	rep.add("queries", "%.0f by the janitor (%.2f per cycle; %d distinct (metric, window) per cycle), %.0f failed, mean %s each on the janitor's side",
		queries, perCycle, distinct, qErrs, ms(qMean))
	rep.add("", "the cycle without its queries: mean %s (list, plan, decide, act)", ms(mean-time.Duration(float64(qMean)*perCycle)))
	rep.add("", "Prometheus: %.0f requests to /api/v1/query, %.0f query evaluations (mean inner_eval %s); its CPU %.1f s (%.1f%% of one core: scrapes and queries)",
		httpQueries, evals, ms(evalMean), (promCPUAfter - promCPUBefore).Seconds(), 100*(promCPUAfter-promCPUBefore).Seconds()/c.steady.Seconds())
	unknown := jAfter.value("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "unknown"})
	candidates := jAfter.value("kubemedic_janitor_pods", map[string]string{"state": "candidate"})
	rep.add("", "after the last cycle: %.0f pods Unknown for the idle rule, %.0f candidates, kubemedic_janitor_gpu_metrics_readable %.0f",
		unknown, candidates, jAfter.value("kubemedic_janitor_gpu_metrics_readable", nil))
	rep.verdict(distinct >= 1 && perCycle <= float64(distinct), "Prometheus queries per cycle %.2f <= %d distinct (metric, window); Prometheus served %.0f for the janitor's %.0f",
		perCycle, distinct, httpQueries, queries)

	writes := d(func(m metrics) float64 { return m.value("kubemedic_janitor_api_writes_total", nil) })
	byMethod := map[string]float64{}
	clientWrites := 0.0
	for _, s := range jAfter.delta(jBefore, "rest_client_requests_total") {
		if s.value > 0 {
			byMethod[s.labels["method"]+" "+s.labels["code"]] += s.value
			if s.labels["method"] != http.MethodGet {
				clientWrites += s.value
			}
		}
	}
	var parts []string
	for _, k := range slices.Sorted(mapKeys(byMethod)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, byMethod[k]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	alloc := d(func(m metrics) float64 { return m.value("go_memstats_alloc_bytes_total", nil) })
	rep.add("", "allocated %s per cycle (go_memstats_alloc_bytes_total), %.1f KiB per pod; GC goal after the last cycle %s (go_memstats_next_gc_bytes: about twice the live heap)",
		scaleutil.MiB(int64(alloc/cycles)), alloc/cycles/1024/float64(c.pods), scaleutil.MiB(int64(jAfter.value("go_memstats_next_gc_bytes", nil))))
	rep.add("API", "kubemedic_janitor_api_writes_total +%.0f; rest_client_requests_total by method and code: %s", writes, strings.Join(parts, ", "))
	rep.add("", "janitor CPU %.2f s in %s (%.1f%% of one core)", (cpuAfter - cpuBefore).Seconds(), c.steady, 100*(cpuAfter-cpuBefore).Seconds()/c.steady.Seconds())
	rep.verdict(writes == 0 && clientWrites == 0, "API writes in steady state: %.0f per cycle (kubemedic_janitor_api_writes_total +%.0f, client requests other than GET +%.0f)",
		(writes+clientWrites)/cycles, writes, clientWrites)
	return nil
}

// busyCycle makes a share of the pods idle and times the cycle in which
// they become candidates.
func busyCycle(ctx context.Context, c config, w *world, dcgm *harness.DCGMExporter, cs kubernetes.Interface, jan *janitor, rep *report) error {
	n := max(1, int(math.Round(float64(c.pods)*c.idlePct/100)))
	stride := c.pods / n
	for k := range n {
		dcgm.Set(w.series(k*stride), 0)
	}
	idleAt := time.Now()
	scaleutil.Logf("busy cycle: %d pods idle (0%%) from now; they are candidates once a whole %s window is below %d%%", n, c.window, idleBelow)
	before, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	candidates := func(m metrics) float64 {
		return m.value("kubemedic_janitor_pods", map[string]string{"rule": "Idle", "state": "candidate"})
	}
	count := func(m metrics) float64 { return m.value("kubemedic_janitor_cycle_duration_seconds_count", nil) }
	sum := func(m metrics) float64 { return m.value("kubemedic_janitor_cycle_duration_seconds_sum", nil) }
	writes := func(m metrics) float64 { return m.value("kubemedic_janitor_api_writes_total", nil) }
	clientWrites := func(m metrics) float64 {
		t := 0.0
		for _, s := range m.samples("rest_client_requests_total") {
			if s.labels["method"] != http.MethodGet {
				t += s.value
			}
		}
		return t
	}

	// Poll faster than the cycles. base is the first poll after the end of
	// the latest cycle: the busy cycle is what lies between it and the poll
	// that sees the candidates (the janitor writes only within cycles; a
	// poll during a cycle would see some of its writes counted already).
	base := before
	deadline := time.Now().Add(c.window + 3*c.interval + time.Minute)
	last := time.Now()
	var busy metrics
	var busyDur time.Duration
	var seenAt time.Time
	for busy == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("busy cycle: only %.0f of %d pods candidates %s after they went idle (log %s)", candidates(base), n, time.Since(idleAt).Round(time.Second), jan.logPath)
		}
		if err := scaleutil.Sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
		m, err := jan.metrics(ctx)
		if err != nil {
			return err
		}
		if count(m) > count(base) && candidates(m) >= float64(n) {
			busy, seenAt = m, time.Now()
			if count(m)-count(base) == 1 {
				busyDur = time.Duration((sum(m) - sum(base)) * float64(time.Second))
			}
			break
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			scaleutil.Logf("busy cycle: %.0f of %d candidates %s after the change", candidates(m), n, time.Since(idleAt).Round(time.Second))
		}
		if count(m) > count(base) {
			base = m
		}
	}
	logFrom := jan.logSize()
	// The next cycle, and a few seconds for the event broadcaster to post.
	if err := jan.waitCycles(ctx, int(count(busy))+1, 2*c.interval+time.Minute); err != nil {
		return err
	}
	next, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	if err := scaleutil.Sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	after, err := jan.metrics(ctx)
	if err != nil {
		return err
	}
	nextDur := time.Duration((sum(next) - sum(busy)) / max(1, count(next)-count(busy)) * float64(time.Second))
	logged := jan.cycles(0, logFrom)
	if busyDur == 0 && len(logged) > 0 {
		busyDur = logged[len(logged)-1].took
	}
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Events: %w", err)
	}
	byReason := map[string]float64{}
	for _, e := range evs.Items {
		if e.ReportingController == "kubemedic-janitor" || e.Source.Component == "kubemedic-janitor" {
			byReason[e.Reason]++
		}
	}
	var reasons []string
	for _, r := range slices.Sorted(mapKeys(byReason)) {
		reasons = append(reasons, fmt.Sprintf("%s %.0f", r, byReason[r]))
	}
	if len(reasons) == 0 {
		reasons = []string{"none"}
	}
	rep.add("busy cycle", "%d pods (%.3g%%) idle at once; candidates %s later (window %s, scrape %s, --interval %s)",
		n, c.idlePct, seenAt.Sub(idleAt).Round(time.Second), c.window, c.scrape, c.interval)
	rep.add("", "that cycle took %s, the next %s; kubemedic_janitor_pods{rule=Idle,state=candidate} %.0f",
		ms(busyDur), ms(nextDur), candidates(busy))
	rep.add("", "writes: kubemedic_janitor_api_writes_total +%.0f in that cycle, +%.0f in the next; client requests other than GET +%.0f over both (and 5 s of event posting)",
		writes(busy)-writes(base), writes(next)-writes(busy), clientWrites(after)-clientWrites(base))
	rep.add("", "the janitor's Events in the cluster by reason: %s (one per candidate: %s where no Slack token lets it notify, %s for PyTorchJob pods; nothing is reclaimed)",
		strings.Join(reasons, ", "), controller.EventNoticeFailed, controller.EventUnsupportedOwner)
	return nil
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func mapKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// janitor is the kubemedic-janitor process.
type janitor struct {
	proc       *localcluster.Process
	logPath    string
	metricsURL string
	pprofURL   string
}

func startJanitor(c config, kubeconfig, promURL, dir string) (*janitor, error) {
	port, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	pprofAddr := "0"
	if c.pprof {
		p, err := localcluster.FreePort()
		if err != nil {
			return nil, err
		}
		pprofAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=" + addr,
		"--health-probe-bind-address=0",
		"--namespace=" + janitorNS,
		"--prometheus-url=" + promURL,
		"--interval=" + c.interval.String(),
		"--metrics-staleness=" + c.staleness.String(),
		"--log-level=1",
	}
	if c.pprof {
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	proc, err := localcluster.StartProcess(context.Background(), localcluster.ProcessSpec{
		Name: "kubemedic-janitor",
		Path: c.bin,
		Args: args,
		// No Slack token, whatever this shell has (empty is none); GOMEMLIMIT
		// as asked (empty is the runtime's default).
		Env:         []string{notify.EnvSlackToken + "=", "GOMEMLIMIT=" + c.gomemlimit},
		LogPath:     filepath.Join(dir, "kubemedic-janitor.log"),
		StopTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &janitor{proc: proc, logPath: proc.LogPath(), metricsURL: "http://" + addr + "/metrics", pprofURL: "http://" + pprofAddr + "/debug/pprof"}, nil
}

func (j *janitor) pid() int { return j.proc.PID() }

// waitCycles waits until the janitor has finished n cycles.
func (j *janitor) waitCycles(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := time.Now()
	for {
		m, err := j.metrics(ctx)
		got := 0.0
		if err == nil {
			got = m.value("kubemedic_janitor_cycle_duration_seconds_count", nil)
			if got >= float64(n) {
				return nil
			}
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			hwm, _ := scaleutil.ProcStatus(j.pid(), "VmHWM")
			scaleutil.Logf("janitor: %.0f of %d cycles done; VmHWM %s", got, n, scaleutil.MiB(hwm))
		}
		select {
		case <-j.proc.Done():
			return j.proc.Exited()
		case <-ctx.Done():
			return fmt.Errorf("janitor: %.0f of %d cycles done: %w%s", got, n, ctx.Err(), j.proc.LogTail(20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (j *janitor) stop() { _ = j.proc.Stop() }

func (j *janitor) metrics(ctx context.Context) (metrics, error) { return getMetrics(ctx, j.metricsURL) }

func (j *janitor) logSize() int64 {
	fi, err := os.Stat(j.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// cycle is one "Janitor cycle done" log line.
type cycle struct {
	// pods is the GPU pods judged, withState those with something to do
	// (a notice, a decision) in the plan.
	pods, withState, queries int
	took                     time.Duration
}

// cycles returns the cycles logged between the byte offsets from and to
// (to < 0: the end).
func (j *janitor) cycles(from, to int64) []cycle {
	b, err := os.ReadFile(j.logPath)
	if err != nil {
		return nil
	}
	if to < 0 || to > int64(len(b)) {
		to = int64(len(b))
	}
	b = b[min(from, to):to]
	var out []cycle
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, `"Janitor cycle done"`) {
			continue
		}
		var l struct {
			Pods, WithState, Queries int
			Took                     json.RawMessage
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		// zap's production encoder writes durations as seconds; a
		// development one as a string.
		var took time.Duration
		if f, err := strconv.ParseFloat(string(l.Took), 64); err == nil {
			took = time.Duration(f * float64(time.Second))
		} else if s, err := strconv.Unquote(string(l.Took)); err == nil {
			took, _ = time.ParseDuration(s)
		}
		out = append(out, cycle{pods: l.Pods, withState: l.WithState, queries: l.Queries, took: took})
	}
	return out
}

// logErrors counts the error lines in the janitor's log and returns the
// message and error of the first.
func (j *janitor) logErrors() (int, string) {
	b, err := os.ReadFile(j.logPath)
	if err != nil {
		return 0, ""
	}
	n, first := 0, ""
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, `"level":"error"`) {
			continue
		}
		n++
		if first == "" {
			var e struct{ Msg, Error string }
			if json.Unmarshal([]byte(line), &e) == nil {
				first = scaleutil.Truncate(e.Msg+": "+e.Error, 200)
			} else {
				first = scaleutil.Truncate(strings.TrimSpace(line), 200)
			}
		}
	}
	return n, first
}

// metrics is a scraped text exposition.
type metrics map[string]*dto.MetricFamily

type sample struct {
	labels map[string]string
	value  float64
}

func getMetrics(ctx context.Context, u string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", u, resp.Status)
	}
	m, err := parseMetrics(string(b))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	return m, nil
}

func parseMetrics(text string) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(text))
}

// samples returns the samples of a counter, gauge or untyped metric, or of
// a histogram's or summary's name_count or name_sum.
func (m metrics) samples(name string) []sample {
	var out []sample
	get := func(mf *dto.MetricFamily, f func(*dto.Metric) float64) {
		for _, x := range mf.GetMetric() {
			l := make(map[string]string, len(x.GetLabel()))
			for _, lp := range x.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, sample{labels: l, value: f(x)})
		}
	}
	if mf, ok := m[name]; ok {
		get(mf, func(x *dto.Metric) float64 {
			switch {
			case x.Counter != nil:
				return x.GetCounter().GetValue()
			case x.Gauge != nil:
				return x.GetGauge().GetValue()
			case x.Untyped != nil:
				return x.GetUntyped().GetValue()
			}
			return math.NaN()
		})
		return out
	}
	for _, suffix := range []string{"_count", "_sum"} {
		mf, ok := m[strings.TrimSuffix(name, suffix)]
		if !ok || !strings.HasSuffix(name, suffix) {
			continue
		}
		get(mf, func(x *dto.Metric) float64 {
			switch {
			case x.Histogram != nil && suffix == "_count":
				return float64(x.GetHistogram().GetSampleCount())
			case x.Histogram != nil:
				return x.GetHistogram().GetSampleSum()
			case x.Summary != nil && suffix == "_count":
				return float64(x.GetSummary().GetSampleCount())
			case x.Summary != nil:
				return x.GetSummary().GetSampleSum()
			}
			return math.NaN()
		})
	}
	return out
}

// value sums the samples of the metric whose labels include match.
func (m metrics) value(name string, match map[string]string) float64 {
	t := 0.0
next:
	for _, s := range m.samples(name) {
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		t += s.value
	}
	return t
}

// delta returns, for each label set of the metric in m, its value minus the
// one in before (a counter that is new counts from zero).
func (m metrics) delta(before metrics, name string) []sample {
	key := func(l map[string]string) string {
		var b strings.Builder
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range l {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, "%s=%q,", k, l[k])
		}
		return b.String()
	}
	old := map[string]float64{}
	for _, s := range before.samples(name) {
		old[key(s.labels)] = s.value
	}
	var out []sample
	for _, s := range m.samples(name) {
		out = append(out, sample{labels: s.labels, value: s.value - old[key(s.labels)]})
	}
	return out
}

// describeBinary names the janitor binary's commit, from its build info,
// or (with -buildvcs=false) from git when this program built it from the
// working tree.
func describeBinary(path string, built bool) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s (no build info: %v)", path, err)
	}
	rev, modified := "", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " with uncommitted changes"
		}
	}
	if rev == "" && built {
		if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
			rev = strings.TrimSpace(string(out))
		}
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
			modified = " with uncommitted changes to tracked files"
		}
	}
	if rev == "" {
		rev = "an unknown revision"
	}
	return fmt.Sprintf("kubemedic-janitor at %s%s, %s", rev, modified, info.GoVersion)
}

// queryStats runs the janitor's own query once more with stats=all: how
// many samples it touches and where Prometheus spends its time.
func queryStats(ctx context.Context, c config, base string, rep *report) error {
	expr := gpuutil.Expr(gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: c.window}, c.staleness)
	v := url.Values{"query": {expr}, "time": {strconv.FormatInt(time.Now().Unix(), 10)}, "stats": {"all"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/query", strings.NewReader(v.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("query with stats: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return fmt.Errorf("query with stats: %w", err)
	}
	var ans struct {
		Status, Error string
		Data          struct {
			Result []json.RawMessage
			Stats  struct {
				Timings map[string]float64
				Samples struct {
					TotalQueryableSamples, PeakSamples int64
				}
			}
		}
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("query with stats: %s: %w", resp.Status, err)
	}
	if ans.Status != "success" {
		return fmt.Errorf("query with stats: %s", ans.Error)
	}
	t := ans.Data.Stats.Timings
	sec := func(k string) string { return ms(time.Duration(t[k] * float64(time.Second))) }
	rep.add("the query", "the janitor's PromQL (gpuutil.Expr, window %s) once more with stats=all: %d series in %s of JSON, %s wall",
		c.window, len(ans.Data.Result), scaleutil.MiB(int64(len(body))), ms(took))
	rep.add("", "%d samples read (peak %d in memory); Prometheus' timings: exec %s (queue %s, preparation %s, inner eval %s, sort %s)",
		ans.Data.Stats.Samples.TotalQueryableSamples, ans.Data.Stats.Samples.PeakSamples,
		sec("execTotalTime"), sec("execQueueTime"), sec("queryPreparationTime"), sec("innerEvalTime"), sec("resultSortTime"))
	rep.verdict(took <= time.Second, "the Prometheus query (window %s, %s) %s <= 1 s", c.window, map[bool]string{true: "recorded buckets", false: "raw series"}[gpuutil.UsesBuckets(c.window)], ms(took))
	return nil
}

// profiles saves a CPU profile over two cycles and a heap profile.
func (j *janitor) profiles(ctx context.Context, c config, dir string, rep *report) error {
	secs := int((2*(c.interval+5*time.Second) + time.Second - 1) / time.Second)
	scaleutil.Logf("pprof: CPU profile of the janitor for %ds", secs)
	var saved []string
	for _, p := range []struct{ name, path string }{
		{"cpu.pprof", fmt.Sprintf("/profile?seconds=%d", secs)},
		{"heap.pprof", "/heap?gc=1"},
		{"allocs.pprof", "/allocs"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.pprofURL+p.path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("pprof %s: %w", p.path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("pprof %s: %s %v", p.path, resp.Status, err)
		}
		path := filepath.Join(dir, p.name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		saved = append(saved, path)
	}
	rep.add("profiles", "%s (go tool pprof %s <profile>)", strings.Join(saved, ", "), c.bin)
	return nil
}
