package nccltests

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubemedic/kubemedic/internal/smicsv"
)

// Device is one rank's GPU as the "# Using devices" lines list it.
type Device struct {
	Rank  int
	Host  string
	Index int
	// BusID is the normalised PCI address when nccl-tests printed one
	// ("[0000:19:00]"); older versions print only the bus ("[0x19]").
	BusID string
	Name  string
}

// Side is one half of a row: out of place or in place.
type Side struct {
	TimeUS, AlgBW, BusBW float64
	// Wrong is the #wrong count; WrongKnown is false for N/A (no
	// validation) and for the old table's error column.
	Wrong      int64
	WrongKnown bool
}

// Row is one message size.
type Row struct {
	Size, Count         int64
	Type, Op            string
	OutOfPlace, InPlace Side
	// Line is the row's line in the output, 1-based.
	Line int
}

// Run is one all_reduce_perf run.
type Run struct {
	// TestsVersion is nccl-tests' ("2.17.6"), NCCLVersion NCCL's
	// ("2.19.3+cuda12.2"), when printed.
	TestsVersion, NCCLVersion string
	Devices                   []Device
	Rows                      []Row
	AvgBusBW                  float64
	// OutOfBounds is the count of "# Out of bounds values", and
	// OutOfBoundsOK whether nccl-tests called it OK.
	OutOfBounds   int64
	OutOfBoundsOK bool
}

var (
	deviceRe = regexp.MustCompile(`^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s+(.+?)\s*$`)
	oobRe    = regexp.MustCompile(`^#\s*Out of bounds values\s*:\s*(\d+)\s+(\S+)`)
	avgRe    = regexp.MustCompile(`^#\s*Avg bus bandwidth\s*:\s*(\S+)`)
	testsRe  = regexp.MustCompile(`^#\s*nccl-tests version\s+(\S+)`)
	ncclRe   = regexp.MustCompile(`^NCCL version\s+(\S+)`)
)

// Parse reads all_reduce_perf's output. Errors say which line, or what
// is missing.
func Parse(out []byte) (Run, error) {
	var run Run
	header, root := false, false
	avg := false
	lastLine := ""
	for n, raw := range strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		n++
		if line == "" {
			continue
		}
		lastLine = line
		if strings.HasPrefix(line, "#") {
			switch f := strings.Fields(strings.TrimLeft(line, "# ")); {
			case deviceRe.MatchString(line):
				d, err := device(deviceRe.FindStringSubmatch(line))
				if err != nil {
					return Run{}, fmt.Errorf("line %d: %w", n, err)
				}
				run.Devices = append(run.Devices, d)
			case len(f) > 4 && f[0] == "size" && f[1] == "count" && contains(f, "busbw"):
				header = true
				root = contains(f, "root")
			case testsRe.MatchString(line):
				run.TestsVersion = testsRe.FindStringSubmatch(line)[1]
			case oobRe.MatchString(line):
				m := oobRe.FindStringSubmatch(line)
				run.OutOfBounds, _ = strconv.ParseInt(m[1], 10, 64)
				run.OutOfBoundsOK = m[2] == "OK"
			case avgRe.MatchString(line):
				v, err := strconv.ParseFloat(avgRe.FindStringSubmatch(line)[1], 64)
				if err != nil {
					return Run{}, fmt.Errorf("line %d: average bus bandwidth %q is not a number", n, avgRe.FindStringSubmatch(line)[1])
				}
				run.AvgBusBW, avg = v, true
			}
			continue
		}
		if m := ncclRe.FindStringSubmatch(line); m != nil {
			run.NCCLVersion = m[1]
			continue
		}
		f := strings.Fields(line)
		if _, err := strconv.ParseInt(f[0], 10, 64); err != nil {
			// NCCL's own lines ("host:pid:tid [0] NCCL INFO ..."),
			// mpirun's: not the table's.
			continue
		}
		if !header {
			return Run{}, fmt.Errorf("line %d: a table row before the table's header: %q", n, smicsv.Clip(line))
		}
		if avg {
			return Run{}, fmt.Errorf("line %d: a table row after the average: %q", n, smicsv.Clip(line))
		}
		r, err := row(f, root)
		if err != nil {
			return Run{}, fmt.Errorf("line %d: %w: %q", n, err, smicsv.Clip(line))
		}
		r.Line = n
		run.Rows = append(run.Rows, r)
	}
	switch {
	case !header:
		return Run{}, fmt.Errorf("no table: the run ended before it measured anything (its last line: %q)", smicsv.Clip(lastLine))
	case len(run.Rows) == 0:
		return Run{}, fmt.Errorf("the table has no rows (its last line: %q)", smicsv.Clip(lastLine))
	case !avg:
		last := run.Rows[len(run.Rows)-1]
		return Run{}, fmt.Errorf("no \"# Avg bus bandwidth\" line after %d rows, the last at line %d (%s): the output is truncated, or the run died", len(run.Rows), last.Line, Size(last.Size))
	case len(run.Devices) == 0:
		return Run{}, errors.New(`no "# Using devices" list: the run does not say which GPUs it used`)
	}
	return run, nil
}

