package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/plan"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// simulatorPoll is how often the simulator looks for operation pods.
const simulatorPoll = 300 * time.Millisecond

// opDuration is how long an operation takes on a real 8-GPU node, which the
// simulator waits (divided by the demo's speed) before playing its effect:
// a reset first waits for the GPU's processes to exit (the evicted pods'
// 30 s grace period, often more) and the reset itself takes up to a minute
// on an H100, about 3 minutes in all; a reboot of a large server with 1-2
// TiB of RAM takes about 8 minutes to POST and boot; a remount seconds.
// A diagnostics capture is mostly nvidia-bug-report.sh, which takes a
// minute or two on an 8-GPU node.
var opDuration = map[string]time.Duration{
	"reset-gpu":               3 * time.Minute,
	"reboot":                  8 * time.Minute,
	"remount-nfs":             30 * time.Second,
	"collect-gpu-diagnostics": 90 * time.Second,
	// DCGM's diagnostics at level 2 on 8 GPUs: a few minutes. A background
	// test runs longer in the demo (backgroundTestDuration).
	validateTemplate: 3 * time.Minute,
}

// defaultOpDuration is the duration of any other operation.
const defaultOpDuration = 30 * time.Second

// The simulator stands in for the nodes themselves: kwok marks operation
// pods Running but runs nothing, so the simulator plays what each
// operation would have done to the node and ends the pod, the way the
// kubelet would report it:
//
//   - reset-gpu: records the reset with kubemedic-detect's own
//     --record-reset on a fake-root node (the xid check then sees the Xid as
//     dealt with), or clears GPUXidError on a simulated node; the pod
//     Succeeded. On a node with a faulty GPU the reset fails: the pod
//     Failed, with nvidia-smi's refusal as its message.
//   - reboot: a new boot ID (fake root and Node.status.nodeInfo), a fresh
//     kernel log, no processes, mounts back; a simulated node's kubemedic
//     conditions clear. On a node with a faulty GPU the Xid is logged again
//     right after the boot, as a GPU that is broken does.
//   - remount-nfs: the mount is back (when the NFS server answers).
//   - validate-dcgm (a GPU test: a step's validate, a join or a background
//     test): the real kubemedic-validate on DCGM's real output, failing GPU
//     0's memory test on a silent-gpu node (validate.go). A background test
//     runs longer (backgroundTestDuration), so that a real pod can preempt
//     it; a preempted pod is being deleted, and is not played.
//   - anything else: the pod Succeeded.
//
// It also ticks every fake root's uptime, and keeps dcgm-exporter's series
// with the workload pods wherever the scheduler puts them (syncGPUs).
func (w *World) simulate(ctx context.Context) {
	played := map[string]podResult{} // pods whose operation was played, until they end
	seen := map[string]time.Time{}   // when a Running pod was first seen
	t := time.NewTicker(simulatorPoll)
	defer t.Stop()
	tick := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tick++
		if tick%3 == 0 {
			for _, r := range w.Roots {
				if err := r.Tick(); err != nil {
					w.say("simulator: %v", err)
				}
			}
		}
		w.syncGPUs(ctx)
		var pods corev1.PodList
		if err := w.Cluster.Client.List(ctx, &pods, client.InNamespace(Namespace), client.HasLabels{v1alpha1.LabelTemplate}); err != nil {
			if ctx.Err() == nil {
				w.say("simulator: list operation pods: %v", err)
			}
			continue
		}
		running := map[string]bool{}
		for i := range pods.Items {
			p := &pods.Items[i]
			uid := string(p.UID)
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || plan.Preempted(p) {
				continue
			}
			running[uid] = true
			res, done := played[uid]
			if !done {
				if _, ok := seen[uid]; !ok {
					seen[uid] = time.Now()
				}
				d, ok := opDuration[p.Labels[v1alpha1.LabelTemplate]]
				if !ok {
					d = defaultOpDuration
				}
				if isBackgroundTest(p) {
					d = backgroundTestDuration
				}
				if time.Since(seen[uid]) < d/time.Duration(w.Speed) {
					continue
				}
				// Played once: a failed status write is retried on the
				// next poll without playing the operation again.
				res.ok, res.msg = w.play(ctx, p)
				played[uid] = res
			}
			if err := localcluster.FinishPod(ctx, w.Cluster.Client, p, res.ok, res.msg); err != nil && ctx.Err() == nil {
				w.say("simulator: end pod %s/%s (retried): %v", p.Namespace, p.Name, err)
			}
		}
		for uid := range played {
			if !running[uid] {
				delete(played, uid)
			}
		}
		for uid := range seen {
			if !running[uid] {
				delete(seen, uid)
			}
		}
	}
}

