// Command remediator measures the remediator at cluster scale: a real
// kube-apiserver and etcd with kwok playing 5,000 GPU nodes and 100,000
// pods, and the kubemedic-remediator binary as its own process.
//
//	go run ./test/scale/remediator [-nodes 5000] [-pods-per-node 20] [-burst 50] [-for 1s] [-steady 5m] [-profile DIR]
//
// Run it from the repository root after `make testbin`. It prints, against
// the goals of the remediator's scale issue 29:
//
//   - the build of the cluster, one line per phase with its wall time:
//     the remediator's go build, the control plane and kwok, the nodes
//     (created and Ready), the pods (created; with -run-workload or
//     -stack-health, until kwok has marked its pods Running and stopped
//     writing their status), the remediator's exec to /readyz.
//   - latency beyond `lastTransitionTime + for` (goal p50 <= 50 ms, p99
//     <= 100 ms): -burst nodes (default 50; -unhealthy-percent instead
//     takes a share of the nodes) get GPUXidError=True at once, patched at
//     the start of a second with lastTransitionTime = now, as
//     node-problem-detector writes it. For each node the program reads the
//     condition's lastTransitionTime from the patch's answer, as the API
//     server stored it (whole seconds), adds the policy's `for` (-for,
//     default 1s), and takes the arrival of the node's NodeOperation watch
//     event minus that: p50, p99, max. Beside it, the watch event minus
//     the patch's answer minus `for`, which runs before issue 29 reported.
//     The policy's one step has no cordon and no drain, so this is the
//     decision path only; its maxUnhealthy is 5 %, or the burst when that
//     is more (the breaker must not open).
//   - the floor under that latency (floor.go): under the same burst (a
//     condition the policy does not match, patched onto as many other
//     nodes), this program patches the policy's status and creates as many
//     NodeOperations at lastTransitionTime + for, 64 in flight as the
//     policy reconciler does, deciding nothing: what the API server alone
//     costs on this machine.
//   - memory (goal peak <= 200 MiB): the remediator's RSS once settled
//     (/readyz and 20 s), its peak RSS (VmHWM) at the end, and its
//     process_resident_memory_bytes and go_memstats_heap_inuse_bytes at
//     both; VmRSS and VmHWM of kube-apiserver, etcd and kwok at the end,
//     for the API server's memory at that many nodes and pods.
//   - API traffic in a steady state (-steady) with nothing writing but
//     kwok's node heartbeats and leases: the API server's
//     apiserver_request_total delta by verb and resource (it has no client
//     label: the other clients are kwok, this program and the API server's
//     own loopback), and the remediator's own rest_client_requests_total
//     delta by method (target: no periodic LISTs).
//   - the remediator's log: its error-level lines while it ran and while
//     it shut down (SIGTERM at the end), by message (goal: none), and
//     kubemedic_remediation_conflicts_total when the binary exports it.
//
// -profile DIR starts the remediator with --pprof-bind-address on a free
// port and saves into DIR heap profiles (after a GC: ?gc=1) once settled
// and at the end, and a CPU profile and a runtime trace of the burst, from
// just before the patches until the last operation arrives (or the wait
// for it times out). It prints their paths.
//
// The workload pods stay Pending. Each node gets -pods-per-node pods,
// bound (spec.nodeName) in 50 namespaces, and by default kwok does not run
// them: a kwok Stage set whose pod-ready Stage skips the workload pods'
// label, so they stay Pending with no status. The remediator does not read
// them: it caches only the pods of its own namespace (the operation pods,
// which kwok runs and completes), the drain lists a node's pods from the
// API server but the policy's step has no drain, and the stack health
// checks (-stack-health) read the device plugin's and dcgm-exporter's
// pods, which kwok runs. What it changes: the API server and etcd hold the
// pods without the status kwok would write (pod IP, conditions, container
// statuses), so their memory here is a lower bound; and the build no
// longer waits for kwok, which marked 100,000 pods Running at about 90 a
// second (16 minutes, then 5 more of stale retries; its default is 4
// parallel pod Stages). -run-workload has kwok run them as before, with 16
// parallel pod Stages. The pods are created by -workers (default 64)
// concurrent creates, protobuf on the wire and no client-side rate limit.
//
// With -stack-health it also measures the GPU stack health checks: a first
// remediator with --stack-health=false gives the baseline steady state and
// peak RSS; the one measured after it runs the checks with their defaults
// (period 30s), and the program reports the first pass (every node written
// once), then per pass in the steady state: reconcile time, the
// remediator's requests by method, the API server's pod and node requests,
// and the remediator's writes (target 0). -stack-pods (default true) gives
// each node a device plugin and a dcgm-exporter pod; without them every
// node misses both and the checks ask whether the DaemonSets are deployed.
//
// How long, on 2 cores: -nodes 300 -pods-per-node 5 -steady 20s took 63 s
// (the go build included). Creating pods ran at 1,010 a second with
// protobuf and 64 workers (932 with JSON and 32) at 20,000 pods on 500
// nodes, and nodes at about 200 a second, so 10,000 nodes and 200,000 pods
// should take about 4 to 8 minutes before the remediator starts (kwok's
// heartbeats of 10,000 nodes load the API server meanwhile: an estimate,
// not a measurement), then 20 s of settling, -steady, and about 15 s for
// the burst and its operations.
//
// The numbers are measurements, not a gate: CI does not run this. See
// docs/remediator.md for what was measured.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

const (
	opNamespace  = "kubemedic-system"
	templateName = "bench-reset"
	policyName   = "bench-xid"
	// podNamespaces spreads the workload pods like teams' namespaces.
	podNamespaces = 50
	// settle is how long the remediator runs after /readyz before it is
	// measured: the first reconciles (every object is new to it) finish.
	settle = 20 * time.Second
)

