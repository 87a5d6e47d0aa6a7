package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Hardware is what `kubemedic status --hardware` shows, and its -o json|yaml
// output: the RMA list. The field names are stable: scripts read them.
// Lists are never null, and times are RFC 3339 in UTC.
type Hardware struct {
	// Time is the time the list describes (--now, or the time of reading).
	Time metav1.Time `json:"time"`
	// Server is the API server's address.
	Server string `json:"server"`
	// Window is --window: FailuresInWindow counts the failures in the
	// window before Time.
	Window metav1.Duration `json:"window"`
	// Attention lists why the exit status is 1: each node whose
	// kubemedic.io/gpu-history annotation does not parse. Empty when the
	// exit status is 0.
	Attention []string `json:"attention"`
	// GPUs are the GPUs (and node-wide groups) of every node with the
	// annotation, worst first: unreadable histories, then by
	// FailuresInWindow, then Faults, each most first; then by node and
	// gpuhistory.Summary's order.
	GPUs []GPUHardware `json:"gpus"`
}

// GPU names of the rows that are not one GPU.
const (
	// GPUNodeWide is the row of the entries that name no GPU (a reboot, a
	// fault without a bus ID or UUID).
	GPUNodeWide = "node"
	// GPUUnreadable is the row of a node whose history does not parse.
	GPUUnreadable = "?"
)

// GPUHardware is one GPU's history on one node, from gpuhistory.Summary.
type GPUHardware struct {
	Node string `json:"node"`
	// GPU identifies the GPU as gpuhistory does: its UUID when known, else
	// its PCI bus ID; GPUNodeWide for node-wide entries, GPUUnreadable for
	// a history that does not parse.
	GPU string `json:"gpu"`
	// UUID is the GPU's UUID; empty when no entry names it.
	UUID string `json:"uuid,omitempty"`
	// Bus is the last PCI bus ID the GPU was seen at.
	Bus string `json:"bus,omitempty"`
	// Quarantined: the node has the kubemedic.io/quarantined taint.
	Quarantined bool `json:"quarantined"`
	// Faults counts the fault entries kept in the history (at most
	// gpuwire.MaxEntries entries are kept per node, the oldest dropped).
	Faults int `json:"faults"`
	// FailuresInWindow counts the faults and the Failed operations in the
	// window, as the per-GPU attempt cap counts them
	// (gpuhistory.FailuresInWindow with the UUID and last bus ID). For the
	// node-wide row it counts the node-wide entries the same way.
	FailuresInWindow int `json:"failuresInWindow"`
	// LastFault and LastOperation are the latest such entries; absent when
	// there are none.
	LastFault     *HardwareFault     `json:"lastFault,omitempty"`
	LastOperation *HardwareOperation `json:"lastOperation,omitempty"`
	// Bundles are the diagnostics bundles kubemedic kept before repairing
	// this GPU (operations whose status names it; the node-wide row has
	// those that name none), oldest first: the evidence for an RMA ticket.
	Bundles []HardwareBundle `json:"bundles,omitempty"`
	// Notes is what more is known about the GPU: for an unreadable
	// history, the parse error naming the node and the annotation; else its
	// memory banks without spare rows, as the gpu-memory check reports them
	// in the node's GPUMemoryUnhealthy message. Empty otherwise.
	Notes string `json:"notes"`
}

// HardwareBundle is one diagnostics bundle: `kubemedic diag get
// <operation>` downloads it.
type HardwareBundle struct {
	Operation string      `json:"operation"`
	Time      metav1.Time `json:"time"`
	Key       string      `json:"key"`
	SHA256    string      `json:"sha256"`
	// Stored: in the store; false: still in the node's spool.
	Stored bool `json:"stored"`
}

// HardwareFault is a fault entry of the history.
type HardwareFault struct {
	Time metav1.Time `json:"time"`
	// Condition is the Node condition type, e.g. GPUXidError.
	Condition string `json:"condition"`
	// Reason is the effective reason, e.g. XidResetRequired.
	Reason string `json:"reason,omitempty"`
	// Xid is the Xid number; absent when unknown or not an Xid fault.
	Xid int `json:"xid,omitempty"`
	// ECC is the ECC kind (e.g. VolatileDBE, RowRemapFailed) when known.
	ECC string `json:"ecc,omitempty"`
}