// podResult is how a played operation ends its pod.
type podResult struct {
	ok  bool
	msg string
}

// recordResetTimeout bounds kubemedic-detect --record-reset.
const recordResetTimeout = 10 * time.Second

// play applies the operation of pod p to its node and says whether it
// succeeded, with the message its container would have printed last.
func (w *World) play(ctx context.Context, p *corev1.Pod) (bool, string) {
	node := p.Spec.NodeName
	tpl := p.Labels[v1alpha1.LabelTemplate]
	root := w.Roots[node]
	w.mu.Lock()
	faulty := w.faulty[node]
	w.mu.Unlock()
	switch tpl {
	case validateTemplate:
		return w.validate(ctx, p)
	case "collect-gpu-diagnostics":
		return w.capture(ctx, p, root)
	case "reset-gpu":
		bus := podEnv(p, "GPU_BUS_ID")
		if faulty {
			return false, fmt.Sprintf("reset-gpu: nvidia-smi -r -i %s: GPU Reset couldn't run because GPU %s is in use by another client (simulated fault)", bus, bus)
		}
		if root != nil {
			ctx, cancel := context.WithTimeout(ctx, recordResetTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(w.opts.BinDir, "kubemedic-detect"), "xid", "--record-reset="+bus,
				"--root="+root.Dir, "--state-dir="+filepath.Join(root.Dir, rootStateDir))
			if out, err := cmd.CombinedOutput(); err != nil {
				return false, fmt.Sprintf("reset-gpu: recording the reset of %s failed: %v: %s", bus, err, strings.TrimSpace(string(out)))
			}
			if err := root.ClearRecovery(bus); err != nil {
				return false, err.Error()
			}
		} else {
			for _, typ := range []string{v1alpha1.ConditionGPUXidError, v1alpha1.ConditionGPURecoveryRequired} {
				if err := w.clearCondition(ctx, node, typ); err != nil {
					return false, err.Error()
				}
			}
		}
		return true, "reset-gpu: " + bus + " reset and answering"
	case "reboot":
		if err := w.reboot(ctx, node, faulty); err != nil {
			return false, err.Error()
		}
		return true, "reboot: rebooting"
	case "remount-nfs":
		if root != nil {
			if err := root.SetNFSMounted(true); err != nil {
				return false, err.Error()
			}
		} else if err := w.clearCondition(ctx, node, v1alpha1.ConditionNFSMountUnhealthy); err != nil {
			return false, err.Error()
		}
		return true, "remount-nfs: remounted " + nfsMountPoint
	}
	return true, tpl + ": done (simulated)"
}

// reboot plays a reboot of node.
func (w *World) reboot(ctx context.Context, node string, faulty bool) error {
	var boot string
	if root := w.Roots[node]; root != nil {
		if err := root.Reboot(); err != nil {
			return err
		}
		boot = root.BootID()
		if faulty {
			if err := root.Xid(0, 46, "GPU timeout"); err != nil {
				return err
			}
		}
	} else {
		w.mu.Lock()
		w.bootSeq[node]++
		boot = simBootID(node, w.bootSeq[node])
		w.mu.Unlock()
		for typ := range v1alpha1.ConditionReasons {
			if faulty && typ == v1alpha1.ConditionGPUXidError {
				continue
			}
			if err := w.clearCondition(ctx, node, typ); err != nil {
				return err
			}
		}
	}
	return setBootID(ctx, w.Cluster, node, boot)
}

