//go:build unix

package democli

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// lockFile takes an exclusive flock on path, creating it, and writes this
// process's pid into it. The kernel drops the lock when the process ends,
// however it ends, so a killed demo never leaves its path claimed. When
// another process holds it, the error is errLocked and holder is the pid it
// wrote. The lock file itself stays: removing it could let two processes
// each lock a different file of the same name.
func lockFile(path string) (release func(), holder int, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPid(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, holder, errLocked
		}
		return nil, 0, err
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = f.Close() }, 0, nil
}
