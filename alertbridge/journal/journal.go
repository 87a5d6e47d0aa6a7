package journal

import (
	"container/heap"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// idWidth is the number of decimal digits of an ID; int64 needs 19, so
	// IDs stay fixed-width (and sort as strings) until the year 2262.
	idWidth = 20
	// entryExt names a pending entry: <id>.json.
	entryExt = ".json"
	// doneExt names the high-water tombstone: <id>.done. See Done.
	doneExt = ".done"
	// tempPrefix starts the name of a file being written by Append.
	tempPrefix = ".tmp-"
	// CorruptDir is the subdirectory that unreadable entry files are moved
	// to. Nothing in it is read or deleted by the journal.
	CorruptDir = "corrupt"
)

var (
	// ErrNotFound is returned by Load for an ID that is not pending.
	ErrNotFound = errors.New("journal entry not found")
	// ErrCorrupt is returned by Load for an entry file that no longer
	// verifies; the file has been moved to CorruptDir.
	ErrCorrupt = errors.New("journal entry corrupt")
	// ErrClosed is returned by operations on a closed Journal.
	ErrClosed = errors.New("journal closed")
)

// Entry is one accepted webhook.
type Entry struct {
	// ID is fixed-width decimal, sorts in Append order and is unique across
	// restarts of the process that owns the directory.
	ID string
	// Key is the dedupe key hash the bridge computed at ingest; the journal
	// does not interpret it.
	Key string
	// Received is the time passed to Append, in UTC.
	Received time.Time
	// Payload is the webhook body exactly as appended. Pending leaves it
	// nil; Load fills it.
	Payload []byte
}

// Journal is a directory of durable, pending entries. It is safe for
// concurrent use. Only one Journal may have a directory open at a time; Open
// takes an exclusive flock on the directory to enforce it.
type Journal struct {
	dir  string
	log  *slog.Logger
	lock *os.File // the directory, opened and flocked; released by Close

	// doneMu serialises Done, so that deciding whether the entry is the
	// high-water mark and renaming or removing its file happen as one step
	// with respect to other Dones. It is taken before mu, never after.
	doneMu sync.Mutex

	// mu guards the fields below. It is never held across file I/O.
	mu     sync.Mutex
	closed bool
	// lastID is the highest ID handed out, including IDs whose Append then
	// failed; the next ID is greater.
	lastID int64
	// highWater is the highest ID whose file was durably written. The
	// invariant Done maintains is that <highWater>.json or
	// <highWater>.done exists, so Open can never choose a lower ID than
	// one already acknowledged, whatever the clock says.
	highWater int64
	// tombstone is the ID of the current <id>.done file, 0 if none.
	tombstone int64
	pending   map[string]*item
	byAge     ageHeap // the items of pending, earliest Received first
}

// item is the in-memory index record of one pending entry. Payloads are not
// kept in memory: they can be up to 1 MiB each and are read on Load.
type item struct {
	id       string
	n        int64
	key      string
	received time.Time
	heapIdx  int
}

// Open opens the journal in dir, creating dir (0700) if needed. It removes
// temporary files left by an interrupted Append, verifies and indexes every
// entry, and moves any entry file that does not verify to dir/corrupt/ with
// a Warn log naming the file and the reason; a corrupt file is never deleted
// and never makes Open fail. Open fails if dir cannot be created, read or
// locked (another process has it open). log may be nil.
func Open(dir string, log *slog.Logger) (*Journal, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open journal: create directory: %w", err)
	}
	lock, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("open journal %s: directory is in use by another journal (flock held)", dir)
		}
		return nil, fmt.Errorf("open journal %s: flock: %w", dir, err)
	}
	j := &Journal{
		dir:     dir,
		log:     log.With("journal", dir),
		lock:    lock,
		pending: make(map[string]*item),
	}
	if err := j.load(); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("open journal %s: %w", dir, err)
	}
	return j, nil
}

