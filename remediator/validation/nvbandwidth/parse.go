package nvbandwidth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubemedic/kubemedic/internal/smicsv"
)

// Status of a test in the output.
type Status string

const (
	// Passed: the matrix is complete.
	Passed Status = "Passed"
	// Waived: nvbandwidth did not run it (no peer access, one GPU).
	Waived Status = "Waived"
	// Failed: it started and aborted; Test.Error says how.
	Failed Status = "Failed"
	// Incomplete: the output ends before the test's matrix does.
	Incomplete Status = "Incomplete"
)

// Cell is one matrix entry; OK is false for N/A.
type Cell struct {
	GBps float64
	OK   bool
}

// Test is one testcase's result.
type Test struct {
	Name        string
	Status      Status
	Description string
	// Matrix is rows × columns; row and column i are device i (the CPU
	// is the one row of the host tests).
	Matrix [][]Cell
	// Error is what nvbandwidth said when the test aborted.
	Error string
	// Line is where the test starts in the text output (0 for JSON).
	Line int
}

// Device is one GPU as nvbandwidth lists it.
type Device struct {
	Index int
	Name  string
	// BusID is normalised ("0000:34:00.0"); "" before v0.7.
	BusID string
}

// Run is one nvbandwidth run.
type Run struct {
	Version, Driver string
	Devices         []Device
	Tests           []*Test
}

// Test is the run's test of that name, or nil.
func (r Run) Test(name string) *Test {
	for _, t := range r.Tests {
		if t.Name == name {
			return t
		}
	}
	return nil
}

var (
	deviceRe  = regexp.MustCompile(`^Device (\d+): (.+?)(?: \(([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)\))?$`)
	runningRe = regexp.MustCompile(`^Running (\S+)\.$`)
	waivingRe = regexp.MustCompile(`^Waiving (\S+)\.$`)
	sumRe     = regexp.MustCompile(`^SUM (\S+) (\S+)$`)
	descRe    = regexp.MustCompile(`^(memcpy|memory) .*\((GB/s|ns)\)$`)
)

// Parse reads nvbandwidth's output: the -j document when a line begins
// with '{', else the text.
func Parse(out []byte) (Run, error) {
	if doc, ok := jsonStart(out); ok {
		return parseJSON(doc)
	}
	return parseText(out)
}

func parseText(out []byte) (Run, error) {
	var run Run
	var cur *Test
	inMatrix, closed := false, false
	var cols int
	last := ""
	for n, raw := range strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n") {
		n++
		line := strings.TrimSpace(raw)
		if line == "" {
			if cur != nil && inMatrix && len(cur.Matrix) > 0 {
				closed, inMatrix = true, false
			}
			continue
		}
		last = line
		switch {
		case strings.HasPrefix(line, "nvbandwidth Version:"):
			run.Version = strings.TrimSpace(strings.TrimPrefix(line, "nvbandwidth Version:"))
			continue
		case strings.HasPrefix(line, "Driver Version:"):
			run.Driver = strings.TrimSpace(strings.TrimPrefix(line, "Driver Version:"))
			continue
		case deviceRe.MatchString(line) && cur == nil:
			m := deviceRe.FindStringSubmatch(line)
			d := Device{Name: m[2]}
			d.Index, _ = strconv.Atoi(m[1])
			if m[3] != "" {
				id, ok := smicsv.NormalizeBusID(m[3] + ".0")
				if !ok {
					return Run{}, fmt.Errorf("line %d: device %d's bus ID %q is not a PCI address", n, d.Index, m[3])
				}
				d.BusID = id
			}
			if d.Index != len(run.Devices) {
				return Run{}, fmt.Errorf("line %d: device %d listed after %d devices", n, d.Index, len(run.Devices))
			}
			run.Devices = append(run.Devices, d)
			continue
		}
		if m := runningRe.FindStringSubmatch(line); m != nil {
			finish(cur, closed)
			cur = &Test{Name: m[1], Line: n}
			run.Tests = append(run.Tests, cur)
			inMatrix, closed = false, false
			continue
		}
		if m := waivingRe.FindStringSubmatch(line); m != nil {
			finish(cur, closed)
			cur = nil
			run.Tests = append(run.Tests, &Test{Name: m[1], Status: Waived, Line: n})
			continue
		}
		if m := sumRe.FindStringSubmatch(line); m != nil && cur != nil {
			if cur.Name == "" {
				cur.Name = m[1]
			}
			if m[1] != cur.Name {
				return Run{}, fmt.Errorf("line %d: SUM of %s inside %s", n, m[1], cur.Name)
			}
			if len(cur.Matrix) == 0 {
				return Run{}, fmt.Errorf("line %d: SUM of %s without its matrix", n, cur.Name)
			}
			closed, inMatrix = true, false
			finish(cur, closed)
			cur = nil
			continue
		}
		if descRe.MatchString(line) && (cur == nil || (len(cur.Matrix) == 0 && cur.Description == "")) {
			if cur == nil {
				// Output that begins mid-way (a run's tail, or "..."
				// in a post): a matrix whose SUM line names it.
				finish(cur, closed)
				cur = &Test{Line: n}
				run.Tests = append(run.Tests, cur)
			}
			cur.Description, cols, inMatrix, closed = line, 0, true, false
			continue
		}
		if cur == nil || !inMatrix {
			if cur != nil && !closed {
				// An abort inside a test: " Invalid value when
				// checking the pattern ...", "ASSERT in expression ...".
				cur.Error = strings.TrimPrefix(cur.Error+"; "+line, "; ")
			}
			continue
		}
		f := strings.Fields(line)
		if cols == 0 {
			for i, x := range f {
				if v, err := strconv.Atoi(x); err != nil || v != i {
					return Run{}, fmt.Errorf("line %d: %s's column header %q does not number the columns from 0", n, nameOf(cur), smicsv.Clip(line))
				}
			}
			cols = len(f)
			continue
		}
		v, err := strconv.Atoi(f[0])
		if err != nil {
			// Not a row: the test aborted inside its matrix.
			cur.Error = strings.TrimPrefix(cur.Error+"; "+line, "; ")
			inMatrix = false
			continue
		}
		if v != len(cur.Matrix) {
			return Run{}, fmt.Errorf("line %d: %s's row %d starts with index %d: %q", n, nameOf(cur), len(cur.Matrix), v, smicsv.Clip(line))
		}
		if len(f) != cols+1 {
			return Run{}, fmt.Errorf("line %d: %s's row %d has %d values, the header %d: %q", n, nameOf(cur), len(cur.Matrix), len(f)-1, cols, smicsv.Clip(line))
		}
		row := make([]Cell, cols)
		for i, x := range f[1:] {
			c, err := cell(x)
			if err != nil {
				return Run{}, fmt.Errorf("line %d: %s row %d column %d: %w", n, nameOf(cur), len(cur.Matrix), i, err)
			}
			row[i] = c
		}
		cur.Matrix = append(cur.Matrix, row)
	}
	finish(cur, closed)
	if len(run.Tests) == 0 {
		return Run{}, fmt.Errorf("no test ran (the output's last line: %q)", smicsv.Clip(last))
	}
	return run, nil
}

