package journal_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounts it
// when the test ends and returns the mount point. It skips the test, saying
// why, where the process may not mount (no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs to produce the failure (%v); needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH)) })
	return mnt
}

// remountReadOnly remounts a tmpfs from mountTmpfs read-only.
func remountReadOnly(t *testing.T, mnt string) {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(mnt, &st))
	require.EqualValues(t, unix.TMPFS_MAGIC, st.Type, "%s is not a tmpfs from mountTmpfs", mnt)
	require.NoError(t, unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""), "remount %s read-only", mnt)
}
