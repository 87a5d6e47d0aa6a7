package procgroup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alive reports whether the process pid exists (and is not a zombie the
// test's shell left).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}

// TestTimeoutKillsTheGroup: a tool that hangs with a child that holds its
// output open is killed at the deadline, child included, and Run returns
// within the wait delay.
func TestTimeoutKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cmd := Command(ctx, time.Second, "/bin/sh", "-c", "sleep 60 & echo $! > "+pidFile+"; wait")
	var out strings.Builder
	cmd.Stdout = &out
	start := time.Now()
	err := cmd.Run()
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "Run waited for the orphan")
	KillGroup(cmd)
	b, rerr := os.ReadFile(pidFile)
	require.NoError(t, rerr)
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	require.Positive(t, child)
	require.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 20*time.Millisecond, "the child sleep %d outlived its group's kill", child)
}

// TestKillGroupAfterExit: a leader that exits leaves a child in the group;
// KillGroup ends it.
func TestKillGroupAfterExit(t *testing.T) {
	cmd := Command(context.Background(), 100*time.Millisecond, "/bin/sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	require.NoError(t, err)
	child, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	require.Positive(t, child)
	require.True(t, alive(child))
	KillGroup(cmd)
	require.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 20*time.Millisecond)
}
