package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Fault is a fault the demo can inject into a node.
type Fault struct {
	Name string
	Help string
}

// Faults lists what Inject knows, in the order `kubemedic-demo inject`
// shows them.
var Faults = []Fault{
	{"xid", "fatal Xid 46 (GPU timeout) on GPU 0: the driver asks for a GPU reset"},
	{"xid-reboot", "Xid 79 (GPU fell off the bus) on GPU 0: the driver asks for a reboot"},
	{"broken-gpu", "Xid 46 on GPU 0 of a GPU that is broken: resets fail, and the Xid returns after every reboot"},
	{"driver-reset", "a GSP fault on GPU 0 (Xid 119): every ECC counter stays 0, and the driver asks for a GPU reset (Xid 154, nvidia-smi's gpu_recovery_action)"},
	{"gpu-lost", "GPU 1 falls off the bus (Xid 79) and nvidia-smi stops listing it"},
	{"nfs", "the NFS mount /mnt/datasets disappears"},
	{"dstate", "a process of a deleted pod is stuck in D state"},
	{"replace-gpu", "a technician replaces the broken GPU: resets work again and the next reboot finds no Xid (kubemedic does not release a quarantined node; you do)"},
}

// BadRequestError is an Inject of an unknown fault or node.
type BadRequestError struct{ msg string }

func (e *BadRequestError) Error() string { return e.msg }

// xidMessage is what the xid check prints for an Xid on a bus.
func xidMessage(reason string, xid int, bus, what string) string {
	return fmt.Sprintf("%s: Xid %d on %s: %s", reason, xid, bus, what)
}

// Inject puts fault into node: on a fake-root node as the kernel, the
// driver or the mount table would show it (the real detectors find it), on
// another node as the condition NPD would set.
func (w *World) Inject(ctx context.Context, fault, node string) (string, error) {
	if !w.hasNode(node) {
		return "", &BadRequestError{fmt.Sprintf("no node %q; the nodes are %s … %s", node, w.Nodes[0], w.Nodes[len(w.Nodes)-1])}
	}
	root := w.Roots[node]
	bus := kernelBus(0)
	switch fault {
	case "xid", "broken-gpu":
		if fault == "broken-gpu" {
			w.mu.Lock()
			w.faulty[node] = true
			w.mu.Unlock()
		}
		if root != nil {
			return "kernel log: NVRM: Xid 46 on " + bus, root.Xid(0, 46, "GPU timeout")
		}
		return "condition GPUXidError=True", w.setCondition(ctx, node, v1alpha1.ConditionGPUXidError, xidMessage(v1alpha1.ReasonXidResetRequired, 46, bus, "GPU timeout"))
	case "xid-reboot":
		if root != nil {
			return "kernel log: NVRM: Xid 79 on " + bus, root.Xid(0, 79, "GPU has fallen off the bus.")
		}
		return "condition GPUXidError=True", w.setCondition(ctx, node, v1alpha1.ConditionGPUXidError, xidMessage(v1alpha1.ReasonXidRebootRequired, 79, bus, "fell off the bus"))
	case "driver-reset":
		if root != nil {
			return "kernel log: Xid 119 and Xid 154 (GPU Reset Required) on " + bus + "; nvidia-smi: gpu_recovery_action \"GPU reset\"", root.AskRecovery(0, gpuaction.GPUReset)
		}
		if err := w.setCondition(ctx, node, v1alpha1.ConditionGPUXidError, xidMessage(v1alpha1.ReasonXidResetRequired, 154, bus, "driver asks reset")); err != nil {
			return "", err
		}
		a := gpuaction.GPUReset
		return "conditions GPURecoveryRequired=True and GPUXidError=True", w.setCondition(ctx, node, v1alpha1.ConditionGPURecoveryRequired,
			fmt.Sprintf("%s: driver asks to %s: %s on %s (%s)", a.Reason(), a.Do(), a, bus, gpuUUID(node, 0)))
	case "gpu-lost":
		if root != nil {
			return "nvidia-smi lists 7 of 8 GPUs; kernel log: Xid 79", root.LoseGPU(1)
		}
		return "condition GPULost=True", w.setCondition(ctx, node, v1alpha1.ConditionGPULost, v1alpha1.ReasonGPUFellOffBus+": GPU "+kernelBus(1)+" fell off the bus (Xid 79)")
	case "nfs":
		if root != nil {
			return "mountinfo: " + nfsMountPoint + " gone", root.SetNFSMounted(false)
		}
		return "condition NFSMountUnhealthy=True", w.setCondition(ctx, node, v1alpha1.ConditionNFSMountUnhealthy, v1alpha1.ReasonMountMissing+": "+nfsMountPoint+" not mounted")
	case "dstate":
		return w.injectDState(ctx, node)
	case "replace-gpu":
		w.mu.Lock()
		broken := w.faulty[node]
		delete(w.faulty, node)
		w.mu.Unlock()
		if !broken {
			return "", &BadRequestError{fmt.Sprintf("node %s has no broken GPU (inject broken-gpu first)", node)}
		}
		// The node is powered off for the swap and boots again.
		return "GPU 0 replaced; the node booted again", w.reboot(ctx, node, false)
	}
	names := make([]string, len(Faults))
	for i, f := range Faults {
		names[i] = f.Name
	}
	return "", &BadRequestError{fmt.Sprintf("unknown fault %q; known: %s", fault, strings.Join(names, ", "))}
}

func (w *World) hasNode(node string) bool {
	for _, n := range w.Nodes {
		if n == node {
			return true
		}
	}
	return false
}

// setCondition sets a detector condition on a simulated node as NPD does
// from kubemedic-detect's output (reason KubemedicDetect, the specific
// reason first in the message).
func (w *World) setCondition(ctx context.Context, node, typ, message string) error {
	return w.Cluster.SetNodeCondition(ctx, node, corev1.NodeCondition{
		Type: corev1.NodeConditionType(typ), Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason, Message: message})
}

// injectDState runs a pod on the node, leaves one of its processes in D
// state on the node, and deletes the pod: the process outlives it, as one
// blocked on a dead NFS server or the GPU driver does.
func (w *World) injectDState(ctx context.Context, node string) (string, error) {
	pod, err := w.Cluster.CreatePod(ctx, localcluster.PodSpec{Namespace: workloadNS, NodeName: node,
		Name:        fmt.Sprintf("preprocess-%d", w.next()),
		Annotations: map[string]string{notify.AnnotationOwner: researchers[1].Email}})
	if err != nil {
		return "", err
	}
	uid := string(pod.UID)
	if err := w.Cluster.Client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return "", fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if root := w.Roots[node]; root != nil {
		return fmt.Sprintf("a python3 process in D state, from deleted pod %s/%s (uid %s)", pod.Namespace, pod.Name, uid),
			root.StuckProcess(4000+w.next(), "python3", uid)
	}
	return "condition PodProcessesStuck=True", w.setCondition(ctx, node, v1alpha1.ConditionPodProcessesStuck,
		fmt.Sprintf("%s: 1 process in D; pod %s", v1alpha1.ReasonDStateOrphans, uid))
}

// SimulatedNodes are the nodes without NPD, sorted.
func (w *World) SimulatedNodes() []string {
	out := append([]string(nil), w.Nodes[w.opts.NPDNodes:]...)
	sort.Strings(out)
	return out
}

// NPDNodes are the nodes with NPD and a fake root.
func (w *World) NPDNodes() []string { return append([]string(nil), w.Nodes[:w.opts.NPDNodes]...) }
