package nfs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
)

// ProbeName is the internal subcommand of the probe child, and the name it
// gives itself (/proc/<pid>/comm), so that ps shows what is stuck.
const ProbeName = "nfs-probe"

// RecordsDir is where, under --state-dir, the probe child keeps one record
// per outstanding probe.
const RecordsDir = "nfs-probes"

// Record says that a probe child is inside stat or statfs of Mount. The
// child writes it before the calls and removes it when both returned, so a
// record exists exactly while its probe is outstanding, or when the child
// died in between (then procfs.Alive says so and the parent removes it).
type Record struct {
	Mount string `json:"mount"`
	// PID and StartTicks identify the child across PID reuse. The PID is in
	// the plugin's own PID namespace (the host's, with hostPID).
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"startTicks"`
	Started    time.Time `json:"started"`
}

// recordFile is the record's path: one file per mount point, named by a
// hash because mount points hold slashes and anything else.
func recordFile(dir, mount string) string {
	sum := sha256.Sum256([]byte(mount))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+".json")
}

// writeRecord replaces the mount's record atomically (temp file, rename),
// so a reader never sees half a record. No fsync: a crash that loses it is
// a reboot, after which no probe is outstanding.
func writeRecord(dir string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	path := recordFile(dir, r.Mount)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write probe record: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write probe record %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write probe record %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write probe record: %w", err)
	}
	return nil
}

// ReadRecords reads every record in dir, with its file name. A missing dir
// is no records.
func ReadRecords(dir string) (map[string]Record, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read probe records: %w", err)
	}
	out := map[string]Record{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // its probe returned meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read probe records: %w", err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil || r.Mount == "" || r.PID <= 0 {
			// Records are renamed into place, so this is not a torn
			// write; a PID of zero can never be alive either.
			r = Record{}
		}
		out[path] = r
	}
	return out, nil
}

// ProbeCommand is the internal probe child:
//
//	kubemedic-detect nfs-probe --records=DIR -- MOUNT PATH [MOUNT PATH ...]
//
// It stats and statfs's every PATH in its own thread and writes one line
// per finished call to fd 3 (see probeLine). The parent gives it /dev/null
// for stdin, stdout and stderr and a session of its own, and may exit and
// leave it blocked; it then finishes, or not, on its own.
func ProbeCommand() *plugin.Command {
	return &plugin.Command{Name: ProbeName, Internal: true, Main: probeMain}
}

func probeMain(args []string) int {
	fs := pflag.NewFlagSet(ProbeName, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("records", "", "directory of the probe records")
	if err := fs.Parse(args); err != nil || *dir == "" || fs.NArg()%2 != 0 {
		return 2
	}
	results := os.NewFile(3, "results")
	if results == nil {
		return 2
	}
	_ = os.WriteFile("/proc/self/comm", []byte(ProbeName), 0) // best effort: only cosmetic
	w := &resultWriter{f: results}
	self, err := procfs.ReadStat(host.Root("/"), os.Getpid())
	if err != nil {
		for i := 0; i < fs.NArg()/2; i++ {
			w.send(i, "record", err.Error())
		}
		return 2
	}
	var wg sync.WaitGroup
	pairs := fs.Args()
	for i := 0; i+1 < len(pairs); i += 2 {
		idx, mount, path := i/2, pairs[i], pairs[i+1]
		rec := Record{Mount: mount, PID: os.Getpid(), StartTicks: self.StartTicks, Started: time.Now().UTC()}
		if err := writeRecord(*dir, rec); err != nil {
			// No bookkeeping, no probe: it could hang untracked.
			w.send(idx, "record", err.Error())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			probeOne(w, idx, recordFile(*dir, mount), path)
		}()
	}
	wg.Wait()
	return 0
}

// probeOne stats and statfs's path; the record goes before the result is
// sent, so a parent that sees the result also sees the record gone.
func probeOne(w *resultWriter, idx int, record, path string) {
	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Stat(path, &st) }); err != nil {
		os.Remove(record)
		w.send(idx, "stat", errnoName(err))
		return
	}
	w.send(idx, "stat", "ok")
	var sfs unix.Statfs_t
	err := retryEINTR(func() error { return unix.Statfs(path, &sfs) })
	os.Remove(record)
	if err != nil {
		w.send(idx, "statfs", errnoName(err))
		return
	}
	w.send(idx, "statfs", "ok")
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return "errno" + strconv.Itoa(int(errno))
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// resultWriter writes probe lines to fd 3, one write per line so lines
// from the probing threads never interleave. Errors are ignored: the
// parent may be gone (EPIPE), and the probe's bookkeeping is the record.
type resultWriter struct {
	mu sync.Mutex
	f  *os.File
}

// send writes "<index> <op> <result>": op is stat, statfs or record;
// result is ok, an errno name, or (for record) an error text.
func (w *resultWriter) send(idx int, op, result string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = fmt.Fprintf(w.f, "%d %s %s\n", idx, op, result)
}
