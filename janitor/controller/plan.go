package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// PodPlan is the decision for one GPU pod, with what it was made from.
type PodPlan struct {
	Pod *corev1.Pod
	// Selected is false when no reclaim policy selects the pod.
	Selected bool
	Rules    policies.Reclaim
	Facts    decide.Pod
	Verdict  decide.Verdict
	Decision decide.Decision
	Notice   *decide.Notice
	// Recipient is who is told; HasRecipient is false when nobody can be.
	Recipient    notify.Recipient
	HasRecipient bool
	// Problems: invalid annotations and owner values, one Warning each.
	Problems []string
	// Err is set when the pod's facts could not be read; the pod is left
	// alone this cycle.
	Err error
}

// IgnoredPolicy is a namespaced ReclaimPolicy looser than a cluster policy
// selecting its namespace: it is not enforced.
type IgnoredPolicy struct {
	Policy *v1alpha1.ReclaimPolicy
	Why    string
}

// Plan is one cycle's decisions.
type Plan struct {
	Now     time.Time
	Pods    []PodPlan
	Queries []gpuutil.Query
	Results map[gpuutil.Query]gpuutil.Result
	Ignored []IgnoredPolicy
}

// PlanInput is what Plan reads.
type PlanInput struct {
	// Reader reads policies, namespaces and workload metadata: the cache
	// in the controller, a read-only API client in `kubemedic janitor plan`.
	Reader client.Reader
	// Pods are the candidate pods; pods without GPUs are skipped. They
	// are only read.
	Pods   []*corev1.Pod
	Source gpuutil.Source
	Now    time.Time
	// NotifierReady is false when Slack is not configured.
	NotifierReady  bool
	DefaultChannel string
	SelfNamespace  string
}

// work is what prepare learns about a selected GPU pod.
type work struct {
	pp     PodPlan // Verdict, Decision and Recipient are filled in later
	target decide.Target
	exempt string
	done   bool // decided (unreadable notice) or left alone (unreadable owners)
}

