package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/host"
)

// The nvidia-smi queries. The order of the fields is what the parsers
// expect.
var (
	// smiBaseFields are the --query-gpu fields both checks read.
	smiBaseFields = []string{"index", "pci.bus_id", "uuid", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending", "retired_pages.sbe", "retired_pages.dbe"}
	smiFormat     = "--format=csv,noheader"
	smiQueryRemap = []string{
		"--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable",
		smiFormat,
	}
	// smiQueryECC is -q's ECC section alone, read only for the verdict
	// signals that have no --query-gpu field (channel/TPC repair pending,
	// unrepairable memory): nvidia-smi 580 prints them only in -q and
	// -q -x. It is text because nvidia-smi refuses -d with -x: driver
	// 580.159.04 answers `-q -x -d ECC` with "Invalid combination of input
	// arguments: --display/-d flags can not be combined with
	// -x/--xml-format flags." and its -h says of -d "Doesn't work with -u
	// or -x flags". The whole -q -x costs about 4x the NVML floor in CPU
	// (docs/detectors.md, "Measurements").
	smiQueryECC = []string{"-q", "-d", "ECC"}
)

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

// smiRecoveryGate is the verdict field whose rejection shows an
// nvidia-smi too old for the -q -d ECC verdict lines: channel and TPC
// repair pending need NVML 580, and every nvidia-smi that prints them
// knows gpu_recovery_action (and -d ECC, which is far older).
const smiRecoveryGate = "gpu_recovery_action"

// smiWaitDelay bounds how long we wait for nvidia-smi's output pipes to
// close after it exits or is killed: a child stuck in D state cannot be
// killed and would otherwise keep Wait blocked.
const smiWaitDelay = time.Second

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

func appendSignal(list []string, signal string) []string {
	if slices.Contains(list, signal) {
		return list
	}
	return append(list, signal)
}

type smiOutput struct {
	output   []byte
	exitCode int
}

// run runs nvidia-smi with args. The child reads /dev/null and writes into
// pipes of its own (never our stdout or stderr, which NPD reads: a hung
// child holding them wedges NPD, its issue #1050); it runs in its own
// process group, which is killed at the timeout, and Wait gives up on the
// pipes smiWaitDelay later.
func (s *SMI) run(ctx context.Context, path string, args ...string) (smiOutput, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = nil // the null device
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = smiWaitDelay
	err := cmd.Run()
	if ctx.Err() != nil {
		if parent.Err() != nil {
			return smiOutput{}, fmt.Errorf("nvidia-smi: %w", parent.Err())
		}
		return smiOutput{}, fmt.Errorf("nvidia-smi: no answer in %s", s.Timeout)
	}
	out := smiOutput{output: append(stdout.Bytes(), stderr.Bytes()...)}
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: it exited 0 but left something holding its
		// pipes; what it wrote is complete.
	case errors.As(err, &exitErr):
		out.exitCode = exitErr.ExitCode()
	default:
		return smiOutput{}, fmt.Errorf("nvidia-smi: %w", err)
	}
	return out, nil
}

// smiDirs are where nvidia-smi lives on GPU nodes when it is not on PATH:
// the distribution's driver packages, the GPU operator's driver container
// (/run/nvidia/driver) and its toolkit (/usr/local/nvidia).
var smiDirs = []string{"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/run/nvidia/driver/usr/bin", "/bin"}

// findSMI resolves the --nvidia-smi flag: a path with a slash is used as
// given; a bare name is looked up on PATH, then in smiDirs under root.
func findSMI(name string, root host.Root) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("nvidia-smi: %w", err)
		}
		return name, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range smiDirs {
		p := root.Path(dir + "/" + name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if name == "nvidia-smi" {
		return "", fmt.Errorf("nvidia-smi: not found on PATH or under %s", root.Path("/"))
	}
	return "", fmt.Errorf("nvidia-smi: %s not found on PATH or under %s", name, root.Path("/"))
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

func joinErr(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
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
		for _, f := range smiFatal {
			if strings.Contains(lower, f) {
				return nil, errors.New(line)
			}
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

// fieldReader reads nvidia-smi CSV fields and remembers what they say
// about the device: "[N/A]" and "[Not Supported]" are N/A (unknown, not a
// fault), "[GPU is lost]" marks the device lost, and other bracketed values
// ("[Unknown Error]") are read errors.
type fieldReader struct {
	lost    bool
	readErr []string
	bad     error
}

// unsupported reports a value that says the GPU or driver lacks the
// field: "[N/A]", "[Not Supported]", and N/A as -q writes it.
func (r *fieldReader) unsupported(v string) bool {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(v), "[]")) {
	case "n/a", "not supported", "not available":
		return true
	}
	return false
}

func (r *fieldReader) special(name, v string) bool {
	if !strings.HasPrefix(v, "[") && v != "N/A" {
		return false
	}
	switch strings.ToLower(strings.Trim(v, "[]")) {
	case "n/a", "not supported", "not available":
	case "gpu is lost":
		r.lost = true
	default:
		r.readErr = append(r.readErr, name+": "+v)
	}
	return true
}

func (r *fieldReader) count(name, v string) Count {
	if r.special(name, v) {
		return Count{}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		r.fail(fmt.Errorf("%s: bad number %q", name, v))
		return Count{}
	}
	return Count{Value: n, Known: true}
}

func (r *fieldReader) flag(name, v string) Flag {
	if r.special(name, v) {
		return Flag{}
	}
	switch strings.ToLower(v) {
	case "yes", "1", "true", "enabled":
		return Flag{Value: true, Known: true}
	case "no", "0", "false", "disabled":
		return Flag{Known: true}
	}
	r.fail(fmt.Errorf("%s: bad value %q", name, v))
	return Flag{}
}

// verdictFlag reads a verdict flag: Yes or No. Unlike flag, any other
// value is a read error of this device, not a failure of the whole output,
// so that a value this parser has not seen loses no other evidence.
func (r *fieldReader) verdictFlag(name, v string) Flag {
	v = strings.TrimSpace(v)
	if r.special(name, v) {
		return Flag{}
	}
	switch strings.ToLower(v) {
	case "yes":
		return Flag{Value: true, Known: true}
	case "no":
		return Flag{Known: true}
	}
	r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
	return Flag{}
}

// verdictCount reads a verdict counter, as verdictFlag.
func (r *fieldReader) verdictCount(name, v string) Count {
	if r.special(name, v) {
		return Count{}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
		return Count{}
	}
	return Count{Value: n, Known: true}
}

// recovery reads gpu_recovery_action. The real H100 printed "None"; the
// other names and numbers are gpuaction's (NVIDIA's names, matched without
// case, spaces, underscores or dashes). Any other value is a read error,
// never a guessed action.
func (r *fieldReader) recovery(name, v string) Recovery {
	if r.special(name, v) {
		return Recovery{}
	}
	if a, ok := gpuaction.Parse(v); ok {
		return Recovery{Action: a, Known: true}
	}
	r.readErr = append(r.readErr, fmt.Sprintf("%s: unexpected value %q", name, v))
	return Recovery{}
}

func (r *fieldReader) fail(err error) {
	if r.bad == nil {
		r.bad = err
	}
}

func (r *fieldReader) apply(d *Device) {
	if r.lost {
		d.Lost, d.Err = true, "GPU is lost"
	}
	d.ReadErr = strings.Join(r.readErr, "; ")
}
