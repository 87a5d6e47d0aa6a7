package xid

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/reason"
)

// stateVersion is State.Version; a file with another version is discarded.
const stateVersion = 1

// Caps on the state, so a flood of Xids cannot grow the file without bound.
const (
	// maxEventsPerGPU: see State.compact for what is kept.
	maxEventsPerGPU = 32
	// maxResetsPerGPU: only the latest reset matters to the decision; a few
	// more are kept for whoever reads the file.
	maxResetsPerGPU = 8
)

// State is what the check keeps between invocations (state name "xid"),
// for the current boot only.
type State struct {
	Version int `json:"version"`
	// BootID is /proc/sys/kernel/random/boot_id when the state was written;
	// a different boot ID discards everything else.
	BootID string `json:"bootID"`
	// GPUs is keyed by normalised PCI bus ID ("0000:3b:00.0").
	GPUs map[string]*GPU `json:"gpus,omitempty"`
}

// GPU is what is known about one GPU this boot.
type GPU struct {
	// Events are the Xids seen, oldest first, at most maxEventsPerGPU.
	Events []Event `json:"events,omitempty"`
	// ResetsUsec are the recorded GPU resets, in microseconds since boot,
	// ascending, at most maxResetsPerGPU.
	ResetsUsec []int64 `json:"resetsUsec,omitempty"`
}

// Event is one Xid record.
type Event struct {
	Xid int `json:"xid"`
	// Usec is the record's time, microseconds since boot.
	Usec int64 `json:"usec"`
	// Seq is the kmsg sequence number; -1 when unknown (dmesg text).
	Seq int64 `json:"seq"`
	// Named is the action an Xid 154 names (NVML's numbering, -1 unknown);
	// 0 and unused for other Xids.
	Named gpuaction.Action `json:"named,omitempty"`
}

// NewState is an empty state for a boot.
func NewState(bootID string) *State {
	return &State{Version: stateVersion, BootID: bootID, GPUs: map[string]*GPU{}}
}

func (s *State) gpu(bus string) *GPU {
	g := s.GPUs[bus]
	if g == nil {
		g = &GPU{}
		s.GPUs[bus] = g
	}
	return g
}

type usecXid struct {
	usec int64
	xid  int
}

// AddEvents merges events into the state and returns those it did not have
// already. An event is a duplicate of a stored one on the same GPU when both
// have a kmsg sequence number and it is the same, or when their time and
// Xid number are the same (dmesg text has no sequence numbers). It does not
// compact; call Compact after.
func (s *State) AddEvents(found []Found) []Found {
	type index struct {
		seq map[int64]bool
		key map[usecXid]bool
	}
	idx := map[string]*index{}
	var added []Found
	for _, f := range found {
		ix := idx[f.Bus]
		if ix == nil {
			ix = &index{seq: map[int64]bool{}, key: map[usecXid]bool{}}
			if g := s.GPUs[f.Bus]; g != nil {
				for _, e := range g.Events {
					if e.Seq >= 0 {
						ix.seq[e.Seq] = true
					}
					ix.key[usecXid{e.Usec, e.Xid}] = true
				}
			}
			idx[f.Bus] = ix
		}
		k := usecXid{f.Usec, f.Xid}
		if (f.Seq >= 0 && ix.seq[f.Seq]) || ix.key[k] {
			continue
		}
		if f.Seq >= 0 {
			ix.seq[f.Seq] = true
		}
		ix.key[k] = true
		g := s.gpu(f.Bus)
		g.Events = append(g.Events, f.Event)
		added = append(added, f)
	}
	return added
}

// AddReset records a GPU reset at usec since boot; false when it was
// recorded already.
func (s *State) AddReset(bus string, usec int64) bool {
	g := s.gpu(bus)
	if slices.Contains(g.ResetsUsec, usec) {
		return false
	}
	g.ResetsUsec = append(g.ResetsUsec, usec)
	slices.Sort(g.ResetsUsec)
	if n := len(g.ResetsUsec); n > maxResetsPerGPU {
		g.ResetsUsec = slices.Delete(g.ResetsUsec, 0, n-maxResetsPerGPU)
	}
	return true
}

// Compact caps every GPU's events at maxEventsPerGPU. Over the cap it keeps,
// first, the earliest and the latest event of every kind (Xid number, and
// for 154 the named action), worst kind first; then the newest of the rest.
// The latest of a kind says whether that kind happened after the last reset,
// which is all the decision needs; the earliest keeps an Xid 48 from before
// a reset, which the recurrence note needs. What can be lost is which kind
// came first after a reset when more than maxEventsPerGPU Xids hit one GPU,
// so the message may name another Xid of the same severity.
func (s *State) Compact(unknown UnknownPolicy) {
	for _, g := range s.GPUs {
		if len(g.Events) <= maxEventsPerGPU {
			continue
		}
		type kind struct {
			xid   int
			named gpuaction.Action
		}
		first := map[kind]int{}
		last := map[kind]int{}
		for i, e := range g.Events {
			k := kind{e.Xid, e.Named}
			if j, ok := first[k]; !ok || e.Usec < g.Events[j].Usec {
				first[k] = i
			}
			if j, ok := last[k]; !ok || e.Usec >= g.Events[j].Usec {
				last[k] = i
			}
		}
		keeper := make([]bool, len(g.Events))
		for _, i := range first {
			keeper[i] = true
		}
		for _, i := range last {
			keeper[i] = true
		}
		order := make([]int, len(g.Events))
		for i := range order {
			order[i] = i
		}
		sev := func(e Event) Severity { s, _ := Classify(e.Xid, e.Named, unknown); return s }
		slices.SortStableFunc(order, func(a, b int) int {
			ea, eb := g.Events[a], g.Events[b]
			if keeper[a] != keeper[b] {
				if keeper[a] {
					return -1
				}
				return 1
			}
			if keeper[a] {
				if c := cmp.Compare(sev(eb), sev(ea)); c != 0 {
					return c
				}
			}
			return cmp.Compare(eb.Usec, ea.Usec)
		})
		kept := make([]Event, 0, maxEventsPerGPU)
		for _, i := range order[:maxEventsPerGPU] {
			kept = append(kept, g.Events[i])
		}
		slices.SortStableFunc(kept, func(a, b Event) int { return cmp.Compare(a.Usec, b.Usec) })
		g.Events = kept
	}
}

