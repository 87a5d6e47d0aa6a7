package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// draPolicy is the demo's policy for a fatal Xid on a DRA node.
//
//go:embed gpu-xid-dra.yaml
var draPolicy []byte

// draPolicyFile names it in messages.
const draPolicyFile = "cmd/kubemedic-demo/demo/gpu-xid-dra.yaml"

// silentPolicy is the demo's policy for the silent-gpu fault: the reset
// ladder with the validation gate on each repair.
//
//go:embed gpu-xid-silent.yaml
var silentPolicy []byte

// silentPolicyFile names it in messages.
const silentPolicyFile = "cmd/kubemedic-demo/demo/gpu-xid-silent.yaml"

// validationPolicy is the demo's ValidationPolicy: the join gate and the
// background tests.
//
//go:embed gpu-validation-demo.yaml
var validationPolicy []byte

// validationPolicyFile names it in messages.
const validationPolicyFile = "cmd/kubemedic-demo/demo/gpu-validation-demo.yaml"

// priorityClassFile is the PriorityClass of the background tests, which
// the remediator's deployment ships.
const priorityClassFile = "deploy/remediator/validation.yaml"

// Names the demo world uses.
const (
	// Namespace holds the operation pods and the components' leases.
	Namespace = "kubemedic-system"
	// Repo is the GitHub stand-in's repository the alertbridge files into.
	Repo = "acme/gpu-oncall"
	// githubToken is the token the GitHub stand-in accepts.
	githubToken = "ghp_kubemedicDemoToken0000000000000000"
	// workloadNS is the namespace of the researchers' training jobs.
	workloadNS = "research"
	// notebookNS is the namespace of interactive notebooks, with the
	// example's stricter ReclaimPolicy.
	notebookNS = "research-interactive"
)

// Researchers are the people who own the demo's workloads: their e-mail is
// each pod's kubemedic.io/owner, and the Slack stand-in knows them.
var researchers = []struct{ ID, Email string }{
	{"U0ALICE01", "alice@example.com"},
	{"U0BOB0002", "bob@example.com"},
	{"U0CAROL03", "carol@example.com"},
}

// Options configures a World.
type Options struct {
	// RepoRoot is the repository checkout: deploy/crds, deploy/npd,
	// deploy/prometheus, deploy/alertmanager's receiver and
	// policies/examples are read from it.
	RepoRoot string
	// BinDir holds kubemedic-detect, kubemedic-remediator,
	// kubemedic-alertbridge and kubemedic-janitor.
	BinDir string
	// Dir is the working directory: fake node roots, configs, logs. It is
	// created, and kept after Stop so that logs can be read.
	Dir string
	// Nodes is the number of simulated GPU nodes. Default 16.
	Nodes int
	// NPDNodes of them run the real node-problem-detector with
	// kubemedic-detect on a fake root. Default 3.
	NPDNodes int
	// MIGEvery makes every k-th node a MIG node (localcluster.NodeSpec).
	// Default 4; negative: none.
	MIGEvery int
	// DRANodes more nodes, after the Nodes, publish their 8 GPUs through
	// DRA (a ResourceSlice of NVIDIA's driver) instead of the device plugin:
	// there kubemedic excludes one GPU by DeviceTaintRule instead of
	// cordoning the node (the exclusion story). Default 1; negative: none.
	DRANodes int
	// Speed divides every duration of the policies, rules and routing.
	// Default DefaultSpeed.
	Speed int
	// Out receives progress lines and each Slack message.
	Out io.Writer
	// GitHubRepo, with GitHubTokenFile, files issues into a real
	// repository instead of the stand-in; GitHubURL is the API (default
	// https://api.github.com/, or GitHub Enterprise's https://HOST/api/v3/).
	GitHubRepo, GitHubTokenFile, GitHubURL string
	// SlackTokenFile sends Slack messages to a real workspace instead of
	// the stand-in, those without a known owner to SlackChannel (default
	// gpu-ops; the app must be a member).
	SlackTokenFile, SlackChannel string
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 16
	}
	if o.NPDNodes == 0 {
		o.NPDNodes = 3
	}
	if o.NPDNodes > o.Nodes {
		o.NPDNodes = o.Nodes
	}
	if o.MIGEvery == 0 {
		o.MIGEvery = 4
	}
	if o.DRANodes == 0 {
		o.DRANodes = 1
	}
	if o.Speed == 0 {
		o.Speed = DefaultSpeed
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.SlackChannel == "" {
		o.SlackChannel = "gpu-ops"
	}
}

