package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// notice is a notice about pod ns/name with UID "uid-"+name in state.
func notice(name string, state v1alpha1.OwnerNoticeState, mut ...func(*v1alpha1.OwnerNotice)) v1alpha1.OwnerNotice {
	n := v1alpha1.OwnerNotice{UID: "uid-" + name, Namespace: "team-a", Name: name, State: state,
		Recipient: v1alpha1.OwnerNoticeRecipient{Email: "alice@example.com"}}
	for _, m := range mut {
		m(&n)
	}
	return n
}

func claimedAt(at time.Time) func(*v1alpha1.OwnerNotice) {
	return func(n *v1alpha1.OwnerNotice) { n.ClaimedAt, n.Claimer = ptrTime(at), "r1" }
}

func deleted(n *v1alpha1.OwnerNotice) { n.Deleted = true }

// states lists "name=State" for each notice, in order.
func states(notices []v1alpha1.OwnerNotice) []string {
	var out []string
	for _, n := range notices {
		s := n.Name + "=" + string(n.State)
		if n.Deleted {
			s += "(deleted)"
		}
		out = append(out, s)
	}
	return out
}

func nn(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "team-a", Name: name}
}

func TestNoticesToWrite(t *testing.T) {
	decision := func(evict, del []string) drain.Decision {
		d := drain.Decision{UIDs: map[types.NamespacedName]types.UID{}}
		for _, p := range evict {
			d.Evict = append(d.Evict, nn(p))
			d.UIDs[nn(p)] = types.UID("uid-" + p)
		}
		for _, p := range del {
			d.Delete = append(d.Delete, nn(p))
			d.UIDs[nn(p)] = types.UID("uid-" + p)
		}
		return d
	}
	for _, tc := range []struct {
		desc       string
		notices    []v1alpha1.OwnerNotice
		evict, del []string
		want       []string
	}{
		{desc: "nothing to stop", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending)}},
		{desc: "new pods, evicted and deleted, in the decision's order", evict: []string{"a", "b"}, del: []string{"c"},
			want: []string{"a", "b", "c(deleted)"}},
		{desc: "pods with a notice already: written once, before the first pass that stops them",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending), notice("b", v1alpha1.OwnerNoticeSent)},
			evict:   []string{"a", "b", "c"}, want: []string{"c"}},
		{desc: "a budget kept it past the timeout: the eviction becomes a deletion, which the notice must say first",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending), notice("b", v1alpha1.OwnerNoticePending, deleted)},
			del:     []string{"a", "b"}, want: []string{"a(deleted)"}},
		{desc: "a pod recreated under the same name is another pod",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeSent, func(n *v1alpha1.OwnerNotice) { n.UID = "old-uid" })},
			evict:   []string{"a"}, want: []string{"a"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got []string
			for _, s := range noticesToWrite(tc.notices, decision(tc.evict, tc.del)) {
				require.Equal(t, types.UID("uid-"+s.Pod.Name), s.UID)
				g := s.Pod.Name
				if s.Deleted {
					g += "(deleted)"
				}
				got = append(got, g)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAddNotices(t *testing.T) {
	t0 := noticeTime
	sent := func(name string, at time.Time) v1alpha1.OwnerNotice {
		return notice(name, v1alpha1.OwnerNoticeSent, func(n *v1alpha1.OwnerNotice) { n.SentAt = ptrTime(at) })
	}
	for _, tc := range []struct {
		desc           string
		notices, add   []v1alpha1.OwnerNotice
		max            int
		want           []string
		wantUnrecorded []string
	}{
		{desc: "appended in order", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeOwed)},
			add: []v1alpha1.OwnerNotice{notice("b", v1alpha1.OwnerNoticePending), notice("c", v1alpha1.OwnerNoticePending)}, max: 5,
			want: []string{"a=Owed", "b=Pending", "c=Pending"}},
		{desc: "same UID replaced in place", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending), notice("b", v1alpha1.OwnerNoticeOwed)},
			add: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending, deleted)}, max: 2,
			want: []string{"a=Pending(deleted)", "b=Owed"}},
		{desc: "full: the oldest sent and failed notices make room",
			notices: []v1alpha1.OwnerNotice{sent("s2", t0.Add(time.Minute)), notice("o", v1alpha1.OwnerNoticeOwed), sent("s1", t0),
				notice("f", v1alpha1.OwnerNoticeFailed, func(n *v1alpha1.OwnerNotice) { n.StoppedAt = ptrTime(t0.Add(2 * time.Minute)) })},
			add: []v1alpha1.OwnerNotice{notice("x", v1alpha1.OwnerNoticePending), notice("y", v1alpha1.OwnerNoticePending)}, max: 4,
			want: []string{"o=Owed", "f=Failed", "x=Pending", "y=Pending"}},
		{desc: "full of unsent notices: what does not fit is returned, never dropped unseen",
			notices: []v1alpha1.OwnerNotice{notice("o", v1alpha1.OwnerNoticeOwed), notice("c", v1alpha1.OwnerNoticeClaimed), sent("s", t0)},
			add:     []v1alpha1.OwnerNotice{notice("x", v1alpha1.OwnerNoticePending), notice("y", v1alpha1.OwnerNoticePending)}, max: 3,
			want: []string{"o=Owed", "c=Claimed", "x=Pending"}, wantUnrecorded: []string{"y=Pending"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := states(tc.notices)
			got, unrecorded := addNotices(tc.notices, tc.add, tc.max)
			require.Equal(t, tc.want, states(got))
			require.Equal(t, tc.wantUnrecorded, states(unrecorded))
			require.LessOrEqual(t, len(got), tc.max)
			require.Equal(t, before, states(tc.notices), "the input is not changed")
		})
	}
}