// HardwareOperation is an operation entry of the history: a NodeOperation
// that ended.
type HardwareOperation struct {
	// Time is when the operation ended.
	Time metav1.Time `json:"time"`
	// Name is the NodeOperation's name (it may have been deleted since).
	Name string `json:"name"`
	// Policy is the RemediationPolicy that created it; absent for a manual one.
	Policy string `json:"policy,omitempty"`
	// Step is the index of its step in the policy's ladder.
	Step int `json:"step,omitempty"`
	// Operation is the operation run, e.g. reset-gpu.
	Operation string          `json:"operation"`
	Outcome   gpuwire.Outcome `json:"outcome"`
}

// buildHardware lists the GPU histories of the nodes at now, worst first
// (see Hardware.GPUs). It is pure and does not change in; only in.Server
// and in.Nodes are read.
func buildHardware(in statusInput, window time.Duration, now time.Time) Hardware {
	hw := Hardware{Time: metav1.NewTime(now.UTC().Truncate(time.Second)), Server: in.Server,
		Window: metav1.Duration{Duration: window}, Attention: []string{}, GPUs: []GPUHardware{}}
	if in.OpsErr != nil {
		hw.Attention = append(hw.Attention, "diagnostics bundles unknown: "+in.OpsErr.Error())
	}
	nodes := slices.Clone(in.Nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for i := range nodes {
		n := &nodes[i]
		raw, ok := n.Annotations[gpuwire.Annotation]
		spare, hasSpare := spareRowsOf(n)
		if !ok && !hasSpare {
			continue
		}
		quarantined := plan.Quarantined(n)
		if !ok {
			hw.GPUs = append(hw.GPUs, spareRowsOnly(n.Name, quarantined, spare))
			continue
		}
		h, err := gpuwire.Parse(raw)
		if err != nil {
			// Lost evidence must be loud: the node is listed and the exit
			// status is 1.
			note := fmt.Sprintf("node %s: unreadable GPU history: %v", n.Name, err)
			hw.Attention = append(hw.Attention, note)
			hw.GPUs = append(hw.GPUs, GPUHardware{Node: n.Name, GPU: GPUUnreadable, Quarantined: quarantined, Notes: note})
			continue
		}
		noted := !hasSpare
		for _, s := range gpuhistory.Summary(h) {
			g := GPUHardware{Node: n.Name, UUID: s.GPU.UUID, Bus: s.GPU.Bus, Quarantined: quarantined, Faults: s.Faults,
				GPU: cmp.Or(s.GPU.UUID, s.GPU.Bus, GPUNodeWide)}
			if g.GPU == GPUNodeWide {
				g.FailuresInWindow = nodeWideFailures(h, window, now)
			} else {
				g.FailuresInWindow = gpuhistory.FailuresInWindow(h, s.GPU, window, now)
			}
			if e := s.LastFault; e != nil {
				g.LastFault = &HardwareFault{Time: metav1.NewTime(e.Time), Condition: e.Fault.Condition, Reason: e.Fault.Reason,
					Xid: e.Fault.Xid, ECC: e.Fault.ECC}
			}
			if e := s.LastOperation; e != nil {
				o := e.Operation
				g.LastOperation = &HardwareOperation{Time: metav1.NewTime(e.Time), Name: o.Name, Policy: o.Policy, Step: o.Step,
					Operation: o.Operation, Outcome: o.Outcome}
			}
			g.Bundles = bundlesOf(in.Ops, n.Name, g)
			if !noted && (spare.UUID != "" && g.UUID == spare.UUID || spare.UUID == "" && g.Bus == spare.Bus) {
				g.Notes, noted = spareRowsNote(spare), true
			}
			hw.GPUs = append(hw.GPUs, g)
		}
		if !noted {
			hw.GPUs = append(hw.GPUs, spareRowsOnly(n.Name, quarantined, spare))
		}
	}
	// Stable: ties keep the node order and Summary's order within a node.
	slices.SortStableFunc(hw.GPUs, func(a, b GPUHardware) int {
		return cmp.Or(
			-cmp.Compare(unreadable(a), unreadable(b)),
			-cmp.Compare(a.FailuresInWindow, b.FailuresInWindow),
			-cmp.Compare(a.Faults, b.Faults),
			cmp.Compare(a.Node, b.Node))
	})
	return hw
}

// bundlesOf are the node's bundles of operations on g: those whose GPU
// is g's (by UUID, else bus ID), or for the node-wide row those that name
// no GPU; oldest first.
func bundlesOf(ops []v1alpha1.NodeOperation, node string, g GPUHardware) []HardwareBundle {
	var out []HardwareBundle
	for i := range ops {
		op := &ops[i]
		d := op.Status.Diagnostics
		if op.Spec.NodeName != node || d == nil || d.Bundle == nil {
			continue
		}
		t := op.Status.GPU
		switch {
		case g.GPU == GPUNodeWide:
			if t != nil && (t.UUID != "" || t.BusID != "") {
				continue
			}
		case t == nil:
			continue
		case g.UUID != "" && t.UUID != "":
			if !strings.EqualFold(t.UUID, g.UUID) {
				continue
			}
		case t.BusID == "" || !strings.EqualFold(t.BusID, g.Bus):
			continue
		}
		b := HardwareBundle{Operation: op.Name, Key: d.Bundle.Key, SHA256: d.Bundle.SHA256, Stored: d.Bundle.Stored}
		if d.CompletionTime != nil {
			b.Time = *d.CompletionTime
		}
		out = append(out, b)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(&out[j].Time) })
	return out
}

