//go:build !linux

package dstate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/procfs"
)

// scanner is the portable scan, for building and testing off Linux; the
// Linux one avoids per-process allocations and looks into zombie leaders'
// threads.
type scanner struct{ root host.Root }

func newScanner(root host.Root) *scanner { return &scanner{root: root} }

func (s *scanner) scan() (scanResult, error) {
	var res scanResult
	dir := s.root.Path("/proc")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		pid, ok := parsePID([]byte(e.Name()))
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			if !vanished(err) {
				res.fail(pid, err)
			}
			continue
		}
		st, err := procfs.ParseStat(b)
		if err != nil {
			res.fail(pid, fmt.Errorf("%s/%s/stat: %w", dir, e.Name(), err))
			continue
		}
		res.Total++
		if st.KernelThread() || st.State != 'D' {
			continue
		}
		p := Proc{Stat: st}
		cg, err := os.ReadFile(filepath.Join(dir, e.Name(), "cgroup"))
		switch {
		case err == nil:
			p.Cgroup = cg
		case vanished(err):
			continue
		default:
			p.CgroupErr = err
		}
		res.Procs = append(res.Procs, p)
	}
	return res, nil
}
