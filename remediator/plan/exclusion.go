package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// GPU exclusion: an operation scoped to one GPU taints that GPU through a
// DeviceTaintRule instead of cordoning the node, so the node keeps serving
// its other GPUs.

// Device is the DRA device of the operation's GPU, found in a
// ResourceSlice on the node by its UUID, or by its PCI bus ID when the
// trigger names no UUID.
type Device struct {
	Driver, Pool, Name string
	// UUID is the GPU's, from the device's uuid attribute: the
	// operation's status records it when the trigger named the bus only.
	UUID string
	// Rule is the DeviceTaintRule's name for it.
	Rule string
}

func (d Device) String() string { return d.Driver + "/" + d.Pool + "/" + d.Name }

// gpuScoped reports whether the operation acts on one GPU the trigger names
// by UUID or bus ID: it is not a quarantine, it does not drain (a drain
// empties the whole node, and on a node left schedulable the evicted pods'
// controllers would place them back while the drain chases them), and its
// template (read in Cordoning) does not reboot, power-cycle or replace the
// node, and it has no validation (whose test takes every GPU of the node,
// which must not serve before the test passes).
func (t *transition) gpuScoped() bool {
	op := t.in.Op
	g := op.Status.GPU
	return !op.Spec.Quarantine && op.Spec.Drain == nil && op.Spec.Validate == nil && g != nil && (g.UUID != "" || g.BusID != "") && !NodeWide(t.in.Template)
}

// whyNotGPU says why an operation that is not gpuScoped cordons the node.
func (t *transition) whyNotGPU() string {
	g := t.in.Op.Status.GPU
	switch {
	case NodeWide(t.in.Template):
		return "the operation acts on the whole node"
	case t.in.Op.Spec.Drain != nil:
		return "the step drains the node, which must not take new pods meanwhile"
	case t.in.Op.Spec.Validate != nil:
		return "the step tests every GPU of the node (" + t.in.Op.Spec.Validate.Operation + ") before it serves again"
	case g == nil || (g.UUID == "" && g.BusID == ""):
		return "the trigger names no GPU"
	}
	return "the operation is not scoped to one GPU"
}

// NodeWide reports whether a template acts on the whole node (a reboot,
// a power cycle, a machine replacement), so that excluding one GPU instead
// of cordoning would let pods land on a node about to go down. A missing
// template counts as node-wide.
func NodeWide(tpl *v1alpha1.NodeOperationTemplate) bool {
	if tpl == nil {
		return true
	}
	switch tpl.Spec.SuccessCriterion {
	case v1alpha1.SuccessNodeRebooted, v1alpha1.SuccessMachineReplaced:
		return true
	}
	return tpl.Spec.MachineKind() != ""
}

// excludeGPU taints the operation's GPU (AdvanceInput.Device) through a
// DeviceTaintRule instead of cordoning the node.
func (t *transition) excludeGPU(msg string) {
	d := t.in.Device
	t.Effect = EffectExcludeGPU
	uuid := d.UUID
	if g := t.Status.GPU; g != nil && g.UUID != "" {
		uuid = g.UUID
	} else if g != nil {
		// Found by its bus ID: the GPU is known by UUID from now on (the
		// rule, its removal, the history). A copy: the input is not
		// changed.
		named := *g
		named.UUID = d.UUID
		t.Status.GPU = &named
	}
	t.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: d.Rule, Device: d.String(), Message: Truncate(msg, maxMessage)}
	t.cond(v1alpha1.OperationCordoned, metav1.ConditionFalse, v1alpha1.ReasonGPUExcluded, fmt.Sprintf("GPU %s (%s) excluded by DeviceTaintRule %s (NoSchedule); the node is not cordoned", uuid, d, d.Rule))
	t.emit(corev1.EventTypeNormal, v1alpha1.ReasonGPUExcluded, "Exclude", fmt.Sprintf("GPU %s excluded by DeviceTaintRule %s; the node stays schedulable", uuid, d.Rule))
}
