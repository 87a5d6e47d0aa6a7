package policies

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// SelectsNamespace reports whether a ClusterReclaimPolicy governs the
// namespace. nsLabels are the namespace's labels; when nil (the CLI, which has
// no cluster) only the kubernetes.io/metadata.name label the API server sets
// on every namespace is assumed. A namespaced policy without a namespace is
// taken to be in "default", as kubectl would apply it there by default.
func SelectsNamespace(c *v1alpha1.ClusterReclaimPolicy, ns string, nsLabels map[string]string) bool {
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	for _, ex := range c.Spec.ExemptNamespaces {
		if ex == ns {
			return false
		}
	}
	if c.Spec.NamespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(c.Spec.NamespaceSelector)
	if err != nil {
		return false // Validate reports the selector
	}
	set := labels.Set{corev1.LabelMetadataName: ns}
	for k, v := range nsLabels {
		set[k] = v
	}
	return sel.Matches(set)
}

// CheckReclaimOverride reports every value of a namespaced ReclaimPolicy
// that is looser than the ClusterReclaimPolicy governing its namespace: a
// namespace may only tighten the cluster's ceilings. Stricter means a higher
// idle threshold, and a shorter idle window, lifetime, pending time and grace
// period and snooze cap. Unset namespaced values inherit the cluster's and
// are never looser. Allowing opt-out or dropping the notice protects the
// owner less and is a cluster admin's decision: a namespaced policy may not
// turn either on when the cluster policy does not.
// A namespaced dry run is looser too (it stops every reclaim); a cluster
// policy in dry run keeps the namespace in dry run whatever it says.
//
// CEL cannot see other objects, so the janitor runs this check against the
// live objects and ignores (with an Event) a namespaced policy that fails it;
// `kubemedic policy validate` runs it over the files it loads.
func CheckReclaimOverride(ns *v1alpha1.ReclaimPolicy, c *v1alpha1.ClusterReclaimPolicy) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	looser := func(fp *field.Path, got, limit any, how string) {
		errs = append(errs, field.Invalid(fp, got, fmt.Sprintf("%v is looser than ClusterReclaimPolicy %q (%v); a namespaced policy may only tighten it: %s", got, c.Name, limit, how)))
	}
	if ni, ci := ns.Spec.Idle, c.Spec.Idle; ni != nil && ci != nil {
		if ni.UtilizationBelowPercent < ci.UtilizationBelowPercent {
			looser(p.Child("idle", "utilizationBelowPercent"), ni.UtilizationBelowPercent, ci.UtilizationBelowPercent, "use a threshold at least as high")
		}
		if ni.Window.Duration > ci.Window.Duration {
			looser(p.Child("idle", "window"), ni.Window.Duration.String(), ci.Window.Duration, "use a window at most as long")
		}
	}
	for _, d := range []struct {
		name      string
		ns, limit *metav1.Duration
	}{
		{"maxLifetime", ns.Spec.MaxLifetime, c.Spec.MaxLifetime},
		{"maxPending", ns.Spec.MaxPending, c.Spec.MaxPending},
		{"gracePeriod", ns.Spec.GracePeriod, orDefault(c.Spec.GracePeriod, v1alpha1.DefaultGracePeriod)},
		{"maxSnooze", ns.Spec.MaxSnooze, orDefault(c.Spec.MaxSnooze, v1alpha1.DefaultMaxSnooze)},
	} {
		if d.ns != nil && d.limit != nil && d.ns.Duration > d.limit.Duration {
			looser(p.Child(d.name), d.ns.Duration.String(), d.limit.Duration, "use a duration at most as long")
		}
	}
	if ns.Spec.DryRun != nil && ns.Spec.DryRun.Enabled && (c.Spec.DryRun == nil || !c.Spec.DryRun.Enabled) {
		looser(p.Child("dryRun", "enabled"), true, false, "a dry run stops every reclaim; only the cluster policy can put its namespaces in dry run")
	}
	if ns.Spec.AllowOptOut != nil && *ns.Spec.AllowOptOut && (c.Spec.AllowOptOut == nil || !*c.Spec.AllowOptOut) {
		looser(p.Child("allowOptOut"), true, false, "only the cluster policy can allow opt-out")
	}
	if ns.Spec.RequireNotice != nil && !*ns.Spec.RequireNotice && (c.Spec.RequireNotice == nil || *c.Spec.RequireNotice) {
		looser(p.Child("requireNotice"), false, true, "only the cluster policy can drop the notice")
	}
	return errs
}

