// Package gpuaction is the driver's GPU recovery action: NVML's
// nvmlDeviceGpuRecoveryAction_t, its numbers, the names the driver and
// nvidia-smi print for it, and the GPURecoveryRequired reason each one
// maps to. The gpu-recovery check reads the action from NVML, DCGM and
// nvidia-smi, and the xid check reads it from Xid 154 lines: both use
// this one table.
//
// The numbers are NVML's (nvml.h of go-nvml v0.13.3-0, driver 580: 0 to
// 5; NVIDIA's cuda-python NVML bindings add 6 BUS_RESET and 7
// SYSTEM_REBOOT for newer drivers). A number or name not in the table is
// Unknown, never a guessed action.
package gpuaction

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/reason"
)

// Action is what the driver asks for a GPU, in NVML's numbering.
type Action int

// NVML's recovery actions; Unknown is a number or name not listed here.
const (
	None              Action = 0 // NVML_GPU_RECOVERY_ACTION_NONE
	GPUReset          Action = 1 // _GPU_RESET
	NodeReboot        Action = 2 // _NODE_REBOOT
	DrainP2P          Action = 3 // _DRAIN_P2P
	DrainAndReset     Action = 4 // _DRAIN_AND_RESET
	RecoverIMEXDomain Action = 5 // _RECOVER_IMEX_DOMAIN
	BusReset          Action = 6 // _BUS_RESET
	SystemReboot      Action = 7 // _SYSTEM_REBOOT
	Unknown           Action = -1
)

// entry is one action's row.
type entry struct {
	name string // NVIDIA's description, for messages
	// names are the spellings the driver (Xid 154's parentheses) and
	// nvidia-smi print, folded by fold.
	names []string
	// reason is the GPURecoveryRequired reason; "" for None.
	reason string
	// do is what the condition's message says the driver asks.
	do string
	// rank orders the actions by how much they disrupt: when GPUs ask for
	// different ones, the node's condition names the highest, which
	// covers the others (a reboot resets every GPU and bus).
	rank int
}

// table: NVIDIA's names are from nvml.h's comments, the A100 memory error
// management guide ("Reset", "Reboot", "Drain P2P") and the driver's Xid
// 154 text ("GPU Reset Required", "Node Reboot Required").
var table = map[Action]entry{
	None:          {name: "None", names: []string{"none"}},
	GPUReset:      {name: "GPU reset", names: []string{"reset", "gpureset", "gpuresetrequired"}, reason: reason.ResetRequired, do: "reset the GPU", rank: 3},
	NodeReboot:    {name: "node reboot", names: []string{"reboot", "nodereboot", "noderebootrequired"}, reason: reason.RebootRequired, do: "reboot the node", rank: 6},
	DrainP2P:      {name: "drain P2P", names: []string{"drainp2p"}, reason: reason.DrainP2P, do: "drain its peer-to-peer work", rank: 2},
	DrainAndReset: {name: "drain and reset", names: []string{"drainandreset", "drainp2pandresetgpu"}, reason: reason.DrainAndReset, do: "drain and reset the GPU", rank: 4},
	// IMEX (multi-node NVLink) domain recovery is not a repair of this
	// node alone: its own reason, which the shipped policies leave to a
	// person (docs/runbooks.md).
	RecoverIMEXDomain: {name: "recover IMEX domain", names: []string{"recoverimexdomain", "imexdomainrecovery"}, reason: reason.IMEXDomainRecovery, do: "recover its IMEX domain", rank: 1},
	// A reset of the GPU's PCIe bus: more than a GPU reset, and a reboot
	// covers it, so the shipped policies reboot.
	BusReset: {name: "bus reset", names: []string{"busreset", "gpubusreset", "resetbus"}, reason: reason.BusResetRequired, do: "reset the GPU's PCIe bus", rank: 5},
	// "Reboot the system": a node reboot is what can be done, and the
	// post-repair check holds the repair until the action reads None.
	SystemReboot: {name: "system reboot", names: []string{"systemreboot", "systemrebootrequired"}, reason: reason.RebootRequired, do: "reboot the system", rank: 7},
}

var byName = func() map[string]Action {
	m := map[string]Action{}
	for a, e := range table {
		for _, n := range e.names {
			m[n] = a
		}
	}
	return m
}()

// fold lowercases s and drops spaces, underscores and dashes:
// "Drain and Reset", "DRAIN_AND_RESET" and "drain-and-reset" are one name.
func fold(s string) string {
	return strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// Parse reads a name the driver or nvidia-smi prints, or a decimal
// number; ok is false for anything not in the table.
func Parse(s string) (Action, bool) {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		return FromCode(n)
	}
	if a, ok := byName[fold(s)]; ok {
		return a, true
	}
	return Unknown, false
}

// FromCode is the action NVML numbers code; ok is false for numbers not
// in the table.
func FromCode(code int64) (Action, bool) {
	a := Action(code)
	if _, ok := table[a]; ok && int64(a) == code {
		return a, true
	}
	return Unknown, false
}

// Known reports whether a is in the table.
func (a Action) Known() bool {
	_, ok := table[a]
	return ok
}

// String is NVIDIA's description, e.g. "GPU reset"; "unknown action N"
// for a number not in the table.
func (a Action) String() string {
	if e, ok := table[a]; ok {
		return e.name
	}
	return "unknown action " + strconv.Itoa(int(a))
}

// Reason is the GPURecoveryRequired reason for a; "" for None and for
// actions not in the table.
func (a Action) Reason() string { return table[a].reason }

// Do says what the driver asks, for a condition message: "reset the GPU".
func (a Action) Do() string { return table[a].do }

// Rank orders actions by disruption: higher covers lower. 0 for None and
// for actions not in the table.
func (a Action) Rank() int { return table[a].rank }

// Reasons lists every GPURecoveryRequired reason, most disruptive first,
// each once.
func Reasons() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range ByRank() {
		if r := a.Reason(); r != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// ByRank lists the actions other than None, most disruptive first.
func ByRank() []Action {
	var out []Action
	for a := range table {
		if a != None {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Action) int { return b.Rank() - a.Rank() })
	return out
}
