package journal_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// t0 is the fake "now" the tests step by hand; time is an input to Append.
var t0 = time.Date(2026, 3, 4, 10, 15, 30, 123456789, time.UTC)

func newLogger() (*slog.Logger, *testsupport.SyncBuffer) {
	buf := &testsupport.SyncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// open opens dir and closes the journal when the test ends.
func open(t testing.TB, dir string) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// reopen closes j and opens its directory again, as a restart would.
func reopen(t testing.TB, j *journal.Journal) *journal.Journal {
	t.Helper()
	require.NoError(t, j.Close())
	return open(t, j.Dir())
}

// names lists the plain file names in dir that match the glob pattern.
func names(t testing.TB, dir, pattern string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		if ok, err := filepath.Match(pattern, de.Name()); !de.IsDir() && ok && err == nil {
			out = append(out, de.Name())
		}
	}
	return out
}

func ids(es []journal.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func requireStrictlyIncreasing(t testing.TB, ids []string) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		require.Len(t, ids[i], len(ids[0]), "IDs must be fixed-width")
		require.Less(t, ids[i-1], ids[i], "ID %d is not greater than ID %d", i, i-1)
	}
}

func TestAppendReopenRoundTrip(t *testing.T) {
	webhook, err := os.ReadFile("testdata/webhook.json")
	require.NoError(t, err)
	big := []byte(`{"blob":"` + strings.Repeat("x", 1<<20-11) + `"}`)
	require.Equal(t, 1<<20, len(big))

	cases := []struct {
		desc    string
		key     string
		payload []byte
	}{
		{desc: "Alertmanager webhook with its trailing newline", key: "sha256:5a8c", payload: webhook},
		{desc: "compact JSON object", key: "k1", payload: []byte(`{"a":1}`)},
		{desc: "JSON with whitespace on both sides and HTML characters", key: "k2", payload: []byte(" \t\n{ \"a\" : \"<b>&</b>\" ,\n \"u\":\"\\u00e9\" }\r\n")},
		{desc: "JSON array", key: "k3", payload: []byte(`[1, 2, 3]`)},
		{desc: "JSON null is not an object", key: "k4", payload: []byte(`null`)},
		{desc: "invalid JSON", key: "k5", payload: []byte(`{"a":`)},
		{desc: "binary", key: "k6", payload: []byte{0, 1, 2, 0xff, 0xfe, '\n', '{'}},
		{desc: "empty payload", key: "k7", payload: []byte{}},
		{desc: "key with newline and unicode", key: "k\n\u00e9\"8", payload: []byte(`{}`)},
		{desc: "1 MiB payload", key: "k9", payload: big},
	}

	j := open(t, t.TempDir())
	var appended []journal.Entry
	for i, c := range cases {
		e, err := j.Append(c.key, c.payload, t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err, c.desc)
		appended = append(appended, e)
	}
	requireStrictlyIncreasing(t, ids(appended))
	require.Len(t, names(t, j.Dir(), "*.json"), len(cases), "one file per entry")
	require.Empty(t, names(t, j.Dir(), ".tmp-*"), "no temp file left behind")

	for _, j := range []*journal.Journal{j, reopen(t, j)} {
		pending := j.Pending()
		require.Equal(t, ids(appended), ids(pending), "same entries in the same order")
		require.Equal(t, len(cases), j.Len())
		for i, c := range cases {
			t.Run(c.desc, func(t *testing.T) {
				p := pending[i]
				require.Nil(t, p.Payload, "Pending does not carry payloads")
				require.Equal(t, c.key, p.Key)
				require.True(t, appended[i].Received.Equal(p.Received), "received %v, want %v", p.Received, appended[i].Received)

				got, err := j.Load(p.ID)
				require.NoError(t, err)
				require.Equal(t, p.ID, got.ID)
				require.Equal(t, c.key, got.Key)
				require.True(t, appended[i].Received.Equal(got.Received))
				require.True(t, bytes.Equal(c.payload, got.Payload), "payload differs: got %d bytes, want %d", len(got.Payload), len(c.payload))
			})
		}
	}
}

