package drain

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

var t0 = time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)

// pod returns a pod as the controller's stripped cache holds it: metadata,
// spec.nodeName and status.phase, Running unless an option changes it.
func pod(key string, opts ...func(*corev1.Pod)) corev1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       corev1.PodSpec{NodeName: "gpu-node-000"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func labeled(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func ownedBy(apiVersion, kind string, controller bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "owner-uid", Controller: ptr.To(controller),
		})
	}
}

func mirror(p *corev1.Pod) {
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3f1f7c2e0d4b5a69"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-node-000", UID: "node-uid", Controller: ptr.To(true)}}
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func deleting(p *corev1.Pod) {
	p.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
}

func nns(keys ...string) []types.NamespacedName {
	if len(keys) == 0 {
		return nil
	}
	out := make([]types.NamespacedName, len(keys))
	for i, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		out[i] = types.NamespacedName{Namespace: ns, Name: name}
	}
	return out
}

func timeout(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestPlan(t *testing.T) {
	defaults := v1alpha1.DrainSpec{Timeout: timeout(10 * time.Minute), Mode: v1alpha1.DrainEvict}
	withRules := func(mode v1alpha1.DrainMode, rules ...v1alpha1.DrainRule) v1alpha1.DrainSpec {
		s := defaults
		s.Mode = mode
		s.Rules = rules
		return s
	}
	deadline := t0.Add(10 * time.Minute)

	tests := []struct {
		desc string
		pods []corev1.Pod
		spec v1alpha1.DrainSpec
		now  time.Time // zero: t0, when the drain started
		// want is compared without Waiting and UIDs, which are checked
		// against Remaining, Evict and Delete for every case.
		want Decision
	}{
		{
			desc: "no pods on the node: done at once",
			spec: defaults,
			want: Decision{Done: true, Message: "drained"},
		},
		{
			desc: "plain pods are evicted in namespace and name order and waited for",
			pods: []corev1.Pod{pod("train/b"), pod("default/web-1"), pod("train/a")},
			spec: defaults,
			want: Decision{
				Evict: nns("default/web-1", "train/a", "train/b"), Remaining: 3, Next: deadline,
				Message: "evicting 3 pods; waiting for default/web-1, train/a, train/b",
			},
		},
		{
			desc: "a pod whose owner is a Deployment's ReplicaSet is evicted",
			pods: []corev1.Pod{pod("default/web-7d9f-x2x4k", ownedBy("apps/v1", "ReplicaSet", true))},
			spec: defaults,
			want: Decision{Evict: nns("default/web-7d9f-x2x4k"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for default/web-7d9f-x2x4k"},
		},
		{
			desc: "DaemonSet pods are neither evicted nor waited for",
			pods: []corev1.Pod{pod("gpu-operator/nvidia-dcgm-exporter-7xk2p", ownedBy("apps/v1", "DaemonSet", true)), pod("default/web")},
			spec: defaults,
			want: Decision{Evict: nns("default/web"), Remaining: 1, Ignored: 1, Next: deadline,
				Message: "evicting 1 pod; 1 ignored; waiting for default/web"},
		},
		{
			desc: "a DaemonSet owner reference that is not the controller still marks a DaemonSet pod",
			pods: []corev1.Pod{pod("kube-system/agent", ownedBy("apps/v1", "DaemonSet", false))},
			spec: defaults,
			want: Decision{Done: true, Ignored: 1, Message: "drained; 1 ignored"},
		},
		{
			desc: "mirror pods of static pods are ignored",
			pods: []corev1.Pod{pod("kube-system/kube-proxy-gpu-node-000", mirror)},
			spec: defaults,
			want: Decision{Done: true, Ignored: 1, Message: "drained; 1 ignored"},
		},
		{
			desc: "finished pods are ignored, whether they succeeded or failed",
			pods: []corev1.Pod{
				pod("batch/done", phase(corev1.PodSucceeded)),
				pod("batch/crashed", phase(corev1.PodFailed)),
			},
			spec: defaults,
			want: Decision{Done: true, Ignored: 2, Message: "drained; 2 ignored"},
		},
		{
			desc: "kubemedic's own operation pods are ignored, whatever the label value",
			pods: []corev1.Pod{
				pod("kubemedic-system/op-reset-gpu", labeled(LabelOperation, "gpu-node-000-reset")),
				pod("kubemedic-system/op-empty", labeled(LabelOperation, "")),
			},
			spec: defaults,
			want: Decision{Done: true, Ignored: 2, Message: "drained; 2 ignored"},
		},
		{
			desc: "pending pods bound to the node are evicted like running ones",
			pods: []corev1.Pod{pod("default/starting", phase(corev1.PodPending))},
			spec: defaults,
			want: Decision{Evict: nns("default/starting"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for default/starting"},
		},
		{
			desc: "a pod with an unknown phase is evicted",
			pods: []corev1.Pod{pod("default/lost", phase(corev1.PodUnknown))},
			spec: defaults,
			want: Decision{Evict: nns("default/lost"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for default/lost"},
		},
		{
			desc: "a terminating pod is waited for and not evicted again",
			pods: []corev1.Pod{pod("default/going", deleting)},
			spec: defaults,
			want: Decision{Remaining: 1, Next: deadline, Message: "1 terminating; waiting for default/going"},
		},
		{
			desc: "a terminating DaemonSet pod is still ignored",
			pods: []corev1.Pod{pod("kube-system/agent", ownedBy("apps/v1", "DaemonSet", true), deleting)},
			spec: defaults,
			want: Decision{Done: true, Ignored: 1, Message: "drained; 1 ignored"},
		},
		{
			desc: "mixed node: every kind of pod counted in the message",
			pods: []corev1.Pod{
				pod("default/web-1"), pod("default/web-2"), pod("train/trainer-0"),
				pod("default/going", deleting),
				pod("monitoring/debug", labeled("app", "debug")),
				pod("kube-system/kube-proxy", mirror),
				pod("gpu-operator/dcgm", ownedBy("apps/v1", "DaemonSet", true)),
			},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{Namespaces: []string{"monitoring"}, Mode: v1alpha1.DrainSkip}),
			want: Decision{
				Evict: nns("default/web-1", "default/web-2", "train/trainer-0"), Remaining: 4, Skipped: 1, Ignored: 2, Next: deadline,
				Message: "evicting 3 pods; 1 terminating; 1 skipped; 2 ignored; waiting for default/going, default/web-1, default/web-2, train/trainer-0",
			},
		},
		{
			desc: "more than five pods waited for: the message names five and counts the rest",
			pods: []corev1.Pod{pod("a/1"), pod("a/2"), pod("a/3"), pod("a/4"), pod("a/5"), pod("a/6"), pod("a/7")},
			spec: defaults,
			want: Decision{
				Evict: nns("a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7"), Remaining: 7, Next: deadline,
				Message: "evicting 7 pods; waiting for a/1, a/2, a/3, a/4, a/5 and 2 more",
			},
		},
		{
			desc: "default mode Skip leaves every pod and is done at once",
			pods: []corev1.Pod{pod("default/a"), pod("default/b")},
			spec: withRules(v1alpha1.DrainSkip),
			want: Decision{Done: true, Skipped: 2, Message: "drained; 2 skipped"},
		},
		{
			desc: "a skipped pod that is terminating is not waited for",
			pods: []corev1.Pod{pod("monitoring/debug", deleting)},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{Namespaces: []string{"monitoring"}, Mode: v1alpha1.DrainSkip}),
			want: Decision{Done: true, Skipped: 1, Message: "drained; 1 skipped"},
		},
		{
			desc: "a namespace rule applies only to the namespaces it lists",
			pods: []corev1.Pod{pod("monitoring/prom"), pod("logging/fluent"), pod("default/web")},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{Namespaces: []string{"monitoring", "logging"}, Mode: v1alpha1.DrainSkip}),
			want: Decision{Evict: nns("default/web"), Remaining: 1, Skipped: 2, Next: deadline,
				Message: "evicting 1 pod; 2 skipped; waiting for default/web"},
		},
		{
			desc: "a selector rule matches by labels in every namespace",
			pods: []corev1.Pod{
				pod("team-a/notebook", labeled("kubemedic.io/drain", "skip")),
				pod("team-b/notebook", labeled("kubemedic.io/drain", "skip")),
				pod("team-b/trainer", labeled("kubemedic.io/drain", "evict")),
			},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubemedic.io/drain": "skip"}}, Mode: v1alpha1.DrainSkip,
			}),
			want: Decision{Evict: nns("team-b/trainer"), Remaining: 1, Skipped: 2, Next: deadline,
				Message: "evicting 1 pod; 2 skipped; waiting for team-b/trainer"},
		},
		{
			desc: "a rule with namespaces and a selector needs both to match",
			pods: []corev1.Pod{
				pod("train/job-a", labeled("tier", "batch")),   // both: Skip
				pod("train/svc", labeled("tier", "online")),    // namespace only
				pod("default/job-b", labeled("tier", "batch")), // labels only
			},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{
				Namespaces: []string{"train"}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}, Mode: v1alpha1.DrainSkip,
			}),
			want: Decision{Evict: nns("default/job-b", "train/svc"), Remaining: 2, Skipped: 1, Next: deadline,
				Message: "evicting 2 pods; 1 skipped; waiting for default/job-b, train/svc"},
		},
		{
			desc: "the first matching rule decides, not the most specific",
			pods: []corev1.Pod{pod("train/a", labeled("tier", "batch")), pod("train/b")},
			spec: withRules(v1alpha1.DrainSkip,
				v1alpha1.DrainRule{Namespaces: []string{"train"}, Mode: v1alpha1.DrainEvict},
				v1alpha1.DrainRule{Namespaces: []string{"train"}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}, Mode: v1alpha1.DrainSkip},
			),
			want: Decision{Evict: nns("train/a", "train/b"), Remaining: 2, Next: deadline,
				Message: "evicting 2 pods; waiting for train/a, train/b"},
		},
		{
			desc: "an empty pod selector matches every pod of the listed namespaces",
			pods: []corev1.Pod{pod("scratch/a"), pod("scratch/b", labeled("x", "y")), pod("default/c")},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{
				Namespaces: []string{"scratch"}, PodSelector: &metav1.LabelSelector{}, Mode: v1alpha1.DrainSkip,
			}),
			want: Decision{Evict: nns("default/c"), Remaining: 1, Skipped: 2, Next: deadline,
				Message: "evicting 1 pod; 2 skipped; waiting for default/c"},
		},
		{
			desc: "match expressions select by label presence and values",
			pods: []corev1.Pod{
				pod("default/interactive", labeled("workload", "notebook")),
				pod("default/training", labeled("workload", "train")),
				pod("default/unlabeled"),
			},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "workload", Operator: metav1.LabelSelectorOpIn, Values: []string{"notebook", "dev"}},
				}},
				Mode: v1alpha1.DrainDeleteAfterTimeout,
			}, v1alpha1.DrainRule{
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "workload", Operator: metav1.LabelSelectorOpDoesNotExist},
				}},
				Mode: v1alpha1.DrainSkip,
			}),
			now: deadline,
			// At the timeout: the notebook is deleted, the training pod
			// (default mode Evict) fails the drain, the unlabeled one is left.
			want: Decision{Failed: true, Remaining: 2, Skipped: 1,
				Message: "drain timed out after 10m0s: 1 pod left: default/training"},
		},
		{
			desc: "empty mode and nil timeout mean Evict and 10 minutes",
			pods: []corev1.Pod{pod("default/web")},
			spec: v1alpha1.DrainSpec{},
			want: Decision{Evict: nns("default/web"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for default/web"},
		},
		{
			desc: "empty mode and nil timeout: the pod fails the drain at 10 minutes",
			pods: []corev1.Pod{pod("default/web")},
			spec: v1alpha1.DrainSpec{},
			now:  deadline,
			want: Decision{Failed: true, Remaining: 1, Message: "drain timed out after 10m0s: 1 pod left: default/web"},
		},
		{
			desc: "a pod blocked by a budget is evicted again at every pass until the timeout",
			pods: []corev1.Pod{pod("train/trainer-0")},
			spec: defaults,
			now:  deadline.Add(-time.Nanosecond),
			want: Decision{Evict: nns("train/trainer-0"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for train/trainer-0"},
		},
		{
			desc: "Evict pods still there at the timeout fail the drain, naming them",
			pods: []corev1.Pod{pod("ns/b"), pod("ns/a"), pod("kube-system/proxy", mirror)},
			spec: defaults,
			now:  deadline,
			want: Decision{Failed: true, Remaining: 2, Ignored: 1,
				Message: "drain timed out after 10m0s: 2 pods left: ns/a, ns/b"},
		},
		{
			desc: "a terminating Evict pod still there at the timeout fails the drain too",
			pods: []corev1.Pod{pod("ns/slow-shutdown", deleting)},
			spec: defaults,
			now:  deadline.Add(time.Second),
			want: Decision{Failed: true, Remaining: 1,
				Message: "drain timed out after 10m0s: 1 pod left: ns/slow-shutdown"},
		},
		{
			desc: "the failure message names five pods and counts the rest",
			pods: []corev1.Pod{pod("a/1"), pod("a/2"), pod("a/3"), pod("a/4"), pod("a/5"), pod("a/6")},
			spec: defaults,
			now:  deadline,
			want: Decision{Failed: true, Remaining: 6,
				Message: "drain timed out after 10m0s: 6 pods left: a/1, a/2, a/3, a/4, a/5 and 1 more"},
		},
		{
			desc: "the drain does not fail at the timeout when only skipped and ignored pods are left",
			pods: []corev1.Pod{pod("monitoring/prom"), pod("kube-system/proxy", mirror)},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{Namespaces: []string{"monitoring"}, Mode: v1alpha1.DrainSkip}),
			now:  deadline.Add(time.Hour),
			want: Decision{Done: true, Skipped: 1, Ignored: 1, Message: "drained; 1 skipped; 1 ignored"},
		},
		{
			desc: "DeleteAfterTimeout pods are evicted before the timeout",
			pods: []corev1.Pod{pod("train/trainer-0")},
			spec: withRules(v1alpha1.DrainDeleteAfterTimeout),
			now:  t0.Add(5 * time.Minute),
			want: Decision{Evict: nns("train/trainer-0"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for train/trainer-0"},
		},
		{
			desc: "DeleteAfterTimeout pods still there at the timeout are deleted and waited for",
			pods: []corev1.Pod{pod("train/trainer-1"), pod("train/trainer-0")},
			spec: withRules(v1alpha1.DrainDeleteAfterTimeout),
			now:  deadline,
			want: Decision{Delete: nns("train/trainer-0", "train/trainer-1"), Remaining: 2, Next: deadline.Add(DeleteGrace),
				Message: "deleting 2 pods after the 10m0s timeout; waiting for train/trainer-0, train/trainer-1"},
		},
		{
			desc: "deleted DeleteAfterTimeout pods are waited for, not deleted again",
			pods: []corev1.Pod{pod("train/trainer-0", deleting), pod("train/trainer-1")},
			spec: withRules(v1alpha1.DrainDeleteAfterTimeout),
			now:  deadline.Add(time.Minute),
			want: Decision{Delete: nns("train/trainer-1"), Remaining: 2, Next: deadline.Add(DeleteGrace),
				Message: "deleting 1 pod after the 10m0s timeout; 1 terminating; waiting for train/trainer-0, train/trainer-1"},
		},
		{
			desc: "DeleteAfterTimeout pods still there two minutes after the timeout fail the drain",
			pods: []corev1.Pod{pod("train/stuck-finalizer", deleting)},
			spec: withRules(v1alpha1.DrainDeleteAfterTimeout),
			now:  deadline.Add(DeleteGrace),
			want: Decision{Failed: true, Remaining: 1,
				Message: "drain timed out after 10m0s: 1 pod still there 2m0s after being deleted: train/stuck-finalizer"},
		},
		{
			desc: "DeleteAfterTimeout pods just before the end of the grace are still waited for",
			pods: []corev1.Pod{pod("train/slow", deleting)},
			spec: withRules(v1alpha1.DrainDeleteAfterTimeout),
			now:  deadline.Add(DeleteGrace - time.Second),
			want: Decision{Remaining: 1, Next: deadline.Add(DeleteGrace),
				Message: "1 terminating; waiting for train/slow"},
		},
		{
			desc: "Evict pods left at the timeout fail the drain and nothing is deleted",
			pods: []corev1.Pod{pod("train/notebook", labeled("workload", "notebook")), pod("train/trainer")},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"workload": "notebook"}}, Mode: v1alpha1.DrainDeleteAfterTimeout,
			}),
			now: deadline,
			want: Decision{Failed: true, Remaining: 2,
				Message: "drain timed out after 10m0s: 1 pod left: train/trainer"},
		},
		{
			desc: "a rule picks DeleteAfterTimeout for some pods while the rest are evicted",
			pods: []corev1.Pod{pod("scratch/notebook"), pod("train/trainer")},
			spec: withRules(v1alpha1.DrainEvict, v1alpha1.DrainRule{Namespaces: []string{"scratch"}, Mode: v1alpha1.DrainDeleteAfterTimeout}),
			want: Decision{Evict: nns("scratch/notebook", "train/trainer"), Remaining: 2, Next: deadline,
				Message: "evicting 2 pods; waiting for scratch/notebook, train/trainer"},
		},
		{
			desc: "a short timeout from the spec sets Next",
			pods: []corev1.Pod{pod("default/web")},
			spec: v1alpha1.DrainSpec{Timeout: timeout(30 * time.Second), Mode: v1alpha1.DrainEvict},
			now:  t0.Add(10 * time.Second),
			want: Decision{Evict: nns("default/web"), Remaining: 1, Next: t0.Add(30 * time.Second),
				Message: "evicting 1 pod; waiting for default/web"},
		},
		{
			desc: "a zero timeout deletes DeleteAfterTimeout pods at once, without evicting them",
			pods: []corev1.Pod{pod("scratch/a")},
			spec: v1alpha1.DrainSpec{Timeout: timeout(0), Mode: v1alpha1.DrainDeleteAfterTimeout},
			want: Decision{Delete: nns("scratch/a"), Remaining: 1, Next: t0.Add(DeleteGrace),
				Message: "deleting 1 pod after the 0s timeout; waiting for scratch/a"},
		},
		{
			desc: "a negative timeout counts as zero",
			pods: []corev1.Pod{pod("default/web")},
			spec: v1alpha1.DrainSpec{Timeout: timeout(-time.Minute), Mode: v1alpha1.DrainEvict},
			want: Decision{Failed: true, Remaining: 1, Message: "drain timed out after 0s: 1 pod left: default/web"},
		},
		{
			desc: "a clock behind the start time is before the timeout",
			pods: []corev1.Pod{pod("default/web")},
			spec: defaults,
			now:  t0.Add(-time.Hour),
			want: Decision{Evict: nns("default/web"), Remaining: 1, Next: deadline,
				Message: "evicting 1 pod; waiting for default/web"},
		},
		{
			desc: "done after the timeout: the evicted pods went in time",
			pods: []corev1.Pod{pod("gpu-operator/dcgm", ownedBy("apps/v1", "DaemonSet", true))},
			spec: defaults,
			now:  deadline.Add(time.Hour),
			want: Decision{Done: true, Ignored: 1, Message: "drained; 1 ignored"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			in := slices.Clone(tc.pods)
			got, err := Plan(tc.pods, tc.spec, t0, now)
			require.NoError(t, err)
			require.Equal(t, in, tc.pods, "Plan must not change or reorder its input")

			require.Len(t, got.Waiting, got.Remaining)
			require.False(t, got.Done && got.Failed, "done and failed")
			if got.Done || got.Failed {
				require.Empty(t, got.Evict, "a finished drain evicts nothing")
				require.Empty(t, got.Delete, "a finished drain deletes nothing")
				require.True(t, got.Next.IsZero(), "a finished drain has no next check")
			}
			require.Equal(t, got.Remaining == 0, got.Done)
			acted := slices.Concat(got.Evict, got.Delete)
			require.Len(t, got.UIDs, len(acted))
			for _, nn := range acted {
				require.Contains(t, got.Waiting, nn, "every pod acted on is waited for")
				require.Equal(t, types.UID("uid-"+nn.Namespace+"-"+nn.Name), got.UIDs[nn], "UID of %s", nn)
			}

			got.Waiting, got.UIDs = nil, nil
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPlanWaitingListsEveryPodWaitedFor(t *testing.T) {
	pods := []corev1.Pod{pod("b/x"), pod("a/y", deleting), pod("a/x"), pod("m/skip"), pod("k/ds", ownedBy("apps/v1", "DaemonSet", true))}
	spec := v1alpha1.DrainSpec{Rules: []v1alpha1.DrainRule{{Namespaces: []string{"m"}, Mode: v1alpha1.DrainSkip}}}
	got, err := Plan(pods, spec, t0, t0)
	require.NoError(t, err)
	require.Equal(t, nns("a/x", "a/y", "b/x"), got.Waiting)
	require.Equal(t, nns("a/x", "b/x"), got.Evict)
	require.Equal(t, map[types.NamespacedName]types.UID{
		nns("a/x")[0]: "uid-a-x",
		nns("b/x")[0]: "uid-b-x",
	}, got.UIDs)
}

func TestPlanRejectsRulesItCannotRead(t *testing.T) {
	tests := []struct {
		desc    string
		spec    v1alpha1.DrainSpec
		wantErr string
	}{
		{
			desc: "invalid operator in a pod selector",
			spec: v1alpha1.DrainSpec{Rules: []v1alpha1.DrainRule{
				{Namespaces: []string{"a"}, Mode: v1alpha1.DrainSkip},
				{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: "Bogus", Values: []string{"x"}},
				}}, Mode: v1alpha1.DrainSkip},
			}},
			wantErr: `drain rules[1].podSelector: "Bogus" is not a valid label selector operator`,
		},
		{
			desc: "In without values",
			spec: v1alpha1.DrainSpec{Rules: []v1alpha1.DrainRule{
				{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn},
				}}, Mode: v1alpha1.DrainSkip},
			}},
			wantErr: "drain rules[0].podSelector: ",
		},
		{
			desc: "invalid label key",
			spec: v1alpha1.DrainSpec{Rules: []v1alpha1.DrainRule{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}}, Mode: v1alpha1.DrainSkip},
			}},
			wantErr: "drain rules[0].podSelector: ",
		},
		{
			desc:    "unknown default mode",
			spec:    v1alpha1.DrainSpec{Mode: "Delete"},
			wantErr: `drain mode "Delete": must be Evict, DeleteAfterTimeout or Skip`,
		},
		{
			desc:    "rule without a mode",
			spec:    v1alpha1.DrainSpec{Rules: []v1alpha1.DrainRule{{Namespaces: []string{"a"}}}},
			wantErr: `drain rules[0].mode "": must be Evict, DeleteAfterTimeout or Skip`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			// Even with no pods: a spec that cannot be read is an error, not a
			// drain that happens to be done.
			for _, pods := range [][]corev1.Pod{nil, {pod("a/x", labeled("app", "x"))}} {
				got, err := Plan(pods, tc.spec, t0, t0)
				require.ErrorContains(t, err, tc.wantErr)
				require.Equal(t, Decision{}, got)
			}
		})
	}
}
