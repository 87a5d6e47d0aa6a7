// Package host reads the node through a root prefix, so that every check
// runs on a fixture tree in tests and on the host's / (or a bind mount of
// it) in the DaemonSet.
package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Root is the prefix for host paths; "" and "/" mean the real root.
type Root string

// Path joins the root and an absolute host path.
func (r Root) Path(p string) string {
	if r == "" || r == "/" {
		return p
	}
	return filepath.Join(string(r), p)
}

// ReadFile reads a host file.
func (r Root) ReadFile(p string) ([]byte, error) {
	return os.ReadFile(r.Path(p))
}

// BootID is the kernel's boot ID; it changes at every boot.
func (r Root) BootID() (string, error) {
	b, err := r.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot ID: %s is empty", r.Path("/proc/sys/kernel/random/boot_id"))
	}
	return id, nil
}

// Uptime is the time since boot from /proc/uptime, in seconds.
func (r Root) Uptime() (float64, error) {
	b, err := r.ReadFile("/proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("read uptime: %s is empty", r.Path("/proc/uptime"))
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("read uptime: %s: %w", r.Path("/proc/uptime"), err)
	}
	return s, nil
}
