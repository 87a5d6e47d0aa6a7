package dstate

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/dstate/dstatetest"
	"github.com/kubemedic/kubemedic/detectors/host"
)

const fixtureRoot = "../testdata/dstate/root"

func TestScanFixture(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the zombie leader's thread is looked into only on Linux")
	}
	res, err := newScanner(host.Root(fixtureRoot)).scan()
	require.NoError(t, err)
	require.Equal(t, 10, res.Total)
	require.Zero(t, res.Errs)
	got := map[int]Proc{}
	for _, p := range res.Procs {
		got[p.PID] = p
	}
	require.Len(t, got, 5, "D-state processes but the kernel worker, and the zombie leader with a thread in D")
	for _, pid := range []int{4242, 4300, 4400, 5000, 7000} {
		require.Contains(t, got, pid)
		require.Equal(t, byte('D'), got[pid].State)
		require.NoError(t, got[pid].CgroupErr)
		require.NotEmpty(t, got[pid].Cgroup)
	}
	require.Equal(t, "pt_main_thread", got[4300].Comm)
	require.Equal(t, "a) b (c", got[7000].Comm)
	require.Equal(t, uint64(95000), got[7000].StartTicks)
	cg, err := os.ReadFile(filepath.Join(fixtureRoot, "proc/7000/task/7001/cgroup"))
	require.NoError(t, err)
	require.Equal(t, string(cg), string(got[7000].Cgroup))
}

func TestScanSkipsVanishedAndCountsGarbage(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, dstatetest.WriteFixture(dir, 5, 1))
	proc := filepath.Join(dir, "proc")
	// A process that exited between the directory read and the open.
	require.NoError(t, os.Mkdir(filepath.Join(proc, "31000"), 0o755))
	// A process whose files read empty: it exited after the open.
	require.NoError(t, os.Mkdir(filepath.Join(proc, "31001"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "31001/stat"), nil, 0o644))
	// A stat that does not parse is an error, counted.
	require.NoError(t, os.Mkdir(filepath.Join(proc, "31002"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "31002/stat"), []byte("31002 (x) D\n"), 0o644))
	// A D-state process whose cgroup is gone is dropped.
	require.NoError(t, os.Mkdir(filepath.Join(proc, "31003"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "31003/stat"), []byte(dstatetest.Stat(31003, "x", 'D', 1, 7)), 0o644))

	res, err := newScanner(host.Root(dir)).scan()
	require.NoError(t, err)
	require.Equal(t, 5+4+1, res.Total)
	require.Equal(t, 1, res.Errs)
	require.ErrorContains(t, res.Err, "31002/stat: parse stat: pid 31002: 3 fields, want at least 22")
	require.Len(t, res.Procs, 1)
	require.Equal(t, dstatetest.DPID(5, 1, 0), res.Procs[0].PID)
}

func TestScanMissingProc(t *testing.T) {
	_, err := newScanner(host.Root(t.TempDir())).scan()
	require.ErrorContains(t, err, "proc")
}

// TestScanAllocatesNothingPerProcess checks that a process not in D costs
// no allocation: a scan of 4,000 processes allocates as much as one of 2,000.
func TestScanAllocatesNothingPerProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the portable scan allocates per process")
	}
	allocs := func(n int) float64 {
		dir := t.TempDir()
		require.NoError(t, dstatetest.WriteFixture(dir, n, 2))
		s := newScanner(host.Root(dir))
		return testing.AllocsPerRun(5, func() {
			if _, err := s.scan(); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(2000), allocs(4000)
	require.InDelta(t, small, large, 2, "allocations with 2000 processes: %v, with 4000: %v", small, large)
}
