package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// device finds the operation's GPU as a DRA device, by the UUID its
// trigger names, else by its PCI bus ID (the xid check's messages have no
// UUID; the device's uuid attribute gives it), or says why it cannot be
// excluded alone.
func (r *OperationReconciler) device(ctx context.Context, op *v1alpha1.NodeOperation) (*plan.Device, string, error) {
	g := op.Status.GPU
	switch {
	case g == nil || (g.UUID == "" && g.BusID == ""):
		return nil, "the trigger names no GPU", nil
	case !r.DRA:
		return nil, "the API server does not serve " + devicetaint.GroupVersion.String() + " DeviceTaintRule", nil
	}
	var slices resourcev1.ResourceSliceList
	if err := r.Reader.List(ctx, &slices, client.MatchingFields{"spec.nodeName": op.Spec.NodeName}); err != nil {
		return nil, "", fmt.Errorf("list ResourceSlices of node %s: %w", op.Spec.NodeName, err)
	}
	var d devicetaint.Device
	var err error
	if g.UUID != "" {
		d, err = devicetaint.Find(slices.Items, op.Spec.NodeName, g.UUID)
	} else {
		d, err = devicetaint.FindByBus(slices.Items, op.Spec.NodeName, g.BusID)
	}
	if err != nil {
		return nil, err.Error(), nil
	}
	return &plan.Device{Driver: d.Driver, Pool: d.Pool, Name: d.Name, UUID: d.UUID, Rule: devicetaint.RuleName(op.Spec.NodeName, d.UUID)}, "", nil
}

// excludeGPU applies the DeviceTaintRule of the operation's GPU.
func (r *OperationReconciler) excludeGPU(ctx context.Context, op *v1alpha1.NodeOperation, d *plan.Device) error {
	reason := "Unhealthy"
	if op.Spec.Trigger != nil && op.Spec.Trigger.Reason != "" {
		reason = op.Spec.Trigger.Reason
	}
	rule := devicetaint.Rule(devicetaint.Device{Driver: d.Driver, Pool: d.Pool, Name: d.Name}, op.Spec.NodeName, op.Status.GPU.UUID, op.Name, reason)
	if op.Status.Phase == v1alpha1.PhaseSkipped {
		// Excluded at the per-GPU attempt cap: for good, not until the
		// next repair of the node.
		rule.Annotations[devicetaint.AnnotationPermanent] = op.Name
	}
	return devicetaint.Apply(ctx, r.Client, r.Reader, rule)
}

// includeGPU removes the DeviceTaintRule of the operation's GPU after a
// verified repair; none is fine.
func (r *OperationReconciler) includeGPU(ctx context.Context, op *v1alpha1.NodeOperation) error {
	if !r.DRA || op.Status.GPU == nil || op.Status.GPU.UUID == "" {
		return nil
	}
	removed, err := devicetaint.Remove(ctx, r.Client, r.Reader, op.Spec.NodeName, op.Status.GPU.UUID)
	if err == nil && !removed {
		log.FromContext(ctx).Info("Keeping the GPU's DeviceTaintRule: it excludes the GPU for good (per-GPU attempt cap); a human removes it", "gpu", op.Status.GPU.UUID)
	}
	return err
}

// xidRe finds an Xid number in a condition message ("Xid 79", "Xid: 79").
var xidRe = regexp.MustCompile(`\bXid:? ?\(?(\d{1,5})\b`)