type config struct {
	nodes, podsPerNode int
	burst              int
	unhealthyPct       float64
	forDur             time.Duration
	steady             time.Duration
	heartbeat          time.Duration
	workers            int
	bin                string
	keep               bool
	stackHealth        bool
	stackPods          bool
	runWorkload        bool
	scheduling         bool
	profileDir         string
	gomemlimit         string
	background         int
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 5000, "kwok GPU nodes")
	flag.IntVar(&c.podsPerNode, "pods-per-node", 20, "workload pods bound to each node")
	flag.IntVar(&c.burst, "burst", 50, "nodes that get the condition at once")
	flag.Float64Var(&c.unhealthyPct, "unhealthy-percent", 0, "instead of -burst, this percentage of the nodes get the condition at once")
	flag.DurationVar(&c.forDur, "for", time.Second, "how long the policy condition must hold (its for)")
	flag.DurationVar(&c.steady, "steady", 5*time.Minute, "length of the steady state whose API requests are counted")
	flag.DurationVar(&c.heartbeat, "heartbeat", 30*time.Second, "kwok's node status heartbeat period")
	flag.IntVar(&c.workers, "workers", 64, "concurrent creates of pods")
	flag.StringVar(&c.bin, "bin", "", "kubemedic-remediator binary (default: go build it)")
	flag.BoolVar(&c.keep, "keep", false, "keep the remediator's log and print its path")
	flag.BoolVar(&c.stackHealth, "stack-health", false, "measure the GPU stack health checks: a first steady state with the remediator's --stack-health=false, then the rest with "+
		"--stack-health=true and the default options (period 30s), reporting the first pass, API requests and node-status writes per pass, and peak RSS of both")
	flag.BoolVar(&c.stackPods, "stack-pods", true, "with -stack-health: one device plugin and one dcgm-exporter pod per node (the GPU Operator's default labels)")
	flag.BoolVar(&c.runWorkload, "run-workload", false, "have kwok mark the workload pods Running too (16 parallel pod Stages); by default they stay bound and Pending, which the remediator does not read")
	flag.BoolVar(&c.scheduling, "scheduling", false, "also run the real kube-scheduler and kube-controller-manager (localcluster's SchedulingControllers), as a cluster does: "+
		"their watches load the API server beside the remediator's. The workload and stack pods then carry no owner references, which the garbage collector would follow to owners that do not exist and delete the pods")
	flag.IntVar(&c.background, "background", 0, "also a ValidationPolicy over every node with background tests, this many at once (0: none): the shipped PriorityClass, a test template no kwok Stage ends, every node due at the start; its reconciles are reported at the end")
	flag.StringVar(&c.gomemlimit, "gomemlimit", "", "the remediator's GOMEMLIMIT (e.g. 180MiB, as deploy/remediator/deployment.yaml sets); empty: unset, the runtime's default")
	flag.StringVar(&c.profileDir, "profile", "", "directory for the remediator's heap profiles (settled, end) and the burst's CPU profile and runtime trace (--pprof-bind-address)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "remediator scale:", err)
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

// phase logs and reports one phase of the build with its wall time.
func (r *report) phase(took time.Duration, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	scaleutil.Logf("build: %s: %s", msg, took.Round(100*time.Millisecond))
	r.add("build", "%-44s %8s", msg, took.Round(100*time.Millisecond))
}

// burstSize is the number of nodes that get the condition at once.
func (c config) burstSize() int {
	n := c.burst
	if c.unhealthyPct > 0 {
		n = int(math.Round(float64(c.nodes) * c.unhealthyPct / 100))
	}
	return max(1, min(n, c.nodes))
}

// maxUnhealthy is the policy's breaker: 5 %, or the burst when that is
// more, so that the burst never opens it.
func (c config) maxUnhealthy() intstr.IntOrString {
	if n := c.burstSize(); n*20 > c.nodes {
		return intstr.FromInt(n)
	}
	return intstr.FromString("5%")
}

func run(ctx context.Context, c config) error {
	if c.nodes < 1 || c.podsPerNode < 0 || c.workers < 1 || c.burst < 1 {
		return errors.New("-nodes, -burst and -workers must be at least 1, -pods-per-node at least 0")
	}
	rep := &report{}
	work, err := os.MkdirTemp("", "kubemedic-remediator-scale-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(work)
	}
	if c.profileDir != "" {
		if err := os.MkdirAll(c.profileDir, 0o755); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	buildStart := time.Now()
	if c.bin == "" {
		t0 := time.Now()
		c.bin = filepath.Join(work, "kubemedic-remediator")
		scaleutil.Logf("building ./cmd/kubemedic-remediator")
		cmd := exec.Command("go", "build", "-o", c.bin, "./cmd/kubemedic-remediator")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build (run from the repository root): %w", err)
		}
		rep.phase(time.Since(t0), "go build ./cmd/kubemedic-remediator")
	}

	// kwok's Stages: the workload pods stay Pending unless -run-workload.
	stages := []string{localcluster.OperationPodStage("kubemedic-bench-op-succeed", templateName, true)}
	skip := labelWorkload
	if c.runWorkload {
		stages, skip = append(stages, kwokParallelism), ""
	}
	t0 := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := localcluster.New(startCtx, localcluster.Options{
		Kwok: true, KwokHeartbeat: c.heartbeat, KwokStages: stages, KwokSkipPodsLabeled: skip, Logf: scaleutil.Logf,
		Scheduler: c.scheduling, ControllerManager: c.scheduling,
	})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			scaleutil.Logf("stop: %v", err)
		}
	}()
	if c.scheduling {
		rep.phase(time.Since(t0), "control plane (etcd, kube-apiserver), kwok, kube-scheduler and kube-controller-manager")
	} else {
		rep.phase(time.Since(t0), "control plane (etcd, kube-apiserver) and kwok")
	}
	// The harness' clients keep envtest's QPS of 1000; creating 200,000
	// pods wants no client-side limit at all, and protobuf.
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}
	proto := rest.CopyConfig(fast)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	pcs, err := kubernetes.NewForConfig(proto)
	if err != nil {
		return err
	}

	// Cluster.
	t0 = time.Now()
	nodeCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	nodes, err := env.CreateGPUNodes(nodeCtx, c.nodes, localcluster.NodeSpec{})
	cancel()
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	rep.phase(time.Since(t0), "%d kwok GPU nodes created and Ready", len(nodes))

	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	t0 = time.Now()
	workloadPod, stackPodOf := benchPod, stackPod
	if c.scheduling {
		workloadPod, stackPodOf = ownerless(benchPod), ownerless(stackPod)
	}
	created, err := createPods(ctx, pcs, names, c.podsPerNode, c.workers, workloadPod)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	rep.phase(took, "%d workload pods created (%.0f/s)", created, float64(created)/took.Seconds())
	runningNS := ""
	if c.runWorkload {
		rep.add("", "%d per node, bound, %d workers, protobuf; kwok marks them Running (-run-workload)", c.podsPerNode, c.workers)
	} else {
		rep.add("", "%d per node, bound, %d workers, protobuf; left Pending: kwok skips label %s", c.podsPerNode, c.workers, labelWorkload)
		runningNS = stackNamespace
	}
	stackPods := 0
	if c.stackHealth && c.stackPods {
		t0 = time.Now()
		if stackPods, err = createPods(ctx, pcs, names, 2, c.workers, stackPodOf); err != nil {
			return err
		}
		rep.phase(time.Since(t0), "%d stack pods created", stackPods)
		rep.add("", "-stack-pods: the device plugin's and dcgm-exporter's, one of each per node; kwok runs them")
	}
	if c.runWorkload || stackPods > 0 {
		t0 = time.Now()
		if err := scaleutil.WaitPodsRunningIn(ctx, cs, runningNS, 60*time.Minute); err != nil {
			return err
		}
		rep.phase(time.Since(t0), "kwok marked the pods it runs Running")
		t0 = time.Now()
		extra, err := waitPodWritesQuiet(ctx, cs, 60*time.Minute)
		if err != nil {
			return err
		}
		rep.phase(time.Since(t0), "kwok's pod status writes quiet (%.0f more)", extra)
	}

	if err := setupPolicy(ctx, env.Client, c.forDur, c.maxUnhealthy()); err != nil {
		return err
	}
	if c.background > 0 {
		if err := setupBackground(ctx, env.Client, int32(c.background)); err != nil {
			return err
		}
	}
	rep.phase(time.Since(buildStart), "build in all")

	if c.stackHealth {
		// The baseline: the same remediator without the checks.
		rem, err := startRemediator(ctx, c.bin, env.Kubeconfig, work, "kubemedic-remediator-baseline", "", c.gomemlimit, "--stack-health=false")
		if err != nil {
			return err
		}
		if err := rem.waitReady(ctx, 10*time.Minute); err != nil {
			rem.stop()
			return err
		}
		scaleutil.Logf("baseline remediator (--stack-health=false, pid %d) ready; settling for %s", rem.pid(), settle)
		if err := scaleutil.Sleep(ctx, settle); err != nil {
			rem.stop()
			return err
		}
		if _, err := steadyState(ctx, env, rem, c.steady, "without checks", rep); err != nil {
			rem.stop()
			return err
		}
		hwm, _ := scaleutil.ProcStatus(rem.pid(), "VmHWM")
		rep.add("without checks", "remediator --stack-health=false: VmHWM (peak RSS) %s", scaleutil.MiB(hwm))
		rem.stop()
	}

	// The remediator, as its own process.
	rem, err := startRemediator(ctx, c.bin, env.Kubeconfig, work, "kubemedic-remediator", c.profileDir, c.gomemlimit, fmt.Sprintf("--stack-health=%t", c.stackHealth))
	if err != nil {
		return err
	}
	defer rem.stop()
	t0 = time.Now()
	if err := rem.waitReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	readyTook := time.Since(t0)
	rep.phase(readyTook, "remediator: exec to /readyz (caches synced)")
	if c.stackHealth {
		if err := firstPass(ctx, cs, rem, len(names), t0, rep); err != nil {
			return err
		}
	}
	hwmAtReady, _ := scaleutil.ProcStatus(rem.pid(), "VmHWM")
	scaleutil.Logf("remediator (pid %d) ready in %s, VmHWM %s; settling for %s", rem.pid(), readyTook.Round(time.Millisecond), scaleutil.MiB(hwmAtReady), settle)
	if err := scaleutil.Sleep(ctx, settle); err != nil {
		return err
	}
	settled, err := rem.memory(ctx)
	if err != nil {
		return err
	}
	limit := c.gomemlimit
	if limit == "" {
		limit = "unset"
	}
	rep.add("memory", "remediator pid %d, GOMEMLIMIT %s; VmHWM at /readyz %s", rem.pid(), limit, scaleutil.MiB(hwmAtReady))
	rep.add("", "settled (/readyz + %s): %s", settle, settled)
	if c.profileDir != "" {
		path := filepath.Join(c.profileDir, "heap-settled.pb.gz")
		if err := rem.saveProfile(ctx, "/debug/pprof/heap?gc=1", path); err != nil {
			return err
		}
		rep.add("profile", "heap once settled (after a GC): %s", path)
	}

	// Steady state.
	w, err := steadyState(ctx, env, rem, c.steady, "steady state", rep)
	if err != nil {
		return err
	}
	if c.stackHealth {
		stackHealthPasses(w, len(names), rep)
	}

	// Latency beyond lastTransitionTime + for.
	if err := latency(ctx, env, cs, rem, names, c, rep); err != nil {
		return err
	}
	if err := floor(ctx, env, cs, names, c.burstSize(), c.forDur, rep); err != nil {
		return err
	}

	// Memory at the end.
	end, err := rem.memory(ctx)
	if err != nil {
		return err
	}
	rep.add("memory", "end: %s", end)
	rep.verdict(end.hwm <= 200<<20, "remediator peak RSS (VmHWM) %s <= 200 MiB (settled VmRSS %s)", scaleutil.MiB(end.hwm), scaleutil.MiB(settled.rss))
	if c.profileDir != "" {
		path := filepath.Join(c.profileDir, "heap-end.pb.gz")
		if err := rem.saveProfile(ctx, "/debug/pprof/heap?gc=1", path); err != nil {
			return err
		}
		rep.add("profile", "heap at the end (after a GC): %s", path)
	}
	for _, p := range controlPlaneProcs(env) {
		rss, err1 := scaleutil.ProcStatus(p.pid, "VmRSS")
		hwm, err2 := scaleutil.ProcStatus(p.pid, "VmHWM")
		if err := errors.Join(err1, err2); err != nil {
			rep.add("", "%s (pid %d): %v", p.name, p.pid, err)
			continue
		}
		rep.add("", "%-14s pid %-7d VmRSS %s, VmHWM (peak) %s", p.name, p.pid, scaleutil.MiB(rss), scaleutil.MiB(hwm))
	}
	if am, err := apiserverMetrics(ctx, cs); err != nil {
		rep.add("", "kube-apiserver metrics: %v", err)
	} else {
		objs := func(group, resource string) string {
			m := map[string]string{"group": group, "resource": resource}
			return fmt.Sprintf("%s %.0f (%s)", resource, am.sum("apiserver_resource_objects", m), scaleutil.MiB(int64(am.sum("apiserver_resource_size_estimate_bytes", m))))
		}
		rep.add("", "etcd database %s (apiserver_storage_size_bytes; etcd's default quota is 2 GiB); objects at the API server's last count, once a minute (estimated size): %s, %s, %s",
			scaleutil.MiB(int64(am.sum("apiserver_storage_size_bytes", nil))), objs("", "pods"), objs("", "nodes"), objs("coordination.k8s.io", "leases"))
	}
	if !c.runWorkload {
		rep.add("", "(the workload pods are Pending, without the status kwok would write: the API server's and etcd's memory is a lower bound)")
	}

	// The log, shutdown included.
	m, err := rem.metrics(ctx)
	if err != nil {
		return err
	}
	if c.background > 0 {
		backgroundPasses(ctx, env.Client, m, rep)
	}
	if m.has("kubemedic_remediation_conflicts_total") {
		rep.add("conflicts", "kubemedic_remediation_conflicts_total %.0f (%s)", m.sum("kubemedic_remediation_conflicts_total", nil), labelled(m, "kubemedic_remediation_conflicts_total"))
	} else {
		rep.add("conflicts", "kubemedic_remediation_conflicts_total absent from the remediator's metrics (not in this build)")
	}
	logSize := rem.logSize()
	t0 = time.Now()
	rem.stop()
	rep.add("remediator log", "stopped with SIGTERM in %s", time.Since(t0).Round(time.Millisecond))
	running, shutdown := rem.logErrors(logSize)
	rep.add("", "error lines while it ran: %d; during shutdown: %d", running.n, shutdown.n)
	for _, s := range append(running.lines("while it ran"), shutdown.lines("during shutdown")...) {
		rep.add("", "  %s", s)
	}
	rep.verdict(running.n+shutdown.n == 0, "no error lines in the remediator's log: %d while it ran, %d during shutdown", running.n, shutdown.n)
	if c.keep {
		rep.add("", "%s", rem.logPath)
	}

	pods := "Pending, not run by kwok"
	if c.runWorkload {
		pods = "Running"
	}
	fmt.Printf("\nkubemedic-remediator at scale: %d nodes, %d workload pods (%s), policy for=%s maxUnhealthy=%s, kwok heartbeat %s, %d CPUs (GOMAXPROCS %d)\n",
		c.nodes, created, pods, c.forDur, ptr.To(c.maxUnhealthy()).String(), c.heartbeat, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Println("The policy's one step runs a pod with no cordon and no drain: the latency is the decision path.")
	fmt.Println()
	for _, r := range rep.rows {
		fmt.Printf("%-16s %s\n", r[0], r[1])
	}
	fmt.Println()
	for _, v := range rep.verdicts {
		fmt.Println(v)
	}
	return nil
}

