package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// ValidationPolicyReconciler runs the tests of ValidationPolicies: the
// join gate and the background tests (plan.PlanValidations decides).
type ValidationPolicyReconciler struct {
	Client   client.Client
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Metrics  *Metrics
	Nodes    NodeLister
	// Namespace is where test pods run.
	Namespace string
}

var _ reconcile.Reconciler = &ValidationPolicyReconciler{}

// Reconcile runs one policy's pass.
func (r *ValidationPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.ValidationPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("validationPolicy", klog.KObj(pol)))
	// A policy the API server took but policy validate refuses (a zero
	// duration, a bad selector) tests nothing, and says why; the other
	// policies go on.
	check := pol.DeepCopy()
	policies.SetDefaults(check)
	if errs := policies.Validate(check); len(errs) > 0 {
		msg := fmt.Sprintf("ValidationPolicy %s is invalid, so it tests nothing and nodes with the taint %s keep it: %s", pol.Name, v1alpha1.TaintUnvalidated, errs.ToAggregate().Error())
		if r.setReady(ctx, pol, pol.Status, metav1.ConditionFalse, "Invalid", msg) {
			r.Recorder.Eventf(pol, nil, corev1.EventTypeWarning, "Invalid", "Validate", "%s", plan.Truncate(msg, 1024))
		}
		return ctrl.Result{}, nil
	}
	in, err := r.input(ctx, pol)
	if err != nil {
		return ctrl.Result{}, err
	}
	out := plan.PlanValidations(in)
	var errs []error
	for i := range out.Actions {
		if err := r.apply(ctx, pol, in.Template, &out.Actions[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range out.Orphans {
		log.FromContext(ctx).Info("Deleting a test pod no NodeValidation names", "pod", klog.KObj(p))
		if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete test pod %s/%s that no record names: %w", p.Namespace, p.Name, err))
		}
	}
	ready, reason := metav1.ConditionTrue, "TemplateFound"
	msg := fmt.Sprintf("tests with NodeOperationTemplate %s", pol.Spec.Validate.Operation)
	switch {
	case in.NoBackground != "":
		ready, reason, msg = metav1.ConditionFalse, "UnsafePriorityClass", in.NoBackground
	case in.Template == nil:
		ready, reason = metav1.ConditionFalse, "TemplateNotFound"
		msg = fmt.Sprintf("NodeOperationTemplate %s does not exist: no test starts, and nodes with the taint %s keep it", pol.Spec.Validate.Operation, v1alpha1.TaintUnvalidated)
	}
	r.setReady(ctx, pol, out.Status, ready, reason, msg)
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
}

// setReady writes the policy's status with its Ready condition; it
// reports whether the condition changed.
func (r *ValidationPolicyReconciler) setReady(ctx context.Context, pol *v1alpha1.ValidationPolicy, status v1alpha1.ValidationPolicyStatus, ready metav1.ConditionStatus, reason, msg string) bool {
	status.Conditions = append([]metav1.Condition(nil), pol.Status.Conditions...)
	changed := apimeta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: "Ready", Status: ready, Reason: reason, Message: plan.Truncate(msg, 32768), ObservedGeneration: pol.Generation})
	if equality.Semantic.DeepEqual(status, pol.Status) {
		return changed
	}
	orig := pol.DeepCopy()
	pol.Status = status
	if err := r.Client.Status().Patch(ctx, pol, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "Patch the ValidationPolicy's status")
	}
	return changed
}

