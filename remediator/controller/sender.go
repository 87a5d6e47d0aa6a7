package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Bounds of the Slack sender.
const (
	// noticeQueueSize is how many operations may wait for the sender. A
	// full queue loses nothing: the operation's notices stay owed in its
	// status, and the pass noticeRequeue later queues it again.
	noticeQueueSize = 512
	// noticeRequeue is how soon an operation whose notices found the queue
	// full is looked at again.
	noticeRequeue = 10 * time.Second
	// noticeTimeout bounds one message, its retries and Retry-After waits
	// included, so that a Slack that hangs cannot hold the queue for long;
	// shorter than noticeClaimTimeout.
	noticeTimeout = policies.NoticeSendTimeout
	// maxNoticeConflicts bounds the status writes of one claim or record
	// that conflict in a row, each after a fresh read; then they are
	// paced like other failures.
	maxNoticeConflicts = 10
	// senderName names the sender in its logger and in
	// kubemedic_remediation_conflicts_total.
	senderName = "owner-notices"
)

// recordBackoff paces the status writes of claims and records that fail
// for another reason than a conflict: about 6 s in all, then the message
// waits for its claim to expire.
var recordBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}

// sender posts the notices owed in NodeOperations' status, one operation
// at a time from a bounded queue of their names, with one worker, so that
// a reconcile never waits for Slack, whose retries honour Retry-After and
// can take seconds or minutes. For each notice it can claim it writes the
// claim (with the record of the notice before, in the same status write),
// posts, and records the result; see owed.go. Messages about one
// operation go out in the order of its notices.
//
// What the queue holds is only a hint: the status says what is owed, the
// reconciler queues an operation again until nothing is, and a message
// queued when the manager stops is sent by the next leader.
//
// enqueue is safe for concurrent use; Start runs the one worker. mu guards
// queued.
type sender struct {
	notifier notify.Notifier
	// client writes claims and records to the operations' status; reader
	// reads operations and nodes from the API server, not a cache, so that
	// a claim is decided on what was last written.
	client  client.Client
	reader  client.Reader
	clock   clock.PassiveClock
	claimer string
	queue   chan string
	timeout time.Duration
	results *prometheus.CounterVec // by result: sent, failed, dropped
	// conflicts counts the status writes that conflicted; nil: not
	// counted.
	conflicts prometheus.Counter
	log       logr.Logger

	mu     sync.Mutex
	queued map[string]bool // names in queue
}

var (
	_ manager.Runnable               = (*sender)(nil)
	_ manager.LeaderElectionRunnable = (*sender)(nil)
)

// newSender returns a sender claiming as claimer (the process, for
// people reading the status).
func newSender(n notify.Notifier, c client.Client, reader client.Reader, clk clock.PassiveClock, claimer string, size int, timeout time.Duration, results *prometheus.CounterVec, logger logr.Logger) *sender {
	return &sender{notifier: n, client: c, reader: reader, clock: clk, claimer: claimer, queue: make(chan string, size),
		timeout: timeout, results: results, log: logger, queued: map[string]bool{}}
}

// enqueue queues the operation's name without blocking, once while it
// waits. It reports false, and logs it, when the queue is full.
func (s *sender) enqueue(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queued[op] {
		return true
	}
	select {
	case s.queue <- op:
		s.queued[op] = true
		return true
	default:
		s.log.Info("Slack queue full: the operation's messages stay owed and are queued again later", "nodeOperation", op, "queueSize", cap(s.queue), "retryIn", noticeRequeue)
		return false
	}
}

// Start sends the notices of queued operations until ctx ends.
func (s *sender) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case op := <-s.queue:
			s.mu.Lock()
			delete(s.queued, op)
			s.mu.Unlock()
			if ctx.Err() != nil {
				return nil
			}
			s.sendOwed(ctx, op)
		}
	}
}

// NeedLeaderElection is true: only the leader drains and sends; a standby
// that becomes leader finds what is owed in the operations' status.
func (s *sender) NeedLeaderElection() bool { return true }

