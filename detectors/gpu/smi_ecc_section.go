package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubemedic/kubemedic/internal/smicsv"
)

// smiQueryECC is -q's ECC section alone, read only for the verdict
// signals that have no --query-gpu field (channel/TPC repair pending,
// unrepairable memory): nvidia-smi 580 prints them only in -q and
// -q -x. It is text because nvidia-smi refuses -d with -x: driver
// 580.159.04 answers `-q -x -d ECC` with "Invalid combination of input
// arguments: --display/-d flags can not be combined with
// -x/--xml-format flags." and its -h says of -d "Doesn't work with -u
// or -x flags". The whole -q -x costs about 4x the NVML floor in CPU
// (docs/detectors.md, "Measurements").
var smiQueryECC = []string{"-q", "-d", "ECC"}

// errSMIECCSkipped marks the -q -d ECC signals as Unsupported by this
// backend, -q -d ECC not run: SMI.ECCSection is off, or nvidia-smi
// rejected smiRecoveryGate and so predates them.
var errSMIECCSkipped = errors.New("nvidia-smi -q -d ECC not run")

// smiECCLines are the lines of `nvidia-smi -q -d ECC` (smiQueryECC) under
// "ECC Errors" that the memory checks read: the verdict signals that have
// no --query-gpu field. Driver 580.159.04 prints them as
// "Channel Repair Pending : No" (-q -x names them channel_repair_pending,
// tpc_repair_pending and unrepairable_memory); an older nvidia-smi prints
// no such line.
var smiECCLines = []struct {
	label  string // as nvidia-smi prints it
	signal string
	set    func(d *Device, f Flag)
}{
	{"Channel Repair Pending", SignalRepairStatus, func(d *Device, f Flag) { d.ChannelRepairPending = f }},
	{"TPC Repair Pending", SignalRepairStatus, func(d *Device, f Flag) { d.TPCRepairPending = f }},
	{"Unrepairable Memory", SignalUnrepairableMemory, func(d *Device, f Flag) { d.UnrepairableMemory = f }},
}

// ParseQueryECC parses the output (stdout then stderr) of
// `nvidia-smi -q -d ECC` (smiQueryECC) with its exit code. Each GPU's
// section starts with an unindented "GPU 00000000:00:06.0". The devices it
// returns carry only the bus ID, channel and TPC repair pending,
// unrepairable memory, Unsupported (a line that is missing, or N/A) and
// lost/read errors: "GPU is lost" as a value marks the device lost, any
// other value but Yes and No is a read error, and nvidia-smi's "Unable to
// determine the device handle" lines are devices that are lost or
// unusable. Output that is not nvidia-smi's -q log, a driver failure, or
// a non-zero exit that the output does not explain is an error.
func ParseQueryECC(out []byte, exitCode int) ([]Device, error) {
	var (
		devs      []Device
		values    []map[string]string // per device; nil for a handle error
		log       bool                // the "NVSMI LOG" banner was seen
		noDevices bool
	)
	cur := -1 // the device whose section is being read
	for _, raw := range strings.Split(strings.ReplaceAll(string(out), "\r", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		lower := strings.ToLower(line)
		switch {
		case strings.HasPrefix(lower, handleErrPrefix):
			d, err := parseHandleErr(line)
			if err != nil {
				return nil, err
			}
			devs, values, cur = append(devs, d), append(values, nil), -1
			continue
		case strings.HasPrefix(lower, "no devices were found"):
			noDevices = true
			continue
		case strings.Contains(lower, "nvsmi log"):
			log = true
			continue
		}
		if smicsv.Fatal(lower) {
			return nil, errors.New(line)
		}
		if rest, ok := strings.CutPrefix(raw, "GPU "); ok {
			bus, ok := NormalizeBusID(strings.TrimSpace(rest))
			if !ok {
				return nil, fmt.Errorf("bad PCI bus ID in %q", clip(line))
			}
			devs, values = append(devs, Device{Index: -1, BusID: bus}), append(values, map[string]string{})
			cur = len(devs) - 1
			continue
		}
		if cur < 0 {
			continue // the log's header: timestamp, driver version
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		if _, seen := values[cur][key]; !seen {
			values[cur][key] = strings.TrimSpace(val)
		}
	}
	if !log && len(devs) == 0 && !noDevices {
		switch {
		case exitCode != 0 && len(bytes.TrimSpace(out)) == 0:
			return nil, fmt.Errorf("exit status %d and no output", exitCode)
		case exitCode != 0:
			return nil, fmt.Errorf("exit status %d: %s", exitCode, clip(firstLine(out)))
		case len(bytes.TrimSpace(out)) == 0:
			return nil, errors.New("no output")
		}
		return nil, fmt.Errorf("not nvidia-smi's -q log: %s", clip(firstLine(out)))
	}
	if exitCode != 0 && !noDevices && !slices.ContainsFunc(devs, func(d Device) bool { return !d.Usable() }) {
		return nil, fmt.Errorf("exit status %d: %s", exitCode, clip(firstLine(out)))
	}
	for i := range devs {
		if values[i] == nil {
			continue
		}
		d := &devs[i]
		var fv fieldReader
		for _, l := range smiECCLines {
			v, ok := values[i][strings.ToLower(l.label)]
			var f Flag
			switch {
			case !ok || fv.unsupported(v):
				d.Unsupported = appendSignal(d.Unsupported, l.signal)
			case strings.EqualFold(v, "yes"), strings.EqualFold(v, "no"):
				f = fv.verdictFlag(l.label, v)
			default:
				// -q writes errors without brackets: "GPU is lost"
				// marks the device lost, anything else is a read
				// error.
				fv.special(l.label, "["+strings.Trim(v, "[]")+"]")
			}
			l.set(d, f)
		}
		fv.apply(d)
	}
	return devs, nil
}

// mergeECC copies the -q -d ECC answers into the devices by bus ID. When
// the query failed as a whole (eccErr: an exit status or output it does
// not explain, a timeout), every usable device gets a read error: the
// signals were not read, which is not the driver lacking them. For
// errSMIECCSkipped they are named Unsupported instead. A usable device
// missing from the output gets a read error.
func mergeECC(devs, edevs []Device, eccErr error) []Device {
	out := append([]Device(nil), devs...)
	byBus := indexByBus(edevs)
	for i := range out {
		d := &out[i]
		if !d.Usable() {
			continue
		}
		switch {
		case errors.Is(eccErr, errSMIECCSkipped):
			d.Unsupported = appendSignal(appendSignal(d.Unsupported, SignalRepairStatus), SignalUnrepairableMemory)
			continue
		case eccErr != nil:
			d.ReadErr = joinErr(d.ReadErr, "nvidia-smi -q -d ECC: "+eccErr.Error())
			continue
		}
		e, ok := byBus[d.BusID]
		if !ok {
			d.ReadErr = joinErr(d.ReadErr, "nvidia-smi -q -d ECC: GPU not listed")
			continue
		}
		if e.Lost || e.Err != "" {
			d.Lost, d.Err = e.Lost, e.Err
			continue
		}
		d.ChannelRepairPending, d.TPCRepairPending, d.UnrepairableMemory = e.ChannelRepairPending, e.TPCRepairPending, e.UnrepairableMemory
		for _, sig := range e.Unsupported {
			d.Unsupported = appendSignal(d.Unsupported, sig)
		}
		d.ReadErr = joinErr(d.ReadErr, e.ReadErr)
	}
	return out
}
