package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

// Verdict is what admission decided for a waiting operation.
type Verdict int

const (
	// Wait: a limit holds the operation in WaitingForBudget for now.
	Wait Verdict = iota
	// Start: every limit passed; the operation may start.
	Start
	// Skip: the operation must never run (phase Skipped).
	Skip
)

func (v Verdict) String() string {
	return [...]string{"Wait", "Start", "Skip"}[v]
}

// AdmitInput is the state an admission decides from, as read from the API
// server. Objects are shared with the caller's cache and must not be changed.
type AdmitInput struct {
	Op *v1alpha1.NodeOperation
	// Node is the target node; nil when it does not exist.
	Node *corev1.Node
	// Policies are every valid policy.
	Policies []*Policy
	Nodes    []*corev1.Node
	Ops      []*v1alpha1.NodeOperation
	// Reserved are operations admitted in the ledger whose phase may not
	// show it yet; they count as running.
	Reserved map[string]bool
	Now      time.Time
}

// Admission is the decision for one operation.
type Admission struct {
	Verdict Verdict
	// Reason is a constant of v1alpha1 (MaxConcurrent, BreakerOpen, ...).
	Reason string
	// Message names the limit and the numbers.
	Message string
	// Quarantine: the node must be quarantined (attempt cap reached).
	Quarantine bool
	// ExcludeGPU: the operation's GPU reached the per-GPU cap; it is
	// excluded by a DeviceTaintRule, or the node quarantined where that
	// cannot be done.
	ExcludeGPU bool
	// Next is when a waiting operation should be looked at again even if
	// nothing changes (a window opens, a cooldown ends); zero: on change only.
	Next time.Time
}

// Running reports whether an operation holds a budget slot: it has started
// and not finished, or the ledger reserved it.
func Running(op *v1alpha1.NodeOperation, reserved map[string]bool) bool {
	switch op.Status.Phase {
	case v1alpha1.PhaseCordoning, v1alpha1.PhaseCapturing, v1alpha1.PhaseDraining, v1alpha1.PhaseRunning, v1alpha1.PhaseVerifying, v1alpha1.PhaseValidating:
		return true
	}
	return reserved[op.Name] && !op.Status.Phase.Finished()
}

// Admit decides whether a waiting operation may start now.
//
// The operation is held to the limits of its policy, or, for a manual
// operation, of every policy that selects the node. An operation counts
// against every policy that selects its node, whoever created it: budgets
// bound the disruption of a set of nodes, not the work of one policy.
//
// Order: things that mean "never" (node gone, policy gone, opted out, attempt
// cap) come first, then the limits that mean "later", the first of which
// names the reason.
func Admit(in AdmitInput) Admission {
	op := in.Op
	if in.Node == nil {
		return Admission{Verdict: Skip, Reason: v1alpha1.ReasonNodeNotFound, Message: fmt.Sprintf("node %s does not exist", op.Spec.NodeName)}
	}
	var governing []*Policy
	if op.Spec.Policy != "" {
		for _, p := range in.Policies {
			if p.Name() == op.Spec.Policy {
				governing = []*Policy{p}
			}
		}
		if governing == nil {
			return Admission{Verdict: Skip, Reason: v1alpha1.ReasonPolicyNotFound, Message: fmt.Sprintf("policy %s does not exist or is invalid", op.Spec.Policy)}
		}
		if OptedOut(in.Node) {
			return Admission{Verdict: Skip, Reason: v1alpha1.ReasonOptedOut, Message: fmt.Sprintf("node %s has the label %s=%s", in.Node.Name, v1alpha1.LabelRemediation, v1alpha1.RemediationDisabled)}
		}
	} else {
		for _, p := range in.Policies {
			if p.Selects(in.Node) {
				governing = append(governing, p)
			}
		}
	}
	sort.Slice(governing, func(i, j int) bool { return governing[i].Name() < governing[j].Name() })

	onNode := opsByNode(in.Ops)[op.Spec.NodeName]
	if !op.Spec.Quarantine {
		for _, p := range governing {
			if a, capped := gpuAttemptCap(p, op, in.Node, in.Now); capped {
				return a
			}
			if a, capped := attemptCap(p, op, onNode, in.Now); capped {
				return a
			}
		}
	}

	var waits []Admission
	for _, other := range onNode {
		if other.Name != op.Name && Running(other, in.Reserved) {
			waits = append(waits, Admission{Reason: v1alpha1.ReasonNodeBusy, Message: fmt.Sprintf("operation %s is %s on the node", other.Name, phaseOf(other))})
			break
		}
	}
	for _, p := range governing {
		name := "policy " + p.Name() + ": "
		if p.Obj.Spec.Paused && op.Spec.Policy != "" {
			waits = append(waits, Admission{Reason: v1alpha1.ReasonPaused, Message: name + "paused"})
		}
		if open, msg := BreakerOpen(p.Obj); open {
			waits = append(waits, Admission{Reason: v1alpha1.ReasonBreakerOpen, Message: name + "circuit breaker open: " + msg})
		}
		if op.Spec.Quarantine {
			continue
		}
		if a, ok := cooldown(p, op, onNode, in.Now); ok {
			waits = append(waits, a)
		}
		if !op.Spec.Urgent {
			if p.windowErr != nil {
				waits = append(waits, Admission{Reason: v1alpha1.ReasonOutsideWindow, Message: name + "cannot read the maintenance windows, so none opens: " + p.windowErr.Error()})
			} else if open, next := InWindow(p.windows, in.Now); !open {
				waits = append(waits, Admission{Reason: v1alpha1.ReasonOutsideWindow, Next: next,
					Message: fmt.Sprintf("%soutside the maintenance windows; the next opens at %s", name, next.UTC().Format(time.RFC3339))})
			}
		}
		waits = append(waits, budgets(p, in)...)
	}
	if len(waits) == 0 {
		return Admission{Verdict: Start, Message: "every safety limit passed"}
	}
	first := waits[0]
	first.Verdict = Wait
	for _, w := range waits[1:] {
		if !w.Next.IsZero() && (first.Next.IsZero() || w.Next.After(first.Next)) {
			// Looking again before every timed limit has passed is wasted work.
			first.Next = w.Next
		}
	}
	if len(waits) > 1 {
		first.Message += fmt.Sprintf(" (and %d more limits)", len(waits)-1)
	}
	return first
}

