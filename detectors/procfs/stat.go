// Package procfs parses the /proc files the detectors read: /proc/<pid>/stat
// and /proc/<pid>/cgroup. It reads nothing that takes the target's mmap lock
// (such as cmdline or environ): those reads hang on a process stuck in D
// state, and a hung read would wedge node-problem-detector.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Stat is the part of /proc/<pid>/stat the detectors use.
type Stat struct {
	PID  int
	Comm string
	// State is one letter: R running, S sleeping, D uninterruptible, Z
	// zombie, T stopped, I idle kernel thread, ...
	State byte
	PPID  int
	// StartTicks is field 22, the start time in clock ticks since boot.
	// With PID it identifies a process across PID reuse.
	StartTicks uint64
}

// ParseStat parses one /proc/<pid>/stat line: "pid (comm) state ppid ...".
// comm can hold spaces and ')' itself, so it ends at the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, errors.New("parse stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("parse stat: pid: %w", err)
	}
	s := Stat{PID: pid, Comm: string(b[open+1 : closing])}
	// Fields after comm, numbered from 3 (state).
	rest := b[closing+1:]
	field := 2
	for len(rest) > 0 {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		tok := bytes.TrimRight(rest[:end], "\n")
		rest = rest[end:]
		field++
		switch field {
		case 3:
			if len(tok) != 1 {
				return Stat{}, fmt.Errorf("parse stat: pid %d: state %q is not one letter", pid, tok)
			}
			s.State = tok[0]
		case 4:
			if s.PPID, err = strconv.Atoi(string(tok)); err != nil {
				return Stat{}, fmt.Errorf("parse stat: pid %d: ppid: %w", pid, err)
			}
		case 22:
			if s.StartTicks, err = strconv.ParseUint(string(tok), 10, 64); err != nil {
				return Stat{}, fmt.Errorf("parse stat: pid %d: starttime: %w", pid, err)
			}
			return s, nil
		}
	}
	return Stat{}, fmt.Errorf("parse stat: pid %d: %d fields, want at least 22", pid, field)
}
