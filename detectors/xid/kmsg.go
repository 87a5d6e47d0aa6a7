package xid

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// kmsgBufSize is one read's buffer. A /dev/kmsg record is at most 8 KiB
// (CONSOLE_EXT_LOG_MAX) with its continuation lines; a smaller buffer
// makes read fail with EINVAL.
const kmsgBufSize = 16 << 10

// fileBufSize is one read's buffer for a regular file: a saved kernel log
// is streamed through it rather than read whole, so a large file costs a
// short-lived check neither a large allocation nor its page faults.
const fileBufSize = 64 << 10

// readLog calls fn for every Xid in the kernel log at path: /dev/kmsg (a
// character device) or a regular file of kmsg records or dmesg lines.
func readLog(ctx context.Context, path string, fn func(Found)) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := scanLines(ctx, f, make([]byte, fileBufSize), fn); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		return nil
	}
	return readKmsg(ctx, path, func(rec []byte) { ScanLog(rec, fn) })
}

// scanLines is ScanLog over everything r returns, read into buf: each
// read's complete lines are scanned, and the incomplete last one is kept
// for the next read. buf doubles when one line does not fit. ScanLog looks
// at one line at a time, so this finds what ScanLog over the whole input
// would.
func scanLines(ctx context.Context, r io.Reader, buf []byte, fn func(Found)) error {
	kept := 0 // buf[:kept] is an incomplete line from the last read
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if kept == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		n, err := r.Read(buf[kept:])
		data := buf[:kept+n]
		if err == io.EOF {
			ScanLog(data, fn)
			return nil
		}
		if err != nil {
			return err
		}
		nl := bytes.LastIndexByte(data, '\n')
		if nl < 0 {
			kept = len(data)
			continue
		}
		ScanLog(data[:nl+1], fn)
		kept = copy(buf, data[nl+1:])
	}
}

// readKmsg reads /dev/kmsg from the oldest record in the ring buffer to the
// newest, one record per read, and returns at EAGAIN: it never waits for new
// records. It uses the raw file descriptor because an *os.File would park a
// non-blocking read in the poller instead of returning EAGAIN. EPIPE means
// the kernel overwrote records this reader had not read yet; reading on
// continues with the oldest record still there. record gets each record
// (with its continuation lines); the slice is reused by the next read.
func readKmsg(ctx context.Context, path string, record func([]byte)) error {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, kmsgBufSize)
	for i := 0; ; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return fmt.Errorf("read %s: %w", path, ctx.Err())
		}
		n, err := syscall.Read(fd, buf)
		switch {
		case err == nil && n == 0:
			return nil
		case err == nil:
			record(buf[:n])
		case errors.Is(err, syscall.EAGAIN):
			return nil
		case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EINTR):
			continue
		default:
			return &os.PathError{Op: "read", Path: path, Err: err}
		}
	}
}

// ForEachRecord calls fn with every record of the kernel log at path: each
// /dev/kmsg record from the oldest still in the ring buffer, or each line
// of a regular file (kmsg records or dmesg lines). It never waits for new
// records. The slice is reused after fn returns.
func ForEachRecord(ctx context.Context, path string, fn func([]byte)) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return readKmsg(ctx, path, fn)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), kmsgBufSize*64)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		fn(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