// input gathers the pass's evidence: the policy's nodes, their records,
// the test pods the records name and the template.
func (r *ValidationPolicyReconciler) input(ctx context.Context, pol *v1alpha1.ValidationPolicy) (plan.ValidationPassInput, error) {
	in := plan.ValidationPassInput{Now: r.Clock.Now(), Policy: pol, Namespace: r.Namespace,
		Records: map[string]*v1alpha1.NodeValidation{}, Pods: map[string]*corev1.Pod{}}
	tpl := &v1alpha1.NodeOperationTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pol.Spec.Validate.Operation}, tpl); err == nil {
		in.Template = tpl
	} else if !apierrors.IsNotFound(err) {
		return in, fmt.Errorf("get NodeOperationTemplate %s: %w", pol.Spec.Validate.Operation, err)
	}
	if b := pol.Spec.Background; b != nil {
		why, err := r.unsafePriorityClass(ctx, b.PriorityClassName)
		if err != nil {
			return in, err
		}
		in.NoBackground = why
	}
	var pols v1alpha1.ValidationPolicyList
	if err := r.Client.List(ctx, &pols, client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list ValidationPolicies: %w", err)
	}
	selectors, err := validationSelectors(pols.Items)
	if err != nil {
		return in, err
	}
	nodes, err := r.Nodes(ctx)
	if err != nil {
		return in, err
	}
	for _, n := range nodes {
		if testedBy(selectors, n) == pol.Name {
			in.Nodes = append(in.Nodes, n)
		}
	}
	sort.Slice(in.Nodes, func(i, j int) bool { return in.Nodes[i].Name < in.Nodes[j].Name })
	var recs v1alpha1.NodeValidationList
	// Read only: the pass copies a record before it changes it.
	if err := r.Client.List(ctx, &recs, client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("list NodeValidations: %w", err)
	}
	for i := range recs.Items {
		in.Records[recs.Items[i].Name] = &recs.Items[i]
	}
	for _, n := range in.Nodes {
		rec := in.Records[n.Name]
		if rec == nil {
			continue
		}
		for _, name := range plan.NodeTestPods(rec) {
			pod, err := r.testPod(ctx, name)
			if err != nil {
				return in, err
			}
			if pod != nil {
				in.Pods[pod.Name] = pod
			}
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(r.Namespace), client.MatchingLabels{v1alpha1.LabelValidationPolicy: plan.LabelValue(pol.Name)}); err != nil {
		return in, fmt.Errorf("list the test pods of ValidationPolicy %s: %w", pol.Name, err)
	}
	for i := range pods.Items {
		in.PolicyPods = append(in.PolicyPods, &pods.Items[i])
	}
	return in, nil
}

// unsafePriorityClass says why the background tests' priority class would
// let a test delay real pods: it does not exist, is not negative, or may
// preempt. "" when it is safe.
func (r *ValidationPolicyReconciler) unsafePriorityClass(ctx context.Context, name string) (string, error) {
	pc := &schedulingv1.PriorityClass{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("PriorityClass %s does not exist, so no background test starts (apply deploy/remediator/validation.yaml); join tests go on", name), nil
		}
		return "", fmt.Errorf("get PriorityClass %s: %w", name, err)
	}
	if pc.Value >= 0 || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever {
		policy := "PreemptLowerPriority"
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return fmt.Sprintf("PriorityClass %s has value %d and preemptionPolicy %s: a background test must be below every real pod (a negative value) and preempt nothing (Never), so none starts; join tests go on", name, pc.Value, policy), nil
	}
	return "", nil
}

// testPod is a test pod a record names: from the cache, else read fresh
// (too new for the cache, or gone).
func (r *ValidationPolicyReconciler) testPod(ctx context.Context, name string) (*corev1.Pod, error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: name}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) {
		err = r.Reader.Get(ctx, key, pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get test pod %s: %w", key, err)
	}
	return pod, nil
}

type policySelector struct {
	name string
	sel  labels.Selector
}