// load scans the directory once, at Open.
func (j *Journal) load() error {
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return fmt.Errorf("read directory: %w", err)
	}
	var tombstones []int64
	// maxSeen is the highest ID named by any file, pending, tombstone or
	// corrupt: an ID that was ever written is never handed out again.
	maxSeen := j.corruptMaxID()
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(j.dir, name)
		switch {
		case de.IsDir():
			// corrupt/, or the bridge's own state (rollups/): not entries.
		case strings.HasPrefix(name, tempPrefix):
			j.log.Info("Removing temporary file left by an interrupted append", "file", path)
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				// A leftover temp file is harmless: it is never read.
				j.log.Warn("Failed to remove temporary file", "file", path, "err", err)
			}
		case strings.HasSuffix(name, doneExt):
			n, ok := parseID(strings.TrimSuffix(name, doneExt))
			if !ok {
				j.log.Warn("Ignoring unknown file in journal directory", "file", path)
				continue
			}
			tombstones = append(tombstones, n)
		case strings.HasSuffix(name, entryExt):
			id := strings.TrimSuffix(name, entryExt)
			n, ok := parseID(id)
			if !ok {
				j.log.Warn("Ignoring unknown file in journal directory", "file", path)
				continue
			}
			maxSeen = max(maxSeen, n)
			e, err := readEntry(path, id)
			if err != nil {
				j.quarantine(path, err)
				continue
			}
			j.index(e, n)
		default:
			j.log.Warn("Ignoring unknown file in journal directory", "file", path)
		}
	}
	// Only the highest tombstone matters; the others are left over from a
	// Done whose best-effort removal of the previous one did not happen.
	slices.Sort(tombstones)
	for i, n := range tombstones {
		if i == len(tombstones)-1 {
			j.tombstone = n
			j.highWater = max(j.highWater, n)
			break
		}
		path := filepath.Join(j.dir, formatID(n)+doneExt)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.log.Warn("Failed to remove old high-water file", "file", path, "err", err)
		}
	}
	j.lastID = max(j.highWater, maxSeen)
	j.log.Info("Opened journal", "pending", len(j.pending), "lastID", formatID(j.lastID))
	return nil
}

// corruptMaxID returns the highest ID named by a file in CorruptDir, 0 if
// none or if the directory cannot be read.
func (j *Journal) corruptMaxID() int64 {
	des, err := os.ReadDir(filepath.Join(j.dir, CorruptDir))
	if err != nil {
		return 0
	}
	var m int64
	for _, de := range des {
		if name := de.Name(); len(name) >= idWidth {
			if n, ok := parseID(name[:idWidth]); ok {
				m = max(m, n)
			}
		}
	}
	return m
}

// index adds a durably written entry to the in-memory index. The caller
// holds mu or has not published j yet.
func (j *Journal) index(e Entry, n int64) {
	it := &item{id: e.ID, n: n, key: e.Key, received: e.Received}
	j.pending[e.ID] = it
	heap.Push(&j.byAge, it)
	j.highWater = max(j.highWater, n)
}

// Append durably records a new entry and returns it. When it returns nil the
// entry's file and its directory entry have been fsynced, so the entry
// survives SIGKILL and power loss; only then may the webhook be
// acknowledged. On error nothing is left under a final name and the caller
// should answer 503: a full disk, a read-only or removed directory all end
// here. The ID is greater than every ID this directory has handed out, even
// if now goes backwards. payload is kept by reference in the returned Entry.
func (j *Journal) Append(key string, payload []byte, now time.Time) (Entry, error) {
	if now.IsZero() {
		return Entry{}, errors.New("append: zero receive time")
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return Entry{}, fmt.Errorf("append to %s: %w", j.dir, ErrClosed)
	}
	n := max(now.UnixNano(), j.lastID+1)
	j.lastID = n
	j.mu.Unlock()

	e := Entry{ID: formatID(n), Key: key, Received: now.UTC(), Payload: payload}
	data, err := encode(e)
	if err != nil {
		return Entry{}, err
	}
	final := filepath.Join(j.dir, e.ID+entryExt)
	if err := writeDurable(j.dir, tempPrefix+"*", final, data, 0o600, true); err != nil {
		return Entry{}, fmt.Errorf("append %s: %w", final, err)
	}

	j.mu.Lock()
	j.index(e, n)
	j.mu.Unlock()
	return e, nil
}

