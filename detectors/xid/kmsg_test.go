package xid

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadRealKmsg reads this machine's /dev/kmsg, when it can: it must
// return at the end of the ring buffer instead of waiting for new records,
// and every record must parse.
func TestReadRealKmsg(t *testing.T) {
	const path = "/dev/kmsg"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("cannot open %s (%v): needs a kernel with /dev/kmsg and CAP_SYSLOG or kernel.dmesg_restrict=0", path, err)
	}
	n, err := syscall.Read(fd, make([]byte, kmsgBufSize))
	syscall.Close(fd)
	if err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EPIPE) {
		t.Skipf("cannot read %s (%v): needs CAP_SYSLOG or kernel.dmesg_restrict=0", path, err)
	}
	if n == 0 {
		t.Skipf("%s is empty here", path)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		records, bad int
		err          error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = readKmsg(ctx, path, func(rec []byte) {
			r.records++
			line, _, _ := bytes.Cut(rec, []byte("\n"))
			if _, ok := ParseRecord(line); !ok {
				r.bad++
			}
		})
		done <- r
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Positive(t, r.records)
		require.Zero(t, r.bad, "records that do not parse")
		t.Logf("read %d records from %s", r.records, path)
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s blocked", path)
	}

	// And the whole path through readLog, which tells a character device
	// from a file.
	require.NoError(t, readLog(ctx, path, func(Found) {}))
	_, err = os.Stat(path)
	require.NoError(t, err)
}
