package drain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// LabelOperation is on the pods that run NodeOperations (the NodeOperation
// controller sets it, the value is the operation's name). A drain never
// evicts or waits for them: they are the reason for the drain. It is
// v1alpha1.LabelOperation, the label's API name.
const LabelOperation = v1alpha1.LabelOperation

// DeleteGrace is how long DeleteAfterTimeout pods may take to go once they
// were deleted at the drain timeout. Pods still there after it fail the
// drain: something (a finalizer, a kubelet that does not answer) keeps them,
// and running the operation under them would be unsafe.
const DeleteGrace = 2 * time.Minute

// maxNamed is how many pod names a message lists before "and N more".
const maxNamed = 5

// mirrorPodAnnotation marks the API server's copy of a kubelet static pod.
const mirrorPodAnnotation = corev1.MirrorPodAnnotationKey

// Decision is what to do in one pass of a drain. Its lists are sorted by
// namespace and name.
type Decision struct {
	// Evict are the pods to evict now. Pods that are already terminating
	// are not in it; pods a budget refused before are, again.
	Evict []types.NamespacedName
	// Delete are the DeleteAfterTimeout pods to delete now, the drain
	// timeout having passed.
	Delete []types.NamespacedName
	// UIDs holds the UID of each pod in Evict and Delete. Run sends it as a
	// precondition, so that a pod recreated under the same name is left alone.
	UIDs map[types.NamespacedName]types.UID
	// Waiting are the pods the drain still waits for: those in Evict and
	// Delete and the terminating ones.
	Waiting []types.NamespacedName
	// Remaining is len(Waiting).
	Remaining int
	// Skipped counts the pods left running by mode Skip.
	Skipped int
	// Ignored counts the DaemonSet, mirror, finished and operation pods.
	Ignored int
	// Done is true when no pod is left that the drain waits for.
	Done bool
	// Failed is true when the drain cannot succeed: Evict pods were still
	// there at the timeout, or DeleteAfterTimeout pods DeleteGrace after it.
	// A failed decision has nothing to evict or delete.
	Failed bool
	// Message says what the drain does or why it failed, for the status.
	Message string
	// Next is when the decision changes with time alone (the timeout, or the
	// end of DeleteGrace after it); zero when Done or Failed. A caller whose
	// evictions were blocked by a disruption budget retries before that.
	Next time.Time
}

// Plan decides one pass of the drain of a node from the pods bound to it,
// the drain spec, when the drain started and the time now. It makes no API
// call and keeps nothing: call it again at every pass.
//
// The pods may be stripped to metadata, spec.nodeName and status.phase. A
// nil spec.Timeout means policies.DefaultDrainTimeout (the CRD default) and an empty spec.Mode means Evict.
// The first rule that matches a pod gives its mode, otherwise spec.Mode:
//
//   - Skip leaves the pod running and does not wait for it.
//   - Evict evicts the pod at every pass until it is gone (again after a
//     budget refused); a pod still there at the timeout fails the drain.
//   - DeleteAfterTimeout evicts like Evict until the timeout, then deletes
//     the pods still there and waits DeleteGrace for them to go.
//
// A terminating pod is waited for and not evicted again. DaemonSet, mirror
// and finished pods and pods with LabelOperation are ignored. Plan returns
// an error, and no decision, when a rule has an invalid pod selector or a
// mode is unknown: a drain whose rules cannot be read must not guess.
func Plan(pods []corev1.Pod, spec v1alpha1.DrainSpec, started, now time.Time) (Decision, error) {
	rules, defaultMode, err := compile(spec)
	if err != nil {
		return Decision{}, err
	}
	timeout := policies.DefaultDrainTimeout
	if spec.Timeout != nil {
		timeout = max(spec.Timeout.Duration, 0)
	}
	deadline := started.Add(timeout)
	timedOut := !now.Before(deadline)
	deleteDeadline := deadline.Add(DeleteGrace)

	sorted := make([]*corev1.Pod, len(pods))
	for i := range pods {
		sorted[i] = &pods[i]
	}
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	var (
		d                     Decision
		evictable, deletable  []types.NamespacedName
		evictLeft, deleteLeft []types.NamespacedName
		terminating           int
		uids                  = map[types.NamespacedName]types.UID{}
	)
	for _, pod := range sorted {
		if ignored(pod) {
			d.Ignored++
			continue
		}
		mode := modeOf(pod, rules, defaultMode)
		if mode == v1alpha1.DrainSkip {
			d.Skipped++
			continue
		}
		nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		d.Waiting = append(d.Waiting, nn)
		going := pod.DeletionTimestamp != nil
		if going {
			terminating++
		} else {
			uids[nn] = pod.UID
		}
		switch mode {
		case v1alpha1.DrainEvict:
			evictLeft = append(evictLeft, nn)
			if !going {
				evictable = append(evictable, nn)
			}
		case v1alpha1.DrainDeleteAfterTimeout:
			deleteLeft = append(deleteLeft, nn)
			if !going {
				if timedOut {
					deletable = append(deletable, nn)
				} else {
					evictable = append(evictable, nn)
				}
			}
		}
	}
	d.Remaining = len(d.Waiting)

	var notes []string
	if d.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d skipped", d.Skipped))
	}
	if d.Ignored > 0 {
		notes = append(notes, fmt.Sprintf("%d ignored", d.Ignored))
	}

	switch {
	case d.Remaining == 0:
		d.Done = true
		d.Message = strings.Join(append([]string{"drained"}, notes...), "; ")
	case timedOut && len(evictLeft) > 0:
		d.Failed = true
		d.Message = fmt.Sprintf("drain timed out after %s: %s left: %s",
			timeout, plural(len(evictLeft), "pod"), names(evictLeft))
	case timedOut && !now.Before(deleteDeadline):
		d.Failed = true
		d.Message = fmt.Sprintf("drain timed out after %s: %s still there %s after being deleted: %s",
			timeout, plural(len(deleteLeft), "pod"), DeleteGrace, names(deleteLeft))
	default:
		d.Evict, d.Delete = evictable, deletable
		d.Next = deadline
		if timedOut {
			d.Next = deleteDeadline
		}
		var parts []string
		if len(d.Evict) > 0 {
			parts = append(parts, "evicting "+plural(len(d.Evict), "pod"))
		}
		if len(d.Delete) > 0 {
			parts = append(parts, fmt.Sprintf("deleting %s after the %s timeout", plural(len(d.Delete), "pod"), timeout))
		}
		if terminating > 0 {
			parts = append(parts, fmt.Sprintf("%d terminating", terminating))
		}
		parts = append(parts, notes...)
		parts = append(parts, "waiting for "+names(d.Waiting))
		d.Message = strings.Join(parts, "; ")
	}
	if n := len(d.Evict) + len(d.Delete); n > 0 {
		d.UIDs = make(map[types.NamespacedName]types.UID, n)
		for _, nn := range slices.Concat(d.Evict, d.Delete) {
			d.UIDs[nn] = uids[nn]
		}
	}
	return d, nil
}

