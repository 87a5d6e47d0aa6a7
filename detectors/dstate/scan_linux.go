//go:build linux

package dstate

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/procfs"
)

// scanner reads /proc with raw openat/read/close on reused buffers, so a
// pass allocates nothing for a process that is not in D (os.ReadFile
// would cost six system calls and several allocations per process), and
// spreads the processes over up to maxWorkers goroutines: the cost is
// system calls, about three per process, and a node has cores to spare.
// A scanner is not safe for concurrent use.
type scanner struct {
	root    host.Root
	dirBuf  []byte  // getdents64 records of /proc
	pids    []int32 // the processes of this pass
	workers []*worker
}

// worker scans a share of the processes with its own buffers.
type worker struct {
	root    host.Root
	taskBuf []byte   // getdents64 records of /proc/<pid>/task
	buf     []byte   // the file being read; grows to fit
	path    [96]byte // NUL-terminated path relative to /proc
	res     scanResult
}

const (
	maxWorkers = 4
	// perWorker is the fewest processes worth a goroutine, and chunk how
	// many a worker takes at a time.
	perWorker = 1000
	chunk     = 128
)

func newScanner(root host.Root) *scanner {
	return &scanner{root: root, dirBuf: make([]byte, 32<<10)}
}

func (s *scanner) scan() (scanResult, error) {
	dir := s.root.Path("/proc")
	procFD, err := retry(func() (int, error) {
		return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return scanResult{}, fmt.Errorf("open %s: %w", dir, err)
	}
	defer syscall.Close(procFD)
	s.pids = s.pids[:0]
	for {
		n, err := retry(func() (int, error) { return syscall.ReadDirent(procFD, s.dirBuf) })
		if err != nil {
			return scanResult{}, fmt.Errorf("read %s: %w", dir, err)
		}
		if n == 0 {
			break
		}
		for rec := s.dirBuf[:n]; len(rec) > 0; {
			name, next := dirent(rec)
			rec = next
			if pid, ok := parsePID(name); ok {
				s.pids = append(s.pids, pid)
			}
		}
	}

	nw := min(max(runtime.GOMAXPROCS(0), 1), maxWorkers, (len(s.pids)+perWorker-1)/perWorker)
	for len(s.workers) < max(nw, 1) {
		s.workers = append(s.workers, &worker{root: s.root, taskBuf: make([]byte, 4<<10), buf: make([]byte, 1024)})
	}
	var next atomic.Int64
	work := func(w *worker) {
		w.res = scanResult{}
		for {
			end := int(next.Add(chunk))
			start := end - chunk
			if start >= len(s.pids) {
				return
			}
			for _, pid := range s.pids[start:min(end, len(s.pids))] {
				w.process(procFD, pid)
			}
		}
	}
	if nw <= 1 {
		work(s.workers[0])
		return s.workers[0].res, nil
	}
	var wg sync.WaitGroup
	for _, w := range s.workers[:nw] {
		wg.Go(func() { work(w) })
	}
	wg.Wait()
	var res scanResult
	for _, w := range s.workers[:nw] {
		res.Procs = append(res.Procs, w.res.Procs...)
		res.Total += w.res.Total
		res.Errs += w.res.Errs
		if w.res.Err != nil && (res.Err == nil || w.res.errPID < res.errPID) {
			res.Err, res.errPID = w.res.Err, w.res.errPID
		}
	}
	return res, nil
}

// process reads one process's stat and, when it is in D, its cgroup.
func (w *worker) process(procFD int, pid int32) {
	b, err := w.read(procFD, pid, -1, "/stat")
	if err != nil {
		if !vanished(err) {
			w.res.fail(pid, fmt.Errorf("read %s/%d/stat: %w", w.root.Path("/proc"), pid, err))
		}
		return
	}
	st, comm, err := procfs.ParseStatRaw(b)
	if err != nil {
		w.res.fail(pid, fmt.Errorf("%s/%d/stat: %w", w.root.Path("/proc"), pid, err))
		return
	}
	w.res.Total++
	if st.KernelThread() || st.State != 'D' && st.State != 'Z' {
		return
	}
	st.Comm = string(comm)
	tid := int32(-1)
	if st.State == 'Z' {
		// A group leader that exited is a zombie until its last thread
		// does; that thread may be the one stuck in D.
		if tid = w.threadInD(procFD, pid); tid < 0 {
			return
		}
		st.State = 'D'
	}
	p := Proc{Stat: st}
	cg, err := w.read(procFD, pid, tid, "/cgroup")
	switch {
	case err == nil:
		p.Cgroup = append([]byte(nil), cg...)
	case vanished(err):
		return
	default:
		p.CgroupErr = fmt.Errorf("read %s/%d/cgroup: %w", w.root.Path("/proc"), pid, err)
	}
	w.res.Procs = append(w.res.Procs, p)
}

// threadInD returns the TID of a thread of pid in D, or -1.
func (w *worker) threadInD(procFD int, pid int32) int32 {
	n := len(strconv.AppendInt(w.path[:0], int64(pid), 10))
	n += copy(w.path[n:], "/task\x00")
	fd, err := openat(procFD, w.path[:n], syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return -1
	}
	defer syscall.Close(fd)
	for {
		n, err := retry(func() (int, error) { return syscall.ReadDirent(fd, w.taskBuf) })
		if err != nil || n == 0 {
			return -1
		}
		for rec := w.taskBuf[:n]; len(rec) > 0; {
			name, next := dirent(rec)
			rec = next
			tid, ok := parsePID(name)
			if !ok || tid == pid {
				continue
			}
			b, err := w.read(procFD, pid, tid, "/stat")
			if err != nil {
				continue
			}
			if st, _, err := procfs.ParseStatRaw(b); err == nil && st.State == 'D' {
				return tid
			}
		}
	}
}

// read reads /proc/<pid><file>, or /proc/<pid>/task/<tid><file> when tid
// is not negative, into w.buf. A short read is the whole file: procfs
// generates a seq_file in one read when the buffer holds it, and a regular
// file (a fixture) is read whole.
func (w *worker) read(procFD int, pid, tid int32, file string) ([]byte, error) {
	p := strconv.AppendInt(w.path[:0], int64(pid), 10)
	if tid >= 0 {
		p = append(p, "/task/"...)
		p = strconv.AppendInt(p, int64(tid), 10)
	}
	p = append(p, file...)
	p = append(p, 0)
	if len(p) > len(w.path) {
		return nil, fmt.Errorf("path %s too long", p)
	}
	fd, err := openat(procFD, p, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	size := 0
	for {
		m, err := retry(func() (int, error) { return syscall.Read(fd, w.buf[size:]) })
		if err != nil {
			return nil, err
		}
		size += m
		if m == 0 || size < len(w.buf) {
			break
		}
		w.buf = append(w.buf, make([]byte, len(w.buf))...)
	}
	if size == 0 {
		// An exited process's files read empty.
		return nil, syscall.ESRCH
	}
	return w.buf[:size], nil
}

// openat opens a NUL-terminated path relative to dirFD. syscall.Openat
// would allocate a copy of the path on every call.
func openat(dirFD int, path []byte, flags int) (int, error) {
	for {
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirFD), uintptr(unsafe.Pointer(&path[0])),
			uintptr(flags|syscall.O_CLOEXEC), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
}

// dirent splits the first linux_dirent64 record off buf: d_ino (8 bytes),
// d_off (8), d_reclen (2), d_type (1), then the NUL-terminated name.
func dirent(buf []byte) (name, rest []byte) {
	if len(buf) < 19 {
		return nil, nil
	}
	reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
	if reclen < 19 || reclen > len(buf) {
		return nil, nil
	}
	name = buf[19:reclen]
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	return name, buf[reclen:]
}

func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != syscall.EINTR {
			return n, err
		}
	}
}
