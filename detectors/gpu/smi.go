package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// The nvidia-smi queries. The order of the fields is what the parsers
// expect.
var (
	smiQueryGPU = []string{
		"--query-gpu=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe",
		"--format=csv,noheader",
	}
	smiQueryRemap = []string{
		"--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable",
		"--format=csv,noheader",
	}
)

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
}

// Name implements Backend.
func (*SMI) Name() string { return "nvidia-smi" }

// Devices implements Backend. The remapped-rows query runs only for
// memory; when it fails while the GPU query worked, the devices get a read
// error rather than the whole call failing.
func (s *SMI) Devices(ctx context.Context, memory bool) ([]Device, error) {
	path, err := findSMI(s.Path, s.Root)
	if err != nil {
		return nil, err
	}
	out, err := s.run(ctx, path, smiQueryGPU...)
	if err != nil {
		return nil, err
	}
	devs, err := ParseQueryGPU(out.output, out.exitCode)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	if !memory || len(devs) == 0 {
		return devs, nil
	}
	var rows []Device
	rout, err := s.run(ctx, path, smiQueryRemap...)
	if err == nil {
		rows, err = ParseRemappedRows(rout.output, rout.exitCode)
	}
	return mergeRemap(devs, rows, err), nil
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

// mergeRemap copies the remapped-rows answers into the devices by bus ID.
// When the query failed (remapErr), every usable device gets a read error.
// A device with no row gets nothing: nvidia-smi lists no rows, or N/A, for
// GPUs without row remapping (pre-Ampere).
func mergeRemap(devs, rows []Device, remapErr error) []Device {
	out := append([]Device(nil), devs...)
	byBus := map[string]Device{}
	for _, r := range rows {
		byBus[r.BusID] = r
	}
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

// ParseQueryGPU parses the output (stdout then stderr) of the --query-gpu
// query in smiQueryGPU, with nvidia-smi's exit code. Error lines
// ("Unable to determine the device handle for GPU 0000:02:00.0: GPU is
// lost...") become devices that are lost or unusable, with their bus ID;
// "No devices were found" is an empty list; a driver failure, an
// unrecognised line or a non-zero exit that the output does not explain is
// an error.
func ParseQueryGPU(out []byte, exitCode int) ([]Device, error) {
	return parseSMI(out, exitCode, 7, false, func(f []string) (Device, error) {
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
