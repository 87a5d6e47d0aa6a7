package gpu

import (
	"fmt"

	"github.com/kubemedic/kubemedic/internal/smicsv"
)

// smiFormat is the output format of the CSV queries (--query-gpu,
// --query-remapped-rows), as parseSMI reads it.
var smiFormat = smicsv.Format

const handleErrPrefix = smicsv.HandleErrPrefix

// parseSMI parses CSV rows of nfields fields and nvidia-smi's error lines
// (internal/smicsv), each row into a Device by row. Empty output is an
// error unless emptyOK (the remapped-rows query of GPUs without row
// remapping).
func parseSMI(out []byte, exitCode, nfields int, emptyOK bool, row func([]string) (Device, error)) ([]Device, error) {
	rows, err := smicsv.Parse(out, exitCode, nfields, emptyOK)
	if err != nil {
		return nil, err
	}
	var devs []Device
	for _, r := range rows {
		if r.HandleErr != nil {
			devs = append(devs, handleErrDevice(*r.HandleErr))
			continue
		}
		d, err := row(r.Fields)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", clip(r.Line), err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// parseHandleErr reads "Unable to determine the device handle for GPU
// 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU" (the
// space after GPU is missing on some drivers) as a lost or unusable
// device.
func parseHandleErr(line string) (Device, error) {
	h, err := smicsv.ParseHandleErr(line)
	if err != nil {
		return Device{}, err
	}
	return handleErrDevice(h), nil
}

func handleErrDevice(h smicsv.HandleErr) Device {
	return Device{Index: -1, BusID: h.BusID, Err: h.Err, Lost: h.Lost}
}

func firstLine(b []byte) string { return smicsv.FirstLine(b) }

func clip(s string) string { return smicsv.Clip(s) }
