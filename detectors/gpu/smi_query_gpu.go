package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// smiBaseFields are the --query-gpu fields both checks read. The order of
// the fields is what the parser expects.
var smiBaseFields = []string{"index", "pci.bus_id", "uuid", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending", "retired_pages.sbe", "retired_pages.dbe"}

// smiVerdictField is a --query-gpu field of the driver's own verdict
// (issue 19), appended to smiBaseFields for the memory check. An older
// nvidia-smi rejects the name; the field is then dropped from the query
// and signal is Unsupported.
type smiVerdictField struct {
	name   string
	signal string // as Device.Unsupported names it; the NVML backend's names
	read   func(r *fieldReader, d *Device, v string)
}

// smiVerdictFields are the verdict fields in --query-gpu, in the order the
// memory query appends them. Values seen on a real H100 (driver
// 580.159.04): "None", "No", "0".
var smiVerdictFields = []smiVerdictField{
	{"gpu_recovery_action", "recovery action", func(r *fieldReader, d *Device, v string) {
		d.RecoveryAction = r.recovery("gpu_recovery_action", v)
	}},
	{"ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", "SRAM threshold", func(r *fieldReader, d *Device, v string) {
		d.SRAMThresholdExceeded = r.verdictFlag("ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", v)
	}},
	{"remapped_rows.histogram.none", "row remapper histogram", func(r *fieldReader, d *Device, v string) {
		d.BanksWithoutSpareRows = r.verdictCount("remapped_rows.histogram.none", v)
	}},
}

// smiQueryGPU is the --query-gpu invocation for smiBaseFields and extra.
func smiQueryGPU(extra []smiVerdictField) []string {
	names := append([]string(nil), smiBaseFields...)
	for _, f := range extra {
		names = append(names, f.name)
	}
	return []string{"--query-gpu=" + strings.Join(names, ","), smiFormat}
}

// ParseQueryGPU parses the output (stdout then stderr) of either
// --query-gpu query the backend runs, with nvidia-smi's exit code: the gpu
// check's smiBaseFields, or the memory check's with every verdict field
// appended, told apart by the number of fields. Error lines
// ("Unable to determine the device handle for GPU 0000:02:00.0: GPU is
// lost...") become devices that are lost or unusable, with their bus ID;
// "No devices were found" is an empty list; a driver failure, an
// unrecognised line or a non-zero exit that the output does not explain is
// an error.
func ParseQueryGPU(out []byte, exitCode int) ([]Device, error) {
	var extra []smiVerdictField
	if smiFirstRowFields(out) == len(smiBaseFields)+len(smiVerdictFields) {
		extra = smiVerdictFields
	}
	return parseQueryGPU(out, exitCode, extra)
}

// smiFirstRowFields is the number of comma-separated fields on the first
// line that is not one of nvidia-smi's error or warning lines.
func smiFirstRowFields(out []byte) int {
	for _, line := range strings.Split(strings.ReplaceAll(string(out), "\r", "\n"), "\n") {
		lower := strings.ToLower(strings.TrimSpace(line))
		if lower == "" || strings.HasPrefix(lower, handleErrPrefix) || strings.HasPrefix(lower, "warning:") {
			continue
		}
		return strings.Count(line, ",") + 1
	}
	return 0
}

// parseQueryGPU parses the output of smiQueryGPU(extra): exactly the
// base fields and then extra, in order.
func parseQueryGPU(out []byte, exitCode int, extra []smiVerdictField) ([]Device, error) {
	return parseSMI(out, exitCode, len(smiBaseFields)+len(extra), false, func(f []string) (Device, error) {
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 {
			return Device{}, fmt.Errorf("bad index %q", f[0])
		}
		bus, ok := NormalizeBusID(f[1])
		if !ok {
			return Device{}, fmt.Errorf("bad PCI bus ID %q", f[1])
		}
		d := Device{Index: idx, BusID: bus, UUID: f[2]}
		var fv fieldReader
		d.VolatileDBE = fv.count("ecc.errors.uncorrected.volatile.total", f[3])
		d.RetiredPagesPending = fv.flag("retired_pages.pending", f[4])
		sbe := fv.count("retired_pages.sbe", f[5])
		dbe := fv.count("retired_pages.dbe", f[6])
		if sbe.Known && dbe.Known {
			d.RetiredPages = Count{Value: sbe.Value + dbe.Value, Known: true}
		}
		for i, vf := range extra {
			v := f[len(smiBaseFields)+i]
			if fv.unsupported(v) {
				d.Unsupported = appendSignal(d.Unsupported, vf.signal)
				continue
			}
			vf.read(&fv, &d, v)
		}
		fv.apply(&d)
		return d, fv.bad
	})
}

// smiRejectedFields returns the field names in nvidia-smi's rejection
// lines, `Field "foo.bar" is not a valid field to query.` (curly quotes
// on some Windows builds).
func smiRejectedFields(out []byte) []string {
	var names []string
	for _, line := range strings.Split(strings.ReplaceAll(string(out), "\r", "\n"), "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "Field ")
		if !ok {
			continue
		}
		name, ok := strings.CutSuffix(rest, " is not a valid field to query.")
		if !ok {
			continue
		}
		name = strings.Trim(name, "\"\u201c\u201d")
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}