// Done removes a pending entry once the bridge has acted on it, and fsyncs
// the directory so it does not come back after a crash. Done of an ID that
// is not pending is not an error.
//
// When the entry is the highest ID ever written to the directory, its file
// is renamed to <id>.done instead of removed, and the previous <id>.done is
// removed: one file always records the high-water mark, so IDs keep
// increasing across a restart with an empty journal and a clock that went
// backwards. It costs the same as an unlink: one rename and one directory
// fsync.
func (j *Journal) Done(id string) error {
	j.doneMu.Lock()
	defer j.doneMu.Unlock()

	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return fmt.Errorf("done %s in %s: %w", id, j.dir, ErrClosed)
	}
	it, ok := j.pending[id]
	if !ok {
		j.mu.Unlock()
		return nil
	}
	keep := it.n == j.highWater
	oldTombstone := j.tombstone
	j.mu.Unlock()

	src := filepath.Join(j.dir, id+entryExt)
	var err error
	if keep {
		err = os.Rename(src, filepath.Join(j.dir, id+doneExt))
	} else {
		err = os.Remove(src)
	}
	// A missing file means an earlier Done got this far and then failed
	// to fsync the directory; finish the job.
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("done %s: %w", src, err)
	}
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("done %s: %w", src, err)
	}

	j.mu.Lock()
	delete(j.pending, id)
	heap.Remove(&j.byAge, it.heapIdx)
	if keep {
		j.tombstone = it.n
	}
	j.mu.Unlock()

	if keep && oldTombstone != 0 && oldTombstone != it.n {
		// No fsync: if this removal is lost, Open removes the stale file.
		old := filepath.Join(j.dir, formatID(oldTombstone)+doneExt)
		if err := os.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.log.Warn("Failed to remove old high-water file", "file", old, "err", err)
		}
	}
	return nil
}

// Load reads a pending entry, payload included, from disk. It returns an
// error wrapping ErrNotFound if id is not pending, and one wrapping
// ErrCorrupt if the file no longer verifies; the file is then moved to
// CorruptDir, logged and dropped from the index, as Open would have done.
func (j *Journal) Load(id string) (Entry, error) {
	j.mu.Lock()
	_, ok := j.pending[id]
	j.mu.Unlock()
	if !ok {
		return Entry{}, fmt.Errorf("load %s from %s: %w", id, j.dir, ErrNotFound)
	}
	path := filepath.Join(j.dir, id+entryExt)
	e, err := readEntry(path, id)
	if err == nil {
		return e, nil
	}
	var ce *corruptError
	if !errors.As(err, &ce) {
		return Entry{}, fmt.Errorf("load %s: %w", path, err)
	}
	// Take doneMu so a concurrent Done of the same ID cannot race the move.
	j.doneMu.Lock()
	defer j.doneMu.Unlock()
	j.mu.Lock()
	if it, ok := j.pending[id]; ok {
		delete(j.pending, id)
		heap.Remove(&j.byAge, it.heapIdx)
	}
	j.mu.Unlock()
	j.quarantine(path, err)
	return Entry{}, fmt.Errorf("load %s: %w: %w", path, ErrCorrupt, err)
}

// Pending returns the entries that have been appended (in this process or
// before Open) and are not Done, sorted by ID, without their payloads: call
// Load for those. Keeping only the index in memory bounds the journal's
// memory by the number of entries, not by their size (up to 1 MiB each).
func (j *Journal) Pending() []Entry {
	j.mu.Lock()
	out := make([]Entry, 0, len(j.pending))
	for _, it := range j.pending {
		out = append(out, Entry{ID: it.id, Key: it.key, Received: it.received})
	}
	j.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Len returns the number of pending entries.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending)
}

