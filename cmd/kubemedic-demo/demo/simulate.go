package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"

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
//   - anything else: the pod Succeeded.
//
// It also ticks every fake root's uptime.
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
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
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
