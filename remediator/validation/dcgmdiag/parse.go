package dcgmdiag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Status is a result's status.
type Status int

const (
	// StatusUnknown is a status kubemedic does not know: no answer.
	StatusUnknown Status = iota
	StatusPass
	StatusFail
	// StatusWarn passed with a warning.
	StatusWarn
	// StatusSkip did not run.
	StatusSkip
)

func (s Status) String() string {
	switch s {
	case StatusPass:
		return "Pass"
	case StatusFail:
		return "Fail"
	case StatusWarn:
		return "Warn"
	case StatusSkip:
		return "Skip"
	}
	return "Unknown"
}

// parseStatus reads DCGM's status words: PASS, Pass, FAIL, Fail, WARN,
// Warn, SKIPPED, Skip, Not Run (3.x writes upper case, 4.x mixed case).
func parseStatus(s string) Status {
	switch strings.ToLower(strings.Join(strings.Fields(s), " ")) {
	case "pass", "passed":
		return StatusPass
	case "fail", "failed":
		return StatusFail
	case "warn", "warning":
		return StatusWarn
	case "skip", "skipped", "not run", "notrun":
		return StatusSkip
	}
	return StatusUnknown
}

// Result is one test's verdict on one entity.
type Result struct {
	// Test is the test's name as DCGM gives it: "memory", "software"
	// (4.x); "Denylist", "GPU Memory" (3.x).
	Test     string
	Category string
	// GPU is DCGM's GPU id; -1 when the entity is not a GPU (Entity then
	// names its group, e.g. "CPU", "NvSwitch").
	GPU    int
	Entity string
	Status Status
	// RawStatus is the status as DCGM wrote it.
	RawStatus string
	// Warnings are what DCGM said went wrong; Info what it measured.
	Warnings []string
	Info     []string
}

// Diag is one dcgmi diag -j document.
type Diag struct {
	// Version is DCGM's, Driver the NVIDIA driver's, as the document
	// says them ("" when it does not).
	Version, Driver string
	// RuntimeError is DCGM's error when the diagnostic could not run.
	RuntimeError string
	Results      []Result
	// FailedSummaries are tests whose test_summary (4.x) says Fail.
	FailedSummaries []string
	// Serials are the boards' serial numbers by DCGM GPU id (4.x
	// entity_groups), when DCGM read them.
	Serials map[int]string
}

type document struct {
	V3           *body         `json:"DCGM GPU Diagnostic"`
	V4           *body         `json:"DCGM Diagnostic"`
	EntityGroups []entityGroup `json:"entity_groups"`
	Metadata     *metadata     `json:"metadata"`
}

type body struct {
	Categories   []*category `json:"test_categories"`
	Version      string      `json:"version"`
	Driver       string      `json:"Driver Version Detected"`
	RuntimeError string      `json:"runtime_error"`
}

type metadata struct {
	Version string `json:"version"`
	Driver  string `json:"Driver Version Detected"`
}

type category struct {
	Category string  `json:"category"`
	Tests    []*test `json:"tests"`
}

type test struct {
	Name    string    `json:"name"`
	Results []*result `json:"results"`
	Summary *struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

type result struct {
	GPUIDs      json.RawMessage `json:"gpu_ids"`
	GPUID       json.RawMessage `json:"gpu_id"`
	EntityGroup string          `json:"entity_group"`
	EntityID    *int            `json:"entity_id"`
	Status      *string         `json:"status"`
	Warnings    json.RawMessage `json:"warnings"`
	Info        json.RawMessage `json:"info"`
}

type entityGroup struct {
	Group    string `json:"entity_group"`
	Entities []struct {
		EntityID *int   `json:"entity_id"`
		Serial   string `json:"serial_num"`
	} `json:"entities"`
}

// Parse reads dcgmi diag -j's output (its stdout). Errors say what is
// wrong and where: no document, a document cut short, a result without a
// status or a GPU.
func Parse(out []byte) (Diag, error) {
	doc, line, ok := documentStart(out)
	if !ok {
		return Diag{}, fmt.Errorf("no JSON document in the output (%s)", describe(out))
	}
	var d document
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&d); err != nil {
		return Diag{}, jsonError(err, doc, line)
	}
	b := d.V4
	if b == nil {
		b = d.V3
	}
	if b == nil {
		return Diag{}, errors.New(`the document has neither "DCGM Diagnostic" (DCGM 4) nor "DCGM GPU Diagnostic" (DCGM 3)`)
	}
	diag := Diag{Version: b.Version, Driver: b.Driver, RuntimeError: strings.TrimSpace(b.RuntimeError)}
	if m := d.Metadata; m != nil {
		diag.Version, diag.Driver = firstOf(m.Version, diag.Version), firstOf(m.Driver, diag.Driver)
	}
	for ci, c := range b.Categories {
		if c == nil {
			continue
		}
		for ti, t := range c.Tests {
			if t == nil {
				// DCGM 3.1 writes null between its deployment tests.
				continue
			}
			at := fmt.Sprintf("test_categories[%d].tests[%d]", ci, ti)
			if strings.TrimSpace(t.Name) == "" {
				return Diag{}, fmt.Errorf("%s has no name", at)
			}
			for ri, r := range t.Results {
				if r == nil {
					continue
				}
				rs, err := results(r, t.Name, c.Category)
				if err != nil {
					return Diag{}, fmt.Errorf("%s (%s) results[%d]: %w", at, t.Name, ri, err)
				}
				diag.Results = append(diag.Results, rs...)
			}
			if t.Summary != nil && parseStatus(t.Summary.Status) == StatusFail {
				diag.FailedSummaries = append(diag.FailedSummaries, t.Name)
			}
		}
	}
	for _, g := range d.EntityGroups {
		if !strings.EqualFold(g.Group, "GPU") {
			continue
		}
		for _, e := range g.Entities {
			if e.EntityID == nil || !realSerial(e.Serial) {
				continue
			}
			if diag.Serials == nil {
				diag.Serials = map[int]string{}
			}
			diag.Serials[*e.EntityID] = strings.TrimSpace(e.Serial)
		}
	}
	if len(diag.Results) == 0 && diag.RuntimeError == "" {
		return Diag{}, errors.New("the document has no test results and no runtime_error")
	}
	return diag, nil
}

