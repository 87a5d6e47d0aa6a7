package policies

import (
	"fmt"

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
// period. Unset namespaced values inherit the cluster's and are never looser.
// dryRun is not compared: a cluster policy in dry run keeps the namespace in
// dry run whatever the namespaced policy says.
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
		{"gracePeriod", ns.Spec.GracePeriod, clusterGrace(c)},
	} {
		if d.ns != nil && d.limit != nil && d.ns.Duration > d.limit.Duration {
			looser(p.Child(d.name), d.ns.Duration.String(), d.limit.Duration, "use a duration at most as long")
		}
	}
	return errs
}

func clusterGrace(c *v1alpha1.ClusterReclaimPolicy) *metav1.Duration {
	if c.Spec.GracePeriod != nil {
		return c.Spec.GracePeriod
	}
	return &metav1.Duration{Duration: v1alpha1.DefaultGracePeriod}
}