func TestEntryFileIsReadableJSON(t *testing.T) {
	webhook, err := os.ReadFile("testdata/webhook.json")
	require.NoError(t, err)
	j := open(t, t.TempDir())
	e, err := j.Append("sha256:5a8c", webhook, t0)
	require.NoError(t, err)

	// What an SRE gets with cat and jq: the webhook, as JSON, under "payload".
	data, err := os.ReadFile(filepath.Join(j.Dir(), e.ID+".json"))
	require.NoError(t, err)
	var doc struct {
		ID       string          `json:"id"`
		Key      string          `json:"key"`
		Received time.Time       `json:"received"`
		Payload  json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	require.Equal(t, e.ID, doc.ID)
	require.Equal(t, "sha256:5a8c", doc.Key)
	require.True(t, t0.Equal(doc.Received))
	require.JSONEq(t, string(webhook), string(doc.Payload))
}

func TestIDs(t *testing.T) {
	cases := []struct {
		desc  string
		times []time.Time
	}{
		{desc: "clock goes backwards", times: []time.Time{t0, t0.Add(-time.Second), t0.Add(-time.Hour), t0.Add(time.Nanosecond), t0}},
		{desc: "many Appends in the same nanosecond", times: slices.Repeat([]time.Time{t0}, 300)},
		{desc: "clock before the epoch", times: []time.Time{time.Unix(-5, 0), time.Unix(-10, 0)}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			j := open(t, t.TempDir())
			var got []string
			for _, now := range c.times {
				e, err := j.Append("k", []byte(`{}`), now)
				require.NoError(t, err)
				require.True(t, now.Equal(e.Received), "Received is the time passed in, whatever the ID")
				got = append(got, e.ID)
			}
			requireStrictlyIncreasing(t, got)
			require.Equal(t, got, ids(j.Pending()))
		})
	}

	t.Run("ID is the receive time in nanoseconds when the clock moves forward", func(t *testing.T) {
		j := open(t, t.TempDir())
		e, err := j.Append("k", nil, t0)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%020d", t0.UnixNano()), e.ID)
	})

	t.Run("after reopen IDs are greater than every existing one, whatever the clock", func(t *testing.T) {
		j := open(t, t.TempDir())
		var before []string
		for range 3 {
			e, err := j.Append("k", nil, t0)
			require.NoError(t, err)
			before = append(before, e.ID)
		}
		j = reopen(t, j)
		e, err := j.Append("k", nil, t0.Add(-24*time.Hour))
		require.NoError(t, err)
		requireStrictlyIncreasing(t, append(before, e.ID))
	})

	t.Run("after every entry is Done and reopen IDs still increase", func(t *testing.T) {
		j := open(t, t.TempDir())
		var before []string
		for range 3 {
			e, err := j.Append("k", nil, t0)
			require.NoError(t, err)
			before = append(before, e.ID)
		}
		// Newest first, so the high-water entry is Done before the others.
		for _, id := range slices.Backward(before) {
			require.NoError(t, j.Done(id))
		}
		require.Equal(t, []string{before[2] + ".done"}, names(t, j.Dir(), "*.done"), "only the high-water mark is kept")
		require.Empty(t, names(t, j.Dir(), "*.json"))

		j = reopen(t, j)
		require.Zero(t, j.Len(), "the high-water file is not pending")
		e, err := j.Append("k", nil, t0.Add(-24*time.Hour))
		require.NoError(t, err)
		requireStrictlyIncreasing(t, append(before, e.ID))

		// Done of the new entry moves the high-water mark forward and
		// drops the old one.
		require.NoError(t, j.Done(e.ID))
		require.Equal(t, []string{e.ID + ".done"}, names(t, j.Dir(), "*.done"))
	})

	t.Run("a stale high-water file left by a crash is removed at Open", func(t *testing.T) {
		j := open(t, t.TempDir())
		e, err := j.Append("k", nil, t0)
		require.NoError(t, err)
		require.NoError(t, j.Done(e.ID))
		stale := filepath.Join(j.Dir(), fmt.Sprintf("%020d.done", 1))
		require.NoError(t, os.WriteFile(stale, nil, 0o600))

		j = reopen(t, j)
		require.Equal(t, []string{e.ID + ".done"}, names(t, j.Dir(), "*.done"))
		e2, err := j.Append("k", nil, t0.Add(-time.Hour))
		require.NoError(t, err)
		require.Greater(t, e2.ID, e.ID)
	})
}

