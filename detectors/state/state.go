// Package state keeps what a check must remember between invocations (seen
// Xids, when a process entered state D, outstanding mount probes) as one JSON
// file per check in the state directory. A file is locked for the whole
// invocation, so two overlapping runs of a check never lose each other's
// writes, and it is replaced atomically, so a crash never leaves half a file.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Store is one check's state file, held under an exclusive lock until Close.
type Store struct {
	path string
	lock *os.File
}

// Open creates dir if needed and locks dir/name.json, waiting for another
// invocation to let go until ctx is done.
func Open(ctx context.Context, dir, name string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open state: no state directory (--state-dir)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	path := filepath.Join(dir, name+".json")
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	for {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Store{path: path, lock: lock}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			lock.Close()
			return nil, fmt.Errorf("lock state %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			lock.Close()
			return nil, fmt.Errorf("lock state %s: another invocation holds it: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Load decodes the state into v. It returns false, and leaves v alone, when
// there is no state yet. A file that does not decode is an error that names
// it: the caller decides whether to start over.
func (s *Store) Load(v any) (bool, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load state: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("load state %s: %w", s.path, err)
	}
	return true, nil
}

// Save replaces the state with v: write a temporary file, sync, rename.
func (s *Store) Save(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("save state %s: %w", s.path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save state %s: %w", s.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save state %s: %w", s.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save state %s: %w", s.path, err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// Close releases the lock.
func (s *Store) Close() error {
	return s.lock.Close()
}
