// Package dstate is the PodProcessesStuck check (reason DStateOrphans):
// processes that have been in uninterruptible sleep (state D) for longer
// than --min-duration and whose pod is gone, or has been Terminating past
// its grace period. Such processes cannot be killed; they pin GPUs and
// memory until the node reboots.
//
// A run scans /proc/<pid>/stat of every process with reused buffers
// (10,000 processes in a few milliseconds), reads /proc/<pid>/cgroup only
// for processes in D, and asks this node's kubelet (the API server as a
// fallback, never a cluster-wide list) for its pods only when some pod
// process has been in D long enough. How long a process has been in D is
// kept in the state directory, keyed by boot ID and by PID and start time,
// so a reused PID starts over.
//
// It must never read /proc/<pid>/cmdline, environ, maps or anything else
// that takes the target's mmap lock: such a read blocks on a process stuck
// in D, and the check with it. The command name comes from stat's comm.
package dstate