// MakePlan judges every GPU pod. It makes one Prometheus query per
// distinct (metric, window) among the idle rules of the running pods.
func MakePlan(ctx context.Context, in PlanInput) (*Plan, error) {
	var clusters v1alpha1.ClusterReclaimPolicyList
	if err := in.Reader.List(ctx, &clusters); err != nil {
		return nil, fmt.Errorf("list ClusterReclaimPolicies: %w", err)
	}
	var nsPolicies v1alpha1.ReclaimPolicyList
	if err := in.Reader.List(ctx, &nsPolicies); err != nil {
		return nil, fmt.Errorf("list ReclaimPolicies: %w", err)
	}
	var nsList corev1.NamespaceList
	if err := in.Reader.List(ctx, &nsList); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	namespaces := make(map[string]*corev1.Namespace, len(nsList.Items))
	for i := range nsList.Items {
		namespaces[nsList.Items[i].Name] = &nsList.Items[i]
	}
	plan := &Plan{Now: in.Now}

	// Cluster policies per namespace, and the namespaced policies that
	// pass CheckReclaimOverride against every one of them.
	clusterFor := map[string][]*v1alpha1.ClusterReclaimPolicy{}
	selecting := func(ns string) []*v1alpha1.ClusterReclaimPolicy {
		if cs, ok := clusterFor[ns]; ok {
			return cs
		}
		var labels map[string]string
		if n := namespaces[ns]; n != nil {
			labels = n.Labels
		}
		var cs []*v1alpha1.ClusterReclaimPolicy
		for i := range clusters.Items {
			if policies.SelectsNamespace(&clusters.Items[i], ns, labels) {
				cs = append(cs, &clusters.Items[i])
			}
		}
		clusterFor[ns] = cs
		return cs
	}
	validNS := map[string][]*v1alpha1.ReclaimPolicy{}
	for i := range nsPolicies.Items {
		np := &nsPolicies.Items[i]
		var why []string
		for _, c := range selecting(np.Namespace) {
			for _, e := range policies.CheckReclaimOverride(np, c) {
				why = append(why, e.Error())
			}
		}
		if len(why) > 0 {
			plan.Ignored = append(plan.Ignored, IgnoredPolicy{Policy: np, Why: fmt.Sprintf("%v", why)})
			continue
		}
		validNS[np.Namespace] = append(validNS[np.Namespace], np)
	}

	// A cycle reads every GPU pod twice: once to learn which Prometheus
	// queries it needs, then, with the answers, to decide. Both passes call
	// prepare, so they agree, and nothing is kept per pod between them: at
	// 50,000 GPU pods a kept record would be tens of MB a cycle. A PodPlan
	// is kept only for the pods with something to do or to say.
	chains := chainMemo{reader: in.Reader, memo: map[types.UID]chainResult{}}
	// The merge depends only on the policies selecting the pod: the same
	// for most pods of a namespace. The result is shared, read only.
	type mergedRules struct {
		r  policies.Reclaim
		ok bool
	}
	merges := map[string]mergedRules{}
	merged := func(ns string, cs []*v1alpha1.ClusterReclaimPolicy, ns2 []*v1alpha1.ReclaimPolicy) (policies.Reclaim, bool) {
		key := ns
		for _, np := range ns2 {
			key += "/" + np.Name
		}
		if m, ok := merges[key]; ok {
			return m.r, m.ok
		}
		r, ok := policies.MergeReclaim(cs, ns2)
		merges[key] = mergedRules{r, ok}
		return r, ok
	}
	prepare := func(pod *corev1.Pod) (w work, ok bool) {
		if wn, mn := GPURequests(pod); wn+mn == 0 || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return w, false
		}
		notice, err := decide.ParseNotice(pod.Annotations[v1alpha1.AnnotationReclaimNotice])
		cs := selecting(pod.Namespace)
		var ns2 []*v1alpha1.ReclaimPolicy
		for _, np := range validNS[pod.Namespace] {
			if policies.SelectsPod(np, pod.Labels) {
				ns2 = append(ns2, np)
			}
		}
		if len(cs) == 0 && len(ns2) == 0 && notice == nil && err == nil {
			return w, false // no policy, no state: nothing to decide
		}
		w.pp = PodPlan{Pod: pod, Notice: notice}
		pp := &w.pp
		chain, cerr := chains.get(ctx, pod)
		if cerr != nil {
			pp.Err, w.done = cerr, true
			return w, true
		}
		pp.Facts = podFacts(pod, chain, namespaces[pod.Namespace])
		exempt := exemption(pod, chain, in.SelfNamespace)
		for _, c := range cs {
			if exempt == "" && policies.ExemptsPod(c, pod.Labels) {
				exempt = "exempted by ClusterReclaimPolicy " + c.Name
			}
		}
		pp.Rules, pp.Selected = merged(pod.Namespace, cs, ns2)
		if pod.Annotations[v1alpha1.AnnotationReclaim] == v1alpha1.ReclaimDisabled && exempt == "" {
			if pp.Rules.AllowOptOut {
				exempt = "the owner opted out with " + v1alpha1.AnnotationReclaim + "=" + v1alpha1.ReclaimDisabled
			} else {
				pp.Problems = append(pp.Problems, fmt.Sprintf("annotation %s=%s is ignored: the reclaim policies (%v) do not allow opt-out",
					v1alpha1.AnnotationReclaim, v1alpha1.ReclaimDisabled, pp.Rules.Policies))
			}
		}
		if !pp.Selected && exempt == "" {
			exempt = "no reclaim policy selects the pod any more"
		}
		if err != nil {
			pp.Decision, w.done = decide.Next(decide.Input{Now: in.Now, NoticeErr: err}), true
			return w, true
		}
		w.target, w.exempt = target(pod, chain), exempt
		return w, true
	}

	seen := map[gpuutil.Query]bool{}
	for _, pod := range in.Pods {
		w, ok := prepare(pod)
		if !ok || w.done || w.exempt != "" || w.pp.Rules.Idle == nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, q := range decide.Queries(&w.pp.Facts, w.pp.Rules.Idle.Window.Duration) {
			if !seen[q] {
				seen[q] = true
				plan.Queries = append(plan.Queries, q)
			}
		}
	}
	sort.Slice(plan.Queries, func(i, j int) bool {
		a, b := plan.Queries[i], plan.Queries[j]
		return a.Metric < b.Metric || a.Metric == b.Metric && a.Window < b.Window
	})
	if len(plan.Queries) > 0 {
		plan.Results = in.Source.Fetch(ctx, plan.Queries, in.Now)
	}

	for _, pod := range in.Pods {
		w, ok := prepare(pod)
		if !ok {
			continue
		}
		pp := &w.pp
		if !w.done {
			var idle decide.Idle
			if pp.Rules.Idle != nil {
				idle = decide.IdleFromMetrics(&pp.Facts, pp.Rules.Idle.Window.Duration, plan.Results)
			}
			pp.Verdict = decide.Judge(&pp.Facts, pp.Rules, idle, in.Now)
			// Who would be told matters only when there is something to say.
			if _, candidate := pp.Verdict.Candidate(); candidate || pp.Notice != nil {
				ns := namespaces[pod.Namespace]
				if ns == nil {
					ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}
				}
				rcpt, probs, ok := notify.ResolveOwner(pod, ns, in.DefaultChannel)
				pp.Recipient, pp.HasRecipient = rcpt, ok
				pp.Problems = append(pp.Problems, probs...)
			}
			pp.Decision = decide.Next(decide.Input{
				Now: in.Now, Reclaim: pp.Rules, Exempt: w.exempt, Verdict: pp.Verdict, Notice: pp.Notice,
				Snooze: pod.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil], Target: w.target,
				NotifierReady: in.NotifierReady && pp.HasRecipient, PodName: pod.Name,
			})
			pp.Problems = append(pp.Problems, pp.Decision.Problems...)
		}
		// Keep only the pods with something to do or to say: most GPU pods
		// in a cycle are busy and need neither a write nor a line.
		if pp.Err == nil && pp.Notice == nil && len(pp.Problems) == 0 &&
			pp.Decision.Step == decide.StepNone && pp.Decision.State == decide.StateNone {
			continue
		}
		plan.Pods = append(plan.Pods, *pp)
	}
	return plan, nil
}