// World is a running demo: the control plane, the nodes, the kubemedic
// components as processes, monitoring, the stand-ins and the simulator.
type World struct {
	Cluster *localcluster.Cluster
	// Nodes are every node's name, in order; the first NPDNodes have a
	// FakeRoot in Roots and run NPD, the last ones are the DRANodes.
	Nodes []string
	// DRANodes publish their GPUs through DRA, not the device plugin.
	DRANodes []string
	Roots    map[string]*FakeRoot
	// GitHub is the GitHub stand-in and PageURL its web page; nil and the
	// repository's issues page with Options.GitHubRepo.
	GitHub  *ghfake.Fake
	PageURL string
	// Slack is the Slack stand-in; nil with Options.SlackTokenFile.
	Slack *notifytest.Server
	// slackSecret is the signing secret the janitor verifies presses
	// with, and interactURL its interactivity endpoint; both empty with
	// Options.SlackTokenFile.
	slackSecret, interactURL string
	// S3 is the diagnostics store, a real S3-compatible server.
	S3 *localcluster.S3
	// githubURL, githubTokenFile and repo are what the alertbridge and the
	// timeline use: the stand-in's or the real ones.
	githubURL, githubTokenFile, repo string
	// PrometheusURL and AlertmanagerURL are the monitoring UIs/APIs.
	PrometheusURL, AlertmanagerURL string
	// ControlURL serves inject and the Slack log to `kubemedic-demo`
	// commands in other terminals.
	ControlURL string
	Speed      int

	opts  Options
	start time.Time
	out   *lockedWriter
	nfs   *nfsServer

	// mu guards the fields below; Start appends to stoppers before any
	// other goroutine runs, and holds it too.
	mu       sync.Mutex
	procs    []*localcluster.Process
	stoppers []func() error
	faulty   map[string]bool // nodes whose GPU resets fail and whose Xid returns after a reboot
	silent   map[string]int  // silent-gpu nodes: the GPU that fails DCGM's memory test
	joined   []string        // nodes new-node added, after Nodes
	bootSeq  map[string]int  // simulated nodes' boot counters
	slackLog []SlackMessage
	seq      int // names of the pods and processes inject makes
	// bridgeAddr is the alertbridge's listen address.
	bridgeAddr string
	scrape     []scrapeTarget
	// DCGM is the dcgm-exporter stand-in: GPU utilisation of pods.
	DCGM *localcluster.DCGMExporter
	// gpus is which GPUs the pods hold, for DCGM's series (syncGPUs).
	gpus gpuBook
}

// scrapeTarget is one /metrics endpoint Prometheus scrapes.
type scrapeTarget struct{ job, addr string }

// lockedWriter serialises lines from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (w *World) say(format string, args ...any) {
	fmt.Fprintf(w.out, "[%5.1fs] %s\n", time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
}

