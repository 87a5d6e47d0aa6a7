package dstate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/detectors/kube"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
	"github.com/kubemedic/kubemedic/detectors/reason"
)

// PodSource lists the pods bound to a node. kube.Client implements it; an
// error means the pod set is unknown, never empty.
type PodSource interface {
	NodePods(ctx context.Context, node string) (pods []kube.Pod, source string, err error)
}

var _ PodSource = (*kube.Client)(nil)

// Proc is a process the scan found in state D (or a zombie group leader
// with a thread in D), with its cgroup file.
type Proc struct {
	procfs.Stat
	// Cgroup is /proc/<pid>/cgroup, read right after stat. CgroupErr is
	// set when it could not be read (a process that vanished is dropped
	// by the scan instead).
	Cgroup    []byte
	CgroupErr error
}

// State is what the check keeps between runs in <state-dir>/dstate.json.
type State struct {
	// BootID is the boot the sightings belong to; after a reboot they are
	// dropped.
	BootID string `json:"bootID"`
	// Procs are the pod processes in D at the last run, sorted by PID.
	Procs []Sighting `json:"procs"`
}

// Sighting is a process in D, identified by PID and start time so that a
// reused PID is a new process, and when it was first seen in D.
type Sighting struct {
	PID        int       `json:"pid"`
	StartTicks uint64    `json:"startTicks"`
	FirstSeen  time.Time `json:"firstSeen"`
}

type procKey struct {
	pid   int
	start uint64
}

// Equal says whether two states are the same, so that a run that changes
// nothing does not rewrite (and fsync) the file.
func (s State) Equal(o State) bool {
	return s.BootID == o.BootID && slices.EqualFunc(s.Procs, o.Procs, func(a, b Sighting) bool {
		return a.PID == b.PID && a.StartTicks == b.StartTicks && a.FirstSeen.Equal(b.FirstSeen)
	})
}

// Input is everything one decision depends on.
type Input struct {
	BootID string
	// Node is this node's name, for the pod source.
	Node string
	// Procs are the processes in D now.
	Procs []Proc
	// ScanErrs counts processes whose stat could not be read or parsed
	// (not those that vanished); ScanErr is the first such error.
	ScanErrs int
	ScanErr  error
	Prev     State
	Now      time.Time
	// MinDuration is how long a process must have been in D to count.
	MinDuration time.Duration
}

// Orphan is a process of a deleted pod stuck in D.
type Orphan struct {
	PID       int
	Comm      string
	PodUID    string
	FirstSeen time.Time
	// Pod is the pod when it is Terminating past its grace period; nil
	// when it is gone.
	Pod *kube.Pod
}

// Decision is what the check reports and keeps.
type Decision struct {
	Result plugin.Result
	State  State
	// Orphans are sorted oldest first seen first, then by PID; the
	// message names the first.
	Orphans []Orphan
	// PodSource says who listed the pods ("kubelet", "apiserver"); "" when
	// the pods were not needed.
	PodSource string
	// Young counts pod processes in D for less than MinDuration, Live
	// those in D long enough whose pod is running or Terminating within
	// its grace period.
	Young, Live int
	// Unreadable counts processes that could not be judged.
	Unreadable int
}

type candidate struct {
	Proc
	uid   string
	first time.Time
}

