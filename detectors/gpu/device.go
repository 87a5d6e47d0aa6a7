package gpu

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/internal/smicsv"
)

// Count is a counter a GPU may not support; Known is false when the
// device reports it as not supported or not applicable (N/A).
type Count struct {
	Value uint64
	Known bool
}

// Flag is a yes/no state a GPU may not support.
type Flag struct {
	Value bool
	Known bool
}

// Device is one GPU as a backend sees it.
type Device struct {
	// Index is the backend's index, -1 when the backend gave none (a
	// device known only from an error line).
	Index int
	// BusID is the normalised PCI address, e.g. "0000:3b:00.0"; "" when
	// the backend could not tell.
	BusID string
	UUID  string
	// Lost is set when the driver reports the GPU lost (NVML
	// ERROR_GPU_IS_LOST, nvidia-smi "GPU is lost", DCGM entity status Lost).
	Lost bool
	// Err says why the device cannot be used: the lost error, or another
	// failure to get its handle ("Unknown Error"). A device with Err is
	// not counted as visible.
	Err string
	// ReadErr says which memory counters failed to read with a real error
	// (not "not supported"); the memory check reports Unknown for it.
	ReadErr string

	// VolatileDBE is the volatile (since last reset) uncorrected ECC
	// error total.
	VolatileDBE Count
	// RetiredPagesPending: pages wait to be retired at the next reset
	// (pre-Ampere).
	RetiredPagesPending Flag
	// RetiredPages is the retired page count, SBE plus DBE (pre-Ampere).
	RetiredPages Count
	// RowRemapPending: a row remap waits for a GPU reset (Ampere+).
	RowRemapPending Flag
	// RowRemapFailed: a row remap failed; the GPU needs replacing.
	RowRemapFailed Flag
	// RemappedUncorrectable is the number of rows remapped for
	// uncorrectable errors.
	RemappedUncorrectable Count

	// The driver's own verdict (issue 19). Known is false when the signal
	// was not read: its name is then in Unsupported when the GPU or the
	// driver does not support it (not a fault, and not Unknown), else
	// ReadErr says why it could not be read.

	// RecoveryAction is the driver's recommended action: NVML field
	// FI_DEV_GET_GPU_RECOVERY_ACTION (230), DCGM_FI_DEV_GPU_RECOVERY_ACTION,
	// nvidia-smi --query-gpu=gpu_recovery_action.
	RecoveryAction Recovery
	// UnrepairableMemory: GetUnrepairableMemoryFlag_v1 (Hopper+),
	// DCGM_FI_DEV_MEMORY_UNREPAIRABLE (1507).
	UnrepairableMemory Flag
	// SRAMThresholdExceeded: GetSramEccErrorStatus().BThresholdExceeded,
	// DCGM_FI_DEV_SRAM_EXCEEDED (346), nvidia-smi
	// ecc.errors.uncorrected.aggregate.sram.thresholdExceeded.
	SRAMThresholdExceeded Flag
	// ChannelRepairPending and TPCRepairPending: GetRepairStatus() (NVML
	// 580+).
	ChannelRepairPending Flag
	TPCRepairPending     Flag
	// BanksWithoutSpareRows is the row remapper histogram's None bucket:
	// banks with no spare row left (GetRowRemapperHistogram, DCGM fields
	// 385-389, nvidia-smi -q "Remapping Histogram"). Not a fault; recorded.
	BanksWithoutSpareRows Count
	// Unsupported names the signals this GPU or driver does not support,
	// e.g. "recovery action", "unrepairable memory"; logged once with
	// --verbose.
	Unsupported []string
}

// Recovery is the driver's recommended action, when it was read.
type Recovery struct {
	Action gpuaction.Action
	Known  bool
}

// Usable is a device the node can use: not lost, handle obtained.
func (d Device) Usable() bool { return !d.Lost && d.Err == "" }