// attemptCap is the Skip for an operation past its policy's attempt cap:
// operations on the node that started within the window, of any policy.
func attemptCap(p *Policy, op *v1alpha1.NodeOperation, onNode []*v1alpha1.NodeOperation, now time.Time) (Admission, bool) {
	c := p.Obj.Spec.Safety.AttemptCap
	if c == nil {
		return Admission{}, false
	}
	window := 24 * time.Hour
	if c.Window != nil {
		window = c.Window.Duration
	}
	var in []string
	for _, o := range onNode {
		if o.Name == op.Name || o.Spec.DryRun || o.Spec.Quarantine || o.Status.StartTime == nil {
			continue
		}
		if now.Sub(o.Status.StartTime.Time) < window {
			in = append(in, o.Name)
		}
	}
	if len(in) < int(c.MaxAttempts) {
		return Admission{}, false
	}
	sort.Strings(in)
	return Admission{
		Verdict:    Skip,
		Reason:     v1alpha1.ReasonAttemptCapReached,
		Quarantine: true,
		Message: fmt.Sprintf("policy %s: %d operations on the node in the last %s (attemptCap %d): %s; quarantining",
			p.Name(), len(in), window, c.MaxAttempts, strings.Join(in, ", ")),
	}, true
}

// gpuAttemptCap is the Skip for an operation whose GPU reached its
// policy's maxFailuresPerGPU: faults of that GPU (by UUID, else bus ID) in
// the node's GPU history within the window, the one that triggered this
// operation included once it is recorded. A history that cannot be read is
// no evidence that the GPU is fine: the cap counts as reached.
func gpuAttemptCap(p *Policy, op *v1alpha1.NodeOperation, node *corev1.Node, now time.Time) (Admission, bool) {
	c := p.Obj.Spec.Safety.AttemptCap
	g := op.Status.GPU
	if c == nil || c.MaxFailuresPerGPU == nil || g == nil {
		return Admission{}, false
	}
	window := 24 * time.Hour
	if c.Window != nil {
		window = c.Window.Duration
	}
	key := gpuwire.GPUKey{UUID: g.UUID, Bus: g.BusID}
	h, err := gpuwire.Parse(node.Annotations[gpuwire.Annotation])
	if err != nil {
		return Admission{Verdict: Skip, Reason: v1alpha1.ReasonGPUAttemptCapReached, ExcludeGPU: true,
			Message: fmt.Sprintf("policy %s: cannot read node %s's GPU history (annotation %s) to count GPU %s's faults: %v", p.Name(), node.Name, gpuwire.Annotation, key, err)}, true
	}
	if tr := op.Spec.Trigger; tr != nil {
		// This operation's own fault counts, whether or not the history
		// write that records it is in the node object read.
		own := gpuwire.Entry{Time: tr.LastTransitionTime.Time, UUID: g.UUID, Bus: g.BusID, Fault: &gpuwire.Fault{Condition: tr.Type}}
		if !gpuhistory.Has(h, own) {
			h = gpuhistory.Add(h, own, now)
		}
	}
	n := gpuhistory.FaultsInWindow(h, key, window, now)
	if n < int(*c.MaxFailuresPerGPU) {
		return Admission{}, false
	}
	return Admission{Verdict: Skip, Reason: v1alpha1.ReasonGPUAttemptCapReached, ExcludeGPU: true,
		Message: fmt.Sprintf("policy %s: GPU %s had %d faults in the last %s (attemptCap.maxFailuresPerGPU %d); excluding it instead of operating again",
			p.Name(), key, n, window, *c.MaxFailuresPerGPU)}, true
}