// Decide tracks how long each pod process has been in D and reports those
// of deleted pods. It asks pods only when some pod process has been in D
// for MinDuration; otherwise the result is OK without a pod list. A failed
// pod list is Unknown. Processes it could not judge (unreadable stat or
// cgroup) make an otherwise OK result Unknown.
func Decide(ctx context.Context, in Input, pods PodSource) Decision {
	prev := map[procKey]time.Time{}
	if in.Prev.BootID == in.BootID {
		for _, s := range in.Prev.Procs {
			prev[procKey{s.PID, s.StartTicks}] = s.FirstSeen
		}
	}
	d := Decision{State: State{BootID: in.BootID, Procs: []Sighting{}}, Unreadable: in.ScanErrs}
	firstErr := in.ScanErr
	unreadable := func(err error) {
		d.Unreadable++
		if firstErr == nil {
			firstErr = err
		}
	}
	var cands []candidate
	for _, p := range in.Procs {
		if p.State != 'D' || p.KernelThread() {
			continue
		}
		var uid string
		if p.CgroupErr != nil {
			unreadable(fmt.Errorf("pid %d: %w", p.PID, p.CgroupErr))
		} else {
			u, ok, err := procfs.PodUID(p.Cgroup)
			if err != nil {
				unreadable(fmt.Errorf("pid %d: %w", p.PID, err))
			} else if !ok {
				continue // not a pod's process
			}
			uid = u
		}
		// Keep timing a process whose pod could not be told this time.
		first, seen := prev[procKey{p.PID, p.StartTicks}]
		if !seen {
			first = in.Now
		}
		d.State.Procs = append(d.State.Procs, Sighting{PID: p.PID, StartTicks: p.StartTicks, FirstSeen: first})
		if uid == "" {
			continue
		}
		if in.Now.Sub(first) >= in.MinDuration {
			cands = append(cands, candidate{Proc: p, uid: uid, first: first})
		} else {
			d.Young++
		}
	}
	slices.SortFunc(d.State.Procs, func(a, b Sighting) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.StartTicks, b.StartTicks))
	})

	if len(cands) > 0 {
		list, source, err := pods.NodePods(ctx, in.Node)
		if err != nil {
			d.Result = plugin.Unknown("dstate: pods unknown: %v", err)
			return d
		}
		d.PodSource = source
		byUID := make(map[string]*kube.Pod, len(list))
		for i := range list {
			byUID[list[i].UID] = &list[i]
		}
		for _, c := range cands {
			pod, exists := byUID[c.uid]
			switch {
			case !exists:
				d.Orphans = append(d.Orphans, Orphan{PID: c.PID, Comm: c.Comm, PodUID: c.uid, FirstSeen: c.first})
			case pod.DeletionTimestamp != nil && !in.Now.Before(*pod.DeletionTimestamp):
				d.Orphans = append(d.Orphans, Orphan{PID: c.PID, Comm: c.Comm, PodUID: c.uid, FirstSeen: c.first, Pod: pod})
			default:
				d.Live++
			}
		}
	}
	slices.SortFunc(d.Orphans, func(a, b Orphan) int {
		return cmp.Or(a.FirstSeen.Compare(b.FirstSeen), cmp.Compare(a.PID, b.PID))
	})

	switch {
	case len(d.Orphans) > 0:
		d.Result = orphansResult(len(d.Orphans), d.Orphans[0])
	case d.Unreadable > 0:
		d.Result = plugin.Unknown("dstate: %d %s unreadable: %v", d.Unreadable, procs(d.Unreadable), firstErr)
	default:
		d.Result = plugin.OK("%s", okMessage(d.Young, d.Live, in.MinDuration))
	}
	return d
}

// orphansResult names the count n and the first orphan's pod UID (in full)
// and command (shortened to fit the line). Nothing in it changes while the
// same processes stay stuck.
func orphansResult(n int, o Orphan) plugin.Result {
	msg := fmt.Sprintf("%d %s in D; pod %s", n, procs(n), o.PodUID)
	room := plugin.MaxLine - len(reason.DStateOrphans+": ") - len(msg) - 1
	if comm := printable(o.Comm); room > 0 && comm != "" {
		msg += " " + comm[:min(room, len(comm))]
	}
	return plugin.NonOK(reason.DStateOrphans, "%s", msg)
}

func okMessage(young, live int, minDuration time.Duration) string {
	msg := "no D-state processes of deleted pods"
	var more []string
	if young > 0 {
		more = append(more, fmt.Sprintf("%d in D under %s", young, minDuration))
	}
	if live > 0 {
		more = append(more, fmt.Sprintf("%d of live pods", live))
	}
	if len(more) > 0 {
		msg += "; " + strings.Join(more, ", ")
	}
	return msg
}

func procs(n int) string {
	if n == 1 {
		return "proc"
	}
	return "procs"
}

// printable makes comm, which may hold any byte, safe for a condition
// message: spaces become '_', other bytes outside printable ASCII '?'.
func printable(comm string) string {
	b := []byte(comm)
	for i, c := range b {
		switch {
		case c == ' ':
			b[i] = '_'
		case c < 0x21 || c > 0x7e:
			b[i] = '?'
		}
	}
	return string(b)
}
