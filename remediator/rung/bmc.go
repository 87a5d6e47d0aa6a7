package rung

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
)

// A BMC reset is the one request whose answer can be lost after it took
// effect (a 5xx or a timeout after the POST), and whose repetition hurts:
// a second power cycle of a node that is booting. So it is asked in three
// writes, each confirmed before the next:
//
//  1. the BMC's state is read (redfish.Inspect): its PowerState and
//     LastResetTime before the ask;
//  2. the intent is written on the Node (v1alpha1.AnnotationMachineResetIntent:
//     the operation, the time, the node's boot ID and that BMC state),
//     under the Node's resourceVersion as read from the API server, so
//     that two remediators cannot both write one and both ask; a failed
//     write asks nothing;
//  3. the reset is posted, and its answer recorded on the Node
//     (v1alpha1.AnnotationMachineRequestedBy).
//
// A pass that finds the intent without the answer (the answer was lost,
// the process died between 2 and 3, the record failed, a new leader took
// over) reads the BMC and the Node again and lets plan.JudgeReset decide:
// record the reset as made, ask again, or hold. A reset that failed
// before its POST (redfish.Sent false) removes its intent, so the next
// pass asks at once.

// resetIntent is the value of AnnotationMachineResetIntent, JSON.
type resetIntent struct {
	// Op is the asking operation's MachineRequestMarker.
	Op string `json:"op"`
	// Time is when the intent was written; the ask follows at once.
	Time time.Time `json:"time"`
	// Asks counts this operation's asks, this one included.
	Asks int `json:"asks"`
	// BootID is the node's boot ID, PowerState and LastResetTime the
	// BMC's, when the intent was written ("" where unknown).
	BootID        string `json:"bootID,omitempty"`
	PowerState    string `json:"powerState,omitempty"`
	LastResetTime string `json:"lastResetTime,omitempty"`
}

// readIntent returns op's reset intent on the node: nil and "" when there
// is none (or it is another operation's), and why not when it does not
// parse.
func readIntent(node *corev1.Node, op *v1alpha1.NodeOperation) (*resetIntent, string) {
	raw, ok := node.Annotations[v1alpha1.AnnotationMachineResetIntent]
	if !ok {
		return nil, ""
	}
	var in resetIntent
	if err := json.Unmarshal([]byte(raw), &in); err != nil || in.Op == "" || in.Time.IsZero() {
		if err == nil {
			err = errors.New("no op or time")
		}
		if !strings.Contains(raw, v1alpha1.MachineRequestMarker(op)) {
			// Not recognisably this operation's: not its intent.
			return nil, ""
		}
		return nil, fmt.Sprintf("node %s's annotation %s does not parse: %v", node.Name, v1alpha1.AnnotationMachineResetIntent, err)
	}
	if in.Op != v1alpha1.MachineRequestMarker(op) {
		return nil, ""
	}
	return &in, ""
}

// observeBMC observes a redfish operation's BMC: the system to ask, and
// whether it was asked (the Node's answer marker), or, when only the
// intent is there, the evidence of whether it was.
func (p *Provider) observeBMC(ctx context.Context, tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation, node *corev1.Node) (plan.MachineObservation, error) {
	intent, unread := readIntent(node, op)
	req, missing, err := p.redfishRequest(ctx, tpl, node)
	if err != nil {
		return plan.MachineObservation{}, err
	}
	target := "the BMC of node " + node.Name
	if missing == "" {
		target = redfishTarget(req)
	}
	if marked(node.Annotations, op) {
		m := plan.MachineObservation{Target: target, Requested: true}
		if intent != nil {
			m.BootID = intent.BootID
		}
		return m, nil
	}
	if intent == nil && unread == "" {
		if missing != "" {
			return plan.MachineObservation{Missing: missing}, nil
		}
		return plan.MachineObservation{Target: target}, nil
	}
	// Asked, maybe: gather the evidence. Missing evidence is never a
	// reason to ask again (plan.JudgeReset).
	e := &plan.ResetEvidence{IntentUnread: unread, CallTimeout: p.timeout(), NodeBootID: node.Status.NodeInfo.BootID}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			e.NodeHeartbeat = c.LastHeartbeatTime.Time
		}
	}
	if intent != nil {
		e.Intended, e.BootID, e.PowerState, e.LastResetTime = intent.Time, intent.BootID, intent.PowerState, intent.LastResetTime
	}
	switch {
	case missing != "":
		e.BMCUnread = missing
	case unread == "":
		st, err := p.inspect(ctx, req)
		if err != nil {
			log.FromContext(ctx).Info("Reading the BMC after an ask without a recorded answer failed", "target", target, "error", err.Error())
			e.BMCUnread = err.Error()
		}
		e.BMCPowerState, e.BMCLastResetTime = st.PowerState, st.LastResetTime
	}
	return plan.MachineObservation{Target: target, Reset: e}, nil
}