// createPods creates perNode pods bound to each node with a bounded pool of
// workers, in podNamespaces namespaces.
func createPods(ctx context.Context, cs kubernetes.Interface, nodes []string, perNode, workers int, build func(node string, i, j int) *corev1.Pod) (int, error) {
	for i := range podNamespaces + 1 {
		name := fmt.Sprintf("team-%02d", i)
		if i == podNamespaces {
			name = stackNamespace
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
	}
	total := len(nodes) * perNode
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
				pod := build(nodes[i/perNode], i/perNode, i%perNode)
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					_, err = cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
						err = nil
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err); cancel() })
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
	for i := range total {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		case <-tick.C:
			n := done.Load()
			scaleutil.Logf("pods: %d/%d created (%.0f/s)", n, total, float64(n)/time.Since(start).Seconds())
			work <- i
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return int(done.Load()), firstErr
	}
	return int(done.Load()), ctx.Err()
}

// benchPod is pod j of node index i: the first eight are GPU training
// workers of a PyTorchJob (not a Job: kwok completes the pods of Jobs), the
// others CPU side pods of a ReplicaSet. The owners do not exist (no
// controller runs). They carry labelWorkload, which kwok's Stages skip
// unless -run-workload.
func benchPod(node string, i, j int) *corev1.Pod {
	ns := fmt.Sprintf("team-%02d", i%podNamespaces)
	gpu := j < 8
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	limits := corev1.ResourceList{}
	image, kind, owner := "registry.k8s.io/pause:3.10", "ReplicaSet", fmt.Sprintf("sidecar-%04d-7d9f8c6b5", i)
	if gpu {
		image, kind, owner = "nvcr.io/nvidia/pytorch:25.01-py3", "PyTorchJob", fmt.Sprintf("train-%04d", i)
		requests[localcluster.ResourceGPU] = resource.MustParse("1")
		limits[localcluster.ResourceGPU] = resource.MustParse("1")
		requests[corev1.ResourceCPU] = resource.MustParse("24")
		requests[corev1.ResourceMemory] = resource.MustParse("200Gi")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      fmt.Sprintf("%s-%s-%02d", owner, node[len(node)-4:], j),
			Labels:    map[string]string{"app.kubernetes.io/name": owner, "kubemedic.io/bench": "true", labelWorkload: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: map[bool]string{true: "kubeflow.org/v1", false: "apps/v1"}[gpu], Kind: kind, Name: owner,
				UID: "00000000-0000-4000-8000-000000000000", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: map[bool]corev1.RestartPolicy{true: corev1.RestartPolicyNever, false: corev1.RestartPolicyAlways}[gpu],
			Tolerations:   []corev1.Toleration{{Key: string(localcluster.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "main", Image: image,
				Env:       []corev1.EnvVar{{Name: "WORKER_INDEX", Value: strconv.Itoa(j)}, {Name: "NCCL_DEBUG", Value: "WARN"}},
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
}

// ownerless returns build with the pods' owner references removed: with
// -scheduling the garbage collector runs, and the owners named are not
// there.
func ownerless(build func(node string, i, j int) *corev1.Pod) func(string, int, int) *corev1.Pod {
	return func(node string, i, j int) *corev1.Pod {
		p := build(node, i, j)
		p.OwnerReferences = nil
		return p
	}
}

// stackNamespace holds the GPU Operator's pods of -stack-pods.
const stackNamespace = "gpu-operator"

// stackPod is the device plugin's (j 0) or dcgm-exporter's (j 1) pod on
// node, labelled as the GPU Operator labels them (the remediator's default
// selectors).
func stackPod(node string, _, j int) *corev1.Pod {
	app := map[int]string{0: "nvidia-device-plugin-daemonset", 1: "nvidia-dcgm-exporter"}[j]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: stackNamespace,
			Name:      app + "-" + node[len(node)-4:],
			Labels:    map[string]string{"app": app, "kubemedic.io/bench": "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: app,
				UID: "00000000-0000-4000-8000-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "main", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
			}},
		},
	}
}

// firstPass waits until the remediator started at start has made as many
// writes as there are nodes (on a fresh cluster every GPU node gets its
// first stack health conditions: this is the first full pass) and reports
// how long it took and the requests and reconciles it made.
func firstPass(ctx context.Context, cs kubernetes.Interface, rem *remediator, nodes int, start time.Time, rep *report) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		m, err := rem.metrics(ctx)
		if err != nil {
			return err
		}
		n := m.sum("controller_runtime_reconcile_total", map[string]string{"controller": "stackhealth"})
		if int(m.sum("rest_client_requests_total", map[string]string{"method": "PATCH"})) >= nodes {
			took := time.Since(start)
			rep.add("stack health", "first pass: %d nodes written %s after exec, %.0f reconciles; remediator requests by method then (every controller): %s; reconcile time (one worker, summed) %s",
				nodes, took.Round(100*time.Millisecond), n,
				byMethod(m, nil, 1), time.Duration(m.sum("controller_runtime_reconcile_time_seconds_sum", map[string]string{"controller": "stackhealth"})*float64(time.Second)).Round(time.Millisecond))
			list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return err
			}
			with := 0
			for _, n := range list.Items {
				if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == v1alpha1.ConditionGPUStackPodNotReady }) {
					with++
				}
			}
			rep.add("", "  then %d of %d nodes have the %s condition", with, len(list.Items), v1alpha1.ConditionGPUStackPodNotReady)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stack health: %.0f of %d nodes reconciled 10m after start", n, nodes)
		}
		if err := scaleutil.Sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// byMethod formats the remediator's rest_client_requests_total (minus