func TestConcurrentAppendAndDone(t *testing.T) {
	const goroutines, perGoroutine = 50, 10
	j := open(t, t.TempDir())

	var wg sync.WaitGroup
	results := make([][]journal.Entry, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				// Everyone shares one clock reading: IDs must still be unique.
				e, err := j.Append(fmt.Sprintf("g%d-%d", g, i), []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)), t0)
				if !(assertNoError(t, err)) {
					return
				}
				results[g] = append(results[g], e)
				_ = j.Len()
				_, _ = j.Oldest()
			}
		})
	}
	wg.Wait()

	byID := map[string]journal.Entry{}
	for _, r := range results {
		for _, e := range r {
			_, dup := byID[e.ID]
			require.False(t, dup, "duplicate ID %s", e.ID)
			byID[e.ID] = e
		}
	}
	require.Len(t, byID, goroutines*perGoroutine)
	require.Equal(t, goroutines*perGoroutine, j.Len())
	requireStrictlyIncreasing(t, ids(j.Pending()))

	// Done the even-numbered entries from many goroutines while others read.
	var done sync.Map
	for g := range goroutines {
		wg.Go(func() {
			for i, e := range results[g] {
				if i%2 == 0 {
					assertNoError(t, j.Done(e.ID))
					done.Store(e.ID, true)
				} else {
					_ = j.Pending()
				}
			}
		})
	}
	wg.Wait()

	j = reopen(t, j)
	want := goroutines * perGoroutine / 2
	require.Equal(t, want, j.Len())
	for _, p := range j.Pending() {
		_, wasDone := done.Load(p.ID)
		require.False(t, wasDone, "entry %s came back after Done", p.ID)
		e, err := j.Load(p.ID)
		require.NoError(t, err)
		require.Equal(t, byID[p.ID].Key, e.Key)
		require.Equal(t, byID[p.ID].Payload, e.Payload)
	}
}

// assertNoError reports err without stopping the goroutine's test: require
// must not be called outside the test goroutine.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func TestDone(t *testing.T) {
	j := open(t, t.TempDir())
	a, err := j.Append("a", []byte(`{"a":1}`), t0)
	require.NoError(t, err)
	b, err := j.Append("b", []byte(`{"b":1}`), t0.Add(time.Second))
	require.NoError(t, err)
	c, err := j.Append("c", []byte(`{"c":1}`), t0.Add(2*time.Second))
	require.NoError(t, err)

	require.NoError(t, j.Done(b.ID))
	require.Equal(t, []string{a.ID, c.ID}, ids(j.Pending()))
	require.Equal(t, 2, j.Len())
	require.NoFileExists(t, filepath.Join(j.Dir(), b.ID+".json"))
	_, err = j.Load(b.ID)
	require.ErrorIs(t, err, journal.ErrNotFound)

	require.NoError(t, j.Done(b.ID), "Done twice is not an error")
	require.NoError(t, j.Done("00000000000000000001"), "Done of an unknown ID is not an error")
	require.NoError(t, j.Done("../../etc/passwd"), "Done of a nonsense ID is not an error and touches nothing")

	j = reopen(t, j)
	require.Equal(t, []string{a.ID, c.ID}, ids(j.Pending()), "Done survives a restart")
}

