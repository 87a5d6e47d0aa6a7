package gpu

import (
	"fmt"
	"sort"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/reason"
	"github.com/kubemedic/kubemedic/internal/gpuwire"
)

// LostInput is what DecideLost needs.
type LostInput struct {
	// Backend names the backend that listed the devices, for the message.
	Backend string
	Devices []Device
	// Driver are the bus IDs under /proc/driver/nvidia/gpus; nil when the
	// directory is absent.
	Driver []string
	// Expected is the number of GPUs the node should have; 0 when
	// unknown, with ExpectedErr saying why.
	Expected    int
	ExpectedErr string
}

// DecideLost is the GPULost verdict. A lost GPU is GPUFellOffBus whatever
// the expected count. A GPU the driver lists (or nvidia-smi names in an
// error line) that the backend cannot use is missing: GPUCountMismatch
// naming it, also without an expected count, since the driver is evidence
// enough. Otherwise fewer usable GPUs than expected is GPUCountMismatch,
// and without an expected count the verdict is Unknown. More GPUs than
// expected is OK, with a warning for the log. The GPU named is the first by
// bus ID, with its UUID when the backend still reports one (nvidia-smi's
// row of a lost GPU, DCGM's cached attributes).
func DecideLost(in LostInput) (r plugin.Result, warning string) {
	devs, missing := withDriver(in.Devices, in.Driver)
	var lost, absent []Device
	visible := 0
	for _, d := range devs {
		switch {
		case d.Lost:
			lost = append(lost, d)
		case !d.Usable():
			absent = append(absent, d)
		default:
			visible++
		}
	}
	if len(lost) > 0 {
		first := firstByName(lost).nameAndUUID()
		if len(lost) == 1 {
			return plugin.NonOK(reason.GPUFellOffBus, "GPU %s is lost (fell off the bus); reboot required", first), ""
		}
		return plugin.NonOK(reason.GPUFellOffBus, "GPU %s%s fell off the bus; reboot required", first, more(len(lost)-1)), ""
	}
	for _, id := range missing {
		absent = append(absent, Device{Index: -1, BusID: id})
	}
	if len(absent) > 0 {
		total := max(in.Expected, visible+len(absent))
		return plugin.NonOK(reason.GPUCountMismatch, "%d of %d GPUs visible; missing %s%s",
			visible, total, firstByName(absent).nameAndUUID(), more(len(absent)-1)), ""
	}
	switch {
	case in.Expected <= 0:
		return plugin.Unknown("no expected GPU count (%d visible): %s", visible, in.ExpectedErr), ""
	case visible < in.Expected:
		return plugin.NonOK(reason.GPUCountMismatch, "%d of %d GPUs visible", visible, in.Expected), ""
	case visible > in.Expected:
		return plugin.OK("%d GPUs healthy (%s), %d expected", visible, in.Backend, in.Expected),
			fmt.Sprintf("%d GPUs visible, more than the %d expected", visible, in.Expected)
	}
	return plugin.OK("%d of %d GPUs healthy (%s)", visible, in.Expected, in.Backend), ""
}

// Thresholds are the gpu-memory limits; 0 turns a limit off.
type Thresholds struct {
	// DBE: volatile uncorrected ECC errors at or above it are
	// VolatileDBE.
	DBE uint64
	// RetiredPages: retired pages (SBE+DBE) at or above it are
	// RetiredPageLimit.
	RetiredPages uint64
}

// DefaultRetiredPagesLimit is the retired-page count at which a GPU should
// be replaced. NVIDIA's page-retirement scheme holds at most 64 retired
// pages per GPU ("Dynamic Page Retirement", docs.nvidia.com/deploy/
// dynamic-page-retirement, and the A100 memory error management guide's
// comparison table), and DCGM's health check raises
// DCGM_FR_RETIRED_PAGES_LIMIT ("60 or more retired pages") at 60.
const DefaultRetiredPagesLimit = 60

// memoryRule is one GPUMemoryUnhealthy reason, in the order they are
// reported: replace reasons first, then reset reasons.
type memoryRule struct {
	reason string
	hit    func(Device, Thresholds) bool
	msg    func(bus string, th Thresholds) string
}

