package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// ReadStat reads and parses /proc/<pid>/stat under root. A process that is
// gone is an error wrapping os.ErrNotExist.
func ReadStat(root host.Root, pid int) (Stat, error) {
	b, err := os.ReadFile(root.Path("/proc/" + strconv.Itoa(pid) + "/stat"))
	if err != nil {
		return Stat{}, err
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", root.Path("/proc/"+strconv.Itoa(pid)+"/stat"), err)
	}
	return s, nil
}

// Alive says whether the process pid that started at startTicks still
// exists and is not a zombie. A different start time means the PID was
// reused, so the original is gone.
func Alive(root host.Root, pid int, startTicks uint64) (bool, error) {
	s, err := ReadStat(root, pid)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.StartTicks == startTicks && s.State != 'Z' && s.State != 'X', nil
}