// sendOwed claims, sends and records the operation's claimable notices
// one by one, then the result replies owed (owed.go): each status write
// records the notice just sent (or refused) and claims the next, with an
// optimistic lock, on the operation as read from the API server. It
// returns when nothing is left to claim, when Slack fails in a way worth
// retrying (the claim expires and a later pass queues the operation
// again), or when the status cannot be written.
func (s *sender) sendOwed(ctx context.Context, name string) {
	logger := s.log.WithValues("nodeOperation", name)
	var (
		done     *v1alpha1.OwnerNotice // sent or refused, not yet recorded
		node     *corev1.Node
		nodeRead bool
		// policy says what the ladder does after a failed GPU test.
		policy     *v1alpha1.RemediationPolicy
		policyRead bool
		backoff    = recordBackoff
		// conflicts in a row: the reconciler writes the same status.
		conflicts int
	)
	for ctx.Err() == nil {
		op := &v1alpha1.NodeOperation{}
		if err := s.reader.Get(ctx, client.ObjectKey{Name: name}, op); err != nil {
			if apierrors.IsNotFound(err) {
				if done != nil {
					logger.Info("Operation deleted before its sent Slack message was recorded", "pod", done.Namespace+"/"+done.Name)
				}
				return
			}
			if !s.pause(ctx, &backoff) {
				if ctx.Err() == nil {
					logger.Error(err, "Reading the operation to send its Slack messages failed; retried on a later pass")
				}
				return
			}
			continue
		}
		orig := op.DeepCopy()
		now := s.clock.Now()
		if done != nil {
			if i := noticeIndex(op.Status.OwnerNotices, done.UID); i >= 0 {
				op.Status.OwnerNotices[i] = *done
			}
		}
		var next *v1alpha1.OwnerNotice
		if idx, _ := claimable(op.Status.OwnerNotices, now); len(idx) > 0 {
			n := &op.Status.OwnerNotices[idx[0]]
			n.State, n.ClaimedAt, n.Claimer = v1alpha1.OwnerNoticeClaimed, ptrTime(now), s.claimer
			c := *n
			next = &c
		} else if idx, _ := resultsClaimable(op, now); len(idx) > 0 {
			n := &op.Status.OwnerNotices[idx[0]]
			n.ResultReply, n.ClaimedAt, n.Claimer = v1alpha1.OwnerNoticeClaimed, ptrTime(now), s.claimer
			c := *n
			next = &c
		}
		if next == nil && done == nil {
			return
		}
		if err := s.client.Status().Patch(ctx, op, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return
			case ctx.Err() != nil:
				return // stopping: the next leader finds what is owed
			case apierrors.IsConflict(err) && conflicts < maxNoticeConflicts:
				// Another writer (the reconciler, another leader): read
				// and decide again.
				conflicts++
				if s.conflicts != nil {
					s.conflicts.Inc()
				}
				logger.V(1).Info("Optimistic-concurrency conflict writing the Slack message claims and records; reading the operation again", "conflicts", conflicts)
				continue
			case !s.pause(ctx, &backoff):
				if ctx.Err() == nil {
					logger.Error(err, "Writing the Slack message claims and records to the operation's status failed; a sent message may be repeated once its claim expires")
				}
				return
			}
			continue
		}
		done, backoff, conflicts = nil, recordBackoff, 0
		if next == nil {
			return
		}
		if !nodeRead {
			node, nodeRead = s.node(ctx, op.Spec.NodeName), true
		}
		if next.State == v1alpha1.OwnerNoticeClaimed {
			done = s.send(ctx, op, node, *next)
		} else {
			if !policyRead {
				policy, policyRead = s.policy(ctx, op), true
			}
			done = s.sendResult(ctx, op, node, policy, *next)
		}
		if done == nil {
			return
		}
	}
}

// pause waits the backoff's next step; false when it is spent or ctx ended.
func (s *sender) pause(ctx context.Context, b *wait.Backoff) bool {
	if b.Steps <= 1 {
		return false
	}
	t := time.NewTimer(b.Step())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// node reads the operation's node for its issue annotation; nil when it
// cannot be read.
func (s *sender) node(ctx context.Context, name string) *corev1.Node {
	n := &corev1.Node{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			s.log.Error(err, "Reading the node for its issue link failed; messages go without it", "node", name)
		}
		return nil
	}
	return n
}