// before's, when not nil) by method and code, divided by div.
func byMethod(after, before samples, div float64) string {
	m := map[string]float64{}
	for _, d := range after.delta(before, "rest_client_requests_total") {
		if d.value > 0 {
			m[d.labels["method"]+" "+d.labels["code"]] += d.value
		}
	}
	var parts []string
	for _, k := range slices.Sorted(mapsKeys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.4g", k, m[k]/div))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// stackHealthPasses reports the steady state window w per stack health
// pass: a pass is one reconcile of every node.
func stackHealthPasses(w window, nodes int, rep *report) {
	sh := map[string]string{"controller": "stackhealth"}
	recs := w.rem1.sum("controller_runtime_reconcile_total", sh) - w.rem0.sum("controller_runtime_reconcile_total", sh)
	if recs == 0 {
		rep.add("stack health", "no stack health reconciles in the steady state")
		return
	}
	passes := recs / float64(nodes)
	secs := w.rem1.sum("controller_runtime_reconcile_time_seconds_sum", sh) - w.rem0.sum("controller_runtime_reconcile_time_seconds_sum", sh)
	rep.add("stack health", "steady state %s: %.0f reconciles = %.2f passes of %d nodes; reconcile time per pass (one worker, summed) %s, %s per node",
		w.d, recs, passes, nodes, time.Duration(secs/passes*float64(time.Second)).Round(time.Millisecond), time.Duration(secs/recs*float64(time.Second)).Round(time.Microsecond))
	rep.add("", "  remediator requests per pass by method and code (every controller): %s", byMethod(w.rem1, w.rem0, passes))
	var parts []string
	for _, d := range w.api1.delta(w.api0, "apiserver_request_total") {
		k := d.labels
		if d.value <= 0 || k["resource"] != "pods" && !(k["resource"] == "nodes" && k["verb"] != "WATCH") {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s%s %.4g", k["verb"], k["resource"], map[bool]string{true: "/" + k["subresource"]}[k["subresource"] != ""], d.value/passes))
	}
	slices.Sort(parts)
	rep.add("", "  kube-apiserver pod and node requests per pass, every client: %s", strings.Join(parts, ", "))
	writes := 0.0
	for _, d := range w.rem1.delta(w.rem0, "rest_client_requests_total") {
		if m := d.labels["method"]; m != "GET" && d.value > 0 {
			writes += d.value
		}
	}
	rep.verdict(writes == 0, "stack health: no node-status writes in steady state: %.0f writes by the remediator in %.2f passes", writes, passes)
}

// waitPodWritesQuiet waits until no pod status is written for 15 s: at
// 100,000 pods kwok goes on patching pod status for many minutes after it
// has marked them all Running, and the steady state must not count that,
// nor the operation pods wait behind it. It returns the patches it saw.
func waitPodWritesQuiet(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	count := func() (float64, error) {
		m, err := apiserverMetrics(ctx, cs)
		if err != nil {
			return 0, err
		}
		return m.sum("apiserver_request_total", map[string]string{"resource": "pods", "subresource": "status"}), nil
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
		if time.Since(last) >= 15*time.Second {
			scaleutil.Logf("pods: kwok still writing pod status (%.0f/s)", (n-prev)/time.Since(last).Seconds())
		}
		prev, last = n, time.Now()
	}
}

func setupPolicy(ctx context.Context, c client.Client, forDur time.Duration, maxUnhealthy intstr.IntOrString) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tpl := &v1alpha1.NodeOperationTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName},
		Spec: v1alpha1.NodeOperationTemplateSpec{
			SuccessCriterion: v1alpha1.SuccessPodSucceeded,
			Image:            "registry.example/kubemedic-gpu-reset:1",
			Command:          []string{"/bin/true"},
		},
	}
	if err := c.Create(ctx, tpl); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	pol := &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: v1alpha1.RemediationPolicySpec{
			Description: "scale benchmark: one step, no drain",
			Conditions: []v1alpha1.ConditionMatch{{
				Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, For: &metav1.Duration{Duration: forDur},
			}},
			Steps: []v1alpha1.RemediationStep{{
				Name: "reset", StepAction: v1alpha1.StepAction{Operation: templateName, Urgent: true},
				HealthyFor:      &metav1.Duration{Duration: 5 * time.Second},
				RecoveryTimeout: &metav1.Duration{Duration: 5 * time.Minute},
			}},
			Safety: v1alpha1.Safety{
				MaxUnhealthy:  ptr.To(maxUnhealthy),
				MaxConcurrent: ptr.To(intstr.FromString("100%")),
				NodeCooldown:  &metav1.Duration{},
			},
		},
	}
	if err := c.Create(ctx, pol); err != nil {
		return fmt.Errorf("create policy: %w", err)
	}
	return nil
}