func TestOldest(t *testing.T) {
	j := open(t, t.TempDir())
	_, ok := j.Oldest()
	require.False(t, ok, "empty journal has no oldest entry")

	// The clock goes backwards for the second Append: the oldest Received
	// is not the lowest ID.
	a, err := j.Append("a", nil, t0)
	require.NoError(t, err)
	b, err := j.Append("b", nil, t0.Add(-time.Minute))
	require.NoError(t, err)
	_, err = j.Append("c", nil, t0.Add(time.Minute))
	require.NoError(t, err)

	oldest, ok := j.Oldest()
	require.True(t, ok)
	require.True(t, t0.Add(-time.Minute).Equal(oldest))

	require.NoError(t, j.Done(b.ID))
	oldest, ok = j.Oldest()
	require.True(t, ok)
	require.True(t, t0.Equal(oldest))

	j = reopen(t, j)
	oldest, ok = j.Oldest()
	require.True(t, ok)
	require.True(t, t0.Equal(oldest), "the index is rebuilt at Open")
	require.NoError(t, j.Done(a.ID))
	oldest, ok = j.Oldest()
	require.True(t, ok)
	require.True(t, t0.Add(time.Minute).Equal(oldest))
}

func TestOpenRecovers(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	var es []journal.Entry
	for i := range 5 {
		e, err := j.Append(fmt.Sprintf("k%d", i), []byte(`{"alert":"xxxxxxxxxxxxxxxx"}`), t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
		es = append(es, e)
	}
	require.NoError(t, j.Close())
	path := func(e journal.Entry) string { return filepath.Join(dir, e.ID+".json") }

	// An Append interrupted before its rename.
	tmp := filepath.Join(dir, ".tmp-123456")
	require.NoError(t, os.WriteFile(tmp, []byte(`{"id":"half`), 0o600))
	// A torn write: the file cut in half.
	data, err := os.ReadFile(path(es[1]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path(es[1]), data[:len(data)/2], 0o600))
	// A flipped bit that leaves valid JSON: only the checksum sees it.
	data, err = os.ReadFile(path(es[2]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path(es[2]), bytes.Replace(data, []byte("xxxx"), []byte("xxxy"), 1), 0o600))
	// An empty file, as ext4 can leave after power loss without fsync.
	require.NoError(t, os.WriteFile(path(es[3]), nil, 0o600))
	// A valid entry copied under another entry's name.
	misnamed := filepath.Join(dir, "00000000000000000007.json")
	data, err = os.ReadFile(path(es[4]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(misnamed, data, 0o600))
	// A file the journal does not own.
	notes := filepath.Join(dir, "NOTES.txt")
	require.NoError(t, os.WriteFile(notes, []byte("sre was here"), 0o600))
	// The bridge keeps its own state in subdirectories.
	rollups := filepath.Join(dir, "rollups")
	require.NoError(t, os.Mkdir(rollups, 0o700))
	require.NoError(t, journal.WriteFileAtomic(filepath.Join(rollups, "a.json"), []byte("{}"), 0o600))

	log, logs := newLogger()
	j, err = journal.Open(dir, log)
	require.NoError(t, err, "corrupt files are never fatal")
	t.Cleanup(func() { _ = j.Close() })

	require.Equal(t, []string{es[0].ID, es[4].ID}, ids(j.Pending()), "the intact entries are loaded")
	require.NoFileExists(t, tmp, "the temp file is removed")
	require.FileExists(t, notes, "unknown files are left alone")

	corrupt := []struct {
		file   string
		reason string
	}{
		{file: path(es[1]), reason: "malformed envelope"},
		{file: path(es[2]), reason: "checksum mismatch"},
		{file: path(es[3]), reason: "empty file"},
		{file: misnamed, reason: "does not match the file name"},
	}
	for _, c := range corrupt {
		require.NoFileExists(t, c.file)
		require.FileExists(t, filepath.Join(dir, journal.CorruptDir, filepath.Base(c.file)), "moved, never deleted")
		line := logLine(t, logs.String(), c.file)
		require.Contains(t, line, "level=WARN")
		require.Contains(t, line, c.reason)
	}
	require.Contains(t, logLine(t, logs.String(), tmp), "Removing temporary file")
	require.Contains(t, logLine(t, logs.String(), notes), "Ignoring unknown file")
	require.NotContains(t, logs.String(), rollups, "subdirectories are not entries and not worth a warning")
	require.FileExists(t, filepath.Join(rollups, "a.json"))

	// The IDs of quarantined files are never handed out again.
	e, err := j.Append("k", nil, time.Unix(0, 1))
	require.NoError(t, err)
	require.Greater(t, e.ID, es[4].ID)

	// A second Open with the same corrupt file name does not overwrite the
	// first one in corrupt/.
	require.NoError(t, j.Close())
	require.NoError(t, os.WriteFile(path(es[3]), []byte("junk"), 0o600))
	j = open(t, dir)
	require.FileExists(t, filepath.Join(dir, journal.CorruptDir, es[3].ID+".json"))
	require.FileExists(t, filepath.Join(dir, journal.CorruptDir, es[3].ID+".json.1"))
	require.Equal(t, 3, j.Len())
}

// logLine returns the one log line that mentions file.
func logLine(t *testing.T, logs, file string) string {
	t.Helper()
	var found []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "file="+file+" ") || strings.HasSuffix(strings.TrimSuffix(line, "\n"), "file="+file) {
			found = append(found, line)
		}
	}
	require.Len(t, found, 1, "want one log line naming %s in:\n%s", file, logs)
	return found[0]
}