func orDefault(d *metav1.Duration, def time.Duration) *metav1.Duration {
	if d != nil {
		return d
	}
	return &metav1.Duration{Duration: def}
}

// Reclaim is the merge of every reclaim policy that selects one pod: the
// rules the janitor enforces on it. Zero durations mean "no such rule".
type Reclaim struct {
	// Idle is nil when no selecting policy has an idle rule.
	Idle *v1alpha1.IdleRule
	// MaxLifetime and MaxPending are 0 when no selecting policy sets them.
	MaxLifetime, MaxPending time.Duration
	// GracePeriod and MaxSnooze always have a value (the defaults when no
	// policy sets them).
	GracePeriod, MaxSnooze time.Duration
	// AllowOptOut, RequireNotice, DeleteUnknownOwners, DryRun, DryRunNotify
	// are the merged switches; see MergeReclaim.
	AllowOptOut, RequireNotice, DeleteUnknownOwners bool
	DryRun, DryRunNotify                            bool
	// Policies names the policies merged, "ClusterReclaimPolicy/x" and
	// "ReclaimPolicy/ns/y", in the order given.
	Policies []string
	// Description is the first non-empty description, namespaced first:
	// what the owner is told the rules are.
	Description string
}

// MergeReclaim merges the cluster policies selecting a pod's namespace and
// the namespaced policies selecting the pod into the rules enforced on it.
// The rule, written once here and documented in docs/janitor.md:
//   - thresholds and durations take the tightest value of any policy: the
//     highest idle threshold, the shortest idle window, lifetime, pending
//     time, grace period and snooze cap. A namespaced policy that is looser
//     than a cluster policy fails CheckReclaimOverride and is not passed in.
//   - protections of the pod's owner hold unless every policy agrees to
//     drop them: a notice is required unless every policy sets
//     requireNotice: false; opt-out is allowed only when every cluster policy
//     sets allowOptOut: true and no namespaced policy sets it false (without
//     a cluster policy: when a namespaced policy allows it and none forbids
//     it). A cluster policy's unset gracePeriod and maxSnooze count as the
//     defaults, as in CheckReclaimOverride.
//   - dry run holds when any policy is in dry run; notices are sent in dry
//     run when any policy in dry run asks for it.
//   - deletePodsOfUnknownOwners holds when any policy sets it.
//
// ok is false when no policy selects the pod.
func MergeReclaim(clusters []*v1alpha1.ClusterReclaimPolicy, namespaced []*v1alpha1.ReclaimPolicy) (r Reclaim, ok bool) {
	if len(clusters) == 0 && len(namespaced) == 0 {
		return Reclaim{}, false
	}
	r.GracePeriod, r.MaxSnooze = -1, -1
	r.RequireNotice = false
	optOut := len(clusters) > 0
	nsAllows, nsForbids := false, false
	rules := make([]*v1alpha1.ReclaimRules, 0, len(clusters)+len(namespaced))
	for _, c := range clusters {
		rules = append(rules, &c.Spec.ReclaimRules)
		r.Policies = append(r.Policies, "ClusterReclaimPolicy/"+c.Name)
		if c.Spec.AllowOptOut == nil || !*c.Spec.AllowOptOut {
			optOut = false
		}
	}
	for _, n := range namespaced {
		rules = append(rules, &n.Spec.ReclaimRules)
		r.Policies = append(r.Policies, "ReclaimPolicy/"+n.Namespace+"/"+n.Name)
		if n.Spec.AllowOptOut != nil {
			if !*n.Spec.AllowOptOut {
				nsForbids = true
			} else {
				nsAllows = true
			}
		}
		if r.Description == "" {
			r.Description = n.Spec.Description
		}
	}
	// With cluster policies, they decide and a namespace may only forbid;
	// without one, a namespaced policy stands alone: opt-out when one
	// allows it and none forbids it.
	if len(clusters) == 0 {
		optOut = nsAllows
	}
	r.AllowOptOut = optOut && !nsForbids
	for _, c := range clusters {
		if r.Description == "" {
			r.Description = c.Spec.Description
		}
	}
	for i, rr := range rules {
		if rr.Idle != nil {
			if r.Idle == nil {
				r.Idle = rr.Idle.DeepCopy()
			} else {
				r.Idle.UtilizationBelowPercent = max(r.Idle.UtilizationBelowPercent, rr.Idle.UtilizationBelowPercent)
				r.Idle.Window.Duration = min(r.Idle.Window.Duration, rr.Idle.Window.Duration)
			}
		}
		r.MaxLifetime = tightest(r.MaxLifetime, rr.MaxLifetime)
		r.MaxPending = tightest(r.MaxPending, rr.MaxPending)
		// Unset on a cluster policy is its default (the same rule as
		// CheckReclaimOverride); unset on a namespaced policy inherits.
		grace, snooze := rr.GracePeriod, rr.MaxSnooze
		if i < len(clusters) {
			grace = orDefault(grace, v1alpha1.DefaultGracePeriod)
			snooze = orDefault(snooze, v1alpha1.DefaultMaxSnooze)
		}
		if grace != nil && (r.GracePeriod < 0 || grace.Duration < r.GracePeriod) {
			r.GracePeriod = grace.Duration
		}
		if snooze != nil && (r.MaxSnooze < 0 || snooze.Duration < r.MaxSnooze) {
			r.MaxSnooze = snooze.Duration
		}
		if rr.RequireNotice == nil || *rr.RequireNotice {
			r.RequireNotice = true
		}
		if rr.DeletePodsOfUnknownOwners != nil && *rr.DeletePodsOfUnknownOwners {
			r.DeleteUnknownOwners = true
		}
		if rr.DryRun != nil && rr.DryRun.Enabled {
			r.DryRun = true
			r.DryRunNotify = r.DryRunNotify || rr.DryRun.Notify
		}
	}
	if r.GracePeriod < 0 {
		r.GracePeriod = v1alpha1.DefaultGracePeriod
	}
	if r.MaxSnooze < 0 {
		r.MaxSnooze = v1alpha1.DefaultMaxSnooze
	}
	return r, true
}

// tightest is the shorter of a current limit (0 = none) and a policy's.
func tightest(cur time.Duration, d *metav1.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return cur
	}
	if cur == 0 || d.Duration < cur {
		return d.Duration
	}
	return cur
}

// ExemptsPod reports whether a cluster policy's exemptPodSelector matches
// the pod's labels: such a pod is never reclaimed, whatever other policy
// selects it. Only cluster admins write cluster policies.
func ExemptsPod(c *v1alpha1.ClusterReclaimPolicy, podLabels map[string]string) bool {
	if c.Spec.ExemptPodSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(c.Spec.ExemptPodSelector)
	if err != nil {
		return false // Validate reports the selector
	}
	return sel.Matches(labels.Set(podLabels))
}

// SelectsPod reports whether a namespaced ReclaimPolicy's podSelector picks
// the pod; an empty selector picks every GPU pod of the namespace.
func SelectsPod(n *v1alpha1.ReclaimPolicy, podLabels map[string]string) bool {
	if n.Spec.PodSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(n.Spec.PodSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(podLabels))
}
