package bridge

import (
	"context"
	"slices"
	"sync"
)

// job is one journal entry waiting to be applied.
type job struct {
	id  string
	key string
	// recovered is set for entries found in the journal at start: their
	// transition may have been half applied before a crash.
	recovered bool
}

// keyQueue hands out keys to workers so that each key is worked on by one
// worker at a time, in the order its jobs arrived: this is the per-key lock.
type keyQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	jobs   map[string][]job // pending jobs by key
	busy   map[string]bool  // keys a worker holds
	ready  []string         // keys with jobs and no worker, in arrival order
	closed bool

	// testHookWait, when set, is called with mu held just before take
	// waits for a key. Since the wait releases mu atomically, a push or
	// done that follows the call wakes the waiter: tests use it to know a
	// worker is blocked in take. It is nil outside tests.
	testHookWait func()
}

func newKeyQueue() *keyQueue {
	q := &keyQueue{jobs: map[string][]job{}, busy: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *keyQueue) push(j job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs[j.key]) == 0 && !q.busy[j.key] {
		q.ready = append(q.ready, j.key)
		q.cond.Signal()
	}
	// Keep a key's jobs in journal order (IDs are fixed-width and sortable)
	// even when two webhooks of one key were appended and pushed in
	// opposite orders. A held key's first job is being worked on: never
	// insert before it.
	jobs := q.jobs[j.key]
	first := 0
	if q.busy[j.key] {
		first = 1
	}
	i := len(jobs)
	for i > first && jobs[i-1].id > j.id {
		i--
	}
	q.jobs[j.key] = slices.Insert(jobs, i, j)
}

// take blocks until a key is ready and returns it held, with its first job.
// ok is false once the queue is closed.
func (q *keyQueue) take() (j job, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 && !q.closed {
		if q.testHookWait != nil {
			q.testHookWait()
		}
		q.cond.Wait()
	}
	if q.closed {
		return job{}, false
	}
	key := q.ready[0]
	q.ready = q.ready[1:]
	q.busy[key] = true
	return q.jobs[key][0], true
}

// done removes the finished job of a held key and releases the key; if more
// jobs wait for it, the key is ready again.
func (q *keyQueue) done(j job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rest := q.jobs[j.key][1:]
	delete(q.busy, j.key)
	if len(rest) == 0 {
		delete(q.jobs, j.key)
		return
	}
	q.jobs[j.key] = rest
	q.ready = append(q.ready, j.key)
	q.cond.Signal()
}

// release gives a held key back without finishing its job (on shutdown).
func (q *keyQueue) release(j job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.busy, j.key)
}

func (q *keyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// closeOnDone closes the queue when ctx ends.
func (q *keyQueue) closeOnDone(ctx context.Context) {
	<-ctx.Done()
	q.close()
}
