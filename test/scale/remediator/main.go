// Command remediator measures the remediator at cluster scale: a real
// kube-apiserver and etcd with kwok playing 5,000 GPU nodes and 100,000
// pods, and the kubemedic-remediator binary as its own process.
//
//	go run ./test/scale/remediator [-nodes 5000] [-pods-per-node 20] [-steady 5m]
//
// Run it from the repository root after `make testbin`. It prints, against
// the targets of the remediator's scale issue:
//
//   - decision latency: 1 % of the nodes get an unhealthy condition at once;
//     the time from each patch to the watch event of its NodeOperation,
//     minus the policy's `for` (target p99 <= 1 s). The policy's one step
//     has no drain and no cordon, so this is the decision path only: policy
//     evaluation over every node and the creates.
//   - memory: the remediator's peak RSS (VmHWM, target <= 300 MiB), and its
//     process_resident_memory_bytes and go_memstats_heap_inuse_bytes.
//   - API traffic in a steady state with nothing writing but kwok's node
//     heartbeats and leases: the API server's apiserver_request_total delta
//     by verb and resource (it has no client label: the other clients are
//     kwok, this program and the API server's own loopback), and the
//     remediator's own rest_client_requests_total delta by method (target:
//     no periodic LISTs).
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
// Building the cluster takes most of the time: on 2 cores about 5 minutes
// to create the pods, 15 for kwok to mark them Running and 5 more until kwok
// stops retrying stale pod-status patches (which the steady state must not
// count). -nodes 500 -steady 60s takes about 3 minutes. The policy's
// maxUnhealthy is 5 %: -unhealthy-percent above 5 opens its breaker.
//
// The numbers are measurements, not a gate: CI does not run this. See
// docs/remediator.md for what was measured.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
)

type config struct {
	nodes, podsPerNode int
	unhealthyPct       float64
	forDur             time.Duration
	steady             time.Duration
	heartbeat          time.Duration
	workers            int
	bin                string
	keep               bool
	stackHealth        bool
	stackPods          bool
}

