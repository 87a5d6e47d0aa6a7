// Package procfs parses the /proc files the detectors read: /proc/<pid>/stat
// and /proc/<pid>/cgroup. It reads nothing that takes the target's mmap lock
// (such as cmdline or environ): those reads hang on a process stuck in D
// state, and a hung read would wedge node-problem-detector. The parsers are
// pure functions over bytes, so they are fuzzed and table-tested on fixture
// text.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
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

// KernelThread says whether s is kthreadd (pid 2) or one of its children,
// which are all kernel threads.
func (s Stat) KernelThread() bool { return s.PID == 2 || s.PPID == 2 }

// ParseStat parses one /proc/<pid>/stat line: "pid (comm) state ppid ...".
// comm can hold any byte but NUL, including spaces, parentheses and
// newlines, so it ends at the last ')'; the fields after it are numbers
// separated by single spaces, as the kernel writes them. Anything else
// (a truncated line, a number that overflows, a state that is not a
// letter) is an error.
func ParseStat(b []byte) (Stat, error) {
	s, comm, err := ParseStatRaw(b)
	if err != nil {
		return Stat{}, err
	}
	s.Comm = string(comm)
	return s, nil
}

// ParseStatRaw is ParseStat without copying comm: it leaves Stat.Comm
// empty and returns comm as a slice of b, valid while b is. A scan of every
// process uses it to allocate nothing per process.
func ParseStatRaw(b []byte) (Stat, []byte, error) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	open := bytes.IndexByte(b, '(')
	if open < 0 {
		return Stat{}, nil, errors.New("parse stat: no (comm)")
	}
	closing := lastCloseParen(b, open)
	if closing < 0 {
		return Stat{}, nil, errors.New("parse stat: no (comm)")
	}
	if open < 2 || b[open-1] != ' ' {
		return Stat{}, nil, errors.New(`parse stat: want "pid (comm)"`)
	}
	pid, ok := parseUint(b[:open-1], math.MaxInt)
	if !ok {
		return Stat{}, nil, fmt.Errorf("parse stat: pid %q is not a number", trunc(b[:open-1]))
	}
	s := Stat{PID: int(pid)}
	comm := b[open+1 : closing]
	// Fields after comm, numbered from 3 (state), each after one space.
	// The loop finds each field's end byte by byte: the fields are short,
	// and this runs once per process on the node.
	rest := b[closing+1:]
	i := 0
	for field := 3; field <= 22; field++ {
		if i == len(rest) {
			return Stat{}, nil, fmt.Errorf("parse stat: pid %d: %d fields, want at least 22", s.PID, field-1)
		}
		if rest[i] != ' ' {
			return Stat{}, nil, fmt.Errorf("parse stat: pid %d: field %d: want a space, got %q", s.PID, field, rest[i])
		}
		i++
		start := i
		for i < len(rest) && rest[i] != ' ' {
			i++
		}
		tok := rest[start:i]
		switch field {
		case 3:
			if len(tok) != 1 || !isLetter(tok[0]) {
				return Stat{}, nil, fmt.Errorf("parse stat: pid %d: state %q is not one letter", s.PID, trunc(tok))
			}
			s.State = tok[0]
		case 4:
			ppid, ok := parseUint(tok, math.MaxInt)
			if !ok {
				return Stat{}, nil, fmt.Errorf("parse stat: pid %d: ppid %q is not a number", s.PID, trunc(tok))
			}
			s.PPID = int(ppid)
		case 22:
			start, ok := parseUint(tok, math.MaxUint64)
			if !ok {
				return Stat{}, nil, fmt.Errorf("parse stat: pid %d: starttime %q is not a number", s.PID, trunc(tok))
			}
			s.StartTicks = start
		default:
			if len(tok) == 0 {
				return Stat{}, nil, fmt.Errorf("parse stat: pid %d: field %d is empty", s.PID, field)
			}
		}
	}
	return s, comm, nil
}

// lastCloseParen returns the index of the last ')' after b[open], or -1.
// It is bytes.LastIndexByte found with forward IndexByte calls, which are
// vectorized: the last ')' is usually the first one, 200 bytes before the
// end of the line.
func lastCloseParen(b []byte, open int) int {
	last := -1
	for i := open + 1; i < len(b); {
		j := bytes.IndexByte(b[i:], ')')
		if j < 0 {
			break
		}
		last = i + j
		i = last + 1
	}
	return last
}

// parseUint parses decimal digits, without sign or spaces, up to max.
func parseUint(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// trunc keeps error messages short when the input is garbage.
func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