// clearCondition sets a detector condition of a simulated node to False,
// as NPD does when its check passes, when the node has it.
func (w *World) clearCondition(ctx context.Context, node, typ string) error {
	var n corev1.Node
	if err := w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return fmt.Errorf("get node %s: %w", node, err)
	}
	if c := localcluster.FindNodeCondition(&n, corev1.NodeConditionType(typ)); c == nil || c.Status == corev1.ConditionFalse {
		return nil
	}
	return w.Cluster.ClearNodeCondition(ctx, node, typ, okReason[typ], "simulated: healthy again")
}

// okReason is the reason deploy/npd's configs give each condition when its
// check passes.
var okReason = map[string]string{
	v1alpha1.ConditionGPULost:              "GPUsPresent",
	v1alpha1.ConditionGPUXidError:          "NoXidError",
	v1alpha1.ConditionGPUMemoryUnhealthy:   "GPUMemoryHealthy",
	v1alpha1.ConditionGPURecoveryRequired:  "GPURecoveryNotRequired",
	v1alpha1.ConditionPodProcessesStuck:    "NoStuckProcesses",
	v1alpha1.ConditionNFSMountUnhealthy:    "NFSMountsHealthy",
	v1alpha1.ConditionNetworkInterfaceDown: "InterfacesUp",
}

