package bridge

import (
	"context"
	"errors"
	"time"
)

// work takes one key at a time and applies its oldest transition.
func (b *Bridge) work(ctx context.Context) {
	for {
		j, ok := b.queue.take()
		if !ok {
			return
		}
		err := b.process(ctx, j)
		for backoff := time.Second; isTransient(err) && ctx.Err() == nil; backoff = min(2*backoff, time.Minute) {
			// A local fault that may pass (the journal cannot be read right
			// now): keep the entry and try again, in order.
			b.log.Warn("Retrying transition", "entry", j.id, "key", j.key, "err", err, "after", backoff)
			select {
			case <-ctx.Done():
			case <-b.clock.After(backoff):
			}
			err = b.process(ctx, j)
		}
		if err != nil && ctx.Err() != nil {
			// Shutting down: the entry stays in the journal for the next start.
			b.queue.release(j)
			return
		}
		if err != nil {
			// process retries transient errors itself; what comes back is
			// permanent or a local fault. Drop it loudly, never loop on it.
			b.log.Error("Dropping transition", "entry", j.id, "key", j.key, "err", err)
		}
		if derr := b.journal.Done(j.id); derr != nil {
			b.log.Error("Removing applied journal entry", "entry", j.id, "err", derr)
		}
		b.queue.done(j)
	}
}

// transientError is a local fault worth retrying, as opposed to a dropped
// transition.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func isTransient(err error) bool {
	var te *transientError
	return errors.As(err, &te)
}
