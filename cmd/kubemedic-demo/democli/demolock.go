package democli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// demoKubeconfig is the kubeconfig path a demo writes, claimed so that two
// demos never write the same file: the second would silently take over the
// path the first printed, and its Ctrl-C would delete the file the first
// one's user is using.
type demoKubeconfig struct {
	Path string
	// Other is the pid of the demo holding the default path when this one
	// fell back to a path of its own; 0 otherwise.
	Other   int
	release func()
}

// Release gives the path up: the kubeconfig is removed and the claim
// dropped. It runs when the demo stops.
func (k *demoKubeconfig) Release() {
	_ = os.Remove(k.Path)
	k.release()
}

// defaultDemoKubeconfig is where a demo writes its kubeconfig unless told
// otherwise, read at run time so that TMPDIR counts.
func defaultDemoKubeconfig() string {
	return filepath.Join(os.TempDir(), "kubemedic-demo.kubeconfig")
}

// claimDemoKubeconfig claims path for this demo. An explicit path held by a
// running demo is an error naming that demo's pid. The default path held by
// a running demo makes this one use kubemedic-demo-<pid>.kubeconfig beside
// it, and say so.
func claimDemoKubeconfig(path string, explicit bool) (*demoKubeconfig, error) {
	release, holder, err := lockFile(path + ".lock")
	if err == nil {
		return &demoKubeconfig{Path: path, release: release}, nil
	}
	if !errors.Is(err, errLocked) {
		return nil, fmt.Errorf("claim %s: %w", path, err)
	}
	if explicit {
		return nil, fmt.Errorf("another demo (pid %s) is running with --kubeconfig %s; stop it (Ctrl-C in its shell, or kill -INT %s), or pass another --kubeconfig", pidText(holder), path, pidText(holder))
	}
	own := filepath.Join(filepath.Dir(path), fmt.Sprintf("kubemedic-demo-%d.kubeconfig", os.Getpid()))
	release, _, err = lockFile(own + ".lock")
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", own, err)
	}
	return &demoKubeconfig{Path: own, Other: holder, release: func() {
		_ = os.Remove(own + ".lock")
		release()
	}}, nil
}

func pidText(pid int) string {
	if pid == 0 {
		return "unknown"
	}
	return strconv.Itoa(pid)
}

// errLocked: another process holds the lock.
var errLocked = errors.New("locked by another process")

// readPid reads the pid a lock file holds; 0 when it holds none.
func readPid(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}
