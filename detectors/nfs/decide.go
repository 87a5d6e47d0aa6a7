package nfs

import (
	"fmt"
	"sort"
	"time"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/reason"
)

// Expected is a mount the node should have.
type Expected struct {
	// MountPoint is the host path, e.g. /mnt/datasets.
	MountPoint string
	// Present says whether mountinfo lists it.
	Present bool
	// Server is how the message names the NFS server ("nfs1:2049"); "" for
	// sources that are not host:path (FUSE, tests): no reachability check.
	Server string
	// Dial is the address to connect to: the kernel's addr= when mountinfo
	// gives it, else the server from the source.
	Dial string
}

// ProbeState is what became of one mount's stat and statfs.
type ProbeState int

// The probe states.
const (
	// ProbeOK: stat and statfs returned without error.
	ProbeOK ProbeState = iota
	// ProbeHung: this invocation's probe did not return by the timeout.
	ProbeHung
	// ProbeStillHung: an earlier invocation's probe is still outstanding
	// past the timeout, so no new one was started.
	ProbeStillHung
	// ProbeFailed: the call returned an error that means the mount is
	// broken (ESTALE, EIO, ENOTCONN, ...).
	ProbeFailed
	// ProbeMissing: the mount point does not exist (ENOENT).
	ProbeMissing
	// ProbeError: the mount could not be probed at all (bookkeeping
	// failed, an unexpected error): the check cannot tell.
	ProbeError
)

// Probe is one mount's probe outcome.
type Probe struct {
	State ProbeState
	// Op is the call that hung or failed: "stat" or "statfs".
	Op string
	// Err is the error, short: an errno name such as ESTALE.
	Err string
}

// Input is everything the decision needs; Decide does no I/O.
type Input struct {
	Mounts []Expected
	// Probes by mount point, for present mounts.
	Probes map[string]Probe
	// Unreachable holds the Dial addresses that refused or timed out; a
	// Dial address not in it was reachable (or not checked).
	Unreachable map[string]error
	// Timeout is --probe-timeout, for the message.
	Timeout time.Duration
}

type finding struct {
	rank    int // higher is worse
	reason  string
	message string
}

// Reason ranks, worst first. ServerUnreachable outranks the rest: when any
// server is down, the node reports the outage rather than a hung or missing
// mount, so that the nfs-mounts policy (MountHung|MountMissing) does not
// remount or reboot clients for a server's fault.
const (
	rankUnknown = iota
	rankMissing
	rankHung
	rankUnreachable
)

// Decide turns the evidence into the check's result. The message names the
// mount point first, as an absolute path at the start of the message, so
// that the remount-nfs template finds it with (?:^|\s)(/[^\s:;,()]+); it is
// stable while the fault lasts (the timeout is configuration, not an age).
func Decide(in Input) plugin.Result {
	mounts := append([]Expected(nil), in.Mounts...)
	sort.Slice(mounts, func(i, j int) bool { return mounts[i].MountPoint < mounts[j].MountPoint })
	if len(mounts) == 0 {
		return plugin.OK("no NFS mounts expected")
	}
	var found []finding
	for _, m := range mounts {
		if m.Dial != "" {
			if _, bad := in.Unreachable[m.Dial]; bad {
				found = append(found, finding{rankUnreachable, reason.ServerUnreachable,
					fmt.Sprintf("%s server %s unreachable", m.MountPoint, m.Server)})
				continue
			}
		}
		if !m.Present {
			found = append(found, finding{rankMissing, reason.MountMissing, m.MountPoint + " missing"})
			continue
		}
		p, ok := in.Probes[m.MountPoint]
		if !ok {
			found = append(found, finding{rankUnknown, "", m.MountPoint + " not probed"})
			continue
		}
		switch p.State {
		case ProbeOK:
		case ProbeHung:
			found = append(found, finding{rankHung, reason.MountHung,
				fmt.Sprintf("%s %s hung >%s", m.MountPoint, p.Op, in.Timeout)})
		case ProbeStillHung:
			found = append(found, finding{rankHung, reason.MountHung,
				fmt.Sprintf("%s still hung >%s", m.MountPoint, in.Timeout)})
		case ProbeFailed:
			found = append(found, finding{rankHung, reason.MountHung,
				fmt.Sprintf("%s %s %s", m.MountPoint, p.Op, p.Err)})
		case ProbeMissing:
			found = append(found, finding{rankMissing, reason.MountMissing, m.MountPoint + " missing"})
		default:
			found = append(found, finding{rankUnknown, "", fmt.Sprintf("%s %s %s", m.MountPoint, p.Op, p.Err)})
		}
	}
	if len(found) == 0 {
		if len(mounts) == 1 {
			return plugin.OK("1 NFS mount healthy")
		}
		return plugin.OK("%d NFS mounts healthy", len(mounts))
	}
	// The worst finding, the first mount point among equals (stable sort
	// keeps mount-point order).
	sort.SliceStable(found, func(i, j int) bool { return found[i].rank > found[j].rank })
	worst := found[0]
	msg := worst.message
	if more := len(found) - 1; more == 1 {
		msg += " (+1 mount)"
	} else if more > 1 {
		msg += fmt.Sprintf(" (+%d mounts)", more)
	}
	if worst.rank == rankUnknown {
		return plugin.Unknown("%s", msg)
	}
	return plugin.NonOK(worst.reason, "%s", msg)
}
