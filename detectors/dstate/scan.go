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
	Errs int
	Err  error
}

// vanished says whether err means the process exited during the scan,
// which is normal.
func vanished(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// isPID reports whether a /proc entry name is a PID.
func isPID(name []byte) bool {
	if len(name) == 0 || len(name) > 10 {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (r *scanResult) fail(err error) {
	r.Errs++
	if r.Err == nil {
		r.Err = err
	}
}
