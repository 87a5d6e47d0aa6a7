package xid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
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

// TestScanLinesFindsWhatScanLogFinds streams logs through buffers of every
// awkward size, and readers that return a byte at a time or data with
// io.EOF: each must find exactly the Xids ScanLog finds in the whole log.
func TestScanLinesFindsWhatScanLogFinds(t *testing.T) {
	logs := map[string][]byte{"1 MiB of kmsg records": kernelLog1MiB()}
	entries, err := os.ReadDir(fixtures)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(fixtures, e.Name()))
		require.NoError(t, err)
		logs[e.Name()] = b
	}
	logs["no newline at the end"] = []byte("4,1,2,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.")
	logs["empty"] = nil

	collect := func(f func(fn func(Found))) []Found {
		var found []Found
		f(func(x Found) { found = append(found, x) })
		return found
	}
	for name, data := range logs {
		want := collect(func(fn func(Found)) { ScanLog(data, fn) })
		readers := map[string]func() io.Reader{
			"plain":        func() io.Reader { return bytes.NewReader(data) },
			"one byte":     func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
			"data and EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
		}
		for rname, r := range readers {
			for _, size := range []int{1, 7, 64, 4096, fileBufSize} {
				t.Run(fmt.Sprintf("%s/%s/%d", name, rname, size), func(t *testing.T) {
					var err error
					got := collect(func(fn func(Found)) { err = scanLines(context.Background(), r(), make([]byte, size), fn) })
					require.NoError(t, err)
					require.Equal(t, want, got)
				})
			}
		}
	}
}

func TestReadLogRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kern.log")
	require.NoError(t, os.WriteFile(path, kernelLog1MiB(), 0o644))
	var n int
	require.NoError(t, readLog(context.Background(), path, func(Found) { n++ }))
	require.Equal(t, strings.Count(string(kernelLog1MiB()), "NVRM: Xid"), n)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, readLog(ctx, path, func(Found) {}), context.Canceled)
}
