package dstate

import (
	"errors"
	"syscall"
)

// scanResult is one pass over /proc.
type scanResult struct {
	// Procs are the processes in D (and zombie group leaders with a thread
	// in D), kernel threads left out.
	Procs []Proc
	// Total counts the processes whose stat was read.
	Total int
	// Errs counts processes whose stat could not be read or parsed, for a
	// reason other than the process having gone; Err is the first.
	Errs   int
	Err    error
	errPID int32 // Err's process: the lowest PID with an error
}

// vanished says whether err means the process exited during the scan,
// which is normal.
func vanished(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// parsePID parses a /proc entry name that is a PID.
func parsePID(name []byte) (int32, bool) {
	if len(name) == 0 || len(name) > 10 {
		return 0, false
	}
	var n int64
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<31-1 {
		return 0, false
	}
	return int32(n), true
}

func (r *scanResult) fail(pid int32, err error) {
	r.Errs++
	if r.Err == nil || pid < r.errPID {
		r.Err, r.errPID = err, pid
	}
}