// backgroundName names the -background ValidationPolicy and its template.
const backgroundName = "bench-validate"

// setupBackground creates the shipped PriorityClass, a test template and a
// ValidationPolicy over every node with background tests, n at once.
func setupBackground(ctx context.Context, c client.Client, n int32) error {
	b, err := os.ReadFile("deploy/remediator/validation.yaml")
	if err != nil {
		return fmt.Errorf("the shipped PriorityClass (run from the repository root): %w", err)
	}
	pc := &schedulingv1.PriorityClass{}
	if err := sigsyaml.UnmarshalStrict(b, pc); err != nil {
		return fmt.Errorf("deploy/remediator/validation.yaml: %w", err)
	}
	if err := c.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PriorityClass: %w", err)
	}
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: backgroundName},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "registry.example/kubemedic-validate:1", Command: []string{"/ko-app/kubemedic-validate"}, Args: []string{"dcgm"}}}
	if err := c.Create(ctx, tpl); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	pol := &v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: backgroundName},
		Spec: v1alpha1.ValidationPolicySpec{
			Validate:   v1alpha1.ValidateSpec{Operation: backgroundName},
			Background: &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: 168 * time.Hour}, MaxConcurrent: n},
		}}
	if err := c.Create(ctx, pol); err != nil {
		return fmt.Errorf("create ValidationPolicy: %w", err)
	}
	return nil
}

