package controller

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// The messages to the owners of the pods a drain stops follow the
// janitor's claim → send → record model, kept in the operation's
// status.ownerNotices so that it outlives the process:
//
//  1. A drain pass that is about to stop pods first writes a Pending notice
//     for each (the pass ends there; the next one stops them).
//  2. The pass that stops them marks those the API server accepted Owed; a
//     later pass that finds a Pending notice's pod terminating or gone
//     marks it Owed too (the record of the pass that stopped it was lost).
//  3. The sender claims an Owed notice (a status write with an optimistic
//     lock: one claimer wins), posts it, then records it Sent, or Failed
//     when Slack refused it for good. A claim older than
//     noticeClaimTimeout is anyone's again.
//
// A crash, a restart, a second leader or a full queue can therefore at
// worst repeat a message (a crash between Slack's answer and the record,
// an answer lost after the post), and never lose one. The decisions are the
// pure functions below.

// noticeClaimTimeout is how long a claimed, unrecorded message holds
// before anyone may send it again: longer than noticeTimeout, the bound of
// one send, and its record's retries.
const noticeClaimTimeout = policies.NoticeClaimTimeout

// stopping is a pod a drain pass is about to stop, whose notice must be
// written before it is.
type stopping struct {
	Pod types.NamespacedName
	UID types.UID
	// Deleted: the pass deletes it (after the drain timeout) instead of
	// evicting it.
	Deleted bool
}

// noticesToWrite are the pods that d is about to stop whose notice is
// missing, or says another way of stopping (an eviction that became a
// deletion at the timeout), in d's order.
func noticesToWrite(notices []v1alpha1.OwnerNotice, d drain.Decision) []stopping {
	byUID := make(map[string]*v1alpha1.OwnerNotice, len(notices))
	for i := range notices {
		byUID[notices[i].UID] = &notices[i]
	}
	var out []stopping
	add := func(pods []types.NamespacedName, deleted bool) {
		for _, p := range pods {
			uid := d.UIDs[p]
			if uid == "" {
				continue // no UID to key a notice on; Plan always gives one
			}
			n := byUID[string(uid)]
			if n == nil || (n.State == v1alpha1.OwnerNoticePending && n.Deleted != deleted) {
				out = append(out, stopping{Pod: p, UID: uid, Deleted: deleted})
			}
		}
	}
	add(d.Evict, false)
	add(d.Delete, true)
	return out
}

// addNotices puts add into notices: a notice with the UID of one already
// there replaces it, others are appended. The list holds at most max: when
// it is full, the Sent and Failed notices go first, oldest first (their
// pods are stopped and never stopped again), and what still does not fit
// is returned in unrecorded.
func addNotices(notices, add []v1alpha1.OwnerNotice, max int) (out, unrecorded []v1alpha1.OwnerNotice) {
	out = slices.Clone(notices)
	for _, n := range add {
		if i := slices.IndexFunc(out, func(o v1alpha1.OwnerNotice) bool { return o.UID == n.UID }); i >= 0 {
			out[i] = n
			continue
		}
		if len(out) >= max {
			out = forgetOldestDone(out)
		}
		if len(out) >= max {
			unrecorded = append(unrecorded, n)
			continue
		}
		out = append(out, n)
	}
	return out, unrecorded
}

// forgetOldestDone removes the Sent or Failed notice recorded first (by
// SentAt, else StoppedAt), if there is one.
func forgetOldestDone(notices []v1alpha1.OwnerNotice) []v1alpha1.OwnerNotice {
	oldest := -1
	var oldestAt time.Time
	for i, n := range notices {
		if n.State != v1alpha1.OwnerNoticeSent && n.State != v1alpha1.OwnerNoticeFailed {
			continue
		}
		at := timeOf(n.SentAt)
		if at.IsZero() {
			at = timeOf(n.StoppedAt)
		}
		if oldest < 0 || at.Before(oldestAt) {
			oldest, oldestAt = i, at
		}
	}
	if oldest < 0 {
		return notices
	}
	return slices.Delete(notices, oldest, oldest+1)
}

// noticesStopped marks the Pending notices of the pods a drain pass
// stopped (the API server accepted the eviction or deletion) Owed, at now.
// The other notices are returned as they are.
func noticesStopped(notices []v1alpha1.OwnerNotice, stopped []drain.Stopped, now time.Time) []v1alpha1.OwnerNotice {
	byUID := make(map[string]drain.Stopped, len(stopped))
	for _, s := range stopped {
		if s.UID != "" {
			byUID[string(s.UID)] = s
		}
	}
	out := slices.Clone(notices)
	for i := range out {
		s, ok := byUID[out[i].UID]
		if !ok || out[i].State != v1alpha1.OwnerNoticePending {
			continue
		}
		out[i].State, out[i].Deleted, out[i].StoppedAt = v1alpha1.OwnerNoticeOwed, s.Deleted, ptrTime(now)
	}
	return out
}