var memoryRules = []memoryRule{
	{reason.RowRemapFailed,
		func(d Device, _ Thresholds) bool { return d.RowRemapFailed.Known && d.RowRemapFailed.Value },
		func(bus string, _ Thresholds) string { return "row remap failed on " + bus + "; replace GPU" }},
	{reason.RetiredPageLimit,
		func(d Device, th Thresholds) bool {
			return th.RetiredPages > 0 && d.RetiredPages.Known && d.RetiredPages.Value >= th.RetiredPages
		},
		func(bus string, th Thresholds) string {
			return fmt.Sprintf("%d+ retired pages on %s; replace GPU", th.RetiredPages, bus)
		}},
	// The driver's own verdict (issue 19): both isolate the GPU in DCGM's
	// terms (DCGM_FR_FAULTY_MEMORY, DCGM_FR_SRAM_THRESHOLD), which leads
	// to field diagnostics and an RMA.
	{reason.UnrepairableMemory,
		func(d Device, _ Thresholds) bool { return d.UnrepairableMemory.Known && d.UnrepairableMemory.Value },
		func(bus string, _ Thresholds) string { return "memory unrepairable on " + bus + "; replace GPU" }},
	{reason.SRAMThresholdExceeded,
		func(d Device, _ Thresholds) bool {
			return d.SRAMThresholdExceeded.Known && d.SRAMThresholdExceeded.Value
		},
		func(bus string, _ Thresholds) string {
			return "SRAM error threshold exceeded on " + bus + "; replace GPU"
		}},
	{reason.RowRemapPending,
		func(d Device, _ Thresholds) bool { return d.RowRemapPending.Known && d.RowRemapPending.Value },
		func(bus string, _ Thresholds) string { return "row remap pending on " + bus + "; reset GPU" }},
	{reason.RetiredPagesPending,
		func(d Device, _ Thresholds) bool { return d.RetiredPagesPending.Known && d.RetiredPagesPending.Value },
		func(bus string, _ Thresholds) string { return "retired pages pending on " + bus + "; reset GPU" }},
	// NVIDIA documents no action for a pending channel or TPC repair
	// (nvmlDeviceGetRepairStatus); like a pending row remap it is taken as
	// applied by a reset, and the reset ladder reboots when it is not.
	{reason.RepairPending,
		func(d Device, _ Thresholds) bool {
			return (d.ChannelRepairPending.Known && d.ChannelRepairPending.Value) || (d.TPCRepairPending.Known && d.TPCRepairPending.Value)
		},
		func(bus string, _ Thresholds) string {
			return "channel or TPC repair pending on " + bus + "; reset GPU"
		}},
	{reason.VolatileDBE,
		func(d Device, th Thresholds) bool {
			return th.DBE > 0 && d.VolatileDBE.Known && d.VolatileDBE.Value >= th.DBE
		},
		// No count: it climbs while the fault lasts and would move the
		// condition's transition time.
		func(bus string, _ Thresholds) string { return "volatile DBE on " + bus + "; reset GPU" }},
}

// DecideMemory is the GPUMemoryUnhealthy verdict over the devices. The
// first rule (replace before reset) that any device hits is reported,
// naming the first such device by bus ID (and UUID, when known) and
// counting the others. A fault found on one GPU is reported even when
// another could not be read; with no fault, a lost or unreadable GPU makes
// the verdict Unknown. Counters a GPU does not support (N/A) are not
// faults.
func DecideMemory(backend string, devs []Device, th Thresholds) plugin.Result {
	if len(devs) == 0 {
		return plugin.Unknown("no GPUs visible (%s)", backend)
	}
	sorted := append([]Device(nil), devs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].name() < sorted[j].name() })
	for _, rule := range memoryRules {
		var hits []string
		for _, d := range sorted {
			if rule.hit(d, th) {
				hits = append(hits, d.nameAndUUID())
			}
		}
		if len(hits) > 0 {
			return plugin.NonOK(rule.reason, "%s", rule.msg(hits[0]+more(len(hits)-1), th))
		}
	}
	var bad []Device
	for _, d := range sorted {
		if !d.Usable() || d.ReadErr != "" {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		why := bad[0].Err
		if why == "" {
			why = bad[0].ReadErr
		}
		return plugin.Unknown("cannot read %s%s: %s", bad[0].name(), more(len(bad)-1), why)
	}
	spare := spareRows(sorted)
	if len(devs) == 1 {
		return plugin.OK("1 GPU without memory faults (%s)%s", backend, spare)
	}
	return plugin.OK("%d GPUs without memory faults (%s)%s", len(devs), backend, spare)
}

// spareRows is "; N banks without spare rows on <GPU> (+M GPUs)" for the
// first GPU by bus ID whose row remapper has banks with no spare row left,
// or "" when none has. Not a fault (the GPU works), but the next
// uncorrectable error in such a bank is a remap failure: it is kept on
// the node, in the condition's message, where `kubemedic status
// --hardware` shows it on the GPU's line (gpuwire.ParseSpareRows).
func spareRows(sorted []Device) string {
	var first *Device
	others := 0
	for i := range sorted {
		if b := sorted[i].BanksWithoutSpareRows; b.Known && b.Value > 0 {
			if first == nil {
				first = &sorted[i]
			} else {
				others++
			}
		}
	}
	if first == nil {
		return ""
	}
	return "; " + gpuwire.FormatSpareRows(first.BanksWithoutSpareRows.Value, first.nameAndUUID(), others)
}

// firstByName is the device with the least name (bus ID); devs is not
// empty.
func firstByName(devs []Device) Device {
	first := devs[0]
	for _, d := range devs[1:] {
		if d.name() < first.name() {
			first = d
		}
	}
	return first
}

// more is " (+N GPUs)" for N other affected GPUs, "" for none.
func more(n int) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return " (+1 GPU)"
	}
	return fmt.Sprintf(" (+%d GPUs)", n)
}