// historyEntry is what a transition adds to the node's GPU history: the
// fault when an operation leaves Pending with a trigger (timed at the
// condition's transition, so that every step of one episode records one
// fault), the operation when it finishes (dry runs changed nothing and are
// not recorded). ok is false when there is nothing to record.
func historyEntry(before v1alpha1.NodeOperationPhase, op *v1alpha1.NodeOperation, st v1alpha1.NodeOperationStatus) (gpuwire.Entry, bool) {
	var e gpuwire.Entry
	if st.GPU != nil {
		e.UUID, e.Bus = st.GPU.UUID, st.GPU.BusID
	}
	switch {
	case (before == "" || before == v1alpha1.PhasePending) && st.Phase == v1alpha1.PhaseWaitingForBudget && op.Spec.Trigger != nil:
		tr := op.Spec.Trigger
		f := &gpuwire.Fault{Condition: tr.Type, Reason: tr.Reason}
		if m := xidRe.FindStringSubmatch(tr.Message); m != nil {
			f.Xid, _ = strconv.Atoi(m[1])
		}
		if tr.Type == v1alpha1.ConditionGPUMemoryUnhealthy {
			f.ECC = tr.Reason
		}
		e.Time, e.Fault = tr.LastTransitionTime.Time, f
		return e, true
	case !before.Finished() && st.Phase.Finished() && !op.Spec.DryRun && !op.Spec.Quarantine:
		step := 0
		if s, err := strconv.Atoi(op.Labels[v1alpha1.LabelStepIndex]); err == nil {
			step = s
		}
		e.Time = st.CompletionTime.Time
		e.Operation = &gpuwire.Operation{Name: op.Name, Policy: op.Spec.Policy, Step: step, Operation: op.Spec.Operation, Outcome: gpuwire.Outcome(st.Phase)}
		return e, true
	}
	return e, false
}

// validationFaults are the faults a failed GPU test adds to the node's GPU
// history, one per GPU it failed, timed at the test's end: they count
// toward the per-GPU attempt cap like a detector's fault.
func validationFaults(before v1alpha1.NodeOperationPhase, st v1alpha1.NodeOperationStatus) []gpuwire.Entry {
	v := st.Validation
	if before != v1alpha1.PhaseValidating || st.Phase != v1alpha1.PhaseFailed || v == nil || v.CompletionTime == nil {
		return nil
	}
	return testFaults(v)
}

// testFaults are a failed test's faults for the GPU history, one per GPU
// it failed, timed at the test's end.
func testFaults(v *v1alpha1.ValidationStatus) []gpuwire.Entry {
	if v == nil || v.CompletionTime == nil {
		return nil
	}
	var out []gpuwire.Entry
	for _, uuid := range plan.FailingGPUs(v) {
		out = append(out, gpuwire.Entry{Time: v.CompletionTime.Time, UUID: gpuwire.NormalizeUUID(uuid),
			Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUValidationFailed, Reason: v1alpha1.ValidationFailedReason(v.Test)}})
	}
	return out
}

// recordHistory adds the transition's entries to the node's GPU history
// annotation before the status that records the transition is written: a
// failed write fails the pass, which is retried, and an entry already there
// (a retried pass) is not added twice. An annotation that does not parse is
// left alone and the failure logged: evidence is never overwritten.
func (r *OperationReconciler) recordHistory(ctx context.Context, before v1alpha1.NodeOperationPhase, op *v1alpha1.NodeOperation, st v1alpha1.NodeOperationStatus) error {
	var entries []gpuwire.Entry
	if e, ok := historyEntry(before, op, st); ok {
		entries = append(entries, e)
	}
	entries = append(entries, validationFaults(before, st)...)
	return addGPUHistory(ctx, r.Client, r.Reader, r.Clock.Now(), op.Spec.NodeName, entries)
}

// addGPUHistory adds entries to the node's GPU history annotation, each
// once. An annotation that does not parse is left alone and the failure
// logged: evidence is never overwritten. A node that is gone has none.
func addGPUHistory(ctx context.Context, c client.Client, reader client.Reader, now time.Time, node string, entries []gpuwire.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := reader.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("get node %s for its GPU history: %w", node, err)
		}
		h, err := gpuwire.Parse(n.Annotations[gpuwire.Annotation])
		if err != nil {
			log.FromContext(ctx).Error(err, "Not recording the GPU history: the node's annotation does not parse; fix or remove it", "annotation", gpuwire.Annotation, "entries", entries)
			return nil
		}
		added := false
		for _, e := range entries {
			if !gpuhistory.Has(h, e) {
				h, added = gpuhistory.Add(h, e, now), true
			}
		}
		if !added {
			return nil
		}
		enc, err := h.Encode()
		if err != nil {
			return fmt.Errorf("encode the GPU history of node %s: %w", n.Name, err)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": n.ResourceVersion,
			"annotations":     map[string]string{gpuwire.Annotation: enc},
		}})
		if err := c.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("record the GPU history of node %s: %w", n.Name, err)
		}
		return nil
	})
}