// cooldown holds an operation while the node's last operation ended less than
// nodeCooldown ago. The next step of the same episode is not held: an
// escalation must not wait out the cooldown of the step that failed.
func cooldown(p *Policy, op *v1alpha1.NodeOperation, onNode []*v1alpha1.NodeOperation, now time.Time) (Admission, bool) {
	d := p.Obj.Spec.Safety.NodeCooldown
	if d == nil || d.Duration <= 0 {
		return Admission{}, false
	}
	var last *v1alpha1.NodeOperation
	for _, o := range onNode {
		if o.Name == op.Name || o.Status.StartTime == nil || o.Status.CompletionTime == nil || o.Spec.DryRun {
			continue
		}
		if last == nil || o.Status.CompletionTime.After(last.Status.CompletionTime.Time) {
			last = o
		}
	}
	if last == nil || sameEpisode(last, op) {
		return Admission{}, false
	}
	until := last.Status.CompletionTime.Add(d.Duration)
	if !now.Before(until) {
		return Admission{}, false
	}
	return Admission{Reason: v1alpha1.ReasonNodeCooldown, Next: until,
		Message: fmt.Sprintf("policy %s: node cooldown of %s after operation %s, until %s", p.Name(), d.Duration, last.Name, until.UTC().Format(time.RFC3339))}, true
}

func sameEpisode(a, b *v1alpha1.NodeOperation) bool {
	e := a.Labels[v1alpha1.LabelEpisode]
	return e != "" && a.Spec.Policy == b.Spec.Policy && e == b.Labels[v1alpha1.LabelEpisode]
}

// budgets checks maxConcurrent and the failure-domain cap of one policy,
// counting the running operations on the nodes the policy selects.
func budgets(p *Policy, in AdmitInput) []Admission {
	sf := p.Obj.Spec.Safety
	nodes := make(map[string]*corev1.Node)
	for _, n := range in.Nodes {
		if p.Selects(n) {
			nodes[n.Name] = n
		}
	}
	var key, domain string
	if sf.FailureDomain != nil {
		key = sf.FailureDomain.TopologyKey
		domain = in.Node.Labels[key]
	}
	running := map[string]bool{}
	inDomain := map[string]bool{}
	for _, o := range in.Ops {
		n, selected := nodes[o.Spec.NodeName]
		if o.Name == in.Op.Name || !selected || !Running(o, in.Reserved) {
			continue
		}
		running[o.Name] = true
		if key != "" && n.Labels[key] == domain {
			inDomain[o.Name] = true
		}
	}
	var out []Admission
	limit := scaled(sf.MaxConcurrent, len(nodes), 1)
	if len(running) >= limit {
		out = append(out, Admission{Reason: v1alpha1.ReasonMaxConcurrent, Message: fmt.Sprintf("policy %s: %d of %d operations running (maxConcurrent %s of %d nodes): %s",
			p.Name(), len(running), limit, sf.MaxConcurrent.String(), len(nodes), strings.Join(first(sortedNames(running), 3), ", "))})
	}
	if key != "" {
		members := 0
		for _, n := range nodes {
			if n.Labels[key] == domain {
				members++
			}
		}
		dlimit := scaled(&sf.FailureDomain.MaxConcurrent, members, 1)
		if len(inDomain) >= dlimit {
			label := domain
			if label == "" {
				label = "(no label)"
			}
			out = append(out, Admission{Reason: v1alpha1.ReasonFailureDomain, Message: fmt.Sprintf("policy %s: %d of %d operations running in %s=%s (maxConcurrent %s of %d nodes): %s",
				p.Name(), len(inDomain), dlimit, key, label, sf.FailureDomain.MaxConcurrent.String(), members, strings.Join(first(sortedNames(inDomain), 3), ", "))})
		}
	}
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("%d more", len(s)-n))
	}
	return s
}
