package validation

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Floor names: the bandwidths a test holds to a floor, as a template
// overrides them (--floor nccl-busbw=350) and measurements name them.
const (
	// FloorNCCLBusBW: all_reduce_perf's bus bandwidth at its largest
	// message, over the node's GPUs (NVLink).
	FloorNCCLBusBW = "nccl-busbw"
	// FloorH2D and FloorD2H: nvbandwidth's host_to_device_memcpy_ce and
	// device_to_host_memcpy_ce, per GPU (PCIe).
	FloorH2D = "h2d"
	FloorD2H = "d2h"
	// FloorD2D: nvbandwidth's device_to_device_memcpy_read_ce, per pair
	// of GPUs (NVLink).
	FloorD2D = "d2d"
)

// FloorNames are the floors there are, in the order a report lists them.
var FloorNames = []string{FloorNCCLBusBW, FloorH2D, FloorD2H, FloorD2D}

// Margin is the share of a healthy node's expected bandwidth that a floor
// asks for: a node 20% below what a healthy one of its model reaches
// fails. docs/validation.md states it with each figure's source.
const Margin = 0.8

// Floors are floors by name, in GB/s: a template's overrides.
type Floors map[string]float64

// Model is a GPU model and the bandwidths a healthy node of eight of them
// reaches.
type Model struct {
	// Name is kubemedic's name for it, e.g. "H100 SXM 80GB".
	Name string
	// DriverNames are the names the driver gives it (nvidia-smi's name,
	// NVML's nvmlDeviceGetName), matched without regard to case or runs
	// of spaces.
	DriverNames []string
	// Expected are the bandwidths in GB/s, by floor name, that a healthy
	// node reaches; each floor is Margin of its figure. A floor name that
	// is absent has no floor for this model: the test gives no answer
	// there unless a template sets one.
	Expected map[string]float64
	// Basis says where Expected comes from, for the report and the docs.
	Basis string
}

// The published figures the expected bandwidths come from:
//
//   - NVLink and PCIe per GPU, bidirectional, from NVIDIA's product pages
//     (specifications tables): H100 SXM 900 GB/s NVLink, PCIe Gen5 128
//     GB/s, https://www.nvidia.com/en-us/data-center/h100/; H200 SXM the
//     same, https://www.nvidia.com/en-us/data-center/h200/; A100 SXM4
//     (40GB and 80GB) 600 GB/s NVLink, PCIe Gen4 64 GB/s,
//     https://www.nvidia.com/en-us/data-center/a100/; L40S no NVLink,
//     PCIe Gen4 x16 64 GB/s, https://www.nvidia.com/en-us/data-center/l40s/.
//     One direction is half of it.
//   - What NCCL's all-reduce reaches over NVLink 4: "450GB/s is the line
//     rate. With the protocol overhead (~20%) NCCL can get an effective
//     NVLink bandwidth of 370GB/s" (NVIDIA's NCCL lead,
//     https://github.com/NVIDIA/nccl-tests/issues/212); busbw is defined
//     to be comparable with that line rate
//     (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
//     NVLink 3 gets the same share (370/450) of its 300 GB/s: 246 GB/s.
//     With NVLink SHARP, H100 and H200 reach more (~480 GB/s); the floor
//     holds without it.
//   - What a copy engine reaches over a link (nvbandwidth): 80% of one
//     direction, the same ~20% protocol overhead; the real nvbandwidth
//     samples in nvbandwidth/testdata reach 75-90% of PCIe.
//
// No NCCL or device-to-device floor for L40S: its GPUs reach each other
// over PCIe through the server's switches and CPUs, so what a healthy node
// reaches depends on the server, not the GPU; a template sets one with
// --floor.
var models = []Model{
	{Name: "H100 SXM 80GB", DriverNames: []string{"NVIDIA H100 80GB HBM3"},
		Expected: map[string]float64{FloorNCCLBusBW: 370, FloorH2D: 51.2, FloorD2H: 51.2, FloorD2D: 360},
		Basis:    "NVLink 4 (900 GB/s), PCIe Gen5 x16 (128 GB/s)"},
	{Name: "H200 SXM 141GB", DriverNames: []string{"NVIDIA H200", "NVIDIA H200 141GB HBM3e"},
		Expected: map[string]float64{FloorNCCLBusBW: 370, FloorH2D: 51.2, FloorD2H: 51.2, FloorD2D: 360},
		Basis:    "NVLink 4 (900 GB/s), PCIe Gen5 x16 (128 GB/s)"},
	{Name: "A100 SXM4 80GB", DriverNames: []string{"NVIDIA A100-SXM4-80GB"},
		Expected: map[string]float64{FloorNCCLBusBW: 246, FloorH2D: 25.6, FloorD2H: 25.6, FloorD2D: 240},
		Basis:    "NVLink 3 (600 GB/s), PCIe Gen4 x16 (64 GB/s)"},
	{Name: "A100 SXM4 40GB", DriverNames: []string{"NVIDIA A100-SXM4-40GB"},
		Expected: map[string]float64{FloorNCCLBusBW: 246, FloorH2D: 25.6, FloorD2H: 25.6, FloorD2D: 240},
		Basis:    "NVLink 3 (600 GB/s), PCIe Gen4 x16 (64 GB/s)"},
	{Name: "L40S", DriverNames: []string{"NVIDIA L40S"},
		Expected: map[string]float64{FloorH2D: 25.6, FloorD2H: 25.6},
		Basis:    "PCIe Gen4 x16 (64 GB/s), no NVLink"},
}