// Start builds the world. On error everything started so far is stopped.
func Start(ctx context.Context, o Options) (_ *World, err error) {
	o.defaults()
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	w := &World{opts: o, start: time.Now(), out: &lockedWriter{w: o.Out}, Speed: o.Speed,
		Roots: map[string]*FakeRoot{}, faulty: map[string]bool{}, silent: map[string]int{}, bootSeq: map[string]int{}}
	defer func() {
		if err != nil {
			_ = w.Stop()
		}
	}()
	for _, bin := range []string{"kubemedic-detect", "kubemedic-remediator", "kubemedic-alertbridge", "kubemedic-janitor", "kubemedic-diag"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (run `make build`): %w", bin, o.BinDir, err)
		}
	}

	w.say("Starting kube-apiserver (with DRA's DeviceTaintRule API), etcd, kwok, kube-scheduler and kube-controller-manager (%s), installing the kubemedic CRDs",
		strings.Join(localcluster.SchedulingControllers, ", "))
	cl, err := localcluster.New(ctx, localcluster.Options{Kwok: true, KwokHeartbeat: 10 * time.Second,
		CRDDir: filepath.Join(o.RepoRoot, "deploy/crds"), DRA: true, Scheduler: true, ControllerManager: true})
	if err != nil {
		return nil, err
	}
	w.Cluster = cl
	w.onStop(cl.Stop)

	if err := w.createNodes(ctx); err != nil {
		return nil, err
	}
	// The controllers and the scheduler place the workloads while the rest
	// starts; waitWorkloads waits for them at the end.
	if err := w.createWorkloads(ctx); err != nil {
		return nil, err
	}
	if err := w.applyPolicies(ctx); err != nil {
		return nil, err
	}
	if err := w.startStandIns(ctx); err != nil {
		return nil, err
	}
	ports, err := w.componentPorts()
	if err != nil {
		return nil, err
	}
	if err := w.startMonitoring(ctx); err != nil {
		return nil, err
	}
	if err := w.startComponents(ctx, ports); err != nil {
		return nil, err
	}
	if err := w.startNPD(ctx); err != nil {
		return nil, err
	}
	if err := w.waitWorkloads(ctx); err != nil {
		return nil, err
	}
	simCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.simulate(simCtx) }()
	w.onStop(func() error { cancel(); <-done; return nil })
	if err := w.startControl(); err != nil {
		return nil, err
	}
	return w, nil
}

// next returns a number no earlier call returned, for unique names.
func (w *World) next() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	return w.seq
}

// onStop adds f to what Stop runs, in reverse order.
func (w *World) onStop(f func() error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stoppers = append(w.stoppers, f)
}

