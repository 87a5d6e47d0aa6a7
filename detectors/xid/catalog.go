package xid

import "github.com/kubemedic/kubemedic/detectors/gpuaction"

// Catalog of Xid numbers and what kubemedic does about each.
//
// Sources: NVIDIA's Xid catalog ("Resolution Bucket (Immediate Action)",
// docs.nvidia.com/deploy/xid-errors, Ampere and later) and NVIDIA
// NVSentinel's xiderrorsmapping.csv, as summarised in shared/NODE-FACTS.md;
// the NVIDIA device plugin's internal/rm/health.go for the Xids it ignores.
// Where the sources disagree or say "workflow", the choice made here is
// written next to the entry. EKS's node monitoring agent maps more Xids to
// reboot/replace because a cloud VM is cheap to replace; kubemedic runs on
// bare metal, where a GPU reset is the cheapest fix that works.
//
// This is the only place the table lives; the decision code asks Classify.

// Action is what the catalog says to do about an Xid.
type Action int

// The catalog's actions. Only ResetGPU and Reboot (and the workflows that
// resolve to them) make the check NonOK.
const (
	// Unknown: not in the catalog; see UnknownPolicy.
	Unknown Action = iota
	// Ignore: informational, or a fault the driver already contained.
	Ignore
	// AppError: the application's fault (restart the app); not the node's.
	AppError
	// ResetGPU: reset the GPU (drain its pods, nvidia-smi -r).
	ResetGPU
	// Reboot: only a node reboot recovers the GPU.
	Reboot
	// Workflow48: double-bit ECC. NVIDIA's workflow is "reset the GPU;
	// replace it if the error recurs". kubemedic reports a reset
	// (XidResetRequired) and, when the Xid recurs on the same GPU after a
	// recorded reset in this boot, says so in the message ("again after
	// reset") so a policy or a human can decide on replacement. It never
	// escalates to reboot on its own: a reboot does not fix a bad DRAM row.
	Workflow48
	// Workflow74: NVLink error (74, and the NVLink 5 errors 144-150).
	// NVIDIA's workflow starts with a GPU reset and escalates to checking
	// the link/cabling; kubemedic reports the first step, a reset.
	Workflow74
	// Indirect154: "GPU recovery action changed"; the driver names the
	// action in the message, and that action is what counts (gpuaction.Action).
	Indirect154
)

func (a Action) String() string {
	switch a {
	case Ignore:
		return "ignore"
	case AppError:
		return "app-error"
	case ResetGPU:
		return "reset"
	case Reboot:
		return "reboot"
	case Workflow48:
		return "workflow-48"
	case Workflow74:
		return "workflow-74"
	case Indirect154:
		return "indirect-154"
	default:
		return "unknown"
	}
}

// Entry is one catalog row.
type Entry struct {
	Action Action
	// Meaning is short: it goes in a line of plugin.MaxLine bytes, and
	// Result drops its last words when the line is too long.
	Meaning string
}

// catalog is the table. Comments give the source's bucket where the choice
// here is not a plain copy of it.
var catalog = map[int]Entry{
	13: {AppError, "graphics engine"}, // restart app
	31: {AppError, "MMU fault"},       // restart app
	43: {Ignore, "channel reset"},     // reset channel verification error
	45: {Ignore, "preempted"},         // preemptive removal, process killed
	46: {ResetGPU, "GPU timeout"},
	48: {Workflow48, "DBE ECC"},
	// 61, PMU breakpoint: the catalog says "report". It usually precedes a
	// 62, which is reset-worthy on its own, so 61 alone is only logged.
	61: {Ignore, "PMU breakpoint"},
	62: {ResetGPU, "PMU halt"},
	// 63: a row remap / page retirement was recorded; the pending remap is
	// the GPU memory check's business (RowRemapPending), not this one's.
	63: {Ignore, "row remap"},
	64: {ResetGPU, "row remap failed"},
	68: {AppError, "video engine"}, // NVDEC0 exception; device plugin ignores it
	74: {Workflow74, "NVLink error"},
	// 79, fallen off the bus: reboot on bare metal (a reset cannot reach a
	// GPU that is off the bus).
	79:  {Reboot, "fell off the bus"},
	92:  {Ignore, "excess SBE"},      // excessive single-bit ECC interrupts
	94:  {AppError, "contained ECC"}, // restart app
	95:  {ResetGPU, "uncontained ECC"},
	109: {ResetGPU, "ctxsw timeout"}, // the device plugin ignores 109; NVIDIA says reset
	119: {ResetGPU, "GSP RPC timeout"},
	120: {ResetGPU, "GSP error"},
	136: {ResetGPU, "link training"},
	140: {ResetGPU, "ECC escape"}, // unrecoverable ECC error escape
	143: {ResetGPU, "GPU init error"},
	144: {Workflow74, "NVLink error"}, // 144-150: NVLink 5
	145: {Workflow74, "NVLink error"},
	146: {Workflow74, "NVLink error"},
	147: {Workflow74, "NVLink error"},
	148: {Workflow74, "NVLink error"},
	149: {Workflow74, "NVLink error"},
	150: {Workflow74, "NVLink error"},
	154: {Indirect154, "recovery action"},
	155: {ResetGPU, "Xid 155"}, // 155-158: reset per the catalog; no short name
	156: {ResetGPU, "Xid 156"},
	157: {ResetGPU, "Xid 157"},
	158: {ResetGPU, "Xid 158"},
}