// ignored reports whether a drain leaves pod alone without waiting for it.
func ignored(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		// Finished: it holds no GPU and its owner will not restart it here.
		return true
	}
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		// The kubelet runs it from a file; deleting the mirror does nothing.
		return true
	}
	if _, ok := pod.Labels[LabelOperation]; ok {
		return true
	}
	for _, ref := range pod.OwnerReferences {
		// The DaemonSet controller ignores unschedulable and would recreate it.
		if ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// rule is a DrainRule with its selector parsed.
type rule struct {
	namespaces []string
	selector   labels.Selector // nil: any labels
	mode       v1alpha1.DrainMode
}

func (r *rule) matches(pod *corev1.Pod) bool {
	if len(r.namespaces) > 0 && !slices.Contains(r.namespaces, pod.Namespace) {
		return false
	}
	return r.selector == nil || r.selector.Matches(labels.Set(pod.Labels))
}

// compile parses the rules of spec and checks its modes.
func compile(spec v1alpha1.DrainSpec) ([]rule, v1alpha1.DrainMode, error) {
	defaultMode := spec.Mode
	if defaultMode == "" {
		defaultMode = v1alpha1.DrainEvict
	}
	if !validMode(defaultMode) {
		return nil, "", fmt.Errorf("drain mode %q: must be %s, %s or %s",
			defaultMode, v1alpha1.DrainEvict, v1alpha1.DrainDeleteAfterTimeout, v1alpha1.DrainSkip)
	}
	rules := make([]rule, 0, len(spec.Rules))
	for i, r := range spec.Rules {
		if !validMode(r.Mode) {
			return nil, "", fmt.Errorf("drain rules[%d].mode %q: must be %s, %s or %s",
				i, r.Mode, v1alpha1.DrainEvict, v1alpha1.DrainDeleteAfterTimeout, v1alpha1.DrainSkip)
		}
		c := rule{namespaces: r.Namespaces, mode: r.Mode}
		if r.PodSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(r.PodSelector)
			if err != nil {
				return nil, "", fmt.Errorf("drain rules[%d].podSelector: %w", i, err)
			}
			c.selector = sel
		}
		rules = append(rules, c)
	}
	return rules, defaultMode, nil
}

func validMode(m v1alpha1.DrainMode) bool {
	switch m {
	case v1alpha1.DrainEvict, v1alpha1.DrainDeleteAfterTimeout, v1alpha1.DrainSkip:
		return true
	}
	return false
}

// modeOf returns the mode of the first rule matching pod, or defaultMode.
func modeOf(pod *corev1.Pod, rules []rule, defaultMode v1alpha1.DrainMode) v1alpha1.DrainMode {
	for i := range rules {
		if rules[i].matches(pod) {
			return rules[i].mode
		}
	}
	return defaultMode
}

// names lists the first maxNamed pods, then how many more there are.
func names(pods []types.NamespacedName) string {
	shown := pods[:min(len(pods), maxNamed)]
	s := make([]string, len(shown))
	for i, nn := range shown {
		s[i] = nn.String()
	}
	out := strings.Join(s, ", ")
	if more := len(pods) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// plural returns "1 pod" or "n pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