// validationSelectors are the policies' node selectors, by name. A
// selector that does not parse selects nothing (its policy says so in its
// Ready condition); the others go on.
func validationSelectors(pols []v1alpha1.ValidationPolicy) ([]policySelector, error) {
	out := make([]policySelector, 0, len(pols))
	for i := range pols {
		p := &pols[i]
		sel := labels.Everything()
		if p.Spec.NodeSelector != nil {
			s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
			if err != nil {
				continue
			}
			sel = s
		}
		out = append(out, policySelector{name: p.Name, sel: sel})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// testedBy is the policy that tests a node: the first by name that
// selects it; "" when none does.
func testedBy(sels []policySelector, n *corev1.Node) string {
	for _, s := range sels {
		if s.sel.Matches(labels.Set(n.Labels)) {
			return s.name
		}
	}
	return ""
}

// apply makes one node's decision, in the order NodeValidationAction
// says.
func (r *ValidationPolicyReconciler) apply(ctx context.Context, pol *v1alpha1.ValidationPolicy, tpl *v1alpha1.NodeOperationTemplate, a *plan.NodeValidationAction) error {
	node := a.Node.Name
	// The node's side first: each write is idempotent, and a pass that
	// fails after it reads the same ended pod again and makes it again.
	// Written after the record, a failure would be lost with the pod.
	if a.AddTaint || a.RemoveTaint {
		if err := r.setUnvalidatedTaint(ctx, node, a.AddTaint); err != nil {
			return err
		}
	}
	if a.Condition != nil {
		if a.Condition.Failed {
			if err := addGPUHistory(ctx, r.Client, r.Reader, r.Clock.Now(), node, testFaults(a.Record.Status.Last)); err != nil {
				return err
			}
		}
		if err := writeValidationCondition(ctx, r.Client, r.Reader, node, a.Condition); err != nil {
			return err
		}
	}
	// The record before its pod: a test pod exists only once a record
	// names it.
	if a.Record != nil {
		if err := r.writeRecord(ctx, a); err != nil {
			return err
		}
	}
	if a.Pod != nil && tpl != nil {
		pod := buildNodeTestPod(pol, tpl, a.Record, a.Node, a.Pod, r.Namespace)
		if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			// The record names the pod: the next pass finds it missing,
			// which is no answer (join) or no result (background).
			return fmt.Errorf("create test pod %s/%s for node %s: %w", pod.Namespace, pod.Name, node, err)
		}
	}
	for _, p := range a.DeletePods {
		// With the pod's own grace: a pod deleted at once, still
		// stopping, no longer counts for the kubelet, which could give
		// its GPUs to another pod while the test still runs.
		if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete test pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	for _, e := range a.Events {
		r.Recorder.Eventf(a.Node, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
	if a.Record == nil {
		return nil
	}
	mode := string(a.Record.Status.Mode)
	switch {
	case a.Result != "":
		r.Metrics.nodeValidations.WithLabelValues(pol.Name, mode, string(a.Result)).Inc()
	case hasEvent(a.Events, v1alpha1.EventValidationPreempted):
		r.Metrics.nodeValidations.WithLabelValues(pol.Name, mode, "Preempted").Inc()
	case hasEvent(a.Events, v1alpha1.EventValidationPutOff):
		r.Metrics.nodeValidations.WithLabelValues(pol.Name, mode, "PutOff").Inc()
	}
	return nil
}

func hasEvent(es []plan.Event, reason string) bool {
	for _, e := range es {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// writeRecord creates or updates the node's NodeValidation, then its
// status, each with the optimistic lock of the version the pass read.
func (r *ValidationPolicyReconciler) writeRecord(ctx context.Context, a *plan.NodeValidationAction) error {
	rec := a.Record.DeepCopy()
	status := rec.Status
	if a.Create {
		rec.Status = v1alpha1.NodeValidationStatus{}
		if err := r.Client.Create(ctx, rec); err != nil {
			return fmt.Errorf("create NodeValidation %s: %w", rec.Name, err)
		}
	} else {
		old := &v1alpha1.NodeValidation{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(rec), old); err != nil {
			return fmt.Errorf("get NodeValidation %s: %w", rec.Name, err)
		}
		if old.ResourceVersion != rec.ResourceVersion {
			return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("nodevalidations").GroupResource(), rec.Name, errors.New("changed since the pass read it"))
		}
		if old.Spec.NodeUID != rec.Spec.NodeUID {
			// A node replaced under the same name: the old node's record
			// goes, with its pods (its dependents), and the new one
			// starts empty, in one write, not a spec and a status apart.
			uid := old.UID
			if err := r.Client.Delete(ctx, old, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete NodeValidation %s of the node replaced under its name: %w", rec.Name, err)
			}
			fresh := &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: rec.Name, OwnerReferences: rec.OwnerReferences}, Spec: rec.Spec}
			a.Create = true
			a.Record.ObjectMeta = fresh.ObjectMeta
			return r.writeRecord(ctx, a)
		}
		if old.Spec != rec.Spec || !equality.Semantic.DeepEqual(old.OwnerReferences, rec.OwnerReferences) {
			if err := r.Client.Update(ctx, rec); err != nil {
				return fmt.Errorf("update NodeValidation %s: %w", rec.Name, err)
			}
		}
	}
	rec.Status = status
	if err := r.Client.Status().Update(ctx, rec); err != nil {
		return fmt.Errorf("update the status of NodeValidation %s: %w", rec.Name, err)
	}
	// The test pod's owner reference needs the record's UID, which a
	// create only now has.
	*a.Record = *rec
	return nil
}

// setUnvalidatedTaint puts kubemedic.io/unvalidated:NoSchedule on the node
// or takes it off, with the optimistic lock of a fresh read.
func (r *ValidationPolicyReconciler) setUnvalidatedTaint(ctx context.Context, name string, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return client.IgnoreNotFound(err)
		}
		if plan.HasTaint(n, v1alpha1.TaintUnvalidated) == on {
			return nil
		}
		orig := n.DeepCopy()
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule})
		} else {
			kept := n.Spec.Taints[:0]
			for _, t := range n.Spec.Taints {
				if t.Key != v1alpha1.TaintUnvalidated {
					kept = append(kept, t)
				}
			}
			n.Spec.Taints = kept
		}
		if err := r.Client.Patch(ctx, n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("set the taint %s=%t on node %s: %w", v1alpha1.TaintUnvalidated, on, name, err)
		}
		return nil
	})
}