// Lookup returns the catalog row for xid; ok is false for numbers not in it.
func Lookup(xid int) (Entry, bool) {
	e, ok := catalog[xid]
	return e, ok
}

// Severity is how bad an Xid is for the node: the order is the order of
// precedence when several Xids are seen.
type Severity int

// Severities, least first.
const (
	SevNone Severity = iota
	SevReset
	SevReboot
)

// UnknownPolicy is what to do with an Xid the catalog does not list (and a
// 154 naming an action we do not know): flag --unknown-xid.
type UnknownPolicy int

// The policies. The default is UnknownIgnore: a new driver's new Xid
// number must not drain nodes fleet-wide before someone has read what it
// means; it is logged (Warn) so that someone does.
const (
	UnknownIgnore UnknownPolicy = iota
	UnknownReset
)

// Classify resolves an Xid (and, for 154, the action it names) to a
// severity and the short meaning for the message.
//
//   - Ignore, AppError: SevNone.
//   - ResetGPU, Workflow48, Workflow74: SevReset.
//   - Reboot: SevReboot.
//   - 154, by the action it names (gpuaction): None -> SevNone; GPU reset,
//     drain and reset -> SevReset; node or system reboot, and a bus reset
//     (which a reboot covers, as the gpu-recovery check's policies do) ->
//     SevReboot; drain P2P -> SevReset (NVIDIA's remedy is to stop the
//     processes using P2P; kubemedic cannot drain P2P traffic alone, and
//     its reset-gpu operation drains the GPU's pods first, which covers
//     it); recover the IMEX domain -> SevNone (not a repair of this node:
//     the gpu-recovery check reports it as GPURecoveryRequired
//     IMEXDomainRecovery, for a person); an unknown action -> the unknown
//     policy.
//   - Not in the catalog: the unknown policy.
func Classify(xid int, named gpuaction.Action, unknown UnknownPolicy) (Severity, string) {
	e, ok := catalog[xid]
	if !ok {
		if unknown == UnknownReset {
			return SevReset, "unknown Xid"
		}
		return SevNone, "unknown Xid"
	}
	switch e.Action {
	case ResetGPU, Workflow48, Workflow74:
		return SevReset, e.Meaning
	case Reboot:
		return SevReboot, e.Meaning
	case Indirect154:
		switch named {
		case gpuaction.None:
			return SevNone, "no recovery needed"
		case gpuaction.RecoverIMEXDomain:
			return SevNone, "asks IMEX recovery"
		case gpuaction.GPUReset, gpuaction.DrainAndReset:
			return SevReset, "driver asks reset"
		case gpuaction.DrainP2P:
			return SevReset, "driver asks P2P drain"
		case gpuaction.BusReset:
			return SevReboot, "driver asks bus reset"
		case gpuaction.NodeReboot, gpuaction.SystemReboot:
			return SevReboot, "driver asks reboot"
		default:
			if unknown == UnknownReset {
				return SevReset, "unknown recovery"
			}
			return SevNone, "unknown recovery"
		}
	default:
		return SevNone, e.Meaning
	}
}
