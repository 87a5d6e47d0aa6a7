package gpu

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// SMI lists GPUs by running nvidia-smi.
type SMI struct {
	// Path is the --nvidia-smi flag: a path, or a name found on PATH or
	// in smiDirs under Root.
	Path string
	Root host.Root
	// Timeout bounds each run of nvidia-smi.
	Timeout time.Duration
	// ECCSection makes the memory checks (gpu-memory, gpu-recovery) also
	// run `nvidia-smi -q -d ECC` (smiQueryECC), the only nvidia-smi form
	// of channel/TPC repair pending and unrepairable memory: a third
	// process per run, never run for the gpu check. Off, or when this
	// nvidia-smi rejects smiRecoveryGate, those signals are named in
	// Device.Unsupported, not read. On, a run that fails as a whole makes
	// them a read error of every GPU (Unknown), never Unsupported; only a
	// GPU whose section lacks a line or says N/A names it Unsupported.
	ECCSection bool
}

// Name implements Backend.
func (*SMI) Name() string { return "nvidia-smi" }

// Devices implements Backend. ReadList runs one --query-gpu of
// smiBaseFields. ReadRecovery and ReadMemory run the --query-gpu with the
// verdict fields appended (again without each field this nvidia-smi
// rejects), which holds the recovery action; ReadMemory then runs
// --query-remapped-rows, then, with ECCSection, -q -d ECC for channel/TPC
// repair pending and unrepairable memory. When a later query fails while
// the GPU query worked, the devices get a read error rather than the whole
// call failing.
func (s *SMI) Devices(ctx context.Context, what Read) ([]Device, error) {
	path, err := findSMI(s.Path, s.Root)
	if err != nil {
		return nil, err
	}
	if what == ReadList {
		out, err := s.run(ctx, path, smiQueryGPU(nil)...)
		if err != nil {
			return nil, err
		}
		devs, err := parseQueryGPU(out.output, out.exitCode, nil)
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi: %w", err)
		}
		return devs, nil
	}
	devs, rejected, err := s.queryVerdict(ctx, path)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 || what == ReadRecovery {
		return devs, nil
	}
	var rows []Device
	rout, err := s.run(ctx, path, smiQueryRemap...)
	if err == nil {
		rows, err = ParseRemappedRows(rout.output, rout.exitCode)
	}
	devs = mergeRemap(devs, rows, err)
	if !s.ECCSection || slices.Contains(rejected, smiRecoveryGate) {
		return mergeECC(devs, nil, errSMIECCSkipped), nil
	}
	var edevs []Device
	eout, err := s.run(ctx, path, smiQueryECC...)
	if err == nil {
		edevs, err = ParseQueryECC(eout.output, eout.exitCode)
	}
	return mergeECC(devs, edevs, err), nil
}

// smiRecoveryGate is the verdict field whose rejection shows an
// nvidia-smi too old for the -q -d ECC verdict lines: channel and TPC
// repair pending need NVML 580, and every nvidia-smi that prints them
// knows gpu_recovery_action (and -d ECC, which is far older).
const smiRecoveryGate = "gpu_recovery_action"

// queryVerdict runs the memory check's --query-gpu. nvidia-smi answers a
// field name it does not know with `Field "gpu_recovery_action" is not a
// valid field to query.` (exit status 2) and prints no other field, so
// the query is run again without each rejected verdict field, and the
// devices name its signal Unsupported: an older driver is judged by the
// fields it has. A rejected base field is an error, as any other
// unexplained output. It returns the rejected field names.
func (s *SMI) queryVerdict(ctx context.Context, path string) ([]Device, []string, error) {
	extra := smiVerdictFields
	var rejected []string
	for {
		out, err := s.run(ctx, path, smiQueryGPU(extra)...)
		if err != nil {
			return nil, nil, err
		}
		names := smiRejectedFields(out.output)
		kept := slices.DeleteFunc(slices.Clone(extra), func(f smiVerdictField) bool {
			return slices.Contains(names, f.name)
		})
		if len(names) > 0 && len(kept) < len(extra) {
			for _, f := range extra {
				if slices.Contains(names, f.name) {
					rejected = append(rejected, f.name)
				}
			}
			extra = kept
			continue
		}
		devs, err := parseQueryGPU(out.output, out.exitCode, extra)
		if err != nil {
			return nil, nil, fmt.Errorf("nvidia-smi: %w", err)
		}
		for i := range devs {
			if !devs[i].Usable() {
				continue
			}
			for _, f := range smiVerdictFields {
				if slices.Contains(rejected, f.name) {
					devs[i].Unsupported = appendSignal(devs[i].Unsupported, f.signal)
				}
			}
		}
		return devs, rejected, nil
	}
}

func appendSignal(list []string, signal string) []string {
	if slices.Contains(list, signal) {
		return list
	}
	return append(list, signal)
}

// indexByBus maps a second query's devices by bus ID, for merging them
// into the first's.
func indexByBus(devs []Device) map[string]Device {
	m := make(map[string]Device, len(devs))
	for _, d := range devs {
		m[d.BusID] = d
	}
	return m
}

func joinErr(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