// results reads one result: one per GPU of a 3.x gpu_ids list.
func results(r *result, testName, cat string) ([]Result, error) {
	if r.Status == nil || strings.TrimSpace(*r.Status) == "" {
		return nil, errors.New("no status")
	}
	warnings, err := texts(r.Warnings)
	if err != nil {
		return nil, fmt.Errorf("warnings: %w", err)
	}
	info, err := texts(r.Info)
	if err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	base := Result{Test: testName, Category: cat, Status: parseStatus(*r.Status), RawStatus: *r.Status, Warnings: warnings, Info: info, Entity: "GPU"}
	switch {
	case r.EntityID != nil:
		base.GPU = *r.EntityID
		if g := strings.TrimSpace(r.EntityGroup); g != "" && !strings.EqualFold(g, "GPU") {
			base.GPU, base.Entity = -1, fmt.Sprintf("%s %d", g, *r.EntityID)
		}
		return []Result{base}, nil
	case len(r.GPUIDs) > 0 || len(r.GPUID) > 0:
		raw := r.GPUIDs
		if len(raw) == 0 {
			raw = r.GPUID
		}
		ids, err := gpuIDs(raw)
		if err != nil {
			return nil, err
		}
		out := make([]Result, len(ids))
		for i, id := range ids {
			out[i] = base
			out[i].GPU = id
		}
		return out, nil
	}
	return nil, errors.New("no entity_id, gpu_ids or gpu_id: the result names no GPU")
}

// gpuIDs reads gpu_ids: a number, or a string of comma-separated numbers.
func gpuIDs(raw json.RawMessage) ([]int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return []int{n}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("gpu_ids %s is neither a number nor a list of numbers", raw)
	}
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 0 {
			return nil, fmt.Errorf("gpu_ids %q: %q is not a GPU id", s, f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// texts reads warnings or info: a string, a list of strings, or a list
// of {"warning": ...} objects (DCGM 4).
func texts(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return nonEmpty([]string{s}), nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%.60s is neither text nor a list", raw)
	}
	var out []string
	for _, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err == nil {
			out = append(out, s)
			continue
		}
		var w struct {
			Warning string `json:"warning"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(it, &w); err != nil {
			return nil, fmt.Errorf("%.60s is neither text nor a warning", it)
		}
		out = append(out, firstOf(w.Warning, w.Message))
	}
	return nonEmpty(out), nil
}

func nonEmpty(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstOf(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return strings.TrimSpace(a)
	}
	return strings.TrimSpace(b)
}

// realSerial: DCGM writes "<<<NOT_SUPPORTED>>>" (and nvidia-smi "[N/A]")
// for a board without a readable serial.
func realSerial(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !strings.HasPrefix(s, "<<<") && !strings.HasPrefix(s, "[") && !strings.EqualFold(s, "N/A")
}

// documentStart is the output from the first line that begins with '{'
// (after blanks), and that line's number (1-based).
func documentStart(out []byte) (doc []byte, line int, ok bool) {
	off := 0
	for n := 1; off < len(out); n++ {
		end := bytes.IndexByte(out[off:], '\n')
		l := out[off:]
		if end >= 0 {
			l = out[off : off+end]
		}
		if t := bytes.TrimLeft(l, " \t\r"); len(t) > 0 && t[0] == '{' {
			return out[off+len(l)-len(t):], n, true
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return nil, 0, false
}

// jsonError says where a document breaks: a truncated one "ends early".
func jsonError(err error, doc []byte, firstLine int) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the JSON document ends early, at line %d: the output is truncated", firstLine+bytes.Count(doc, []byte("\n")))
	case errors.As(err, &se):
		return fmt.Errorf("the JSON document is malformed at line %d: %v", firstLine+bytes.Count(doc[:min(int(se.Offset), len(doc))], []byte("\n")), err)
	case errors.As(err, &te):
		return fmt.Errorf("the JSON document has %s where %s belongs (line %d): %v", te.Value, te.Field, firstLine+bytes.Count(doc[:min(int(te.Offset), len(doc))], []byte("\n")), err)
	}
	return fmt.Errorf("the JSON document: %w", err)
}

// describe is a short account of output that has no document.
func describe(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return "the output is empty"
	}
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 160 {
		line = line[:160] + "..."
	}
	return "it begins " + strconv.Quote(line)
}
