package controller

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubemedic/kubemedic/internal/notify"
)

// Bounds of the Slack sender.
const (
	// noticeQueueSize is how many messages may wait for Slack. A drain
	// stops at most a node's pods (110 by default), a few nodes at a time.
	noticeQueueSize = 512
	// noticeTimeout bounds one message, its retries and Retry-After waits
	// included, so that a Slack that hangs cannot hold the queue for long.
	noticeTimeout = 3 * time.Minute
)

// notice is one Slack message about one pod, the root of its own thread.
type notice struct {
	to  notify.Recipient
	msg notify.Message
	pod types.NamespacedName
	uid types.UID
}

// sender posts notices from a bounded queue with one worker, so that a
// reconcile never waits for Slack, whose retries honour Retry-After and can
// take seconds or minutes. Messages go out in the order they were queued.
//
// Delivery is at most once: a message is never retried once Post failed,
// a message that finds the queue full is dropped, and the messages still
// queued when the manager stops (or the process crashes) are lost. Each
// outcome is counted in kubemedic_remediation_notifications_total and
// logged.
//
// enqueue is safe for concurrent use; Start runs the one worker.
type sender struct {
	notifier notify.Notifier
	queue    chan notice
	timeout  time.Duration
	results  *prometheus.CounterVec // by result: sent, failed, dropped
	log      logr.Logger
}

var (
	_ manager.Runnable               = (*sender)(nil)
	_ manager.LeaderElectionRunnable = (*sender)(nil)
)

func newSender(n notify.Notifier, size int, timeout time.Duration, results *prometheus.CounterVec, logger logr.Logger) *sender {
	return &sender{notifier: n, queue: make(chan notice, size), timeout: timeout, results: results, log: logger}
}

// enqueue queues n without blocking. It reports false, counts a dropped
// message and logs it when the queue is full.
func (s *sender) enqueue(n notice) bool {
	select {
	case s.queue <- n:
		return true
	default:
		s.results.WithLabelValues(notificationDropped).Inc()
		s.log.Info("Dropping Slack message to a pod's owner: the queue is full", "pod", n.pod, "recipient", n.to.String(), "queueSize", cap(s.queue))
		return false
	}
}

// Start sends queued messages until ctx ends, then drops what is left.
func (s *sender) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			s.dropQueued()
			return nil
		case n := <-s.queue:
			if ctx.Err() != nil {
				s.drop(n)
				s.dropQueued()
				return nil
			}
			s.send(ctx, n)
		}
	}
}

// NeedLeaderElection is true: only the leader drains, so only it has
// anything to send, and a standby must not send what it never queued.
func (s *sender) NeedLeaderElection() bool { return true }

func (s *sender) send(ctx context.Context, n notice) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.log.V(1).Info("Sending Slack message to a pod's owner", "pod", n.pod, "podUID", n.uid, "recipient", n.to.String())
	th, err := s.notifier.Post(ctx, n.to, nil, n.msg)
	if err != nil {
		s.results.WithLabelValues(notificationFailed).Inc()
		s.log.Error(err, "Slack message to a pod's owner failed; it is not sent again", "pod", n.pod, "podUID", n.uid, "recipient", n.to.String())
		return
	}
	s.results.WithLabelValues(notificationSent).Inc()
	kv := []any{"pod", n.pod, "podUID", n.uid, "recipient", th.Recipient, "channel", th.Channel, "ts", th.TS}
	if th.Fallback != "" {
		kv = append(kv, "fallback", th.Fallback)
	}
	s.log.Info("Told a pod's owner on Slack that a drain stopped the pod", kv...)
}

// dropQueued empties the queue, counting and logging each message as dropped.
func (s *sender) dropQueued() {
	for {
		select {
		case n := <-s.queue:
			s.drop(n)
		default:
			return
		}
	}
}

func (s *sender) drop(n notice) {
	s.results.WithLabelValues(notificationDropped).Inc()
	s.log.Info("Dropping Slack message to a pod's owner: the remediator is stopping", "pod", n.pod, "recipient", n.to.String())
}
