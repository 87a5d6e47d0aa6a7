package policies_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func dur(s string) *metav1.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: v}
}

func TestMergeReclaim(t *testing.T) {
	cluster := func(name string, r v1alpha1.ReclaimRules) *v1alpha1.ClusterReclaimPolicy {
		return &v1alpha1.ClusterReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterReclaimPolicySpec{ReclaimRules: r}}
	}
	nsp := func(name string, r v1alpha1.ReclaimRules) *v1alpha1.ReclaimPolicy {
		return &v1alpha1.ReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Spec: v1alpha1.ReclaimPolicySpec{ReclaimRules: r}}
	}
	idle := func(pct int32, w string) *v1alpha1.IdleRule {
		return &v1alpha1.IdleRule{UtilizationBelowPercent: pct, Window: *dur(w)}
	}
	base := v1alpha1.ReclaimRules{Idle: idle(5, "4h"), MaxLifetime: dur("168h"), MaxPending: dur("24h"), GracePeriod: dur("1h")}
	for _, tc := range []struct {
		desc     string
		clusters []*v1alpha1.ClusterReclaimPolicy
		ns       []*v1alpha1.ReclaimPolicy
		want     policies.Reclaim
		wantOK   bool
	}{
		{desc: "nothing selects the pod"},
		{desc: "cluster policy alone; defaults for snooze, notice required, no opt-out",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", base)},
			want: policies.Reclaim{Idle: idle(5, "4h"), MaxLifetime: 168 * time.Hour, MaxPending: 24 * time.Hour,
				GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true, Policies: []string{"ClusterReclaimPolicy/c"}},
			wantOK: true},
		{desc: "grace defaults when no policy sets it",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("2h")})},
			want: policies.Reclaim{MaxPending: 2 * time.Hour, GracePeriod: v1alpha1.DefaultGracePeriod, MaxSnooze: v1alpha1.DefaultMaxSnooze,
				RequireNotice: true, Policies: []string{"ClusterReclaimPolicy/c"}},
			wantOK: true},
		{desc: "namespace tightens: highest threshold, shortest durations, unset inherits",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", base)},
			ns: []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{Idle: idle(10, "1h"), GracePeriod: dur("30m"), MaxSnooze: dur("2h"),
				Description: "team rules"})},
			want: policies.Reclaim{Idle: idle(10, "1h"), MaxLifetime: 168 * time.Hour, MaxPending: 24 * time.Hour,
				GracePeriod: 30 * time.Minute, MaxSnooze: 2 * time.Hour, RequireNotice: true, Description: "team rules",
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "two cluster policies: each field its tightest; threshold and window may come from different policies",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("a", v1alpha1.ReclaimRules{Idle: idle(5, "1h"), MaxLifetime: dur("48h")}),
				cluster("b", v1alpha1.ReclaimRules{Idle: idle(20, "6h"), MaxPending: dur("3h"), Description: "b"})},
			want: policies.Reclaim{Idle: idle(20, "1h"), MaxLifetime: 48 * time.Hour, MaxPending: 3 * time.Hour,
				GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true, Description: "b",
				Policies: []string{"ClusterReclaimPolicy/a", "ClusterReclaimPolicy/b"}},
			wantOK: true},
		{desc: "notice dropped only when every policy drops it",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), RequireNotice: ptr.To(false)})},
			ns:       []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxPending: dur("1h")})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "notice dropped by all",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), RequireNotice: ptr.To(false)})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze,
				Policies: []string{"ClusterReclaimPolicy/c"}},
			wantOK: true},
		{desc: "opt-out allowed by the cluster, withdrawn by the namespace",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(true)})},
			ns:       []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(false)})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "opt-out allowed by the cluster, inherited by the namespace",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(true)})},
			ns:       []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxPending: dur("1h")})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true, AllowOptOut: true,
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "opt-out needs every cluster policy",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("a", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(true)}),
				cluster("b", v1alpha1.ReclaimRules{MaxPending: dur("1h")})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				Policies: []string{"ClusterReclaimPolicy/a", "ClusterReclaimPolicy/b"}},
			wantOK: true},
		{desc: "namespaced policy without any cluster policy stands alone",
			ns: []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxLifetime: dur("5h"), AllowOptOut: ptr.To(true)})},
			want: policies.Reclaim{MaxLifetime: 5 * time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true, AllowOptOut: true,
				Policies: []string{"ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "a cluster policy's unset grace is the default, and the tightest wins",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("a", v1alpha1.ReclaimRules{MaxPending: dur("1h")}),
				cluster("b", v1alpha1.ReclaimRules{MaxPending: dur("1h"), GracePeriod: dur("3h"), MaxSnooze: dur("48h")})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				Policies: []string{"ClusterReclaimPolicy/a", "ClusterReclaimPolicy/b"}},
			wantOK: true},
		{desc: "without a cluster policy, one namespaced policy forbidding opt-out wins whatever the order",
			ns: []*v1alpha1.ReclaimPolicy{nsp("a", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(false)}),
				nsp("b", v1alpha1.ReclaimRules{MaxPending: dur("1h"), AllowOptOut: ptr.To(true)})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				Policies: []string{"ReclaimPolicy/team/a", "ReclaimPolicy/team/b"}},
			wantOK: true},
		{desc: "dry run from any policy; notify from a dry-run policy; unknown owners from any",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), DryRun: &v1alpha1.ReclaimDryRun{Enabled: true, Notify: true}})},
			ns:       []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxPending: dur("1h"), DeletePodsOfUnknownOwners: ptr.To(true)})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true,
				DryRun: true, DryRunNotify: true, DeleteUnknownOwners: true,
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
		{desc: "notify of a policy not in dry run does not count",
			clusters: []*v1alpha1.ClusterReclaimPolicy{cluster("c", v1alpha1.ReclaimRules{MaxPending: dur("1h"), DryRun: &v1alpha1.ReclaimDryRun{Enabled: true}})},
			ns:       []*v1alpha1.ReclaimPolicy{nsp("n", v1alpha1.ReclaimRules{MaxPending: dur("1h"), DryRun: &v1alpha1.ReclaimDryRun{Notify: true}})},
			want: policies.Reclaim{MaxPending: time.Hour, GracePeriod: time.Hour, MaxSnooze: v1alpha1.DefaultMaxSnooze, RequireNotice: true, DryRun: true,
				Policies: []string{"ClusterReclaimPolicy/c", "ReclaimPolicy/team/n"}},
			wantOK: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := policies.MergeReclaim(tc.clusters, tc.ns)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMergeReclaimDoesNotAliasPolicies(t *testing.T) {
	c := &v1alpha1.ClusterReclaimPolicy{Spec: v1alpha1.ClusterReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{
		Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: *dur("4h")}}}}
	n := &v1alpha1.ReclaimPolicy{Spec: v1alpha1.ReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{
		Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 10, Window: *dur("1h")}}}}
	_, _ = policies.MergeReclaim([]*v1alpha1.ClusterReclaimPolicy{c}, []*v1alpha1.ReclaimPolicy{n})
	require.Equal(t, int32(5), c.Spec.Idle.UtilizationBelowPercent)
	require.Equal(t, 4*time.Hour, c.Spec.Idle.Window.Duration)
}

func TestExemptsAndSelectsPod(t *testing.T) {
	c := &v1alpha1.ClusterReclaimPolicy{Spec: v1alpha1.ClusterReclaimPolicySpec{
		ExemptPodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"serving": "true"}}}}
	require.True(t, policies.ExemptsPod(c, map[string]string{"serving": "true"}))
	require.False(t, policies.ExemptsPod(c, map[string]string{"serving": "false"}))
	require.False(t, policies.ExemptsPod(&v1alpha1.ClusterReclaimPolicy{}, map[string]string{"serving": "true"}))
	n := &v1alpha1.ReclaimPolicy{Spec: v1alpha1.ReclaimPolicySpec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": "notebook"}}}}
	require.True(t, policies.SelectsPod(n, map[string]string{"kind": "notebook"}))
	require.False(t, policies.SelectsPod(n, nil))
	require.True(t, policies.SelectsPod(&v1alpha1.ReclaimPolicy{}, nil))
}
