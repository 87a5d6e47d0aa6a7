package gpuhistory

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

// Add returns h with e added in time order, then the oldest entries dropped
// until at most MaxEntries remain and the encoding fits in MaxBytes. e is
// normalised first: a zero Time becomes now, times are UTC whole seconds,
// the bus ID and UUID are normalised. An entry that is still invalid
// (e.Validate() != nil: the caller's bug, as entries are built from
// kubemedic's own constants) is not added; h is returned unchanged. h
// itself is not modified.
func Add(h gpuwire.History, e gpuwire.Entry, now time.Time) gpuwire.History {
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Time = e.Time.Round(0).UTC().Truncate(time.Second)
	if b := gpuwire.NormalizeBus(e.Bus); b != "" {
		e.Bus = b
	}
	if u := gpuwire.NormalizeUUID(e.UUID); u != "" {
		e.UUID = u
	}
	if e.Validate() != nil {
		return h
	}
	i := sort.Search(len(h.Entries), func(i int) bool { return h.Entries[i].Time.After(e.Time) })
	entries := make([]gpuwire.Entry, 0, len(h.Entries)+1)
	entries = append(entries, h.Entries[:i]...)
	entries = append(entries, e)
	entries = append(entries, h.Entries[i:]...)
	if len(entries) > gpuwire.MaxEntries {
		entries = entries[len(entries)-gpuwire.MaxEntries:]
	}
	out := gpuwire.History{Version: gpuwire.Version, Entries: entries}
	for len(out.Entries) > 0 {
		if b, err := json.Marshal(out); err == nil && len(b) <= gpuwire.MaxBytes {
			break
		}
		out.Entries = out.Entries[1:]
	}
	if len(out.Entries) == 0 {
		out.Entries = nil
	}
	return out
}

// FailuresInWindow counts the entries about gpu (GPUKey.Matches) in the
// window before now: faults, and operations that ended Failed. It is the
// count for a per-GPU attempt cap. As in the node's attempt cap
// (remediator/plan), an entry is in the window while now minus its time is
// less than window: one exactly window old has left it, and one after now
// (another writer's clock ahead of ours) counts.
func FailuresInWindow(h gpuwire.History, gpu gpuwire.GPUKey, window time.Duration, now time.Time) int {
	n := 0
	for _, e := range h.Entries {
		if !gpu.Matches(e) || now.Sub(e.Time) >= window {
			continue
		}
		if e.Fault != nil || (e.Operation != nil && e.Operation.Outcome == gpuwire.Failed) {
			n++
		}
	}
	return n
}

// IncidentGap: faults of one GPU under other conditions closer together
// than this are one incident, as when one Xid 79 raises GPUXidError,
// GPULost and GPURecoveryRequired at once, each recorded by its own
// operation. The same condition again is a new incident, however soon.
const IncidentGap = time.Minute

// FaultsInWindow counts the incidents of gpu in the window before now:
// its fault entries, where one within IncidentGap of the incident's first
// fault under a condition the incident has not seen yet joins it, with
// FailuresInWindow's window rule. It is the count for the per-GPU attempt
// cap (attemptCap.maxFailuresPerGPU). Operations are not counted: one
// fault whose reset and reboot both failed is one failure of the GPU.
func FaultsInWindow(h gpuwire.History, gpu gpuwire.GPUKey, window time.Duration, now time.Time) int {
	n := 0
	var start time.Time
	seen := map[string]bool{}
	for _, e := range h.Entries {
		if e.Fault == nil || !gpu.Matches(e) || now.Sub(e.Time) >= window {
			continue
		}
		if n > 0 && e.Time.Sub(start) < IncidentGap && !seen[e.Fault.Condition] {
			seen[e.Fault.Condition] = true
			continue
		}
		n++
		start = e.Time
		seen = map[string]bool{e.Fault.Condition: true}
	}
	return n
}

// Has reports whether h already holds e: the same operation (by name), or
// a fault of the same condition at the same time (to the second) about
// the same GPU. Writers use it so that a retried write adds nothing.
func Has(h gpuwire.History, e gpuwire.Entry) bool {
	t := e.Time.UTC().Truncate(time.Second)
	for _, x := range h.Entries {
		switch {
		case e.Operation != nil && x.Operation != nil && x.Operation.Name == e.Operation.Name:
			return true
		case e.Fault != nil && x.Fault != nil && x.Fault.Condition == e.Fault.Condition &&
			x.Time.Equal(t) && (e.Key() == x.Key() || e.Key().Matches(x)):
			return true
		}
	}
	return false
}

// GPUSummary is one GPU's history in brief, for `kubemedic status
// --hardware`.
type GPUSummary struct {
	// GPU is the UUID when known, with the last bus ID it was seen at; else
	// the bus ID; both empty for node-wide entries.
	GPU gpuwire.GPUKey
	// Faults counts the fault entries.
	Faults int
	// LastFault and LastOperation are the latest such entries; nil when
	// there are none.
	LastFault     *gpuwire.Entry
	LastOperation *gpuwire.Entry
}

// Summary groups h by GPU: entries with a UUID by UUID; an entry with only
// a bus ID joins the GPU whose UUID was seen at that bus, when exactly one
// was, else a group of its own for the bus; entries naming no GPU form the
// node-wide group. Groups are ordered by bus ID, then UUID.
func Summary(h gpuwire.History) []GPUSummary {
	uuidsAt := map[string]map[string]bool{}
	for _, e := range h.Entries {
		if e.UUID != "" && e.Bus != "" {
			if uuidsAt[e.Bus] == nil {
				uuidsAt[e.Bus] = map[string]bool{}
			}
			uuidsAt[e.Bus][e.UUID] = true
		}
	}
	groups := map[gpuwire.GPUKey]*GPUSummary{}
	var order []gpuwire.GPUKey
	for i := range h.Entries {
		e := h.Entries[i]
		k := gpuwire.GPUKey{UUID: e.UUID}
		if e.UUID == "" {
			k = gpuwire.GPUKey{Bus: e.Bus}
			if len(uuidsAt[e.Bus]) == 1 {
				for u := range uuidsAt[e.Bus] {
					k = gpuwire.GPUKey{UUID: u}
				}
			}
		}
		s := groups[k]
		if s == nil {
			s = &GPUSummary{GPU: k}
			groups[k] = s
			order = append(order, k)
		}
		if e.UUID != "" && e.Bus != "" {
			s.GPU.Bus = e.Bus // entries are in time order: the last bus wins
		}
		if e.Fault != nil {
			s.Faults++
			s.LastFault = &e
		}
		if e.Operation != nil {
			s.LastOperation = &e
		}
	}
	out := make([]GPUSummary, 0, len(order))
	for _, k := range order {
		out = append(out, *groups[k])
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GPU, out[j].GPU
		if a.Bus != b.Bus {
			return a.Bus < b.Bus
		}
		return a.UUID < b.UUID
	})
	return out
}