// Models are the models with floors, in the table's order.
func Models() []Model {
	out := make([]Model, len(models))
	copy(out, models)
	return out
}

// ModelFor is the model the driver names so.
func ModelFor(driverName string) (Model, bool) {
	key := normName(driverName)
	for _, m := range models {
		for _, n := range m.DriverNames {
			if normName(n) == key {
				return m, true
			}
		}
	}
	return Model{}, false
}

func normName(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// FloorOf is Margin of the expected figure, to 0.1 GB/s.
func FloorOf(expected float64) float64 { return math.Round(expected*Margin*10) / 10 }

// Floor is the floor of name for GPUs the driver names driverName: a
// template's override first, else Margin of the model's figure. source
// says which ("--floor h2d=45", "H100 SXM 80GB: 80% of 51.2"); ok is false
// when there is none, and source then says why, for a NoAnswer's reason.
func Floor(driverName, name string, overrides Floors) (floor float64, source string, ok bool) {
	if v, set := overrides[name]; set {
		return v, fmt.Sprintf("--floor %s=%s", name, strconv.FormatFloat(v, 'f', -1, 64)), true
	}
	m, known := ModelFor(driverName)
	if !known {
		return 0, fmt.Sprintf("no %s floor for %q: kubemedic knows no such GPU model; set --floor %s=<GB/s> in the template", name, driverName, name), false
	}
	e, has := m.Expected[name]
	if !has {
		return 0, fmt.Sprintf("no %s floor for %s: what a healthy one reaches depends on the server; set --floor %s=<GB/s> in the template", name, m.Name, name), false
	}
	return FloorOf(e), fmt.Sprintf("%s: %.0f%% of %s GB/s", m.Name, Margin*100, strconv.FormatFloat(e, 'f', -1, 64)), true
}

// ParseFloor reads a template's override, "nccl-busbw=350": a floor's
// name and a bandwidth in GB/s, positive and finite.
func ParseFloor(s string) (name string, gbps float64, err error) {
	name, v, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok {
		return "", 0, fmt.Errorf("floor %q: want name=GB/s, e.g. %s=350", s, FloorNCCLBusBW)
	}
	known := false
	for _, n := range FloorNames {
		known = known || n == name
	}
	if !known {
		return "", 0, fmt.Errorf("floor %q: unknown name %q, want one of %s", s, name, strings.Join(FloorNames, ", "))
	}
	gbps, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !finite(gbps) || gbps <= 0 {
		return "", 0, fmt.Errorf("floor %q: %q is not a bandwidth in GB/s above 0", s, strings.TrimSpace(v))
	}
	return name, gbps, nil
}
