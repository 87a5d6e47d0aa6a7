package smicsv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Format is the output format of the CSV queries, as Parse reads them.
const Format = "--format=csv,noheader"

// HandleErrPrefix starts, in lower case, nvidia-smi's line about a GPU it
// could not open.
const HandleErrPrefix = "unable to determine the device handle for gpu"

// fatal are whole-output failures of nvidia-smi, in lower case: the driver
// or NVML is not usable.
var fatal = []string{
	"nvidia-smi has failed",
	"failed to initialize nvml",
	"driver/library version mismatch",
	"couldn't communicate with the nvidia driver",
	"unable to load the nvidia management library",
}

// Fatal reports whether a line, in lower case, says that nvidia-smi could
// not use the driver at all.
func Fatal(lower string) bool {
	for _, f := range fatal {
		if strings.Contains(lower, f) {
			return true
		}
	}
	return false
}

// Row is one line of a CSV query's output: the fields of a GPU, or, when
// Fields is nil, a GPU nvidia-smi could not open (HandleErr).
type Row struct {
	// Fields are the line's comma-separated fields, each trimmed.
	Fields []string
	// Line is the line as nvidia-smi wrote it, trimmed.
	Line string
	// HandleErr is set for an "Unable to determine the device handle"
	// line.
	HandleErr *HandleErr
}

// HandleErr is a GPU that nvidia-smi could not open.
type HandleErr struct {
	// BusID is the GPU's normalised PCI address (NormalizeBusID).
	BusID string
	// Err is what nvidia-smi said of it, e.g. "GPU is lost. Reboot the
	// system to recover this GPU"; never empty.
	Err string
	// Lost: nvidia-smi says the GPU is lost (fallen off the bus).
	Lost bool
}

// Parse reads CSV rows of nfields fields and nvidia-smi's error lines, in
// order, given nvidia-smi's exit code. Empty output is an error unless
// emptyOK (the remapped-rows query of GPUs without row remapping); "No
// devices were found" is an empty list. A non-zero exit status is an error
// unless a handle-error line, or "No devices were found", explains it.
func Parse(out []byte, exitCode, nfields int, emptyOK bool) ([]Row, error) {
	var rows []Row
	noDevices, explained := false, false
	lines := 0
	// A CR, alone or in CRLF, ends a line too.
	for _, line := range strings.Split(strings.ReplaceAll(string(out), "\r", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		lines++
		lower := strings.ToLower(line)
		switch {
		case strings.HasPrefix(lower, HandleErrPrefix):
			h, err := ParseHandleErr(line)
			if err != nil {
				return nil, err
			}
			rows = append(rows, Row{Line: line, HandleErr: &h})
			explained = true
			continue
		case strings.HasPrefix(lower, "no devices were found"):
			noDevices = true
			continue
		case strings.HasPrefix(lower, "warning:"):
			// e.g. "WARNING: infoROM is corrupted at gpu 0000:3B:00.0";
			// not the query's business.
			continue
		}
		if Fatal(lower) {
			return nil, errors.New(line)
		}
		fields := strings.Split(line, ",")
		if len(fields) != nfields {
			return nil, fmt.Errorf("unexpected output line %q", Clip(line))
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		rows = append(rows, Row{Fields: fields, Line: line})
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
	if exitCode != 0 && !noDevices && !explained {
		return nil, fmt.Errorf("exit status %d: %s", exitCode, Clip(FirstLine(out)))
	}
	return rows, nil
}

// ParseHandleErr reads "Unable to determine the device handle for GPU
// 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU" (the
// space after GPU is missing on some drivers).
func ParseHandleErr(line string) (HandleErr, error) {
	if len(line) < len(HandleErrPrefix) || !strings.EqualFold(line[:len(HandleErrPrefix)], HandleErrPrefix) {
		return HandleErr{}, fmt.Errorf("unexpected output line %q", Clip(line))
	}
	rest := strings.TrimSpace(line[len(HandleErrPrefix):])
	id, msg, ok := cutBusID(rest)
	if !ok {
		return HandleErr{}, fmt.Errorf("unexpected output line %q", Clip(line))
	}
	h := HandleErr{BusID: id, Err: msg}
	if msg == "" {
		h.Err = "unable to determine the device handle"
	}
	h.Lost = strings.Contains(strings.ToLower(msg), "gpu is lost")
	return h, nil
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

// NormalizeBusID turns a PCI address as NVML, nvidia-smi, DCGM or the
// driver's /proc tree writes it ("00000000:3B:00.0", "0000:3b:00.0") into
// the lowercase form with a 4-digit domain when the domain fits
// ("0000:3b:00.0"). ok is false, and s comes back trimmed and lowercased,
// when s is not a PCI address.
func NormalizeBusID(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s, false
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return s, false
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok {
		return s, false
	}
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 8, 8)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil ||
		len(dom) == 0 || len(dom) > 8 || len(bus) > 2 || len(dev) > 2 || len(fn) != 1 || v > 0x1f || f > 7 {
		return s, false
	}
	if d <= 0xffff {
		return fmt.Sprintf("%04x:%02x:%02x.%d", d, b, v, f), true
	}
	return fmt.Sprintf("%08x:%02x:%02x.%d", d, b, v, f), true
}

// FirstLine is the first non-empty line of b, trimmed: what an error
// quotes of output it does not understand.
func FirstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// Clip cuts s to 120 bytes for an error message.
func Clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
