package journal_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/journal"
)

// The crash tests re-execute the test binary; TestMain sees crashDirEnv and
// runs crashChild instead of the tests.
const (
	crashDirEnv  = "JOURNAL_CRASH_CHILD_DIR"
	crashModeEnv = "JOURNAL_CRASH_CHILD_MODE" // a count N, or "loop"
	loopWriters  = 4
)

// crashChild appends to the journal in dir and dies of SIGKILL, with no
// chance to flush, close or clean up. With mode N it kills itself right after
// the Nth Append returns. With mode "loop" it appends from loopWriters
// goroutines forever, printing each ID to stdout once its Append returned,
// until the parent kills it in the middle of Appends.
func crashChild(dir, mode string) {
	die := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	j, err := journal.Open(dir, nil)
	if err != nil {
		die(err)
	}
	if mode == "loop" {
		var wg sync.WaitGroup
		for g := range loopWriters {
			wg.Go(func() {
				for i := 0; ; i++ {
					key := fmt.Sprintf("g%d-%d", g, i)
					e, err := j.Append(key, []byte(`{"key":"`+key+`"}`), time.Now())
					if err != nil {
						die(err)
					}
					// One write of less than PIPE_BUF bytes is atomic.
					if _, err := os.Stdout.WriteString(e.ID + " " + key + "\n"); err != nil {
						die(err)
					}
				}
			})
		}
		wg.Wait()
	}
	n, err := strconv.Atoi(mode)
	if err != nil {
		die(fmt.Errorf("bad mode %q", mode))
	}
	for i := range n {
		if _, err := j.Append(fmt.Sprintf("k%d", i), []byte(fmt.Sprintf(`{"i":%d}`, i)), time.Now()); err != nil {
			die(err)
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught; this is never reached.
}

// crashCommand returns the test binary set up to run crashChild.
func crashCommand(t *testing.T, dir, mode string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// requireKilled checks that the child died of SIGKILL, not of an error.
func requireKilled(t *testing.T, err error) {
	t.Helper()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "child did not fail: %v", err)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child exited with %v, want SIGKILL", err)
}

func TestSIGKILLAfterAppendLosesNothing(t *testing.T) {
	const n = 25
	dir := t.TempDir()
	requireKilled(t, crashCommand(t, dir, strconv.Itoa(n)).Run())

	log, logs := newLogger()
	j, err := journal.Open(dir, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	pending := j.Pending()
	require.Len(t, pending, n, "exactly the entries whose Append returned")
	for i, p := range pending {
		require.Equal(t, fmt.Sprintf("k%d", i), p.Key, "in Append order")
		e, err := j.Load(p.ID)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf(`{"i":%d}`, i), string(e.Payload))
	}
	require.NotContains(t, logs.String(), "corrupt")
}

func TestSIGKILLDuringAppendsLosesNoAcknowledgedEntry(t *testing.T) {
	dir := t.TempDir()
	lastIDs := []string{}
	for round, killAfter := range []int{40, 97, 150} {
		cmd := crashCommand(t, dir, "loop")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())

		acked := map[string]string{} // ID → key, for every Append that returned
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var id, key string
			_, err := fmt.Sscan(sc.Text(), &id, &key)
			require.NoError(t, err, "line %q", sc.Text())
			acked[id] = key
			if len(acked) == killAfter {
				// Kill while the writers are in the middle of Appends.
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			}
		}
		requireKilled(t, cmd.Wait())

		j := open(t, dir)
		pending := map[string]journal.Entry{}
		for _, p := range j.Pending() {
			pending[p.ID] = p
		}
		for id, key := range acked {
			p, ok := pending[id]
			require.True(t, ok, "round %d: acknowledged entry %s (%s) is lost", round, id, key)
			require.Equal(t, key, p.Key)
		}
		// Each writer may have had one Append finish that it did not get
		// to report; nothing else may appear.
		extra := len(pending) - len(acked) - len(lastIDs)
		require.LessOrEqual(t, extra, loopWriters, "round %d: entries that were never appended", round)
		for id := range pending {
			e, err := j.Load(id)
			require.NoError(t, err, "round %d: every file is whole", round)
			require.Equal(t, `{"key":"`+e.Key+`"}`, string(e.Payload))
		}
		require.NoDirExists(t, dir+"/"+journal.CorruptDir, "round %d: a crash leaves no corrupt file", round)
		require.Empty(t, names(t, dir, ".tmp-*"), "round %d: temp files are removed at Open", round)
		require.Empty(t, names(t, dir, "*.done"))

		// This round's IDs are all greater than the previous rounds'.
		all := ids(j.Pending())
		requireStrictlyIncreasing(t, all)
		require.Equal(t, lastIDs, all[:len(lastIDs)], "round %d: earlier rounds' entries are kept", round)
		lastIDs = all
		require.NoError(t, j.Close())
	}
}