// requestBMC resets the node through its BMC: the state before, the
// intent, the reset, the answer (see above).
func (p *Provider) requestBMC(ctx context.Context, tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation, node *corev1.Node) error {
	req, missing, err := p.redfishRequest(ctx, tpl, node)
	if err != nil {
		return err
	}
	if missing != "" {
		return &PermanentError{Msg: missing}
	}
	prev, unread := readIntent(node, op)
	if unread != "" {
		return fmt.Errorf("not asking the BMC of node %s: %s", node.Name, unread)
	}
	before, err := p.inspect(ctx, req)
	if err != nil {
		if redfish.Permanent(err) {
			return &PermanentError{Msg: err.Error()}
		}
		return fmt.Errorf("read the power state of node %s before asking its BMC: %w", node.Name, err)
	}
	intent := resetIntent{Op: v1alpha1.MachineRequestMarker(op), Time: p.now(), Asks: 1,
		BootID: node.Status.NodeInfo.BootID, PowerState: before.PowerState, LastResetTime: before.LastResetTime}
	if prev != nil {
		intent.Asks = prev.Asks + 1
	}
	value, err := p.writeIntent(ctx, node, intent)
	if err != nil {
		return err
	}
	reset := p.Reset
	if reset == nil {
		reset = redfish.Reset
	}
	if _, err := reset(ctx, req); err != nil {
		if redfish.Permanent(err) {
			return &PermanentError{Msg: err.Error()}
		}
		if !redfish.Sent(err) {
			// Nothing was posted: the next pass may ask at once.
			p.clearIntent(ctx, node, value)
		}
		return err
	}
	// After the BMC accepted: a failed write here leaves the intent, and
	// the next pass judges from it before it asks again.
	if err := p.markNode(ctx, node, op); err != nil {
		return &UnrecordedError{Err: err}
	}
	return nil
}

// writeIntent writes the intent on the node under its resourceVersion as
// read, and confirms it from the API server's answer; it returns the
// value written.
func (p *Provider) writeIntent(ctx context.Context, node *corev1.Node, intent resetIntent) (string, error) {
	data, err := json.Marshal(intent)
	if err != nil {
		return "", fmt.Errorf("encode the reset intent for node %s: %w", node.Name, err)
	}
	value := string(data)
	n := node.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[v1alpha1.AnnotationMachineResetIntent] = value
	if err := p.Client.Patch(ctx, n, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", fmt.Errorf("record the intent to reset node %s on its annotation %s (not asked): %w", node.Name, v1alpha1.AnnotationMachineResetIntent, err)
	}
	if got := n.Annotations[v1alpha1.AnnotationMachineResetIntent]; got != value {
		return "", fmt.Errorf("record the intent to reset node %s: the API server answered its annotation %s as %q (not asked)", node.Name, v1alpha1.AnnotationMachineResetIntent, got)
	}
	return value, nil
}

// clearIntent removes the intent written as value, unless it changed
// since; best effort: an intent left behind only makes the next pass
// judge from evidence.
func (p *Provider) clearIntent(ctx context.Context, node *corev1.Node, value string) {
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(v1alpha1.AnnotationMachineResetIntent)
	data, _ := json.Marshal([]map[string]any{{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}})
	n := &corev1.Node{}
	n.Name = node.Name
	if err := p.Client.Patch(ctx, n, client.RawPatch(types.JSONPatchType, data)); err != nil {
		log.FromContext(ctx).Info("Could not remove the reset intent of a reset never posted; the next pass judges from it", "error", err.Error())
	}
}

func (p *Provider) inspect(ctx context.Context, req redfish.Request) (redfish.SystemState, error) {
	if p.Inspect != nil {
		return p.Inspect(ctx, req)
	}
	return redfish.Inspect(ctx, req)
}

func (p *Provider) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return redfish.DefaultTimeout
}

func (p *Provider) now() time.Time {
	if p.Clock != nil {
		return p.Clock.Now()
	}
	return time.Now()
}
