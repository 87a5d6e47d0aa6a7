package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path durably: it writes a temporary file in
// the same directory, fsyncs it, renames it over path and fsyncs the
// directory. Readers see either the old content or the new, never a mix, and
// when it returns nil the new content survives SIGKILL and power loss. The
// bridge uses it for small state files.
//
// If the final directory fsync fails the new content is already visible under
// path but may not be durable; the error says so and the file is left in
// place, because removing it would lose the previous version as well.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := writeDurable(dir, "."+base+".tmp-*", path, data, perm, false); err != nil {
		return fmt.Errorf("write %s atomically: %w", path, err)
	}
	return nil
}

// writeDurable writes data to a temporary file in dir named after pattern
// (see os.CreateTemp), fsyncs it, renames it to final and fsyncs dir. On any
// error the temporary file is removed. If the directory fsync fails and
// removeOnSyncFail is set, final is removed too, so that a caller that
// reports failure leaves nothing under the final name.
func writeDurable(dir, pattern, final string, data []byte, perm os.FileMode, removeOnSyncFail bool) (err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err == nil || renamed {
			return
		}
		_ = f.Close() // Already closed on the later error paths; the error is then os.ErrClosed.
		if rmErr := os.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove temp file: %w", rmErr))
		}
	}()

	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write temp file: %w", err)
	}
	// CreateTemp always uses 0600; only widen or narrow when asked to.
	if perm != 0o600 {
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("chmod temp file: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync temp file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temp file: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename temp file: %w", err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		if !removeOnSyncFail {
			return err
		}
		if rmErr := os.Remove(final); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return errors.Join(err, fmt.Errorf("remove %s after failed directory fsync: %w", final, rmErr))
		}
		// Best effort: make the removal itself durable. The error that
		// matters has already been returned to the caller.
		_ = syncDir(dir)
		return err
	}
	return nil
}

// syncDir fsyncs a directory so that the creations, renames and removals of
// its entries survive power loss. It opens the directory by path every time,
// so a directory that was removed or replaced fails here instead of syncing a
// stale inode.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close directory %s: %w", dir, err)
	}
	return nil
}
