// Package nfs is `kubemedic-detect nfs`, the check behind the
// NFSMountUnhealthy condition, and its internal probe child `nfs-probe`.
//
// Expected mounts are every mountinfo entry of --fstype (nfs, nfs4), every
// --mount path, and the --fstype entries of <root>/etc/fstab without
// noauto. One missing from mountinfo is MountMissing. For the present ones
// the check runs a stat and a statfs, and connects to each NFS server over
// TCP (2049 or port=, at the kernel's addr=). The worst finding wins:
// ServerUnreachable (any mount), then MountHung, then MountMissing. A
// server outage is reported as such so that the nfs-mounts policy, which
// matches only MountHung|MountMissing, does not remount or reboot clients
// for a server's fault.
//
// Messages start with the mount point ("/mnt/datasets stat hung >5s
// (+2 mounts)"), because the remount-nfs template takes the first absolute
// path at the start of the message or after white space, up to white space
// or one of ":;,()". A mount point with a space in it therefore reaches the
// template cut at the space (and one longer than about 130 bytes is cut by
// the 160-byte line); the template refuses paths that are not in fstab, so
// such a mount is reported but not remounted.
//
// # Never hang, never leak
//
// A stat of a hung hard NFS mount blocks in state D and cannot be killed,
// so the check never makes one itself. Per invocation it starts at most one
// child, `kubemedic-detect nfs-probe --records=DIR -- MOUNT PATH ...`, which
// stats and statfs's every mount in its own thread. The child:
//
//   - gets /dev/null for stdin, stdout and stderr, never the plugin's pipes
//     (NPD wedges on a plugin whose child holds them: NPD issue #1050), and
//     a session of its own (NPD's timeout kills the plugin's process group,
//     not the child);
//   - before probing, writes one Record per mount, {mount, pid, startTicks,
//     started}, to <state-dir>/nfs-probes/<hash of the mount>.json (temp file
//     and rename), and removes it when that mount's stat and statfs return,
//     whether or not the parent still listens;
//   - reports "<index> stat|statfs ok|ERRNO" (or "<index> record <error>",
//     and then it does not probe that mount) on fd 3, one line per call.
//
// The parent reads fd 3 until --probe-timeout. A mount without a final line
// is MountHung ("stat hung" or "statfs hung"); the parent then returns
// without waiting for or killing the child, which may be unkillable. The
// next invocation finds the record: if its child is alive
// (procfs.Alive: PID and start time) and the record is older than the
// timeout, the mount is MountHung "still hung" and gets no new probe; if
// the child died, the record is removed and the mount probed anew. So there
// is at most one outstanding probe per mount, and no probe without a
// record. Invocations hold the state lock (state.Open "nfs") from reading
// the records until they return, so two of them never both start a probe
// for the same mount; the child never takes the lock and does not inherit
// it (close-on-exec).
//
// ESTALE, EIO, ENOTCONN, ETIMEDOUT and EHOSTDOWN from stat or statfs are
// MountHung with the errno name; ENOENT is MountMissing; other errors make
// the mount, and the check if nothing else is wrong, Unknown.
//
// The DaemonSet needs hostPID: the default --mountinfo is PID 1's, and an
// orphaned probe child is reaped by the host's init.
package nfs