// Verdict is the decision: the worst Xid on any GPU since the later of the
// boot and that GPU's last recorded reset.
type Verdict struct {
	Severity Severity
	// Bus, Xid and Meaning describe the GPU that comes first: the worst
	// severity, then the earliest such Xid, then the lowest bus ID.
	Bus     string
	Xid     int
	Meaning string
	// Recurring is an Xid 48 on a GPU that already had one before its last
	// recorded reset (NVIDIA: replace the GPU if 48 recurs).
	Recurring bool
	// Others is how many other GPUs have an actionable Xid.
	Others int
}

type gpuVerdict struct {
	bus       string
	sev       Severity
	ev        Event
	meaning   string
	recurring bool
}

// Decide is the check's decision, a pure function of the state.
func Decide(s *State, unknown UnknownPolicy) Verdict {
	var worst []gpuVerdict
	for bus, g := range s.GPUs {
		var since int64 = -1
		if n := len(g.ResetsUsec); n > 0 {
			since = g.ResetsUsec[n-1]
		}
		v := gpuVerdict{bus: bus}
		for _, e := range g.Events {
			if e.Usec <= since {
				continue
			}
			sev, meaning := Classify(e.Xid, e.Named, unknown)
			if sev == SevNone {
				continue
			}
			if sev > v.sev || (sev == v.sev && (e.Usec < v.ev.Usec || (e.Usec == v.ev.Usec && e.Xid < v.ev.Xid))) {
				v.sev, v.ev, v.meaning = sev, e, meaning
			}
		}
		if v.sev == SevNone {
			continue
		}
		if e, _ := Lookup(v.ev.Xid); e.Action == Workflow48 && since >= 0 {
			v.recurring = slices.ContainsFunc(g.Events, func(o Event) bool { return o.Xid == v.ev.Xid && o.Usec <= since })
		}
		worst = append(worst, v)
	}
	if len(worst) == 0 {
		return Verdict{}
	}
	slices.SortFunc(worst, func(a, b gpuVerdict) int {
		if c := cmp.Compare(b.sev, a.sev); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ev.Usec, b.ev.Usec); c != 0 {
			return c
		}
		return strings.Compare(a.bus, b.bus)
	})
	w := worst[0]
	return Verdict{Severity: w.sev, Bus: w.bus, Xid: w.ev.Xid, Meaning: w.meaning, Recurring: w.recurring, Others: len(worst) - 1}
}

// OKMessage is the message when no GPU needs anything.
const OKMessage = "no actionable Xid since boot"

// Result is the verdict as the plugin reports it. The message names the
// first GPU as "on <bus ID>" (the reset-gpu template takes the first bus ID
// in the message) and holds nothing that changes while the fault lasts:
//
//	Xid 79 on 0000:3b:00.0: fell off the bus; reboot required
//	Xid 46 on 0000:3b:00.0 (+1 GPU): GPU timeout; reset required
//	Xid 48 on 0000:3b:00.0: DBE ECC again after reset; reset required
//
// It is shortened to fit the line (plugin.MaxLine) with its reason: first
// " required" goes, then the meaning's last words, then the meaning. With
// the catalog's short meanings a real message always fits whole.
func (v Verdict) Result() plugin.Result {
	var why, action string
	switch v.Severity {
	case SevNone:
		return plugin.OK(OKMessage)
	case SevReboot:
		why, action = reason.XidRebootRequired, "reboot"
	default:
		why, action = reason.XidResetRequired, "reset"
	}
	head := fmt.Sprintf("Xid %d on %s", v.Xid, v.Bus)
	switch {
	case v.Others == 1:
		head += " (+1 GPU)"
	case v.Others > 1:
		head += fmt.Sprintf(" (+%d GPUs)", v.Others)
	}
	meaning := v.Meaning
	if v.Recurring {
		meaning += " again after reset"
	}
	return plugin.NonOK(why, "%s", fitMessage(plugin.MaxLine-len(why)-len(": "), head, meaning, action))
}

func fitMessage(budget int, head, meaning, action string) string {
	msg := func(tail string) string {
		if meaning == "" {
			return head + "; " + tail
		}
		return head + ": " + meaning + "; " + tail
	}
	if m := msg(action + " required"); len(m) <= budget {
		return m
	}
	for {
		if m := msg(action); len(m) <= budget || meaning == "" {
			return m
		}
		if i := strings.LastIndexByte(meaning, ' '); i > 0 {
			meaning = meaning[:i]
		} else {
			meaning = ""
		}
	}
}
