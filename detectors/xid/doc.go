// Package xid is the kubemedic-detect check "xid": it reads the kernel log
// for NVIDIA driver Xid errors and reports the worst one that still needs
// a GPU reset or a node reboot, as node condition GPUXidError with reason
// XidResetRequired or XidRebootRequired.
//
// # What it reads
//
// /dev/kmsg (flag --kmsg, a host path under --root), opened non-blocking
// and read record by record from the oldest record in the ring buffer to
// the newest: it never waits for new records. A regular file given to
// --kmsg is read whole; it may hold /dev/kmsg records
// ("prio,seq,usec,flags;message") or dmesg lines ("[ 1234.567890] message").
// Parsing (ScanLog, ParseRecord, ParseXid) is pure and fuzzed.
//
// # What it decides
//
// For every GPU (PCI bus ID), the Xids since the later of the boot and the
// GPU's last recorded reset count; catalog.go says which are reset-worthy
// and which need a reboot. The node's verdict is the worst of them (reboot
// over reset); the message names the GPU that needs it first, as
// "on 0000:3b:00.0", and how many more GPUs need something:
//
//	XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reboot required
//	XidResetRequired: Xid 46 on 0000:3b:00.0 (+1 GPU): GPU timeout; reset required
//
// The message holds no time or count, so it does not change while the
// fault lasts. With nothing actionable the check is OK ("no actionable Xid
// since boot"); without a boot ID, or when the kernel log cannot be read,
// it is Unknown and names the path.
//
// # State
//
// <state-dir>/xid.json (package state) holds, for the current boot only:
//
//	{"version": 1, "bootID": "...",
//	 "gpus": {"0000:3b:00.0": {"events": [{"xid": 79, "usec": 5678901, "seq": 1234}],
//	                           "resetsUsec": [6000000000]}}}
//
// Events are kept so that a fault does not clear when the ring buffer wraps
// and its record is gone from /dev/kmsg. A new boot ID discards everything.
// Events are deduplicated by kmsg sequence number, or by time and Xid
// number; each GPU keeps at most 32 (State.Compact says which) and 8
// resets. An event's "named" is the recovery action an Xid 154 names.
//
// # Recording a GPU reset
//
// A reset clears the GPU's earlier Xids. Two ways to record one. First,
// "kubemedic-detect xid --record-reset=0000:3b:00.0" records "reset now"
// (the boot ID and /proc/uptime) and prints OK. Second, for the reset-gpu
// operation's pod, which has only a shell, a file
// <state-dir>/xid-resets/<bus ID> holding "<boot_id> <uptime_seconds>":
//
//	echo "$(cat /proc/sys/kernel/random/boot_id) $(cut -d' ' -f1 /proc/uptime)" \
//	  > /var/lib/kubemedic/detect/xid-resets/0000:3b:00.0
//
// Every run merges these files (idempotently; they are not deleted). A file
// from another boot is skipped; a malformed one is logged, naming it, and
// skipped. The file name is normalised like a driver bus ID, so
// "00000000:3B:00.0" works too.
//
// Kernel log times are the kernel's local clock and reset times come from
// /proc/uptime (CLOCK_BOOTTIME). They agree on servers that never suspend,
// which is where this check runs.
//
// The check must never report OK without having read the kernel log, and
// must never block on it.
package xid