// noticesSeenStopped marks Owed, at now, the Pending notices whose pod is
// terminating or no longer among pods (all the pods bound to the node, as
// the drain listed them): the drain was stopping it, and the record of the
// pass that did may have been lost. A pod a disruption budget kept that
// then went by other means (its owner deleted it) is counted as stopped
// too: telling an owner once too often is the side this errs on.
func noticesSeenStopped(notices []v1alpha1.OwnerNotice, pods []corev1.Pod, now time.Time) []v1alpha1.OwnerNotice {
	pending := false
	for _, n := range notices {
		pending = pending || n.State == v1alpha1.OwnerNoticePending
	}
	if !pending {
		return notices
	}
	running := make(map[string]bool, len(pods))
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			running[string(pods[i].UID)] = true
		}
	}
	out := slices.Clone(notices)
	for i := range out {
		if out[i].State == v1alpha1.OwnerNoticePending && !running[out[i].UID] {
			out[i].State, out[i].StoppedAt = v1alpha1.OwnerNoticeOwed, ptrTime(now)
		}
	}
	return out
}

// claimable returns the indexes of the notices anyone may claim now, in
// order: Owed, or Claimed longer than noticeClaimTimeout ago (the claimer
// crashed, or Slack failed it in a way worth retrying). next is when the
// earliest claim held now expires, zero when none is held.
func claimable(notices []v1alpha1.OwnerNotice, now time.Time) (idx []int, next time.Time) {
	for i, n := range notices {
		switch n.State {
		case v1alpha1.OwnerNoticeOwed:
			idx = append(idx, i)
		case v1alpha1.OwnerNoticeClaimed:
			if claimExpired(n.ClaimedAt, now, &next) {
				idx = append(idx, i)
			}
		}
	}
	return idx, next
}

// claimExpired reports whether a claim made at claimedAt has expired by
// now; a claim still held moves next to its expiry when that is earlier.
func claimExpired(claimedAt *metav1.Time, now time.Time, next *time.Time) bool {
	expires := timeOf(claimedAt).Add(noticeClaimTimeout)
	if !now.Before(expires) {
		return true
	}
	if next.IsZero() || expires.Before(*next) {
		*next = expires
	}
	return false
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// The result of the operation's GPU test (spec.validate) goes to each
// owner who was told of the drain, as one reply in the thread of the
// message about their pod, in the same claim → send → record model kept
// in the notice's resultReply: owed (empty) once the notice is Sent and
// the operation has ended on the test's verdict, Claimed, then Sent or
// Failed. The owners of pods whose message was refused, or never left
// (Pending), are not told: they have no thread. A reply is repeated at
// worst, as a message is, never lost. It is a reply, not a chat.update
// of the message, so that the owner is notified of it.

// gateVerdict is how the operation's GPU test ended the operation: passed
// (Succeeded after a pass) or failed (Failed on a failure or no answer
// twice); ok is false while the operation runs, for an operation without
// a test, and for one that ended before its test gave a verdict.
func gateVerdict(op *v1alpha1.NodeOperation) (passed, ok bool) {
	v := op.Status.Validation
	if op.Spec.Validate == nil || v == nil {
		return false, false
	}
	switch {
	case op.Status.Phase == v1alpha1.PhaseSucceeded && v.Result == v1alpha1.ValidationPassed:
		return true, true
	case op.Status.Phase == v1alpha1.PhaseFailed && v.Result == v1alpha1.ValidationFailed:
		return false, true
	}
	return false, false
}

// resultsClaimable returns the indexes of the notices whose result reply
// anyone may claim now, in order: owed (the notice is Sent into a thread,
// the operation ended on its test's verdict, and no reply was claimed),
// or Claimed longer than noticeClaimTimeout ago. next is when the
// earliest reply claim held now expires, zero when none is held.
func resultsClaimable(op *v1alpha1.NodeOperation, now time.Time) (idx []int, next time.Time) {
	if _, ok := gateVerdict(op); !ok {
		return nil, time.Time{}
	}
	for i, n := range op.Status.OwnerNotices {
		if n.State != v1alpha1.OwnerNoticeSent || n.Channel == "" || n.TS == "" {
			continue
		}
		switch n.ResultReply {
		case "":
			idx = append(idx, i)
		case v1alpha1.OwnerNoticeClaimed:
			if claimExpired(n.ClaimedAt, now, &next) {
				idx = append(idx, i)
			}
		}
	}
	return idx, next
}

// owedNow combines claimable and resultsClaimable: whether anything of
// the operation's may be claimed now, and when the earliest claim held
// expires (zero: none).
func owedNow(op *v1alpha1.NodeOperation, now time.Time) (any bool, next time.Time) {
	idx, n1 := claimable(op.Status.OwnerNotices, now)
	ridx, n2 := resultsClaimable(op, now)
	next = n1
	if next.IsZero() || (!n2.IsZero() && n2.Before(next)) {
		next = n2
	}
	return len(idx)+len(ridx) > 0, next
}
