package bridge

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyQueueFIFOPerKeyAndFairAcrossKeys(t *testing.T) {
	q := newKeyQueue()
	q.push(job{id: "a1", key: "a"})
	q.push(job{id: "a2", key: "a"})
	q.push(job{id: "b1", key: "b"})

	j, ok := q.take()
	require.True(t, ok)
	assert.Equal(t, "a1", j.id, "the first key pushed is handed out first, with its first job")
	// a is held: its second job waits even though it is queued.
	j2, ok := q.take()
	require.True(t, ok)
	assert.Equal(t, "b1", j2.id, "a held key is not handed out twice")

	q.done(j) // a has a2 left: it goes to the back of the ready list
	q.push(job{id: "c1", key: "c"})
	q.done(j2)
	got := []string{}
	for range 2 {
		j, ok := q.take()
		require.True(t, ok)
		got = append(got, j.id)
		q.done(j)
	}
	assert.Equal(t, []string{"a2", "c1"}, got, "keys are handed out in the order they became ready")
	assert.Empty(t, q.jobs, "finished keys are forgotten")
	assert.Empty(t, q.busy)
	assert.Empty(t, q.ready)
}

// waitingWorkers makes q report each worker that blocks in take.
func waitingWorkers(q *keyQueue) <-chan struct{} {
	waiting := make(chan struct{}, 64)
	q.testHookWait = func() { waiting <- struct{}{} }
	return waiting
}

// deadlockTimeout only turns a hang into a failure; no test waits for it
// to pass.
const deadlockTimeout = 10 * time.Second

func TestKeyQueuePushToHeldKeyWaitsForDone(t *testing.T) {
	q := newKeyQueue()
	waiting := waitingWorkers(q)
	q.push(job{id: "1", key: "k"})
	j, ok := q.take()
	require.True(t, ok)
	q.push(job{id: "2", key: "k"})
	assert.Empty(t, q.ready, "a key a worker holds is not ready, whatever is pushed to it")

	got := make(chan job, 1)
	go func() {
		j, ok := q.take()
		if ok {
			got <- j
		}
		close(got)
	}()
	// The second worker either takes the held key (wrong) or blocks in take.
	select {
	case j := <-got:
		t.Fatalf("took %q while the key was held", j.id)
	case <-waiting:
	}
	q.done(j)
	select {
	case j, ok := <-got:
		require.True(t, ok)
		assert.Equal(t, "2", j.id)
	case <-time.After(deadlockTimeout):
		t.Fatal("done did not hand the key's next job to the waiting worker")
	}
}

// TestKeyQueueConcurrent hammers the queue with many pushers and workers and
// checks the two promises: no two workers hold one key, and each key's jobs
// are seen in the order they were pushed.
func TestKeyQueueConcurrent(t *testing.T) {
	const (
		keys    = 64
		perKey  = 200
		workers = 32
	)
	q := newKeyQueue()
	var (
		holders  [keys]atomic.Int32 // workers holding each key right now
		lastSeen [keys]int          // last sequence number seen per key; guarded by holding the key
		overlap  atomic.Int32
		outOrder atomic.Int32
		handled  atomic.Int32
	)
	for k := range keys {
		lastSeen[k] = -1
	}
	var handledAll sync.WaitGroup
	handledAll.Add(keys * perKey)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				j, ok := q.take()
				if !ok {
					return
				}
				k, _ := strconv.Atoi(j.key)
				if holders[k].Add(1) != 1 {
					overlap.Add(1)
				}
				seq, _ := strconv.Atoi(j.id)
				if seq != lastSeen[k]+1 {
					outOrder.Add(1)
				}
				lastSeen[k] = seq
				if w%3 == 0 {
					runtime.Gosched() // hold the key a while, so others try for it
				}
				holders[k].Add(-1)
				q.done(j)
				handled.Add(1)
				handledAll.Done()
			}
		})
	}
	var pushers sync.WaitGroup
	for k := range keys {
		pushers.Go(func() {
			for seq := range perKey {
				q.push(job{id: fmt.Sprintf("%020d", seq), key: strconv.Itoa(k)})
				if seq%17 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	pushers.Wait()
	allDone := make(chan struct{})
	go func() { handledAll.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(deadlockTimeout):
		t.Fatalf("handled %d of %d jobs", handled.Load(), keys*perKey)
	}
	q.close()
	wg.Wait() // every worker returns once the queue is closed

	assert.Zero(t, overlap.Load(), "two workers held the same key")
	assert.Zero(t, outOrder.Load(), "a key's jobs were taken out of push order")
	for k := range keys {
		assert.Equal(t, perKey-1, lastSeen[k], "key %d", k)
	}
	assert.Empty(t, q.jobs)
	assert.Empty(t, q.busy)
}

func TestKeyQueueCloseWakesWaitingWorkers(t *testing.T) {
	q := newKeyQueue()
	waiting := waitingWorkers(q)
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 4 {
		wg.Go(func() {
			if _, ok := q.take(); !ok {
				refused.Add(1)
			}
		})
	}
	for range 4 {
		<-waiting // every worker is blocked in take
	}
	q.close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(deadlockTimeout):
		t.Fatal("close did not wake the workers blocked in take")
	}
	assert.Equal(t, int32(4), refused.Load())
}

func TestKeyQueueCloseRefusesPendingJobs(t *testing.T) {
	q := newKeyQueue()
	q.push(job{id: "1", key: "k"})
	q.close()
	_, ok := q.take()
	assert.False(t, ok, "a closed queue hands out nothing: the journal keeps the entry for the next start")
}

func TestKeyQueueRelease(t *testing.T) {
	q := newKeyQueue()
	q.push(job{id: "1", key: "k"})
	q.push(job{id: "2", key: "k"})
	j, ok := q.take()
	require.True(t, ok)
	q.release(j)
	assert.False(t, q.busy["k"], "release gives the key back")
	require.Len(t, q.jobs["k"], 2, "release keeps the unfinished job: it was not applied")
	assert.Equal(t, "1", q.jobs["k"][0].id)

	// release is for shutdown: the queue closes right after, and take says so.
	q.close()
	_, ok = q.take()
	assert.False(t, ok)
}

func TestKeyQueueManyKeysOneJobEach(t *testing.T) {
	q := newKeyQueue()
	for i := range 10 {
		q.push(job{id: fmt.Sprint(i), key: fmt.Sprint("k", i)})
	}
	for i := range 10 {
		j, ok := q.take()
		require.True(t, ok)
		assert.Equal(t, fmt.Sprint(i), j.id, "keys come out in arrival order")
	}
}

func TestKeyQueueKeepsJournalOrder(t *testing.T) {
	q := newKeyQueue()
	q.push(job{id: "0002", key: "k"})
	j, ok := q.take()
	require.True(t, ok)
	require.Equal(t, "0002", j.id)
	// Two webhooks of k were appended as 0003 and 0004 but pushed the other
	// way round; one older than the held job never goes before it.
	q.push(job{id: "0004", key: "k"})
	q.push(job{id: "0003", key: "k"})
	q.push(job{id: "0001", key: "k"})
	q.done(j)
	var got []string
	for range 3 {
		j, ok := q.take()
		require.True(t, ok)
		got = append(got, j.id)
		q.done(j)
	}
	require.Equal(t, []string{"0001", "0003", "0004"}, got)
}