// nameAndUUID is name with the GPU's UUID when the backend gave a well
// formed one, e.g. "0000:3b:00.0 (GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced)":
// the bus ID names the slot the reset-gpu template resets (it takes the
// first bus ID in the message), the UUID the card, which the remediator's
// per-GPU history and DeviceTaintRule exclusion follow across reboots and
// reseats. A UUID never changes, so it does not move the condition's
// transition time; anything else in the UUID field ("[N/A]", an error) is
// left out.
func (d Device) nameAndUUID() string {
	u, ok := normalizeUUID(d.UUID)
	if !ok {
		return d.name()
	}
	return d.name() + " (" + u + ")"
}

// normalizeUUID returns a GPU UUID ("GPU-" and 8-4-4-4-12 hex digits, as
// NVML, nvidia-smi and DCGM print it) with the hex in lower case, so that
// every backend names a GPU alike; ok is false for anything else.
func normalizeUUID(s string) (string, bool) {
	const form = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
	s = strings.TrimSpace(s)
	if len(s) != len(form) || !strings.HasPrefix(s, "GPU-") {
		return "", false
	}
	b := []byte(s)
	for i := len("GPU-"); i < len(b); i++ {
		switch {
		case form[i] == '-':
			if b[i] != '-' {
				return "", false
			}
		case '0' <= b[i] && b[i] <= '9', 'a' <= b[i] && b[i] <= 'f':
		case 'A' <= b[i] && b[i] <= 'F':
			b[i] += 'a' - 'A'
		default:
			return "", false
		}
	}
	return string(b), true
}

func (d Device) name() string {
	if d.BusID != "" {
		return d.BusID
	}
	if d.Index >= 0 {
		return "index " + strconv.Itoa(d.Index)
	}
	return "unknown"
}

// Read is what a check asks a backend for: each check pays only for the
// calls its verdict needs.
type Read int

const (
	// ReadList: the GPUs, with bus IDs and UUIDs (the gpu check).
	ReadList Read = iota
	// ReadRecovery: and the driver's recovery action (gpu-recovery).
	ReadRecovery
	// ReadMemory: and every memory counter and verdict signal
	// (gpu-memory).
	ReadMemory
)

// Backend lists the GPUs, with what the Read asks for; what it does not
// ask for is left unknown. An error means the backend could not list
// devices at all, and the caller must report Unknown.
type Backend interface {
	Name() string
	Devices(ctx context.Context, what Read) ([]Device, error)
}

// libraryNotFoundError marks a backend whose library is not installed, so
// that --backend=auto falls back to nvidia-smi.
type libraryNotFoundError string

func (e libraryNotFoundError) Error() string { return string(e) }

func isLibraryNotFound(err error) bool {
	var e libraryNotFoundError
	return errors.As(err, &e)
}

// NormalizeBusID turns a PCI address as NVML, nvidia-smi, DCGM or the
// driver's /proc tree writes it ("00000000:3B:00.0", "0000:3b:00.0") into
// the lowercase form with a 4-digit domain when the domain fits
// ("0000:3b:00.0"): internal/smicsv's, the one rule for it. ok is false,
// and s comes back trimmed and lowercased, when s is not a PCI address.
func NormalizeBusID(s string) (string, bool) { return smicsv.NormalizeBusID(s) }

// withDriver merges the bus IDs the NVIDIA driver lists under
// /proc/driver/nvidia/gpus with the backend's devices. A lost or unusable
// device without a bus ID gets one of the driver's IDs that no device
// claims (in PCI order, which is the order NVML enumerates in). It returns
// the driver IDs still unclaimed: GPUs the driver knows and the backend
// cannot see.
func withDriver(devs []Device, driver []string) (out []Device, missing []string) {
	out = append([]Device(nil), devs...)
	seen := map[string]bool{}
	for _, d := range out {
		if d.BusID != "" {
			seen[d.BusID] = true
		}
	}
	for _, id := range driver {
		if !seen[id] {
			missing = append(missing, id)
			seen[id] = true
		}
	}
	sort.Strings(missing)
	for i := range out {
		if out[i].BusID == "" && !out[i].Usable() && len(missing) > 0 {
			out[i].BusID, missing = missing[0], missing[1:]
		}
	}
	return out, missing
}