// evidence is the table's EVIDENCE cell: how many bundles, and the newest.
func evidence(bs []HardwareBundle) string {
	switch len(bs) {
	case 0:
		return "-"
	case 1:
		return "1 bundle: " + bs[0].Operation
	}
	return fmt.Sprintf("%d bundles, newest: %s", len(bs), bs[len(bs)-1].Operation)
}

// spareRowsOf reads the gpu-memory check's note of banks without spare
// rows from the node's GPUMemoryUnhealthy condition, whatever its status.
func spareRowsOf(n *corev1.Node) (gpuwire.SpareRows, bool) {
	for _, c := range n.Status.Conditions {
		if string(c.Type) == v1alpha1.ConditionGPUMemoryUnhealthy {
			return gpuwire.ParseSpareRows(c.Message)
		}
	}
	return gpuwire.SpareRows{}, false
}

func spareRowsNote(s gpuwire.SpareRows) string {
	note := fmt.Sprintf("%d banks without spare rows: the next uncorrectable error there is a remap failure", s.Banks)
	if s.More > 0 {
		note += fmt.Sprintf(" (%d more GPUs of the node have such banks; kubectl describe node)", s.More)
	}
	return note
}

// spareRowsOnly is the line of a GPU the history does not name, shown for
// its banks without spare rows.
func spareRowsOnly(node string, quarantined bool, s gpuwire.SpareRows) GPUHardware {
	return GPUHardware{Node: node, GPU: cmp.Or(s.UUID, s.Bus), UUID: s.UUID, Bus: s.Bus, Quarantined: quarantined, Notes: spareRowsNote(s)}
}

func unreadable(g GPUHardware) int {
	if g.GPU == GPUUnreadable {
		return 1
	}
	return 0
}

// nodeWideFailures counts the node-wide entries (no bus ID, no UUID) in the
// window before now as gpuhistory.FailuresInWindow counts a GPU's: faults
// and Failed operations less than window old. FailuresInWindow itself
// matches no entry for the node-wide key.
func nodeWideFailures(h gpuwire.History, window time.Duration, now time.Time) int {
	n := 0
	for _, e := range h.Entries {
		if e.Bus != "" || e.UUID != "" || now.Sub(e.Time) >= window {
			continue
		}
		if e.Fault != nil || (e.Operation != nil && e.Operation.Outcome == gpuwire.Failed) {
			n++
		}
	}
	return n
}