func TestLoadQuarantinesAFileCorruptedAfterOpen(t *testing.T) {
	log, logs := newLogger()
	j, err := journal.Open(t.TempDir(), log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	e, err := j.Append("k", []byte(`{"a":1}`), t0)
	require.NoError(t, err)
	file := filepath.Join(j.Dir(), e.ID+".json")
	require.NoError(t, os.WriteFile(file, []byte("garbage"), 0o600))

	_, err = j.Load(e.ID)
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.ErrorContains(t, err, file, "the error names the file")
	require.Zero(t, j.Len())
	require.FileExists(t, filepath.Join(j.Dir(), journal.CorruptDir, e.ID+".json"))
	require.Contains(t, logLine(t, logs.String(), file), "level=WARN")
}

func TestOpenLocksTheDirectory(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	_, err := journal.Open(dir, nil)
	require.ErrorContains(t, err, "in use")

	require.NoError(t, j.Close())
	_, err = j.Append("k", nil, t0)
	require.ErrorIs(t, err, journal.ErrClosed)
	open(t, dir)
}

func TestOpenCreatesThePrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "journal")
	j := open(t, dir)
	require.Equal(t, dir, j.Dir())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestAppendRejectsZeroTime(t *testing.T) {
	j := open(t, t.TempDir())
	_, err := j.Append("k", nil, time.Time{})
	require.Error(t, err)
	require.Zero(t, j.Len())
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")

	require.NoError(t, journal.WriteFileAtomic(path, []byte("one"), 0o644))
	require.NoError(t, journal.WriteFileAtomic(path, []byte("two"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, des, 1, "no temp file left behind")

	missing := filepath.Join(dir, "nope", "state.json")
	err = journal.WriteFileAtomic(missing, []byte("x"), 0o600)
	require.ErrorContains(t, err, missing)

	t.Run("relative path", func(t *testing.T) {
		t.Chdir(dir)
		require.NoError(t, journal.WriteFileAtomic("rel.json", []byte("r"), 0o600))
		require.FileExists(t, filepath.Join(dir, "rel.json"))
	})
}

func TestAppendFailsAndLeavesNothing(t *testing.T) {
	cases := []struct {
		desc string
		// breakDir makes the journal directory unwritable; it returns the
		// error text Append must report. It may skip the test with the
		// reason when the machine cannot produce the failure.
		breakDir func(t *testing.T, dir string) string
		// tmpfs puts the journal in a fresh tmpfs, whose mount point is
		// the parent of dir.
		tmpfs bool
	}{
		{desc: "directory removed", breakDir: func(t *testing.T, dir string) string {
			require.NoError(t, os.RemoveAll(dir))
			return "no such file or directory"
		}},
		{desc: "directory replaced by a file", breakDir: func(t *testing.T, dir string) string {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.WriteFile(dir, nil, 0o600))
			return "not a directory"
		}},
		{desc: "directory mode 0500", breakDir: func(t *testing.T, dir string) string {
			require.NoError(t, os.Chmod(dir, 0o500))
			t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
			if f, err := os.CreateTemp(dir, "probe"); err == nil {
				_ = f.Close()
				_ = os.Remove(f.Name())
				t.Skipf("skipping: uid %d can write to a 0500 directory (root or CAP_DAC_OVERRIDE); the read-only and full tmpfs cases cover this path", os.Geteuid())
			}
			return "permission denied"
		}},
		{desc: "read-only filesystem", tmpfs: true, breakDir: func(t *testing.T, dir string) string {
			remountReadOnly(t, filepath.Dir(dir))
			return "read-only file system"
		}},
		{desc: "full filesystem", tmpfs: true, breakDir: func(t *testing.T, dir string) string {
			fill(t, dir)
			return "no space left on device"
		}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			base := t.TempDir()
			if c.tmpfs {
				base = mountTmpfs(t, 256<<10)
			}
			dir := filepath.Join(base, "journal")
			j := open(t, dir)
			kept, err := j.Append("kept", []byte(`{"kept":true}`), t0)
			require.NoError(t, err)

			want := c.breakDir(t, dir)
			_, err = j.Append("lost", bytes.Repeat([]byte("p"), 64<<10), t0.Add(time.Second))
			require.ErrorContains(t, err, want)
			require.ErrorContains(t, err, dir, "the error names the file")
			require.Equal(t, []string{kept.ID}, ids(j.Pending()), "a failed Append is not pending")

			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				require.Equal(t, []string{kept.ID + ".json"}, names(t, dir, "*.json"), "nothing under a final name")
				require.Empty(t, names(t, dir, ".tmp-*"), "no temp file left behind")
			}
		})
	}
}