func TestNoticesStopped(t *testing.T) {
	now := noticeTime
	notices := []v1alpha1.OwnerNotice{
		notice("evicted", v1alpha1.OwnerNoticePending),
		notice("deleted", v1alpha1.OwnerNoticePending),
		notice("blocked", v1alpha1.OwnerNoticePending),
		notice("sent", v1alpha1.OwnerNoticeSent),
	}
	stopped := []drain.Stopped{
		{Pod: nn("evicted"), UID: "uid-evicted"},
		{Pod: nn("deleted"), UID: "uid-deleted", Deleted: true},
		{Pod: nn("sent"), UID: "uid-sent"},
		{Pod: nn("nobody"), UID: "uid-nobody"},
		{Pod: nn("no-uid")},
	}
	got := noticesStopped(notices, stopped, now)
	require.Equal(t, []string{"evicted=Owed", "deleted=Owed(deleted)", "blocked=Pending", "sent=Sent"}, states(got),
		"stopped pods are owed; a pod a budget kept is not; a notice sent stays sent")
	require.Equal(t, now, got[0].StoppedAt.Time)
	require.Nil(t, got[2].StoppedAt)
	require.Equal(t, v1alpha1.OwnerNoticePending, notices[0].State, "the input is not changed")
}

func TestNoticesSeenStopped(t *testing.T) {
	now := noticeTime
	pod := func(name string, terminating bool) corev1.Pod {
		p := *testPod("team-a", name)
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
		}
		return p
	}
	for _, tc := range []struct {
		desc    string
		notices []v1alpha1.OwnerNotice
		pods    []corev1.Pod
		want    []string
	}{
		{desc: "running: still pending", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending)},
			pods: []corev1.Pod{pod("a", false)}, want: []string{"a=Pending"}},
		{desc: "terminating: its eviction was accepted by a pass whose record was lost",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending, deleted)},
			pods:    []corev1.Pod{pod("a", true)}, want: []string{"a=Owed(deleted)"}},
		{desc: "gone", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending), notice("b", v1alpha1.OwnerNoticePending)},
			pods: []corev1.Pod{pod("b", false)}, want: []string{"a=Owed", "b=Pending"}},
		{desc: "recreated under the same name: the notice's pod is gone",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending, func(n *v1alpha1.OwnerNotice) { n.UID = "old-uid" })},
			pods:    []corev1.Pod{pod("a", false)}, want: []string{"a=Owed"}},
		{desc: "only pending notices change",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeClaimed), notice("b", v1alpha1.OwnerNoticeSent), notice("c", v1alpha1.OwnerNoticeFailed)},
			want:    []string{"a=Claimed", "b=Sent", "c=Failed"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := noticesSeenStopped(tc.notices, tc.pods, now)
			require.Equal(t, tc.want, states(got))
			for i, n := range got {
				if n.State == v1alpha1.OwnerNoticeOwed && tc.notices[i].State == v1alpha1.OwnerNoticePending {
					require.Equal(t, now, n.StoppedAt.Time)
					require.Equal(t, v1alpha1.OwnerNoticePending, tc.notices[i].State, "the input is not changed")
				}
			}
		})
	}
}

func TestClaimable(t *testing.T) {
	now := noticeTime
	for _, tc := range []struct {
		desc     string
		notices  []v1alpha1.OwnerNotice
		want     []int
		wantNext time.Time
	}{
		{desc: "none"},
		{desc: "pending: not stopped, not owed", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticePending)}},
		{desc: "owed, in order", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeOwed), notice("b", v1alpha1.OwnerNoticeSent), notice("c", v1alpha1.OwnerNoticeOwed)},
			want: []int{0, 2}},
		{desc: "claimed just now by another: held until the claim expires",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeClaimed, claimedAt(now.Add(-time.Minute)))}, wantNext: now.Add(2 * time.Minute)},
		{desc: "a claim older than the timeout (the claimer crashed or Slack failed): anyone's, sent again",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeClaimed, claimedAt(now.Add(-noticeClaimTimeout)))}, want: []int{0}},
		{desc: "a claim without a time is anyone's", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeClaimed)}, want: []int{0}},
		{desc: "the earliest claim to expire",
			notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeClaimed, claimedAt(now.Add(-time.Second))), notice("b", v1alpha1.OwnerNoticeClaimed, claimedAt(now.Add(-2*time.Minute))),
				notice("c", v1alpha1.OwnerNoticeOwed)},
			want: []int{2}, wantNext: now.Add(time.Minute)},
		{desc: "sent and failed: never again", notices: []v1alpha1.OwnerNotice{notice("a", v1alpha1.OwnerNoticeSent), notice("b", v1alpha1.OwnerNoticeFailed)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, next := claimable(tc.notices, now)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantNext, next)
		})
	}
}

// An operation drains at most a node's pods; the status keeps a notice for
// each of the largest node's pods with room to spare.
func TestOwnerNoticesBound(t *testing.T) {
	var add []v1alpha1.OwnerNotice
	for i := range 250 {
		add = append(add, notice(fmt.Sprintf("p%03d", i), v1alpha1.OwnerNoticePending))
	}
	got, unrecorded := addNotices(nil, add, v1alpha1.MaxOwnerNotices)
	require.Len(t, got, 250)
	require.Empty(t, unrecorded)
}
