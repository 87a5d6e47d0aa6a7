// Package gpuwiretest builds GPU history entries for tests, so that the
// tests of the wire format (internal/gpuwire) and of the history model
// (remediator/gpuhistory) share one set of builders. Test code only: no
// shipped binary links it.
package gpuwiretest

import (
	"time"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

var (
	// T0 is the tests' reference time.
	T0 = time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)

	// UUIDA and UUIDB are two GPU UUIDs in normalised form.
	UUIDA = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	UUIDB = "GPU-11111111-2222-3333-4444-555555555555"
)

// At is T0 plus d.
func At(d time.Duration) time.Time { return T0.Add(d) }

// Fault is a GPUXidError fault entry (XidResetRequired) of Xid xid.
func Fault(when time.Time, bus, uuid string, xid int) gpuwire.Entry {
	return gpuwire.Entry{Time: when, Bus: bus, UUID: uuid, Fault: &gpuwire.Fault{Condition: "GPUXidError", Reason: "XidResetRequired", Xid: xid}}
}

// Op is a reset-gpu operation entry of policy "gpu", step 1.
func Op(when time.Time, bus, uuid, name string, out gpuwire.Outcome) gpuwire.Entry {
	return gpuwire.Entry{Time: when, Bus: bus, UUID: uuid, Operation: &gpuwire.Operation{Name: name, Policy: "gpu", Step: 1, Operation: "reset-gpu", Outcome: out}}
}

// Hist is a history of the current version holding entries.
func Hist(entries ...gpuwire.Entry) gpuwire.History {
	return gpuwire.History{Version: gpuwire.Version, Entries: entries}
}
