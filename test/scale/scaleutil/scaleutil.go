// Package scaleutil holds what the scale programs under test/scale share:
// progress lines, waits, formatting. Only they import it; free ports and
// process supervision come from internal/localcluster.
package scaleutil

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Begin is when the program started: Logf prints the time since.
var Begin = time.Now()

// MiB writes a byte count in MiB.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Pct is the p-th percentile of sorted durations (nearest rank).
func Pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(p)/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Sleep waits d or until ctx ends, and returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Truncate cuts s to n bytes, ending in "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// WaitPodsRunning waits until kwok has marked every pod Running: none is
// Pending any more.
func WaitPodsRunning(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return WaitPodsRunningIn(ctx, cs, "", timeout)
}

// WaitPodsRunningIn waits until no pod of namespace ("": every namespace)
// is Pending any more.
func WaitPodsRunningIn(ctx context.Context, cs kubernetes.Interface, namespace string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := time.Now()
	for {
		list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending", Limit: 500})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			if err != nil {
				Logf("pods: waiting for Running: %v", err)
			} else {
				rest := ""
				if list.RemainingItemCount != nil {
					rest = fmt.Sprintf(" (%d more)", *list.RemainingItemCount)
				}
				Logf("pods: waiting for kwok to mark pods Running: %d Pending in the first page%s", len(list.Items), rest)
			}
		}
		if err := Sleep(ctx, 2*time.Second); err != nil {
			return fmt.Errorf("wait for pods Running: %w", err)
		}
	}
}

// Logf prints a progress line with the seconds since Begin.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(Begin).Seconds(), fmt.Sprintf(format, args...))
}

// ProcStatus returns a "kB" field of /proc/<pid>/status in bytes.
func ProcStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// CPUTime is the process' user+system CPU time.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}