// Stop stops everything, in the reverse order of starting.
func (w *World) Stop() error {
	w.mu.Lock()
	stoppers := w.stoppers
	w.stoppers = nil
	w.mu.Unlock()
	var errs []error
	for i := len(stoppers) - 1; i >= 0; i-- {
		if err := stoppers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// createNodes makes the kwok GPU nodes, the fake roots of the NPD nodes,
// and gives every node a boot ID.
func (w *World) createNodes(ctx context.Context) error {
	c := w.Cluster
	if err := ensureNamespace(ctx, c.Client, Namespace); err != nil {
		return err
	}
	nodes, err := c.CreateGPUNodes(ctx, w.opts.Nodes, localcluster.NodeSpec{MIGEvery: w.opts.MIGEvery,
		Labels: map[string]string{labelDevicePlugin: "true"}})
	if err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	if n := w.opts.DRANodes; n > 0 {
		// The DRA nodes keep the nvidia.com/gpu capacity localcluster gives
		// every node (kubemedic's allocatable check knows only the device
		// plugin's resource); the workloads of the device plugin select
		// labelDevicePlugin=true, so none lands there.
		dra, err := c.CreateGPUNodes(ctx, n, localcluster.NodeSpec{Start: len(nodes), ResourceSlices: true,
			Labels: map[string]string{labelDevicePlugin: "false"}})
		if err != nil {
			return fmt.Errorf("create the DRA nodes: %w", err)
		}
		if err := c.CreateGPUDeviceClass(ctx); err != nil {
			return err
		}
		nodes = append(nodes, dra...)
		for i := range dra {
			w.DRANodes = append(w.DRANodes, dra[i].Name)
		}
	}
	for i := range nodes {
		w.Nodes = append(w.Nodes, nodes[i].Name)
	}
	if err := c.WaitNodesReady(ctx, w.Nodes...); err != nil {
		return fmt.Errorf("wait for nodes: %w", err)
	}
	w.nfs, err = startNFSServer()
	if err != nil {
		return err
	}
	w.onStop(w.nfs.Close)
	for i, name := range w.Nodes {
		boot := simBootID(name, 1)
		if i < w.opts.NPDNodes {
			// nvidia-smi lists the physical GPUs, MIG or not: GPU feature
			// discovery's count.
			gpus, err := strconv.Atoi(nodes[i].Labels["nvidia.com/gpu.count"])
			if err != nil {
				return fmt.Errorf("node %s: label nvidia.com/gpu.count: %w", name, err)
			}
			r, err := NewFakeRoot(filepath.Join(w.opts.Dir, "nodes", name), name, gpus, w.nfs.Addr())
			if err != nil {
				return err
			}
			w.Roots[name] = r
			boot = r.BootID()
		} else {
			w.bootSeq[name] = 1
		}
		if err := setBootID(ctx, c, name, boot); err != nil {
			return err
		}
	}
	w.say("%d simulated GPU nodes are Ready (kwok), in zones zone-a and zone-b; every %s MIG", len(w.Nodes)-len(w.DRANodes), migEvery(w.opts.MIGEvery))
	if len(w.DRANodes) > 0 {
		w.say("%s: 8 GPUs published through DRA (ResourceSlices of %s, DeviceClass %s) instead of the device plugin",
			strings.Join(w.DRANodes, ", "), localcluster.NVIDIADRADriver, localcluster.GPUDeviceClass)
	}
	w.say("Real node-problem-detector + kubemedic-detect on a fake root: %s", strings.Join(w.Nodes[:w.opts.NPDNodes], ", "))
	w.say("Conditions written by the simulator (as NPD would): the other %d nodes", len(w.Nodes)-w.opts.NPDNodes)
	return nil
}

func migEvery(k int) string {
	switch {
	case k <= 0:
		return "none is"
	case k == 1:
		return "node is"
	case k == 2:
		return "2nd node is"
	case k == 3:
		return "3rd node is"
	}
	return fmt.Sprintf("%dth node is", k)
}

// simBootID is the boot ID of a simulated node's n-th boot.
func simBootID(node string, n int) string {
	return fmt.Sprintf("%08x-5100-4000-8000-%012x", fnv32(node), n)
}

func setBootID(ctx context.Context, c *localcluster.Cluster, node, bootID string) error {
	patch := fmt.Sprintf(`{"status":{"nodeInfo":{"bootID":%q}}}`, bootID)
	if _, err := c.Clientset.CoreV1().Nodes().PatchStatus(ctx, node, []byte(patch)); err != nil {
		return fmt.Errorf("set the boot ID of node %s: %w", node, err)
	}
	return nil
}

// applyPolicies applies the example policies and templates, sped up.
func (w *World) applyPolicies(ctx context.Context) error {
	dir := filepath.Join(w.opts.RepoRoot, "policies/examples")
	loaded, problems := policies.LoadFiles(dir)
	// The examples' ValidationPolicies are left out: the demo's own tests
	// the same nodes, and a node is tested by the first policy by name.
	var docs []*policies.Document
	var skipped []string
	for _, d := range loaded {
		if vp, ok := d.Object.(*v1alpha1.ValidationPolicy); ok {
			skipped = append(skipped, vp.Name)
			continue
		}
		docs = append(docs, d)
	}
	examples := len(docs)
	for _, f := range []struct {
		name string
		b    []byte
		want bool
	}{{draPolicyFile, draPolicy, len(w.DRANodes) > 0}, {silentPolicyFile, silentPolicy, true}, {validationPolicyFile, validationPolicy, true}} {
		if !f.want {
			continue
		}
		ds, ps := policies.Load(f.name, f.b)
		docs, problems = append(docs, ds...), append(problems, ps...)
	}
	problems = append(problems, policies.ValidateSet(docs)...)
	if len(problems) > 0 {
		var b strings.Builder
		for _, p := range problems {
			b.WriteString("\n" + p.String())
		}
		return fmt.Errorf("%d problems in %s:%s", len(problems), dir, b.String())
	}
	var windows []string
	for _, d := range docs {
		obj, removed, err := speedUp(d.Object.(client.Object), w.opts.Speed)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", d.File, d.Line, err)
		}
		if removed {
			windows = append(windows, obj.GetName())
		}
		if crp, ok := obj.(*v1alpha1.ClusterReclaimPolicy); ok && crp.Spec.DryRun != nil {
			// The example ships in dry run; the demo shows a reclaim.
			crp.Spec.DryRun.Enabled = false
		}
		if ns := obj.GetNamespace(); ns != "" {
			if err := ensureNamespace(ctx, w.Cluster.Client, ns); err != nil {
				return err
			}
		}
		if err := w.Cluster.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("apply %s %s from %s:%d: %w", d.Kind, client.ObjectKeyFromObject(obj), d.File, d.Line, err)
		}
	}
	sort.Strings(windows)
	w.say("Applied %d objects from policies/examples, every duration divided by %d (for: 2m holds 2s) but maxSnooze (the janitor's Keep buttons keep for real hours); maintenance windows removed from %s so that steps run now; the janitor's dry run is off",
		examples, w.opts.Speed, strings.Join(windows, ", "))
	if len(w.DRANodes) > 0 {
		w.say("Applied the demo's policy gpu-xid-reset-dra (%s) for the DRA nodes: its reset excludes the one GPU instead of draining the node", draPolicyFile)
	}
	w.say("Applied the demo's policy gpu-xid-reset-validated (%s) for the silent-gpu story: each repair is proven by DCGM's diagnostics before the uncordon", silentPolicyFile)
	pc, err := w.applyPriorityClass(ctx)
	if err != nil {
		return err
	}
	left := ""
	if len(skipped) > 0 {
		left = fmt.Sprintf(" (instead of the examples' %s)", strings.Join(skipped, ", "))
	}
	w.say("Applied the demo's ValidationPolicy demo-gpu-validation (%s)%s: a node that joins with the taint %s is tested before it serves; idle nodes are tested in the background at PriorityClass %s (%s)",
		validationPolicyFile, left, v1alpha1.TaintUnvalidated, pc, priorityClassFile)
	return nil
}

// applyPriorityClass creates the PriorityClass of the background tests
// from the file the remediator's deployment ships, and returns its name.
func (w *World) applyPriorityClass(ctx context.Context) (string, error) {
	path := filepath.Join(w.opts.RepoRoot, priorityClassFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pc schedulingv1.PriorityClass
	if err := yaml.UnmarshalStrict(b, &pc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if pc.Kind != "PriorityClass" || pc.Name == "" {
		return "", fmt.Errorf("%s: want one PriorityClass, found kind %q name %q", path, pc.Kind, pc.Name)
	}
	if err := w.Cluster.Client.Create(ctx, &pc); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("apply PriorityClass %s from %s: %w", pc.Name, path, err)
	}
	return pc.Name, nil
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// nfsServer is the NFS server of the demo's mounts: a TCP listener the nfs
// check connects to.
type nfsServer struct {
	addr string
	ln   net.Listener
}

func startNFSServer() (*nfsServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nfs server: %w", err)
	}
	s := &nfsServer{addr: ln.Addr().String(), ln: ln}
	go acceptLoop(ln)
	return s, nil
}

func acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func (s *nfsServer) Addr() string { return s.addr }

func (s *nfsServer) Close() error { return s.ln.Close() }
