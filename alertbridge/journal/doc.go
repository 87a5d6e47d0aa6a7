// Package journal is alertbridge's durable inbox: every accepted webhook is
// written here before it is acknowledged, and stays here until the bridge
// has acted on it, so nothing is lost across a crash, a restart, SIGKILL or
// power loss.
//
// # What must hold
//
//   - Append returns nil only after the entry's file and its directory entry
//     have been fsynced. The bridge acknowledges a webhook (2xx) only then,
//     and answers 503 on any Append error (full disk, read-only or removed
//     directory), so Alertmanager retries.
//   - On any Append error nothing is left under a final name: a failed
//     webhook never reappears as a pending entry after a restart.
//   - A file that does not verify is moved to corrupt/ and logged at Warn
//     with its name and the reason. It is never deleted and never makes Open
//     fail: one bad file must not stop the bridge from delivering the rest.
//   - IDs are fixed-width decimal, sort as strings in Append order, and are
//     strictly increasing across restarts, even if the clock goes backwards
//     or many Appends share a nanosecond, and even after every entry was
//     Done. The bridge records the last applied ID per alert, so a reused ID
//     would make it skip a transition.
//   - One process owns a directory at a time (Open takes a flock on it); two
//     bridge replicas sharing a volume would otherwise hand out the same IDs.
//
// # Layout
//
// One file per pending entry, in one directory on a volume:
//
//	<id>.json      a pending entry: {"id","key","received","crc32c","payload"}
//	<id>.done      the last entry that was Done while it was the newest; kept
//	               only as the ID high-water mark (see Done), never pending
//	.tmp-*         an Append in progress; removed at Open
//	corrupt/       entry files that failed to verify, for an SRE to inspect
//	other dirs     the bridge's own state (rollups/); ignored
//
// The ID is max(now.UnixNano(), lastID+1) printed as 20 digits, where lastID
// is the highest ID handed out, or at Open the highest ID named by any file
// in the directory. "payload" is the webhook body verbatim when it is a JSON
// object (cat and jq work on it) and "payloadBase64" otherwise; "crc32c"
// covers the ID, key, receive time and payload bytes, so a torn, truncated or
// bit-flipped file is detected.
//
// # Why a file per entry
//
// Append writes a temp file in the same directory, fsyncs it, renames it to
// <id>.json and fsyncs the directory. rename(2) is atomic, so a reader (or
// Open after a crash) sees either the whole, fsynced entry or no entry: a
// half-written temp file is never visible under a final name. The file fsync
// makes the content durable before the name exists; the directory fsync
// makes the name durable before Append returns. Done is one unlink (or
// rename) and one directory fsync.
//
// The alternatives were weighed against that:
//
//   - A single append-only log needs its own framing, torn-tail recovery and
//     compaction (acknowledged records accumulate until rewritten), and an
//     SRE cannot read it with ls and cat.
//   - An embedded database (bbolt, SQLite) brings a dependency, a file format
//     only its tools read, and its own recovery story, for a queue that is
//     short and written at alert rates (tens per second at most).
//
// The costs of a file per entry, and why they are acceptable here: two
// fsyncs per Append (a few hundred microseconds to a few milliseconds,
// depending on the disk; BenchmarkAppend measures it), one inode per pending
// entry, and an Open that reads every pending file once to verify it. The
// pending queue is drained as fast as GitHub accepts issues, so it holds tens
// of entries normally and thousands at worst.
//
// # Memory
//
// The journal keeps an index of pending entries in memory (ID, key, receive
// time: about 100 bytes each), so Len and Oldest never touch the disk.
// Payloads, up to 1 MiB each, are not kept: Pending returns entries without
// them and Load reads one from disk. A backlog of 10,000 webhooks therefore
// costs about 1 MiB of memory, not 10 GiB.
//
// # Volume requirements
//
// The directory must be on a filesystem that honours fsync and atomic rename
// within a directory: a local disk or a block-backed PersistentVolume (ext4,
// xfs). An emptyDir does not survive the pod; NFS and FUSE mounts weaken the
// guarantees and the flock.
//
// # What it must never do
//
// Acknowledge (return nil) before the fsyncs; delete a file it cannot read;
// hand out an ID that is not greater than every ID already in the directory;
// interpret the key or the payload.
package journal
