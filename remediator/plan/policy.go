package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Policy is a RemediationPolicy with its defaults applied and its selector
// and reason expressions compiled once.
type Policy struct {
	// Obj is a defaulted copy of the policy; Status is as read.
	Obj      *v1alpha1.RemediationPolicy
	selector labels.Selector
	conds    []condMatcher
	// windows are spec.safety.maintenanceWindows, parsed; windowErr, when
	// one does not parse (the windows are then closed).
	windows   []policies.Window
	windowErr error
}

// WindowError is why the policy's maintenance windows cannot be read, or
// nil. Such a policy starts only urgent operations.
func (p *Policy) WindowError() error { return p.windowErr }

type condMatcher struct {
	v1alpha1.ConditionMatch
	reason *regexp.Regexp // nil matches any reason
	hold   time.Duration
}

// Compile defaults a copy of p and compiles its node selector and reason
// expressions. An error names the field; the policy then acts on nothing.
func Compile(p *v1alpha1.RemediationPolicy) (*Policy, error) {
	obj := p.DeepCopy()
	policies.SetDefaults(obj)
	out := &Policy{Obj: obj, selector: labels.Everything()}
	if obj.Spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(obj.Spec.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("policy %s: spec.nodeSelector: %w", p.Name, err)
		}
		out.selector = sel
	}
	for i, c := range obj.Spec.Conditions {
		m := condMatcher{ConditionMatch: c}
		if c.Reason != "" {
			re, err := regexp.Compile("^(?:" + c.Reason + ")$")
			if err != nil {
				return nil, fmt.Errorf("policy %s: spec.conditions[%d].reason: %w", p.Name, i, err)
			}
			m.reason = re
		}
		if c.For != nil {
			m.hold = c.For.Duration
		}
		out.conds = append(out.conds, m)
	}
	if len(obj.Spec.Steps) == 0 {
		return nil, fmt.Errorf("policy %s: spec.steps: at least one step is required", p.Name)
	}
	// A window that does not parse fails closed: the policy still counts
	// (its breaker and budgets hold its nodes, manual operations included)
	// but its windows never open, so only urgent steps start; its Ready
	// condition says why (WindowError). The API server cannot check time
	// zones, so such a policy can exist.
	windows := field.NewPath("spec", "safety", "maintenanceWindows")
	var werrs field.ErrorList
	for i, mw := range obj.Spec.Safety.MaintenanceWindows {
		w, errs := policies.ParseWindow(mw, windows.Index(i))
		werrs = append(werrs, errs...)
		out.windows = append(out.windows, w)
	}
	if len(werrs) > 0 {
		out.windows, out.windowErr = nil, werrs.ToAggregate()
	}
	return out, nil
}

// Name is the policy's name.
func (p *Policy) Name() string { return p.Obj.Name }

// Selects reports whether the policy's node selector selects the node.
func (p *Policy) Selects(n *corev1.Node) bool {
	return p.selector.Matches(labels.Set(n.Labels))
}

// Match is a node condition that one of a policy's condition matchers matches.
type Match struct {
	// Condition is the node condition as read.
	Condition corev1.NodeCondition
	// Reason is the effective reason (see v1alpha1.EffectiveReason).
	Reason string
	// HeldAt is when the condition has held for the matcher's `for`.
	HeldAt time.Time
}

// Held reports whether the condition has held long enough at now.
func (m Match) Held(now time.Time) bool { return !now.Before(m.HeldAt) }

// Episode identifies the fault episode: the condition's type and the time it
// last changed status. Every step of one ladder shares it, and a condition
// that clears and comes back starts a new one.
func (m Match) Episode() string {
	return shortHash(string(m.Condition.Type) + "\x00" + m.Condition.LastTransitionTime.UTC().Format(time.RFC3339))
}

// Unhealthy returns the node's condition that the policy matches. Of several,
// the first that has held at now wins, else the one that will hold first.
func (p *Policy) Unhealthy(n *corev1.Node, now time.Time) (Match, bool) {
	var best Match
	found := false
	for _, m := range p.conds {
		for _, c := range n.Status.Conditions {
			if string(c.Type) != m.Type || c.Status != m.Status {
				continue
			}
			reason := v1alpha1.EffectiveReason(string(c.Type), c.Reason, c.Message)
			if m.reason != nil && !m.reason.MatchString(reason) {
				continue
			}
			cand := Match{Condition: c, Reason: reason, HeldAt: c.LastTransitionTime.Add(m.hold)}
			if !found || (cand.Held(now) && !best.Held(now)) || (!best.Held(now) && cand.HeldAt.Before(best.HeldAt)) {
				best, found = cand, true
			}
		}
	}
	return best, found
}

// Quarantined reports whether the node carries the quarantine taint.
func Quarantined(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.TaintQuarantined {
			return true
		}
	}
	return false
}

// OptedOut reports whether the node opted out of remediation.
func OptedOut(n *corev1.Node) bool {
	return n.Labels[v1alpha1.LabelRemediation] == v1alpha1.RemediationDisabled
}

// Winner returns the policy that acts on the node among those that select it
// and whose condition has held: the highest priority, then the name that
// sorts first. Paused and dry-run policies take part, so that pausing a
// policy never hands its nodes to another one that may act differently.
func Winner(all []*Policy, n *corev1.Node, now time.Time) *Policy {
	var win *Policy
	for _, p := range all {
		if !p.Selects(n) {
			continue
		}
		if m, ok := p.Unhealthy(n, now); !ok || !m.Held(now) {
			continue
		}
		if win == nil || p.Obj.Spec.Priority > win.Obj.Spec.Priority ||
			(p.Obj.Spec.Priority == win.Obj.Spec.Priority && p.Name() < win.Name()) {
			win = p
		}
	}
	return win
}

// scaled turns a count or percentage of total into a number, rounded down,
// and at least min.
func scaled(v *intstr.IntOrString, total, min int) int {
	if v == nil {
		return min
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, false)
	if err != nil {
		return min
	}
	if n < min {
		return min
	}
	return n
}

// OperationName is the deterministic name of the operation for a step of an
// episode, so that creating it twice (a restart, a stale cache, a second
// leader) fails with AlreadyExists instead of duplicating it.
//
// The hash before the step covers the policy and node names as well as the
// episode, because the dot between policy and node is ambiguous when either
// name has dots: policy "a.b" on node "c" and policy "a" on node "b.c" would
// otherwise share names. The steps of one ladder still share the hash.
func OperationName(policy, node, episode string, step int) string {
	suffix := "." + shortHash(policy+"\x00"+node+"\x00"+episode) + "-" + strconv.Itoa(step)
	base := policy + "." + node
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max-9], ".-") + "." + shortHash(base)
	}
	return base + suffix
}

// shortHash is 8 hex digits of SHA-256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// LabelValue is s when it is a valid label value, else a readable prefix
// of it and a hash.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	prefix := strings.TrimRight(s[:min(len(s), 50)], ".-_")
	prefix = strings.TrimLeft(prefix, ".-_")
	if prefix == "" {
		return "h-" + shortHash(s)
	}
	return prefix + "-" + shortHash(s)
}

// sortedNames returns the keys of a set, sorted.
func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