// send posts the claimed notice n and returns it as it must be recorded:
// Sent, or Failed when Slack refused it for good; nil when Slack failed in
// a way worth retrying, leaving the claim to expire.
func (s *sender) send(parent context.Context, op *v1alpha1.NodeOperation, node *corev1.Node, n v1alpha1.OwnerNotice) *v1alpha1.OwnerNotice {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	to, msg := noticeMessage(op, n, issueURL(op, node))
	pod := n.Namespace + "/" + n.Name
	s.log.V(1).Info("Sending Slack message to a pod's owner", "nodeOperation", op.Name, "pod", pod, "podUID", n.UID, "recipient", to.String())
	th, err := s.notifier.Post(ctx, to, nil, msg)
	if err != nil && parent.Err() != nil {
		// Stopping: the claim expires, and the next leader sends it.
		s.log.V(1).Info("Slack message to a pod's owner not sent: stopping", "nodeOperation", op.Name, "pod", pod, "error", err.Error())
		return nil
	}
	if err != nil {
		s.results.WithLabelValues(notificationFailed).Inc()
		if notify.IsPermanent(err) {
			s.log.Error(err, "Slack refused the message to a pod's owner; it is not sent again", "nodeOperation", op.Name, "pod", pod, "podUID", n.UID, "recipient", to.String())
			n.State, n.Message = v1alpha1.OwnerNoticeFailed, clip(err.Error(), 512)
			return &n
		}
		s.log.Error(err, "Slack message to a pod's owner failed; sent again once its claim expires", "nodeOperation", op.Name, "pod", pod, "podUID", n.UID, "recipient", to.String(), "claimTimeout", noticeClaimTimeout)
		return nil
	}
	s.results.WithLabelValues(notificationSent).Inc()
	kv := []any{"nodeOperation", op.Name, "pod", pod, "podUID", n.UID, "recipient", th.Recipient, "channel", th.Channel, "ts", th.TS}
	if th.Fallback != "" {
		kv = append(kv, "fallback", th.Fallback)
	}
	s.log.Info("Told a pod's owner on Slack that a drain stopped the pod", kv...)
	n.State, n.SentAt, n.Channel, n.TS = v1alpha1.OwnerNoticeSent, ptrTime(s.clock.Now()), clip(th.Channel, 64), clip(th.TS, 64)
	return &n
}

// policy reads the operation's RemediationPolicy for what its ladder does
// after a failed GPU test; nil when the operation has none, its test
// passed, or the policy cannot be read (the reply then says less).
func (s *sender) policy(ctx context.Context, op *v1alpha1.NodeOperation) *v1alpha1.RemediationPolicy {
	if passed, _ := gateVerdict(op); passed || op.Spec.Policy == "" {
		return nil
	}
	p := &v1alpha1.RemediationPolicy{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: op.Spec.Policy}, p); err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			s.log.Error(err, "Reading the operation's policy for its next step failed; the GPU test's result goes without it", "policy", op.Spec.Policy)
		}
		return nil
	}
	return p
}

// sendResult replies in the thread of the notice n, whose result reply is
// claimed, with the operation's GPU test result, and returns n as it must
// be recorded: ResultReply Sent, or Failed when Slack refused it for good;
// nil when Slack failed in a way worth retrying, leaving the claim to
// expire.
func (s *sender) sendResult(parent context.Context, op *v1alpha1.NodeOperation, node *corev1.Node, policy *v1alpha1.RemediationPolicy, n v1alpha1.OwnerNotice) *v1alpha1.OwnerNotice {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	to := notify.Recipient{UserID: n.Recipient.UserID, Email: n.Recipient.Email, Channel: n.Recipient.Channel, Source: n.Recipient.Source}
	msg := resultMessage(op, n, policy, issueURL(op, node))
	pod := n.Namespace + "/" + n.Name
	kv := []any{"nodeOperation", op.Name, "pod", pod, "podUID", n.UID, "channel", n.Channel, "thread", n.TS}
	s.log.V(1).Info("Replying to a pod's owner with the GPU test's result", kv...)
	_, err := s.notifier.Post(ctx, to, &notify.Thread{Channel: n.Channel, TS: n.TS}, msg)
	if err != nil && parent.Err() != nil {
		s.log.V(1).Info("GPU test result not sent to a pod's owner: stopping", append(kv, "error", err.Error())...)
		return nil
	}
	if err != nil {
		s.results.WithLabelValues(notificationFailed).Inc()
		if notify.IsPermanent(err) {
			s.log.Error(err, "Slack refused the GPU test's result for a pod's owner; it is not sent again", kv...)
			n.ResultReply, n.Message = v1alpha1.OwnerNoticeFailed, clip("result reply: "+err.Error(), 512)
			return &n
		}
		s.log.Error(err, "GPU test result for a pod's owner failed; sent again once its claim expires", append(kv, "claimTimeout", noticeClaimTimeout)...)
		return nil
	}
	s.results.WithLabelValues(notificationSent).Inc()
	s.log.Info("Told a pod's owner on Slack the result of the GPU test after the drain", kv...)
	n.ResultReply = v1alpha1.OwnerNoticeSent
	return &n
}

// noticeIndex is the index of the notice with uid, -1 when there is none.
func noticeIndex(notices []v1alpha1.OwnerNotice, uid string) int {
	for i := range notices {
		if notices[i].UID == uid {
			return i
		}
	}
	return -1
}

// claimerName names this process in the claims it writes: the host (the
// pod's name) and a random suffix, as a restarted container keeps its host.
func claimerName(host string) string {
	return fmt.Sprintf("%s_%s", clip(host, 240), rand.String(8))
}
