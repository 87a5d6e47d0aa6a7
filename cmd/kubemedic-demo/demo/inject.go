package demo

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	{"replace-gpu", "a technician replaces the broken GPU (of broken-gpu or silent-gpu): resets work again, the next reboot finds no Xid and DCGM passes (kubemedic does not release a quarantined node; you do)"},
	{"silent-gpu", "Xid 46 on GPU 0, which a reset clears, and every passive check is clean after it; but DCGM's memory test fails GPU 0 on every run (the node must be a device-plugin node; it is labelled " + LabelFault + "=silent-gpu, which the demo's gpu-xid-reset-validated selects)"},
	{"new-node", "a new GPU node joins, registered with the taint " + v1alpha1.TaintUnvalidated + ":NoSchedule (kubelet --register-with-taints): NODE is its name, <prefix>-<NNN>, a node that does not exist yet"},
}

// LabelFault on a node names the fault the demo injected there, for the
// demo's policies that act on one story's nodes only (gpu-xid-silent.yaml).
const LabelFault = "demo.kubemedic.io/fault"

// silentGPU is the GPU of a silent-gpu node that fails DCGM's memory
// test: the one that threw the Xid.
const silentGPU = 0

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
	if fault == "new-node" {
		return w.addNode(ctx, node)
	}
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
	case "silent-gpu":
		if slices.Contains(w.DRANodes, node) {
			return "", &BadRequestError{fmt.Sprintf("node %s publishes its GPUs through DRA; silent-gpu needs a node of the device plugin, whose test pod gets every GPU", node)}
		}
		// The label first: the demo's policy must select the node before
		// the Xid makes it a target of gpu-xid-reset.
		if err := w.labelNode(ctx, node, LabelFault, fault); err != nil {
			return "", err
		}
		w.mu.Lock()
		w.silent[node] = silentGPU
		w.mu.Unlock()
		what := fmt.Sprintf("; GPU %d (%s) fails DCGM's memory test from now on, which no counter shows", silentGPU, gpuUUID(node, silentGPU))
		if root != nil {
			return "kernel log: NVRM: Xid 46 on " + bus + what, root.Xid(silentGPU, 46, "GPU timeout")
		}
		return "condition GPUXidError=True" + what, w.setCondition(ctx, node, v1alpha1.ConditionGPUXidError, xidMessage(v1alpha1.ReasonXidResetRequired, 46, bus, "GPU timeout"))
	case "replace-gpu":
		w.mu.Lock()
		_, silent := w.silent[node]
		broken := w.faulty[node] || silent
		delete(w.faulty, node)
		delete(w.silent, node)
		w.mu.Unlock()
		if !broken {
			return "", &BadRequestError{fmt.Sprintf("node %s has no broken GPU (inject broken-gpu or silent-gpu first)", node)}
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
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.Nodes, node) || slices.Contains(w.joined, node)
}

// newNodeName is what a new node may be called: localcluster's
// <prefix>-<NNN>, whose number gives its zone, rack and addresses.
var newNodeName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-([0-9]{3})$`)

// addNode plays a new GPU node of the device plugin joining the cluster,
// registered with the taint kubemedic.io/unvalidated:NoSchedule as its
// kubelet's --register-with-taints would: no pod is placed on it until the
// demo's ValidationPolicy has tested it and removed the taint. It runs no
// workload and has no NPD (a simulated node).
func (w *World) addNode(ctx context.Context, name string) (string, error) {
	m := newNodeName.FindStringSubmatch(name)
	if m == nil {
		return "", &BadRequestError{fmt.Sprintf("new-node: name the node <prefix>-<NNN>, e.g. %s, not %q", w.nextNodeName(), name)}
	}
	if w.hasNode(name) {
		return "", &BadRequestError{fmt.Sprintf("new-node: node %s exists; a new node needs a new name, e.g. %s", name, w.nextNodeName())}
	}
	start, err := strconv.Atoi(m[3])
	if err != nil {
		return "", &BadRequestError{fmt.Sprintf("new-node: %q: %v", name, err)}
	}
	nodes, err := w.Cluster.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{NamePrefix: m[1], Start: start, MIGEvery: 0,
		Labels: map[string]string{labelDevicePlugin: "true"},
		Taints: []corev1.Taint{{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule}}})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", &BadRequestError{fmt.Sprintf("new-node: node %s exists", name)}
		}
		return "", fmt.Errorf("new-node: %w", err)
	}
	w.mu.Lock()
	w.joined = append(w.joined, nodes[0].Name)
	w.bootSeq[name] = 1
	w.mu.Unlock()
	if err := setBootID(ctx, w.Cluster, name, simBootID(name, 1)); err != nil {
		return "", err
	}
	return fmt.Sprintf("node %s registered with the taint %s:NoSchedule (8 GPUs, device plugin, zone %s); nothing is scheduled on it until a GPU test passes",
		name, v1alpha1.TaintUnvalidated, nodes[0].Labels[corev1.LabelTopologyZone]), nil
}

// nextNodeName is a name no node has: the next number after the last.
func (w *World) nextNodeName() string {
	w.mu.Lock()
	n := len(w.Nodes) + len(w.joined)
	w.mu.Unlock()
	for ; ; n++ {
		name := localcluster.NodeSpec{}.NodeName(n)
		if !w.hasNode(name) {
			return name
		}
	}
}

// JoinedNodes are the nodes new-node added, in order.
func (w *World) JoinedNodes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.joined...)
}

// labelNode sets a label on a node.
func (w *World) labelNode(ctx context.Context, node, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := w.Cluster.Clientset.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s %s=%s: %w", node, key, value, err)
	}
	return nil
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