func nameOf(t *Test) string {
	if t.Name == "" {
		return "a test"
	}
	return t.Name
}

// finish sets the status of the test the output has left.
func finish(t *Test, closed bool) {
	if t == nil || t.Status != "" {
		return
	}
	switch {
	case t.Error != "":
		t.Status = Failed
	case closed && len(t.Matrix) > 0:
		t.Status = Passed
	default:
		t.Status = Incomplete
	}
}

func cell(s string) (Cell, error) {
	if s == "N/A" {
		return Cell{}, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != v || v > 1e9 {
		return Cell{}, fmt.Errorf("%q is not a bandwidth", s)
	}
	return Cell{GBps: v, OK: true}, nil
}

// jsonStart is the output from the first line that begins with '{'.
func jsonStart(out []byte) ([]byte, bool) {
	for off := 0; off < len(out); {
		end := bytes.IndexByte(out[off:], '\n')
		l := out[off:]
		if end >= 0 {
			l = out[off : off+end]
		}
		if t := bytes.TrimLeft(l, " \t\r"); len(t) > 0 && t[0] == '{' {
			return out[off+len(l)-len(t):], true
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return nil, false
}

type jsonDoc struct {
	NV *struct {
		Driver    string `json:"Driver Version"`
		Version   string `json:"version"`
		Testcases []*struct {
			Name        string     `json:"name"`
			Status      string     `json:"status"`
			Description string     `json:"bandwidth_description"`
			Matrix      [][]string `json:"bandwidth_matrix"`
			Error       string     `json:"error"`
		} `json:"testcases"`
	} `json:"nvbandwidth"`
}

func parseJSON(doc []byte) (Run, error) {
	var d jsonDoc
	if err := json.NewDecoder(bytes.NewReader(doc)).Decode(&d); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Run{}, fmt.Errorf("the -j document ends early, after %d lines: the output is truncated", bytes.Count(doc, []byte("\n"))+1)
		}
		return Run{}, fmt.Errorf("the -j document: %w", err)
	}
	if d.NV == nil {
		return Run{}, errors.New(`the -j document has no "nvbandwidth" object`)
	}
	run := Run{Version: d.NV.Version, Driver: d.NV.Driver}
	for i, tc := range d.NV.Testcases {
		if tc == nil || tc.Name == "" {
			return Run{}, fmt.Errorf("testcases[%d] has no name", i)
		}
		t := &Test{Name: tc.Name, Description: strings.TrimSpace(tc.Description)}
		switch tc.Status {
		case "Passed":
			t.Status = Passed
			if len(tc.Matrix) == 0 {
				return Run{}, fmt.Errorf("testcases[%d] (%s) passed without a bandwidth_matrix", i, tc.Name)
			}
			for r, row := range tc.Matrix {
				if len(row) != len(tc.Matrix[0]) {
					return Run{}, fmt.Errorf("testcases[%d] (%s) bandwidth_matrix row %d has %d values, row 0 %d", i, tc.Name, r, len(row), len(tc.Matrix[0]))
				}
				cells := make([]Cell, len(row))
				for c, x := range row {
					v, err := cell(strings.TrimSpace(x))
					if err != nil {
						return Run{}, fmt.Errorf("testcases[%d] (%s) bandwidth_matrix[%d][%d]: %w", i, tc.Name, r, c, err)
					}
					cells[c] = v
				}
				t.Matrix = append(t.Matrix, cells)
			}
		case "Waived":
			t.Status = Waived
		default:
			t.Status, t.Error = Failed, strings.TrimSpace(tc.Status+" "+tc.Error)
		}
		run.Tests = append(run.Tests, t)
	}
	if len(run.Tests) == 0 {
		return Run{}, errors.New("the -j document has no testcases")
	}
	return run, nil
}
