package gpu

import (
	"fmt"
)

// smiQueryRemap is the --query-remapped-rows query. The order of the
// fields is what the parser expects.
var smiQueryRemap = []string{
	"--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable",
	smiFormat,
}

// ParseRemappedRows parses the output of the --query-remapped-rows query
// in smiQueryRemap. The devices it returns carry only the bus ID, the row
// remap fields and lost/read errors.
func ParseRemappedRows(out []byte, exitCode int) ([]Device, error) {
	return parseSMI(out, exitCode, 4, true, func(f []string) (Device, error) {
		bus, ok := NormalizeBusID(f[0])
		if !ok {
			return Device{}, fmt.Errorf("bad PCI bus ID %q", f[0])
		}
		d := Device{Index: -1, BusID: bus}
		var fv fieldReader
		d.RowRemapPending = fv.flag("remapped_rows.pending", f[1])
		d.RowRemapFailed = fv.flag("remapped_rows.failure", f[2])
		d.RemappedUncorrectable = fv.count("remapped_rows.uncorrectable", f[3])
		fv.apply(&d)
		return d, fv.bad
	})
}

// mergeRemap copies the remapped-rows answers into the devices by bus ID.
// When the query failed (remapErr), every usable device gets a read error.
// A device with no row gets nothing: nvidia-smi lists no rows, or N/A, for
// GPUs without row remapping (pre-Ampere).
func mergeRemap(devs, rows []Device, remapErr error) []Device {
	out := append([]Device(nil), devs...)
	byBus := indexByBus(rows)
	for i := range out {
		d := &out[i]
		if !d.Usable() {
			continue
		}
		if remapErr != nil {
			d.ReadErr = joinErr(d.ReadErr, "remapped rows: "+remapErr.Error())
			continue
		}
		r, ok := byBus[d.BusID]
		if !ok {
			continue
		}
		if r.Lost || r.Err != "" {
			d.Lost, d.Err = r.Lost, r.Err
			continue
		}
		d.RowRemapPending, d.RowRemapFailed, d.RemappedUncorrectable = r.RowRemapPending, r.RowRemapFailed, r.RemappedUncorrectable
		d.ReadErr = joinErr(d.ReadErr, r.ReadErr)
	}
	return out
}
