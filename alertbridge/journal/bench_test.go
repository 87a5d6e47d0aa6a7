package journal_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/journal"
)

// payload4KiB is a 4 KiB JSON object, the size of a webhook with a handful
// of alerts.
var payload4KiB = []byte(`{"blob":"` + strings.Repeat("x", 4096-11) + `"}`)

// BenchmarkAppend measures the latency of a durable Append (write, fsync,
// rename, directory fsync) on the disk that holds the test's temp directory;
// set TMPDIR to measure another one. ns/op is the time one webhook waits
// before it can be acknowledged; in parallel it is wall time divided by
// Appends, so it shows how much concurrent Appends share the fsyncs.
func BenchmarkAppend(b *testing.B) {
	if len(payload4KiB) != 4096 {
		b.Fatalf("payload is %d bytes", len(payload4KiB))
	}
	b.Run("sequential/4KiB", func(b *testing.B) {
		j := open(b, b.TempDir())
		b.SetBytes(int64(len(payload4KiB)))
		for b.Loop() {
			if _, err := j.Append("k", payload4KiB, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, goroutines := range []int{8, 50} {
		b.Run(fmt.Sprintf("parallel-%d/4KiB", goroutines), func(b *testing.B) {
			j := open(b, b.TempDir())
			b.SetBytes(int64(len(payload4KiB)))
			// RunParallel starts p*GOMAXPROCS goroutines.
			b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := j.Append("k", payload4KiB, time.Now()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAppendDone measures a webhook's whole stay in the journal in the
// steady state, where the backlog is drained as fast as it fills.
func BenchmarkAppendDone(b *testing.B) {
	j := open(b, b.TempDir())
	b.SetBytes(int64(len(payload4KiB)))
	for b.Loop() {
		e, err := j.Append("k", payload4KiB, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Done(e.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures a restart with a backlog of 1,000 4 KiB entries:
// every file is read and verified.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	j := open(b, dir)
	for range 1000 {
		if _, err := j.Append("k", payload4KiB, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		j, err := journal.Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		if j.Len() != 1000 {
			b.Fatalf("Len = %d", j.Len())
		}
		if err := j.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