func TestAppendWorksAgainAfterSpaceIsFreed(t *testing.T) {
	dir := filepath.Join(mountTmpfs(t, 256<<10), "journal")
	j := open(t, dir)
	filler := fill(t, dir)
	_, err := j.Append("k", bytes.Repeat([]byte("p"), 64<<10), t0)
	require.ErrorContains(t, err, "no space left on device")

	require.NoError(t, os.Remove(filler))
	e, err := j.Append("k", bytes.Repeat([]byte("p"), 64<<10), t0)
	require.NoError(t, err)
	require.Equal(t, []string{e.ID}, ids(j.Pending()))
}

func TestDoneOnReadOnlyFilesystemFails(t *testing.T) {
	mnt := mountTmpfs(t, 256<<10)
	dir := filepath.Join(mnt, "journal")
	j := open(t, dir)
	e, err := j.Append("k", nil, t0)
	require.NoError(t, err)
	remountReadOnly(t, mnt)

	err = j.Done(e.ID)
	require.ErrorContains(t, err, "read-only file system")
	require.Equal(t, 1, j.Len(), "a failed Done leaves the entry pending")
	require.FileExists(t, filepath.Join(dir, e.ID+".json"))
}

// fill writes a file into dir until its filesystem is full and returns its
// path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorContains(t, err, "no space left on device")
			return path
		}
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, os.Getenv(crashModeEnv))
		// crashChild never returns: it dies of SIGKILL.
	}
	os.Exit(m.Run())
}
