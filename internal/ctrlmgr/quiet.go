package ctrlmgr

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Backoff of a reconcile that conflicts again and again: the first requeue
// comes after ConflictBaseDelay, each next one twice as late, up to
// ConflictMaxDelay. The first reconcile of the request that ends otherwise
// starts it over.
const (
	ConflictBaseDelay = 5 * time.Millisecond
	ConflictMaxDelay  = time.Second
)

// QuietConflicts wraps the reconciler of the named controller so that the
// two routine ends of a reconcile are no error, and never reach
// controller-runtime's "Reconciler error" log line with its stack trace:
//
//   - An optimistic-concurrency conflict (a write whose resourceVersion
//     another writer, or the reconciler's own last write, got to first;
//     apierrors.IsConflict, wrapped or joined, as long as every error in it
//     is one) is counted in conflicts (label controller: name), logged at
//     V(1), and requeued after a per-request exponential backoff
//     (ConflictBaseDelay doubling to ConflictMaxDelay), as a returned error
//     would be; by Result.RequeueAfter, since Result.Requeue is deprecated.
//   - An error after ctx ended (the manager is stopping) is logged at V(1)
//     and dropped: the next leader, or this process after its restart,
//     reconciles everything again.
//
// Any other error, and every TerminalError, is returned as it is. The
// series of name in conflicts is created at zero; conflicts may be nil
// (nothing is counted).
func QuietConflicts(name string, r reconcile.Reconciler, conflicts *prometheus.CounterVec) reconcile.Reconciler {
	q := &quiet{name: name, inner: r,
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](ConflictBaseDelay, ConflictMaxDelay)}
	if conflicts != nil {
		q.conflicts = conflicts.WithLabelValues(name)
	}
	return q
}

// quiet is the reconciler QuietConflicts returns. backoff is safe for
// concurrent use, and holds an entry only for a request whose last
// reconcile conflicted.
type quiet struct {
	name      string
	inner     reconcile.Reconciler
	conflicts prometheus.Counter
	backoff   workqueue.TypedRateLimiter[reconcile.Request]
}

var _ reconcile.Reconciler = &quiet{}

func (q *quiet) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := q.inner.Reconcile(ctx, req)
	switch {
	case err == nil, errors.Is(err, reconcile.TerminalError(nil)):
		q.backoff.Forget(req)
		return res, err
	case ctx.Err() != nil:
		q.backoff.Forget(req)
		log.FromContext(ctx).V(1).Info("Reconcile ended by the shutdown", "controller", q.name, "error", err.Error())
		return reconcile.Result{}, nil
	case OnlyConflicts(err):
		delay := q.backoff.When(req)
		if q.conflicts != nil {
			q.conflicts.Inc()
		}
		log.FromContext(ctx).V(1).Info("Optimistic-concurrency conflict; reconciling again", "controller", q.name, "error", err.Error(), "after", delay)
		return reconcile.Result{RequeueAfter: delay}, nil
	default:
		q.backoff.Forget(req)
		return res, err
	}
}

// OnlyConflicts is whether err is an optimistic-concurrency conflict and
// nothing else: a conflict, wrapped (%w) any number of times, or a joined
// or aggregated error all of whose errors are conflicts. A conflict beside
// another error is no routine: that error must be seen.
func OnlyConflicts(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		return allConflicts(e.Unwrap())
	case interface{ Errors() []error }: // k8s.io/apimachinery's Aggregate
		return allConflicts(e.Errors())
	}
	if apierrors.IsConflict(err) {
		// IsConflict unwraps to the first APIStatus; any joined error
		// below a single wrap is checked too.
		if u := errors.Unwrap(err); u != nil {
			return OnlyConflicts(u)
		}
		return true
	}
	return false
}

func allConflicts(errs []error) bool {
	if len(errs) == 0 {
		return false
	}
	for _, e := range errs {
		if !OnlyConflicts(e) {
			return false
		}
	}
	return true
}

// controller-runtime's words for an error its manager receives once it is
// stopping, and the error its leader elector sends when it stops leading.
const (
	stopSequenceEngaged = "error received after stop sequence was engaged"
	leaderElectionLost  = "leader election lost"
)

// quietShutdown is the manager's logger with one line moved from error to
// V(1): controller-runtime (up to v0.24 at least, its issue 3535) logs
// "leader election lost" as an error on every clean shutdown with leader
// election, because releasing the lease on cancel ends the leader elector,
// whose OnStoppedLeading reports the loss after the stop sequence began.
// A lease lost while running is still an error: Start returns it.
func quietShutdown(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // this sink's frame
	}
	return logr.New(&shutdownSink{LogSink: sink})
}

type shutdownSink struct{ logr.LogSink }

var _ logr.CallDepthLogSink = &shutdownSink{}

// Init does nothing: the sink wrapped was initialised with its own Logger.
func (s *shutdownSink) Init(logr.RuntimeInfo) {}

func (s *shutdownSink) Error(err error, msg string, kv ...any) {
	if msg == stopSequenceEngaged && err != nil && err.Error() == leaderElectionLost {
		if s.Enabled(1) {
			s.LogSink.Info(1, "Leader election ended by the shutdown (the lease is released)", kv...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s *shutdownSink) WithValues(kv ...any) logr.LogSink {
	return &shutdownSink{LogSink: s.LogSink.WithValues(kv...)}
}

func (s *shutdownSink) WithName(name string) logr.LogSink {
	return &shutdownSink{LogSink: s.LogSink.WithName(name)}
}

func (s *shutdownSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &shutdownSink{LogSink: cd.WithCallDepth(depth)}
	}
	return s
}