// notServingTaints are the taints that say a node does not serve (yet or
// any more): a test must not start there.
var notServingTaints = []string{
	v1alpha1.TaintQuarantined, v1alpha1.TaintUnvalidated,
	"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
	"karpenter.sh/disrupted", "karpenter.sh/disruption",
}

// notServingPrefixes are the taint prefixes of the same: Kubernetes' own
// node conditions and cordon, a cloud node not yet initialised, a Cluster
// API node not yet initialised.
var notServingPrefixes = []string{"node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "node.cluster.x-k8s.io/"}

func notServing(key string) bool {
	for _, k := range notServingTaints {
		if key == k {
			return true
		}
	}
	for _, p := range notServingPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// buildNodeTestPod is a ValidationPolicy's test pod: the template's
// container with every GPU of the node (buildValidationPod's rules).
// A join test is bound to the node past its taint; a background test goes
// through the scheduler, pinned to the node by affinity, at the policy's
// priority class, tolerating only the taints real pods tolerate there, so
// that it starts only on free GPUs of a node that serves and any real pod
// preempts it. It never carries the operation label: a drain evicts it
// like any pod.
func buildNodeTestPod(pol *v1alpha1.ValidationPolicy, tpl *v1alpha1.NodeOperationTemplate, rec *v1alpha1.NodeValidation, node *corev1.Node, tp *plan.TestPod, ns string) *corev1.Pod {
	op := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: rec.Name, UID: rec.UID},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: node.Name, Policy: pol.Name, Step: strings.ToLower(string(tp.Mode))},
		Status:     v1alpha1.NodeOperationStatus{Validation: &v1alpha1.ValidationStatus{PodName: tp.Name}},
	}
	pod := buildValidationPod(op, tpl, ns, node)
	delete(pod.Labels, v1alpha1.LabelOperation)
	pod.Labels[v1alpha1.LabelValidationPolicy] = plan.LabelValue(pol.Name)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeValidation",
		Name: rec.Name, UID: rec.UID, Controller: ptr.To(true)}}
	if tp.Mode == v1alpha1.ValidationJoin {
		return pod
	}
	b := pol.Spec.Background
	pod.Spec.NodeName = ""
	pod.Spec.PriorityClassName = b.PriorityClassName
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(v1alpha1.BackgroundGracePeriod)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}},
		}}},
	}}
	pod.Spec.Tolerations = backgroundTolerations(node)
	return pod
}

// backgroundTolerations tolerate the node's own NoSchedule taints that
// real pods tolerate to run there (a GPU pool's nvidia.com/gpu taint),
// and none of those that say the node does not serve: a cordon,
// kubemedic's quarantine and join taints, Kubernetes' own node.kubernetes.io
// taints.
func backgroundTolerations(n *corev1.Node) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule || notServing(t.Key) {
			continue
		}
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
	}
	return out
}
