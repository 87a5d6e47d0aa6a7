package gpu

import (
	"errors"
	"fmt"
	"strings"
)

// smiFormat is the output format of the CSV queries (--query-gpu,
// --query-remapped-rows), as parseSMI reads it.
var smiFormat = "--format=csv,noheader"

const handleErrPrefix = "unable to determine the device handle for gpu"

// Whole-output failures of nvidia-smi: the driver or NVML is not usable.
var smiFatal = []string{
	"nvidia-smi has failed",
	"failed to initialize nvml",
	"driver/library version mismatch",
	"couldn't communicate with the nvidia driver",
	"unable to load the nvidia management library",
}

// parseSMI parses CSV rows of nfields fields and nvidia-smi's error lines.
// Empty output is an error unless emptyOK (the remapped-rows query of GPUs
// without row remapping).
func parseSMI(out []byte, exitCode, nfields int, emptyOK bool, row func([]string) (Device, error)) ([]Device, error) {
	var devs []Device
	noDevices := false
	lines := 0
	// A CR, alone or in CRLF, ends a line too.
	text := strings.ReplaceAll(string(out), "\r", "\n")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		lines++
		lower := strings.ToLower(line)
		switch {
		case strings.HasPrefix(lower, handleErrPrefix):
			d, err := parseHandleErr(line)
			if err != nil {
				return nil, err
			}
			devs = append(devs, d)
			continue
		case strings.HasPrefix(lower, "no devices were found"):
			noDevices = true
			continue
		case strings.HasPrefix(lower, "warning:"):
			// e.g. "WARNING: infoROM is corrupted at gpu 0000:3B:00.0";
			// not this check's business.
			continue
		}
		for _, f := range smiFatal {
			if strings.Contains(lower, f) {
				return nil, errors.New(line)
			}
		}
		fields := strings.Split(line, ",")
		if len(fields) != nfields {
			return nil, fmt.Errorf("unexpected output line %q", clip(line))
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		d, err := row(fields)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", clip(line), err)
		}
		devs = append(devs, d)
	}
	if lines == 0 {
		if exitCode != 0 {
			return nil, fmt.Errorf("exit status %d and no output", exitCode)
		}
		if !emptyOK {
			return nil, errors.New("no output")
		}
		return nil, nil
	}
	if exitCode != 0 && !noDevices {
		explained := false
		for _, d := range devs {
			if !d.Usable() {
				explained = true
			}
		}
		if !explained {
			return nil, fmt.Errorf("exit status %d: %s", exitCode, clip(firstLine(out)))
		}
	}
	return devs, nil
}

// parseHandleErr reads "Unable to determine the device handle for GPU
// 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU" (the
// space after GPU is missing on some drivers).
func parseHandleErr(line string) (Device, error) {
	rest := strings.TrimSpace(line[len(handleErrPrefix):])
	id, msg, ok := cutBusID(rest)
	if !ok {
		return Device{}, fmt.Errorf("unexpected output line %q", clip(line))
	}
	d := Device{Index: -1, BusID: id, Err: msg}
	if msg == "" {
		d.Err = "unable to determine the device handle"
	}
	d.Lost = strings.Contains(strings.ToLower(msg), "gpu is lost")
	return d, nil
}

// cutBusID splits "0000:02:00.0: GPU is lost." into the normalised bus ID
// and the message. The bus ID contains colons itself, so it ends at the
// first ':' after the '.' of the function number.
func cutBusID(s string) (id, msg string, ok bool) {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return "", "", false
	}
	end := len(s)
	if c := strings.IndexByte(s[dot:], ':'); c >= 0 {
		end = dot + c
		msg = strings.TrimSpace(s[end+1:])
	}
	id, ok = NormalizeBusID(s[:end])
	return id, msg, ok
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
