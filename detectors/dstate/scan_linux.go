//go:build linux

package dstate

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/procfs"
)

// scanner reads /proc with raw openat/read/close on reused buffers, so a
// pass allocates nothing for a process that is not in D: os.ReadFile
// would cost six system calls and several allocations per process.
// A scanner is not safe for concurrent use.
type scanner struct {
	root    host.Root
	dirBuf  []byte   // getdents64 records of /proc
	taskBuf []byte   // getdents64 records of /proc/<pid>/task
	buf     []byte   // the file being read; grows to fit
	path    [96]byte // NUL-terminated path relative to /proc
}

func newScanner(root host.Root) *scanner {
	return &scanner{root: root, dirBuf: make([]byte, 32<<10), taskBuf: make([]byte, 4<<10), buf: make([]byte, 1024)}
}

func (s *scanner) scan() (scanResult, error) {
	var res scanResult
	dir := s.root.Path("/proc")
	procFD, err := retry(func() (int, error) {
		return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return res, fmt.Errorf("open %s: %w", dir, err)
	}
	defer syscall.Close(procFD)
	for {
		n, err := retry(func() (int, error) { return syscall.ReadDirent(procFD, s.dirBuf) })
		if err != nil {
			return res, fmt.Errorf("read %s: %w", dir, err)
		}
		if n == 0 {
			return res, nil
		}
		for rec := s.dirBuf[:n]; len(rec) > 0; {
			name, next := dirent(rec)
			rec = next
			if isPID(name) {
				s.process(procFD, name, &res)
			}
		}
	}
}

// process reads one process's stat and, when it is in D, its cgroup.
func (s *scanner) process(procFD int, pid []byte, res *scanResult) {
	b, err := s.read(procFD, pid, "/stat")
	if err != nil {
		if !vanished(err) {
			res.fail(fmt.Errorf("read %s/%s/stat: %w", s.root.Path("/proc"), pid, err))
		}
		return
	}
	st, comm, err := procfs.ParseStatRaw(b)
	if err != nil {
		res.fail(fmt.Errorf("%s/%s/stat: %w", s.root.Path("/proc"), pid, err))
		return
	}
	res.Total++
	if st.KernelThread() || st.State != 'D' && st.State != 'Z' {
		return
	}
	st.Comm = string(comm)
	cgroupOf := string(pid)
	if st.State == 'Z' {
		// A group leader that exited is a zombie until its last thread
		// does; that thread may be the one stuck in D.
		tid := s.threadInD(procFD, pid)
		if tid == "" {
			return
		}
		st.State = 'D'
		cgroupOf = string(pid) + "/task/" + tid
	}
	p := Proc{Stat: st}
	cg, err := s.read(procFD, []byte(cgroupOf), "/cgroup")
	switch {
	case err == nil:
		p.Cgroup = append([]byte(nil), cg...)
	case vanished(err):
		return
	default:
		p.CgroupErr = fmt.Errorf("read %s/%s/cgroup: %w", s.root.Path("/proc"), cgroupOf, err)
	}
	res.Procs = append(res.Procs, p)
}

// threadInD returns the TID of a thread of pid in D, or "".
func (s *scanner) threadInD(procFD int, pid []byte) string {
	n := copy(s.path[:], pid)
	n += copy(s.path[n:], "/task\x00")
	fd, err := openat(procFD, s.path[:n], syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return ""
	}
	defer syscall.Close(fd)
	taskDir := string(pid) + "/task/"
	for {
		n, err := retry(func() (int, error) { return syscall.ReadDirent(fd, s.taskBuf) })
		if err != nil || n == 0 {
			return ""
		}
		for rec := s.taskBuf[:n]; len(rec) > 0; {
			name, next := dirent(rec)
			rec = next
			if !isPID(name) || string(name) == string(pid) {
				continue
			}
			b, err := s.read(procFD, []byte(taskDir+string(name)), "/stat")
			if err != nil {
				continue
			}
			if st, _, err := procfs.ParseStatRaw(b); err == nil && st.State == 'D' {
				return string(name)
			}
		}
	}
}

// read reads /proc/<dir><file> into s.buf. A short read is the whole
// file: procfs generates a seq_file in one read when the buffer holds it,
// and a regular file (a fixture) is read whole.
func (s *scanner) read(procFD int, dir []byte, file string) ([]byte, error) {
	if len(dir)+len(file)+1 > len(s.path) {
		return nil, fmt.Errorf("path %s%s too long", dir, file)
	}
	n := copy(s.path[:], dir)
	n += copy(s.path[n:], file)
	s.path[n] = 0
	fd, err := openat(procFD, s.path[:n+1], syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	size := 0
	for {
		m, err := retry(func() (int, error) { return syscall.Read(fd, s.buf[size:]) })
		if err != nil {
			return nil, err
		}
		size += m
		if m == 0 || size < len(s.buf) {
			break
		}
		s.buf = append(s.buf, make([]byte, len(s.buf))...)
	}
	if size == 0 {
		// An exited process's files read empty.
		return nil, syscall.ESRCH
	}
	return s.buf[:size], nil
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