// backgroundPasses reports the ValidationPolicy's reconciles over the run
// and its status at the end.
func backgroundPasses(ctx context.Context, c client.Client, m samples, rep *report) {
	vp := map[string]string{"controller": "validationpolicy"}
	recs := m.sum("controller_runtime_reconcile_total", vp)
	secs := m.sum("controller_runtime_reconcile_time_seconds_sum", vp)
	if recs == 0 {
		rep.add("background", "no ValidationPolicy reconciles")
		return
	}
	pol := &v1alpha1.ValidationPolicy{}
	status := "unknown"
	if err := c.Get(ctx, client.ObjectKey{Name: backgroundName}, pol); err == nil {
		s := pol.Status
		status = fmt.Sprintf("matched %d, validating %d, due %d", s.Matched, s.Validating, s.Due)
	}
	rep.add("background", "ValidationPolicy over every node: %.0f reconciles over the run, %s each on average (%s); %s",
		recs, time.Duration(secs/recs*float64(time.Second)).Round(time.Microsecond), labelled(m, "controller_runtime_reconcile_total"), status)
}

// window is the metrics at the start and end of a steady state.
type window struct {
	api0, api1, rem0, rem1 samples
	d                      time.Duration
}

// steadyState counts API requests while nothing but kwok writes.
func steadyState(ctx context.Context, env *localcluster.Cluster, rem *remediator, d time.Duration, title string, rep *report) (window, error) {
	scaleutil.Logf("steady state: counting API requests for %s", d)
	apiBefore, err := apiserverMetrics(ctx, env.Clientset)
	if err != nil {
		return window{}, err
	}
	remBefore, err := rem.metrics(ctx)
	if err != nil {
		return window{}, err
	}
	cpuBefore, err := rem.cpuTime()
	if err != nil {
		return window{}, err
	}
	if err := scaleutil.Sleep(ctx, d); err != nil {
		return window{}, err
	}
	cpuAfter, err := rem.cpuTime()
	if err != nil {
		return window{}, err
	}
	remAfter, err := rem.metrics(ctx)
	if err != nil {
		return window{}, err
	}
	apiAfter, err := apiserverMetrics(ctx, env.Clientset)
	if err != nil {
		return window{}, err
	}

	// The API server's view: every client.
	type vr struct{ verb, resource string }
	byVR := map[vr]float64{}
	for _, d := range apiAfter.delta(apiBefore, "apiserver_request_total") {
		k, v := d.labels, d.value
		res := k["resource"]
		if s := k["subresource"]; s != "" {
			res += "/" + s
		}
		if res == "" {
			res = "(non-resource)"
		}
		byVR[vr{k["verb"], res}] += v
	}
	keys := make([]vr, 0, len(byVR))
	for k, v := range byVR {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].verb != keys[j].verb {
			return keys[i].verb < keys[j].verb
		}
		return keys[i].resource < keys[j].resource
	})
	// LISTs of what the remediator caches or reads: an upper bound on its own.
	cached := map[string]bool{"nodes": true, "pods": true, "configmaps": true, "nodeoperations": true,
		"remediationpolicies": true, "nodeoperationtemplates": true}
	lists := 0.0
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s %.0f", k.verb, k.resource, byVR[k]))
		if k.verb == "LIST" && cached[k.resource] {
			lists += byVR[k]
		}
	}
	rep.add(title, "%s: kube-apiserver requests by verb and resource, every client (kwok, this program, the API server's own", d)
	rep.add("", "loopback informers and repair loops, the remediator); a WATCH counts when it ends:")
	for i := 0; i < len(parts); i += 4 {
		rep.add("", "  %s", strings.Join(parts[i:min(i+4, len(parts))], "; "))
	}

	// The remediator's own client.
	byMethod := map[string]float64{}
	total := 0.0
	for _, d := range remAfter.delta(remBefore, "rest_client_requests_total") {
		if k, v := d.labels, d.value; v > 0 {
			byMethod[k["method"]+" "+k["code"]] += v
			total += v
		}
	}
	var mparts []string
	for _, k := range slices.Sorted(mapsKeys(byMethod)) {
		mparts = append(mparts, fmt.Sprintf("%s %.0f", k, byMethod[k]))
	}
	if len(mparts) == 0 {
		mparts = []string{"none"}
	}
	rep.add("", "remediator rest_client_requests_total by method and code: %s", strings.Join(mparts, ", "))
	var rparts []string
	reconciles := 0.0
	for _, d := range remAfter.delta(remBefore, "controller_runtime_reconcile_total") {
		if k, v := d.labels, d.value; v > 0 {
			rparts = append(rparts, fmt.Sprintf("%s/%s %.0f", k["controller"], k["result"], v))
			reconciles += v
		}
	}
	sort.Strings(rparts)
	if len(rparts) == 0 {
		rparts = []string{"none"}
	}
	rep.add("", "remediator reconciles (%.0f): %s; CPU %.2f s (%.2f%% of one core)", reconciles, strings.Join(rparts, ", "),
		(cpuAfter - cpuBefore).Seconds(), 100*(cpuAfter-cpuBefore).Seconds()/d.Seconds())
	// The client metric does not tell a LIST from a GET or a WATCH: when the
	// remediator made requests, bound its LISTs by the API server's LISTs
	// of the resources it reads.
	gets := 0.0
	for k, v := range byMethod {
		if strings.HasPrefix(k, "GET ") {
			gets += v
		}
	}
	remLists := min(gets, lists)
	rep.verdict(remLists == 0, "no periodic LISTs: at most %.0f LISTs by the remediator in %s of steady state (its GETs, LIST+WATCH+GET: %.0f; "+
		"LISTs of nodes, pods, configmaps and kubemedic objects at the API server, any client: %.0f)", remLists, d, gets, lists)
	rep.verdict(total-gets == 0, "no writes by the remediator in steady state: %.0f", total-gets)
	return window{api0: apiBefore, api1: apiAfter, rem0: remBefore, rem1: remAfter, d: d}, nil
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// latency patches the condition onto -burst nodes at once and times each
// node's NodeOperation from the moment the policy may act on it: the
// condition's lastTransitionTime as the API server stored it, plus for.
func latency(ctx context.Context, env *localcluster.Cluster, cs kubernetes.Interface, rem *remediator, names []string, c config, rep *report) error {
	n := c.burstSize()
	stride := len(names) / n
	targets := make([]string, n)
	for i := range n {
		targets[i] = names[i*stride]
	}
	targetSet := map[string]int{}
	for i, t := range targets {
		targetSet[t] = i
	}

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	w, err := wc.Watch(watchCtx, &v1alpha1.NodeOperationList{})
	if err != nil {
		return fmt.Errorf("watch operations: %w", err)
	}
	defer w.Stop()
	type opSeen struct {
		name              string
		created, finished time.Time
		phase             v1alpha1.NodeOperationPhase
	}
	var mu sync.Mutex
	seen := map[string]*opSeen{}
	allSeen := make(chan struct{})
	extra := 0
	go func() {
		for ev := range w.ResultChan() {
			at := time.Now()
			op, ok := ev.Object.(*v1alpha1.NodeOperation)
			if !ok {
				continue
			}
			mu.Lock()
			if _, ok := targetSet[op.Spec.NodeName]; !ok {
				if ev.Type == watch.Added {
					extra++
				}
				mu.Unlock()
				continue
			}
			s := seen[op.Spec.NodeName]
			if s == nil {
				s = &opSeen{name: op.Name, created: at}
				seen[op.Spec.NodeName] = s
				if len(seen) == n {
					close(allSeen)
				}
			}
			if s.phase != op.Status.Phase && op.Status.Phase.Finished() {
				s.finished = at
			}
			s.phase = op.Status.Phase
			mu.Unlock()
		}
	}()

	// Patch at the start of a second: lastTransitionTime has a resolution of
	// one second, and the remediator counts `for` from it. The profiles
	// start at least half a second before.
	t0 := time.Now().Add(500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	wait := c.forDur + 2*time.Minute
	var cpu, trace *profileStream
	if c.profileDir != "" {
		secs := int((time.Until(t0) + wait + 10*time.Second).Seconds())
		if cpu, err = rem.startProfile("/debug/pprof/profile", secs, filepath.Join(c.profileDir, "cpu-burst.pb.gz")); err != nil {
			return err
		}
		defer cpu.close()
		if trace, err = rem.startProfile("/debug/pprof/trace", secs, filepath.Join(c.profileDir, "trace-burst.out")); err != nil {
			return err
		}
		defer trace.close()
	}
	if err := scaleutil.Sleep(ctx, time.Until(t0)); err != nil {
		return err
	}
	confBefore, err := rem.metrics(ctx)
	if err != nil {
		return err
	}
	scaleutil.Logf("latency: patching %s=True onto %d nodes at once", v1alpha1.ConditionGPUXidError, n)
	patched := make([]time.Time, n)
	stored := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, node := range targets {
		wg.Go(func() {
			// As node-problem-detector writes it: the transition is now.
			now := metav1.Now()
			cond := corev1.NodeCondition{
				Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason,
				Message:           "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}
			stored[i], errs[i] = patchCondition(ctx, cs, node, cond)
			patched[i] = time.Now()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	spread := slices.MaxFunc(patched, time.Time.Compare).Sub(t0)
	lttMin, lttMax := slices.MinFunc(stored, time.Time.Compare), slices.MaxFunc(stored, time.Time.Compare)
	scaleutil.Logf("latency: %d patches answered within %s; waiting for the operations", n, spread.Round(time.Millisecond))

	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	select {
	case <-allSeen:
	case <-timeout.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	burstEnd := time.Now()
	if cpu != nil {
		for _, s := range []*profileStream{cpu, trace} {
			if err := s.stop(30 * time.Second); err != nil {
				return err
			}
			rep.add("profile", "%s of the burst (%s, until the last operation or the timeout): %s", s.what, burstEnd.Sub(s.started).Round(100*time.Millisecond), s.path)
		}
	}
	mu.Lock()
	got := len(seen)
	mu.Unlock()
	if got < n {
		return fmt.Errorf("only %d of %d operations created %s after the patches (remediator log %s)", got, n, wait, rem.logPath)
	}
	confAfter, err := rem.metrics(ctx)
	if err != nil {
		return err
	}

	beyond := make([]time.Duration, n)
	fromPatch := make([]time.Duration, n)
	mu.Lock()
	for node, s := range seen {
		i := targetSet[node]
		beyond[i] = s.created.Sub(stored[i].Add(c.forDur))
		fromPatch[i] = s.created.Sub(patched[i]) - c.forDur
	}
	mu.Unlock()
	slices.Sort(beyond)
	slices.Sort(fromPatch)
	p50, p99, mx := scaleutil.Pct(beyond, 50), scaleutil.Pct(beyond, 99), beyond[n-1]
	lttRange := lttMin.UTC().Format(time.TimeOnly)
	if !lttMax.Equal(lttMin) {
		lttRange += " to " + lttMax.UTC().Format(time.TimeOnly)
	}
	rep.add("latency", "%d nodes (%.3g %% of %d) patched at once at %s, answered within %s; stored lastTransitionTime %s UTC",
		n, 100*float64(n)/float64(len(names)), len(names), t0.UTC().Format("15:04:05.000"), spread.Round(time.Millisecond), lttRange)
	rep.add("", "NodeOperation watch event - (lastTransitionTime + for %s): p50 %s, p99 %s, max %s, min %s",
		c.forDur, ms(p50), ms(p99), ms(mx), ms(beyond[0]))
	rep.add("", "(watch event - patch answer - for, as before issue 29: p50 %s, p99 %s, max %s)",
		ms(scaleutil.Pct(fromPatch, 50)), ms(scaleutil.Pct(fromPatch, 99)), ms(fromPatch[n-1]))
	const conflicts = "kubemedic_remediation_conflicts_total"
	if confAfter.has(conflicts) {
		rep.add("", "%s during the burst: %.0f", conflicts, confAfter.sum(conflicts, nil)-confBefore.sum(conflicts, nil))
	}
	rep.verdict(p50 <= 50*time.Millisecond, "latency beyond lastTransitionTime + for, p50 %s <= 50 ms", ms(p50))
	rep.verdict(p99 <= 100*time.Millisecond, "latency beyond lastTransitionTime + for, p99 %s <= 100 ms (%d nodes at once)", ms(p99), n)

	// End to end: clear the conditions and wait for the operations to
	// succeed (pod completed by kwok, then healthyFor 5s of the cleared
	// condition), so the run also passes the rest of the lifecycle.
	for _, node := range targets {
		if err := env.ClearNodeCondition(ctx, node, v1alpha1.ConditionGPUXidError, v1alpha1.DetectReason, "no actionable Xid"); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		fin, succ := 0, 0
		for _, s := range seen {
			if s.phase.Finished() {
				fin++
				if s.phase == v1alpha1.PhaseSucceeded {
					succ++
				}
			}
		}
		mu.Unlock()
		if fin == n {
			var took []time.Duration
			mu.Lock()
			for _, s := range seen {
				took = append(took, s.finished.Sub(s.created))
			}
			mu.Unlock()
			slices.Sort(took)
			rep.add("", "all %d operations finished, %d Succeeded; creation to finished p50 %s, max %s (healthyFor 5s after the clear)",
				n, succ, ms(scaleutil.Pct(took, 50)), ms(took[len(took)-1]))
			break
		}
		if time.Now().After(deadline) {
			rep.add("", "only %d of %d operations finished 3m after the conditions cleared", fin, n)
			break
		}
		if err := scaleutil.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	mu.Lock()
	if extra > 0 {
		rep.add("", "%d operations on other nodes (unexpected)", extra)
	}
	mu.Unlock()
	return nil
}

// patchCondition sets cond on node's status and returns the condition's
// lastTransitionTime as the API server stored it.
func patchCondition(ctx context.Context, cs kubernetes.Interface, node string, cond corev1.NodeCondition) (time.Time, error) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return time.Time{}, err
	}
	got, err := cs.CoreV1().Nodes().PatchStatus(ctx, node, patch)
	if err != nil {
		return time.Time{}, fmt.Errorf("set condition on node %s: %w", node, err)
	}
	c := localcluster.FindNodeCondition(got, cond.Type)
	if c == nil || c.LastTransitionTime.IsZero() {
		return time.Time{}, fmt.Errorf("set condition on node %s: the answer has no %s with a lastTransitionTime", node, cond.Type)
	}
	return c.LastTransitionTime.Time, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

func apiserverMetrics(ctx context.Context, cs kubernetes.Interface) (samples, error) {
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseMetrics(string(b)), nil
}

// samples are the samples of a Prometheus text exposition.
type samples []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// sum adds the samples of a metric whose labels include match.
func (s samples) sum(name string, match map[string]string) float64 {
	t := 0.0
next:
	for _, x := range s {
		if x.name != name {
			continue
		}
		for k, v := range match {
			if x.labels[k] != v {
				continue next
			}
		}
		t += x.value
	}
	return t
}

// has says whether the metric has any sample.
func (s samples) has(name string) bool {
	return slices.ContainsFunc(s, func(x sample) bool { return x.name == name })
}

// labelled formats the non-zero samples of a metric with their labels.
func labelled(s samples, name string) string {
	var parts []string
	for _, x := range s {
		if x.name != name || x.value == 0 {
			continue
		}
		var ls []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range x.labels {
				if !yield(k) {
					return
				}
			}
		}) {
			ls = append(ls, k+"="+x.labels[k])
		}
		parts = append(parts, fmt.Sprintf("{%s} %.0f", strings.Join(ls, ","), x.value))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "none non-zero"
	}
	return strings.Join(parts, ", ")
}

// delta returns, for each label set of the metric in s, its value minus the
// one in before (a counter that is new counts from zero).
func (s samples) delta(before samples, name string) []sample {
	key := func(l map[string]string) string {
		ks := slices.Sorted(func(yield func(string) bool) {
			for k := range l {
				if !yield(k) {
					return
				}
			}
		})
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, "%s=%q,", k, l[k])
		}
		return b.String()
	}
	old := map[string]float64{}
	for _, x := range before {
		if x.name == name {
			old[key(x.labels)] = x.value
		}
	}
	var out []sample
	for _, x := range s {
		if x.name == name {
			out = append(out, sample{name: name, labels: x.labels, value: x.value - old[key(x.labels)]})
		}
	}
	return out
}

func parseMetrics(text string) samples {
	var out samples
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line)
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// parseSample parses `name{k="v",...} value [timestamp]`.
func parseSample(line string) (sample, bool) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, false
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if rest == "" {
				return s, false
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, false
			}
			k := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[j])
					}
					continue
				}
				v.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return s, false
			}
			s.labels[k] = v.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}