// capture plays a capture pod (or a flush pod, from the same template):
// kubemedic-diag capture (or flush) on the node's fake root, with the pod's environment (the Secret's keys for its
// secretKeyRefs), as the pod would run it; its report is the pod's
// termination message. A node without a fake root has no host to capture:
// its report says so (a failed capture, and the repair goes on).
func (w *World) capture(ctx context.Context, p *corev1.Pod, root *FakeRoot) (bool, string) {
	flush := len(p.Spec.Containers[0].Args) > 0 && p.Spec.Containers[0].Args[0] == "flush"
	if root == nil && flush {
		return true, "0 bundles stored: simulated node " + p.Spec.NodeName + " has no spool (only the nodes with real NPD have a fake root)"
	}
	if root == nil {
		r := diagnostics.Report{Result: v1alpha1.DiagnosticsFailed, Message: "simulated node " + p.Spec.NodeName + ": no host to capture (only the nodes with real NPD have a fake root)"}
		return true, string(r.Encode())
	}
	env := os.Environ()
	for _, e := range p.Spec.Containers[0].Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			var sec corev1.Secret
			if err := w.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.SecretKeyRef.Name}, &sec); err != nil {
				return false, fmt.Sprintf("capture: secret %s: %v", ref.SecretKeyRef.Name, err)
			}
			v = string(sec.Data[ref.SecretKeyRef.Key])
		}
		env = append(env, e.Name+"="+v)
	}
	term := filepath.Join(w.opts.Dir, "captures", p.Name+".report")
	if err := os.MkdirAll(filepath.Dir(term), 0o755); err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, captureTimeout)
	defer cancel()
	// The pod's own subcommand: capture, or flush for a kubemedic diag
	// flush pod made from the same template.
	args := []string{"capture", "--root=" + root.Dir, "--no-chroot", "--kmsg=" + rootKmsg, "--termination-log=" + term, "--bug-report-timeout=10s"}
	if flush {
		args = []string{"flush", "--root=" + root.Dir, "--termination-log=" + term}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(w.opts.BinDir, "kubemedic-diag"), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	report, rerr := os.ReadFile(term)
	if rerr != nil {
		return false, fmt.Sprintf("capture: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return err == nil, string(report)
}

// captureTimeout bounds kubemedic-diag in the demo.
const captureTimeout = 30 * time.Second

func podEnv(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// gpuBook is which simulated GPUs the workload pods hold, as the device
// plugin or the DRA driver gave them, and the dcgm-exporter series set for
// each pod. syncGPUs is its only user (from Start, then from the
// simulator's goroutine); mu guards it all the same.
type gpuBook struct {
	mu     sync.Mutex
	held   map[string]map[int]types.UID // node -> GPU index -> pod
	series map[types.UID][]localcluster.DCGMSeries
}

// syncGPUs makes dcgm-exporter's series follow the pods: a running pod
// with GPUs that has none gets one per GPU it holds, at the utilisation of
// its annotationGPUUtil (default trainingUtil), on the node it runs on; a
// pod that is gone or terminating loses them, and its GPUs are free again.
// A pod's GPUs are those its ResourceClaims were allocated (device gpu-<i>
// is GPU i), or, for the device plugin's nvidia.com/gpu, the node's lowest
// free ones, as the plugin hands them out. The series carry the pod's real
// name, so a pod recreated elsewhere after a drain is reported there.
func (w *World) syncGPUs(ctx context.Context) {
	var pods corev1.PodList
	if err := w.Cluster.Client.List(ctx, &pods); err != nil {
		if ctx.Err() == nil {
			w.say("simulator: list pods: %v", err)
		}
		return
	}
	b := &w.gpus
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held, b.series = map[string]map[int]types.UID{}, map[types.UID][]localcluster.DCGMSeries{}
	}
	live := map[types.UID]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Labels[v1alpha1.LabelTemplate] != "" {
			continue
		}
		if devicePluginGPUs(p) > 0 || len(p.Spec.ResourceClaims) > 0 {
			live[p.UID] = p
		}
	}
	for uid, series := range b.series {
		if live[uid] != nil {
			continue
		}
		for _, s := range series {
			w.DCGM.Delete(s)
			delete(b.held[s.Hostname], s.GPU)
		}
		delete(b.series, uid)
	}
	var claims map[string]*resourcev1.ResourceClaim // listed once, when a new pod has claims
	for uid, p := range live {
		if _, ok := b.series[uid]; ok {
			continue
		}
		if len(p.Spec.ResourceClaims) > 0 && claims == nil {
			var list resourcev1.ResourceClaimList
			if err := w.Cluster.Client.List(ctx, &list); err != nil {
				w.say("simulator: list resourceclaims: %v", err)
				return
			}
			claims = map[string]*resourcev1.ResourceClaim{}
			for i := range list.Items {
				claims[list.Items[i].Namespace+"/"+list.Items[i].Name] = &list.Items[i]
			}
		}
		gpus := b.gpusOf(p, claims)
		if len(gpus) == 0 {
			continue // a claim not yet allocated, or no GPU free: next time
		}
		util := float64(trainingUtil)
		if v, err := strconv.ParseFloat(p.Annotations[annotationGPUUtil], 64); err == nil {
			util = v
		}
		node := p.Spec.NodeName
		if b.held[node] == nil {
			b.held[node] = map[int]types.UID{}
		}
		for _, g := range gpus {
			s := localcluster.DCGMSeries{Namespace: p.Namespace, Pod: p.Name, Container: p.Spec.Containers[0].Name, Hostname: node,
				UUID: gpuUUID(node, g), GPU: g}
			w.DCGM.Set(s, util)
			b.held[node][g] = uid
			b.series[uid] = append(b.series[uid], s)
		}
	}
}

// simGPUsPerNode is how many GPUs the simulated nodes have.
const simGPUsPerNode = 8

// gpusOf is the GPUs pod p holds: its claims' devices, else the lowest
// GPUs of its node that no other pod holds, as many as it requests.
func (b *gpuBook) gpusOf(p *corev1.Pod, claims map[string]*resourcev1.ResourceClaim) []int {
	var out []int
	if len(p.Spec.ResourceClaims) > 0 {
		for _, st := range p.Status.ResourceClaimStatuses {
			c := claims[p.Namespace+"/"+ptr.Deref(st.ResourceClaimName, "")]
			if c == nil || c.Status.Allocation == nil {
				return nil
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				if g, ok := strings.CutPrefix(r.Device, "gpu-"); ok && r.Pool == p.Spec.NodeName {
					if i, err := strconv.Atoi(g); err == nil {
						out = append(out, i)
					}
				}
			}
		}
		return out
	}
	want := int(devicePluginGPUs(p))
	for g := 0; g < simGPUsPerNode && len(out) < want; g++ {
		if _, taken := b.held[p.Spec.NodeName][g]; !taken {
			out = append(out, g)
		}
	}
	return out
}

// devicePluginGPUs is how many nvidia.com/gpu the pod requests.
func devicePluginGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Requests[gpuResource]
		n += q.Value()
	}
	return n
}