func main() {
	var c config
	flag.IntVar(&c.nodes, "nodes", 5000, "kwok GPU nodes")
	flag.IntVar(&c.podsPerNode, "pods-per-node", 20, "pods bound to each node")
	flag.Float64Var(&c.unhealthyPct, "unhealthy-percent", 1, "percentage of the nodes that get the condition at once (above 5 the policy's breaker opens)")
	flag.DurationVar(&c.forDur, "for", 10*time.Second, "how long the policy condition must hold (its for)")
	flag.DurationVar(&c.steady, "steady", 5*time.Minute, "length of the steady state whose API requests are counted")
	flag.DurationVar(&c.heartbeat, "heartbeat", 30*time.Second, "kwok's node status heartbeat period")
	flag.IntVar(&c.workers, "workers", 32, "concurrent creates of pods")
	flag.StringVar(&c.bin, "bin", "", "kubemedic-remediator binary (default: go build it)")
	flag.BoolVar(&c.keep, "keep", false, "keep the remediator's log and print its path")
	flag.BoolVar(&c.stackHealth, "stack-health", false, "measure the GPU stack health checks: a first steady state with the remediator's --stack-health=false, then the rest with "+
		"--stack-health=true and the default options (period 30s), reporting the first pass, API requests and node-status writes per pass, and peak RSS of both")
	flag.BoolVar(&c.stackPods, "stack-pods", true, "with -stack-health: one device plugin and one dcgm-exporter pod per node (the GPU Operator's default labels)")
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

func run(ctx context.Context, c config) error {
	if c.nodes < 1 || c.podsPerNode < 0 || c.workers < 1 {
		return errors.New("-nodes and -workers must be at least 1, -pods-per-node at least 0")
	}
	rep := &report{}
	work, err := os.MkdirTemp("", "kubemedic-remediator-scale-")
	if err != nil {
		return err
	}
	if !c.keep {
		defer os.RemoveAll(work)
	}
	if c.bin == "" {
		c.bin = filepath.Join(work, "kubemedic-remediator")
		scaleutil.Logf("building ./cmd/kubemedic-remediator")
		cmd := exec.Command("go", "build", "-o", c.bin, "./cmd/kubemedic-remediator")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build (run from the repository root): %w", err)
		}
	}

	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := localcluster.New(startCtx, localcluster.Options{
		Kwok: true, KwokHeartbeat: c.heartbeat,
		KwokStages: []string{localcluster.OperationPodStage("kubemedic-bench-op-succeed", templateName, true)},
		Logf:       scaleutil.Logf,
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
	// The harness' clients keep envtest's QPS of 1000; creating 100,000
	// pods wants no client-side limit at all.
	fast := rest.CopyConfig(env.Config)
	fast.QPS, fast.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}

	// Cluster.
	t0 := time.Now()
	nodeCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	nodes, err := env.CreateGPUNodes(nodeCtx, c.nodes, localcluster.NodeSpec{})
	cancel()
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	nodesTook := time.Since(t0)
	scaleutil.Logf("%d nodes created and Ready in %s", len(nodes), nodesTook.Round(time.Second))
	rep.add("cluster", "%d kwok GPU nodes, created and Ready in %s (%.0f/s)", len(nodes), nodesTook.Round(time.Second), float64(len(nodes))/nodesTook.Seconds())

	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	t0 = time.Now()
	created, err := createPods(ctx, cs, names, c.podsPerNode, c.workers, benchPod)
	if err != nil {
		return err
	}
	if c.stackHealth && c.stackPods {
		n, err := createPods(ctx, cs, names, 2, c.workers, stackPod)
		if err != nil {
			return err
		}
		created += n
		rep.add("", "with -stack-pods: %d of them the device plugin's and dcgm-exporter's, one of each per node", n)
	}
	podsTook := time.Since(t0)
	scaleutil.Logf("%d pods created in %s", created, podsTook.Round(time.Second))
	t0 = time.Now()
	if err := scaleutil.WaitPodsRunning(ctx, cs, 60*time.Minute); err != nil {
		return err
	}
	runningTook := time.Since(t0)
	rep.add("", "%d pods (%d per node, bound), created in %s (%.0f/s, %d workers); all Running %s later",
		created, c.podsPerNode, podsTook.Round(time.Second), float64(created)/podsTook.Seconds(), c.workers, runningTook.Round(time.Second))
	t0 = time.Now()
	extra, err := waitPodWritesQuiet(ctx, cs, 60*time.Minute)
	if err != nil {
		return err
	}
	if extra > 0 {
		rep.add("", "kwok kept patching pod status after all were Running: %.0f more patches, quiet %s later", extra, time.Since(t0).Round(time.Second))
	}

	if err := setupPolicy(ctx, env.Client, c.forDur); err != nil {
		return err
	}

	// Settle: let the first reconciles (every object is new to the
	// remediator) finish.
	settle := 20 * time.Second
	if c.stackHealth {
		// The baseline: the same remediator without the checks.
		rem, err := startRemediator(ctx, c.bin, env.Kubeconfig, work, "--stack-health=false")
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
		hwm, _ := rem.procStatus("VmHWM")
		rep.add("without checks", "remediator --stack-health=false: VmHWM (peak RSS) %s", scaleutil.MiB(hwm))
		rem.stop()
	}

	// The remediator, as its own process.
	rem, err := startRemediator(ctx, c.bin, env.Kubeconfig, work, fmt.Sprintf("--stack-health=%t", c.stackHealth))
	if err != nil {
		return err
	}
	defer rem.stop()
	t0 = time.Now()
	if err := rem.waitReady(ctx, 10*time.Minute); err != nil {
		return err
	}
	readyTook := time.Since(t0)
	if c.stackHealth {
		if err := firstPass(ctx, cs, rem, len(names), t0, rep); err != nil {
			return err
		}
	}
	hwmAtReady, _ := rem.procStatus("VmHWM")
	scaleutil.Logf("remediator (pid %d) ready in %s, VmHWM %s", rem.pid(), readyTook.Round(time.Millisecond), scaleutil.MiB(hwmAtReady))
	rep.add("remediator", "pid %d, /readyz (caches synced) %s after exec; VmHWM then %s", rem.pid(), readyTook.Round(time.Millisecond), scaleutil.MiB(hwmAtReady))

	scaleutil.Logf("settling for %s", settle)
	if err := scaleutil.Sleep(ctx, settle); err != nil {
		return err
	}

	// Steady state.
	w, err := steadyState(ctx, env, rem, c.steady, "steady state", rep)
	if err != nil {
		return err
	}
	if c.stackHealth {
		stackHealthPasses(w, len(names), rep)
	}

	// Decision latency.
	if err := latency(ctx, env, cs, rem, names, c, rep); err != nil {
		return err
	}

	// Memory at the end.
	hwm, err := rem.procStatus("VmHWM")
	if err != nil {
		return err
	}
	rss, _ := rem.procStatus("VmRSS")
	m, err := rem.metrics(ctx)
	if err != nil {
		return err
	}
	rep.add("memory", "VmHWM (peak RSS) %s; VmRSS now %s", scaleutil.MiB(hwm), scaleutil.MiB(rss))
	rep.add("", "process_resident_memory_bytes %s, go_memstats_heap_inuse_bytes %s, go_gc_heap_live_bytes %s",
		scaleutil.MiB(int64(m.sum("process_resident_memory_bytes", nil))), scaleutil.MiB(int64(m.sum("go_memstats_heap_inuse_bytes", nil))),
		scaleutil.MiB(int64(m.sum("go_gc_heap_live_bytes", nil))))
	rep.verdict(hwm <= 300<<20, "remediator peak RSS (VmHWM) %s <= 300 MiB", scaleutil.MiB(hwm))

	if errs, first := rem.logErrors(); errs > 0 {
		rep.add("remediator log", "%d error lines; the first: %s", errs, first)
	}
	if c.keep {
		rep.add("remediator log", "%s", rem.logPath)
	}

	fmt.Printf("\nkubemedic-remediator at scale: %d nodes, %d pods, policy for=%s, kwok heartbeat %s, %d CPUs (GOMAXPROCS %d)\n",
		c.nodes, created, c.forDur, c.heartbeat, runtime.NumCPU(), runtime.GOMAXPROCS(0))
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
// controller runs).
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
			Labels:    map[string]string{"app.kubernetes.io/name": owner, "kubemedic.io/bench": "true"},
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

func setupPolicy(ctx context.Context, c client.Client, forDur time.Duration) error {
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
				MaxUnhealthy:  ptr.To(intstr.FromString("5%")),
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

// latency patches the condition onto a share of the nodes at once and
// times each node's NodeOperation.
func latency(ctx context.Context, env *localcluster.Cluster, cs kubernetes.Interface, rem *remediator, names []string, c config, rep *report) error {
	n := max(1, int(math.Round(float64(len(names))*c.unhealthyPct/100)))
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
			}
			if s.phase != op.Status.Phase && op.Status.Phase.Finished() {
				s.finished = at
			}
			s.phase = op.Status.Phase
			mu.Unlock()
		}
	}()

	// Patch at the start of a second: lastTransitionTime has a resolution of
	// one second, and the remediator counts `for` from it.
	now := time.Now()
	t0 := now.Truncate(time.Second).Add(time.Second)
	if err := scaleutil.Sleep(ctx, time.Until(t0)); err != nil {
		return err
	}
	scaleutil.Logf("latency: patching %s=True onto %d nodes at once", v1alpha1.ConditionGPUXidError, n)
	patched := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	ltt := metav1.NewTime(t0)
	for i, node := range targets {
		wg.Go(func() {
			cond := corev1.NodeCondition{
				Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason,
				Message:           "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus",
				LastHeartbeatTime: ltt, LastTransitionTime: ltt,
			}
			errs[i] = patchCondition(ctx, cs, node, cond)
			patched[i] = time.Now()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	spread := slices.MaxFunc(patched, time.Time.Compare).Sub(t0)
	scaleutil.Logf("latency: %d patches done within %s; waiting for the operations", n, spread.Round(time.Millisecond))

	deadline := time.Now().Add(c.forDur + 2*time.Minute)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d operations created %s after the patches (remediator log %s)", got, n, c.forDur+2*time.Minute, rem.logPath)
		}
		if err := scaleutil.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, n)
	fromDue := make([]time.Duration, n)
	mu.Lock()
	for node, s := range seen {
		i := targetSet[node]
		lat[i] = s.created.Sub(patched[i]) - c.forDur
		fromDue[i] = s.created.Sub(t0.Add(c.forDur))
	}
	mu.Unlock()
	slices.Sort(lat)
	slices.Sort(fromDue)
	p50, p99, mx := scaleutil.Pct(lat, 50), scaleutil.Pct(lat, 99), lat[len(lat)-1]
	rep.add("latency", "%d nodes (%.3g%%) patched at once (all within %s); NodeOperation watch event - patch - for(%s):",
		n, c.unhealthyPct, spread.Round(time.Millisecond), c.forDur)
	rep.add("", "  p50 %s, p99 %s, max %s (from lastTransitionTime+for: p50 %s, max %s)",
		ms(p50), ms(p99), ms(mx), ms(scaleutil.Pct(fromDue, 50)), ms(fromDue[len(fromDue)-1]))
	rep.verdict(p99 <= time.Second, "decision latency beyond `for` p99 %s <= 1 s", ms(p99))

	// End to end: clear the conditions and wait for the operations to
	// succeed (pod completed by kwok, then healthyFor 5s of the cleared
	// condition), so the run also passes the rest of the lifecycle.
	for _, node := range targets {
		if err := env.ClearNodeCondition(ctx, node, v1alpha1.ConditionGPUXidError, v1alpha1.DetectReason, "no actionable Xid"); err != nil {
			return err
		}
	}
	deadline = time.Now().Add(3 * time.Minute)
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

func patchCondition(ctx context.Context, cs kubernetes.Interface, node string, cond corev1.NodeCondition) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().PatchStatus(ctx, node, patch); err != nil {
		return fmt.Errorf("set condition on node %s: %w", node, err)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

// remediator is the kubemedic-remediator process.
type remediator struct {
	proc                 *localcluster.Process
	logPath              string
	metricsURL, readyURL string
}

func startRemediator(ctx context.Context, bin, kubeconfig, dir string, extra ...string) (*remediator, error) {
	mport, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	pport, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	maddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	paddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(pport))
	proc, err := localcluster.StartProcess(ctx, localcluster.ProcessSpec{
		Name: "kubemedic-remediator",
		Path: bin,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--metrics-bind-address=" + maddr,
			"--health-probe-bind-address=" + paddr,
			"--namespace=" + opNamespace,
		}, extra...),
		LogPath:     filepath.Join(dir, "kubemedic-remediator.log"),
		StopTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &remediator{proc: proc, logPath: proc.LogPath(), metricsURL: "http://" + maddr + "/metrics", readyURL: "http://" + paddr + "/readyz"}, nil
}

func (r *remediator) pid() int { return r.proc.PID() }

func (r *remediator) waitReady(ctx context.Context, timeout time.Duration) error {
	return r.proc.WaitHTTPOK(ctx, r.readyURL, timeout)
}

func (r *remediator) stop() { _ = r.proc.Stop() }

// procStatus returns a "kB" field of /proc/<pid>/status in bytes.
func (r *remediator) procStatus(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %w", r.pid(), field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", r.pid(), field)
}

// cpuTime is the remediator's user+system CPU time.
func (r *remediator) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.pid()))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", r.pid())
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

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

// logErrors counts the error lines in the remediator's log and returns the
// message and error of the first.
func (r *remediator) logErrors() (int, string) {
	b, err := os.ReadFile(r.logPath)
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