// Oldest returns the earliest Received among pending entries, and false if
// there are none. It is the age the bridge reports as its backlog.
func (j *Journal) Oldest() (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.byAge) == 0 {
		return time.Time{}, false
	}
	return j.byAge[0].received, true
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Close releases the directory lock. Appends and Dones after Close fail
// with ErrClosed; nothing needs flushing, since every successful Append and
// Done is already on disk.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if err := j.lock.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", j.dir, err)
	}
	return nil
}

// corruptError is an entry file that exists and was read but does not
// verify.
type corruptError struct{ reason error }

func (e *corruptError) Error() string { return e.reason.Error() }
func (e *corruptError) Unwrap() error { return e.reason }

// readEntry reads and verifies the entry file path, whose name says id. An
// I/O error is returned as is; content that does not verify, or a path
// that is not a regular file, as a *corruptError.
func readEntry(path, id string) (Entry, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Entry{}, err
	}
	if !fi.Mode().IsRegular() {
		return Entry{}, &corruptError{fmt.Errorf("not a regular file (%s)", fi.Mode().Type())}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, err
	}
	e, err := decode(data)
	if err != nil {
		return Entry{}, &corruptError{err}
	}
	if e.ID != id {
		return Entry{}, &corruptError{fmt.Errorf("envelope id %q does not match the file name", e.ID)}
	}
	return e, nil
}

// quarantine moves an entry file that cannot be used to CorruptDir, so an
// SRE can inspect it, and logs why. If the move fails the file stays where
// it is, is not indexed, and the next Open tries again.
func (j *Journal) quarantine(path string, reason error) {
	var ce *corruptError
	if !errors.As(reason, &ce) {
		// An I/O error reading the file is not evidence of corruption;
		// leave it for the next Open.
		j.log.Error("Skipping unreadable journal entry", "file", path, "err", reason)
		return
	}
	cdir := filepath.Join(j.dir, CorruptDir)
	dst := filepath.Join(cdir, filepath.Base(path))
	for i := 1; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(cdir, fmt.Sprintf("%s.%d", filepath.Base(path), i))
	}
	j.log.Warn("Moving corrupt journal entry aside", "file", path, "reason", reason.Error(), "to", dst)
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		j.log.Error("Failed to move corrupt journal entry aside", "file", path, "err", err)
		return
	}
	if err := os.Rename(path, dst); err != nil {
		j.log.Error("Failed to move corrupt journal entry aside", "file", path, "err", err)
		return
	}
	for _, d := range []string{cdir, j.dir} {
		if err := syncDir(d); err != nil {
			j.log.Warn("Failed to fsync after moving corrupt journal entry", "file", dst, "err", err)
		}
	}
}

// formatID renders n as a fixed-width ID.
func formatID(n int64) string { return fmt.Sprintf("%0*d", idWidth, n) }

// parseID accepts exactly the strings formatID produces for n > 0.
func parseID(s string) (int64, bool) {
	if len(s) != idWidth {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// ageHeap is a min-heap of items by Received, then ID, so Oldest is O(1)
// and Append and Done are O(log n).
type ageHeap []*item

func (h ageHeap) Len() int { return len(h) }
func (h ageHeap) Less(a, b int) bool {
	if !h[a].received.Equal(h[b].received) {
		return h[a].received.Before(h[b].received)
	}
	return h[a].n < h[b].n
}
func (h ageHeap) Swap(a, b int) {
	h[a], h[b] = h[b], h[a]
	h[a].heapIdx = a
	h[b].heapIdx = b
}
func (h *ageHeap) Push(x any) {
	it := x.(*item)
	it.heapIdx = len(*h)
	*h = append(*h, it)
}
func (h *ageHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.heapIdx = -1
	return it
}