// readHardware lists the nodes, all --hardware reads: the history is a
// node annotation, and the quarantine a node taint.
func readHardware(ctx context.Context, c client.Reader, host string) (statusInput, error) {
	in := statusInput{Server: host}
	var nl corev1.NodeList
	if err := c.List(ctx, &nl); err != nil {
		return in, fmt.Errorf("%s: %w", host, listError("nodes", err))
	}
	in.Nodes = nl.Items
	var ops v1alpha1.NodeOperationList
	if err := c.List(ctx, &ops); err != nil {
		// The bundles are extra evidence: without them the RMA list still
		// stands, and says the bundles are unknown.
		in.OpsErr = fmt.Errorf("%s: %w", host, listError("nodeoperations", err))
		return in, nil
	}
	in.Ops = ops.Items
	return in, nil
}

// showHardware reads the nodes once and writes the RMA list; code is the
// exit status it calls for.
func showHardware(ctx context.Context, read func(context.Context) (statusInput, error), clk clock.PassiveClock,
	output string, window time.Duration, w io.Writer) (code int, err error) {
	in, err := read(ctx)
	if err != nil {
		return ExitInvalid, err
	}
	hw := buildHardware(in, window, clk.Now())
	if err := writeOutput(w, output, hw, func() { printHardware(w, hw) }); err != nil {
		return ExitInvalid, err
	}
	if len(hw.Attention) > 0 {
		return ExitInvalid, nil
	}
	return ExitOK, nil
}

// printHardware writes the RMA list as one table.
func printHardware(w io.Writer, hw Hardware) {
	now := hw.Time.Time
	win := duration.HumanDuration(hw.Window.Duration)
	fmt.Fprintf(w, "kubemedic status --hardware of %s at %s\n", hw.Server, now.Format(time.RFC3339))
	if len(hw.Attention) > 0 {
		fmt.Fprintf(w, "ATTENTION (%d):\n", len(hw.Attention))
		for _, a := range hw.Attention {
			fmt.Fprintf(w, "  %s\n", cut(a, 2*statusMessageWidth))
		}
	}
	if len(hw.GPUs) == 0 {
		fmt.Fprintf(w, "No node has a GPU history (the %s annotation, which the remediator writes).\n", gpuwire.Annotation)
		return
	}
	nodes := map[string]bool{}
	for _, g := range hw.GPUs {
		nodes[g.Node] = true
	}
	fmt.Fprintf(w, "\nGPU history (%d rows, %d nodes), worst first: failures in the last %s, then faults\n", len(hw.GPUs), len(nodes), win)
	tw := newTable(w)
	fmt.Fprintf(tw, "  NODE\tGPU\tBUS\tQUARANTINED\tFAULTS\tFAILURES/%s\tLAST FAULT\tLAST OPERATION\tEVIDENCE\tNOTES\n", win)
	for _, g := range hw.GPUs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", g.Node, g.GPU, dash(g.Bus), yesNo(g.Quarantined), g.Faults, g.FailuresInWindow,
			lastFault(now, g.LastFault), lastOperation(now, g.LastOperation), evidence(g.Bundles), dash(cut(g.Notes, statusMessageWidth)))
	}
	_ = tw.Flush()
}

// lastFault is "GPUXidError/XidResetRequired Xid 48, 2h ago".
func lastFault(now time.Time, f *HardwareFault) string {
	if f == nil {
		return "-"
	}
	s := f.Condition
	if f.Reason != "" {
		s += "/" + f.Reason
	}
	if f.Xid != 0 {
		s += fmt.Sprintf(" Xid %d", f.Xid)
	}
	if f.ECC != "" {
		s += " ECC " + f.ECC
	}
	return s + ", " + relTime(now, f.Time)
}

// lastOperation is "reset-gpu Failed (xid.gpu-a-1), 2h ago".
func lastOperation(now time.Time, o *HardwareOperation) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s (%s), %s", o.Operation, o.Outcome, o.Name, relTime(now, o.Time))
}

// relTime is "2h ago", or "in 5m" for a time after now (a writer's clock ahead).
func relTime(now time.Time, t metav1.Time) string {
	if d := now.Sub(t.Time); d >= 0 {
		return duration.HumanDuration(d) + " ago"
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}