func contains(f []string, s string) bool {
	for _, x := range f {
		if x == s {
			return true
		}
	}
	return false
}

func device(m []string) (Device, error) {
	rank, _ := strconv.Atoi(m[1])
	idx, _ := strconv.Atoi(m[3])
	d := Device{Rank: rank, Host: m[2], Index: idx, Name: m[5]}
	// "0000:19:00" is domain:bus:device; the function is 0.
	if strings.Count(m[4], ":") == 2 {
		id, ok := smicsv.NormalizeBusID(m[4] + ".0")
		if !ok {
			return Device{}, fmt.Errorf("rank %d: bus ID [%s] is not a PCI address", rank, m[4])
		}
		d.BusID = id
	}
	return d, nil
}

// row reads the fields of one row: 13 with a root column (size count type
// redop root, then time algbw busbw #wrong twice), 12 without.
func row(f []string, root bool) (Row, error) {
	want := 12
	if root {
		want = 13
	}
	if len(f) != want {
		return Row{}, fmt.Errorf("%d fields, want %d", len(f), want)
	}
	var r Row
	var err error
	if r.Size, err = strconv.ParseInt(f[0], 10, 64); err != nil || r.Size < 0 {
		return Row{}, fmt.Errorf("size %q is not a byte count", f[0])
	}
	if r.Count, err = strconv.ParseInt(f[1], 10, 64); err != nil || r.Count < 0 {
		return Row{}, fmt.Errorf("count %q is not an element count", f[1])
	}
	r.Type, r.Op = f[2], f[3]
	rest := f[4:]
	if root {
		rest = f[5:]
	}
	if r.OutOfPlace, err = side(rest[:4], root); err != nil {
		return Row{}, fmt.Errorf("out of place: %w", err)
	}
	if r.InPlace, err = side(rest[4:], root); err != nil {
		return Row{}, fmt.Errorf("in place: %w", err)
	}
	return r, nil
}

func side(f []string, counted bool) (Side, error) {
	var s Side
	names := []string{"time", "algbw", "busbw"}
	for i, p := range []*float64{&s.TimeUS, &s.AlgBW, &s.BusBW} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 || v != v || v > 1e12 {
			return Side{}, fmt.Errorf("%s %q is not a number", names[i], f[i])
		}
		*p = v
	}
	if counted && f[3] != "N/A" {
		w, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || w < 0 {
			return Side{}, fmt.Errorf("#wrong %q is not a count", f[3])
		}
		s.Wrong, s.WrongKnown = w, true
	}
	return s, nil
}

// Size is a byte count as nccl-tests' -b and -e write it: "8 GiB",
// "128 MiB", "8 B".
func Size(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d %s", b/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d B", b)
}
