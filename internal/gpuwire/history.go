package gpuwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"
)

const (
	// Annotation on a Node holds its GPU history, the JSON that Encode
	// writes. kubemedic writes it; humans read it.
	Annotation = "kubemedic.io/gpu-history"
	// Version is the schema version Encode writes and Parse accepts.
	Version = 1
	// MaxEntries bounds the entries kept; Add drops the oldest beyond it.
	MaxEntries = 64
	// MaxBytes bounds the encoded history (16 KiB); Add drops the oldest
	// entries until it fits, so a node's annotations stay far below the API
	// server's 256 KiB limit.
	MaxBytes = 16 << 10

	// MaxName bounds object names (NodeOperation, policy, template) and
	// condition types; MaxWord bounds reasons and ECC kinds.
	MaxName = 253
	MaxWord = 128
	// maxStep bounds an operation's step index; maxXid an Xid number.
	maxStep = 1000
	maxXid  = 65535
)

// Outcome is how an operation ended.
type Outcome string

// The outcomes are the terminal NodeOperation phases.
const (
	Succeeded Outcome = "Succeeded"
	Failed    Outcome = "Failed"
	Skipped   Outcome = "Skipped"
)

// Kind says what an Entry records.
type Kind string

const (
	// KindFault: a GPU condition became true (Entry.Fault is set).
	KindFault Kind = "Fault"
	// KindOperation: a NodeOperation ended (Entry.Operation is set).
	KindOperation Kind = "Operation"
)

// Entry is one fault or one finished operation. Exactly one of Fault and
// Operation is set. Bus and UUID name the GPU, in normalised form (see
// NormalizeBus and GPUFromMessage); both empty means node-wide (a reboot,
// a fault that names no GPU).
type Entry struct {
	// Time is when the fault was seen or the operation ended, in UTC.
	Time      time.Time  `json:"time"`
	Bus       string     `json:"bus,omitempty"`
	UUID      string     `json:"uuid,omitempty"`
	Fault     *Fault     `json:"fault,omitempty"`
	Operation *Operation `json:"op,omitempty"`
}

// Fault is a GPU condition that became true.
type Fault struct {
	// Condition is the Node condition type, e.g. GPUXidError.
	Condition string `json:"condition"`
	// Reason is the effective reason (v1alpha1.EffectiveReason).
	Reason string `json:"reason,omitempty"`
	// Xid is the Xid number; 0 when unknown or not an Xid fault.
	Xid int `json:"xid,omitempty"`
	// ECC is the ECC kind (e.g. VolatileDBE, RowRemapFailed) when known.
	ECC string `json:"ecc,omitempty"`
}

// Operation is a NodeOperation that ended.
type Operation struct {
	// Name is the NodeOperation's name.
	Name string `json:"name"`
	// Policy is the RemediationPolicy that created it; empty for a manual one.
	Policy string `json:"policy,omitempty"`
	// Step is the index of its step in the policy's ladder.
	Step int `json:"step,omitempty"`
	// Operation is the operation run (the template name, e.g. reset-gpu).
	Operation string  `json:"operation"`
	Outcome   Outcome `json:"outcome"`
}

// History is a node's GPU history: Entries ordered by Time, oldest first,
// at most MaxEntries of them, encoding in at most MaxBytes. The zero value
// is an empty history.
type History struct {
	// Version is the schema version; Parse and Add set it to Version.
	Version int     `json:"v"`
	Entries []Entry `json:"entries,omitempty"`
}

// GPUKey identifies a GPU: by UUID when known, else by bus ID (a bus ID
// names a slot, and a reseat or a swap puts another card in it).
type GPUKey struct {
	UUID string
	Bus  string
}

func (k GPUKey) String() string {
	switch {
	case k.UUID != "" && k.Bus != "":
		return k.UUID + " (" + k.Bus + ")"
	case k.UUID != "":
		return k.UUID
	case k.Bus != "":
		return k.Bus
	}
	return "node"
}

// Kind says whether e records a fault or an operation; "" when it is
// neither or both (invalid).
func (e Entry) Kind() Kind {
	switch {
	case e.Fault != nil && e.Operation == nil:
		return KindFault
	case e.Operation != nil && e.Fault == nil:
		return KindOperation
	}
	return ""
}

// Key is the GPU the entry names.
func (e Entry) Key() GPUKey { return GPUKey{UUID: e.UUID, Bus: e.Bus} }

// Matches reports whether entry e is about the GPU k. Two UUIDs decide
// alone (the card may have moved); otherwise the bus IDs must be equal.
// An entry with only a bus ID thus counts for whichever card is at that
// bus: the conservative choice for an attempt cap.
func (k GPUKey) Matches(e Entry) bool {
	if k.UUID != "" && e.UUID != "" {
		return k.UUID == e.UUID
	}
	return k.Bus != "" && k.Bus == e.Bus
}

var (
	// busRe is the reset-gpu template's GPU_BUS_ID messageRegex in
	// policies/examples/operation-templates.yaml, verbatim (the tests check
	// it): the history names the GPU the reset acts on.
	busRe = regexp.MustCompile(`\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b`)
	// uuidRe is an NVIDIA GPU UUID as nvidia-smi and NVML print it.
	uuidRe = regexp.MustCompile(`\bGPU-[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b`)

	normalBusRe  = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	normalUUIDRe = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// GPUFromMessage returns the first PCI bus ID in a condition message,
// normalised (NormalizeBus), as the reset-gpu template extracts it, and the
// first GPU UUID, lower case after "GPU-". Either is "" when absent.
func GPUFromMessage(msg string) (bus, uuid string) {
	if m := busRe.FindStringSubmatch(msg); m != nil {
		bus = NormalizeBus(m[1])
	}
	if m := uuidRe.FindString(msg); m != "" {
		uuid = NormalizeUUID(m)
	}
	return bus, uuid
}

// NormalizeBus writes a bus ID (domain:bus:device.function) with a 4-digit
// domain (more digits only for a domain above ffff) in lower case:
// nvidia-smi's 00000000:3B:00.0 and the kernel's 0000:3b:00.0 are the same
// GPU. It returns "" for anything else.
func NormalizeBus(s string) string {
	if !busRe.MatchString(s) || len(busRe.FindString(s)) != len(s) {
		return ""
	}
	var domain string
	for i := range s {
		if s[i] == ':' {
			domain, s = s[:i], s[i:]
			break
		}
	}
	d, err := strconv.ParseUint(domain, 16, 32)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%04x%s", d, bytes.ToLower([]byte(s)))
}

// NormalizeUUID writes a GPU UUID with lower-case hex digits after "GPU-",
// as Entry.UUID holds it. It returns "" for anything else.
func NormalizeUUID(s string) string {
	if !uuidRe.MatchString(s) || len(uuidRe.FindString(s)) != len(s) {
		return ""
	}
	return "GPU-" + string(bytes.ToLower([]byte(s[len("GPU-"):])))
}

// Parse decodes the annotation strictly (see the package doc); "" is an
// empty history. Errors name the field, e.g. entries[2].bus.
func Parse(annotation string) (History, error) {
	if annotation == "" {
		return History{Version: Version}, nil
	}
	var h History
	dec := json.NewDecoder(bytes.NewReader([]byte(annotation)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return History{}, fmt.Errorf("decode %s: %w", Annotation, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return History{}, fmt.Errorf("decode %s: data after the JSON object", Annotation)
	}
	if len(h.Entries) == 0 {
		h.Entries = nil
	}
	for i := range h.Entries {
		h.Entries[i].Time = h.Entries[i].Time.UTC()
	}
	if err := h.validate(); err != nil {
		return History{}, fmt.Errorf("decode %s: %w", Annotation, err)
	}
	return h, nil
}

// Encode is the annotation's value. It fails on a History that Parse would
// reject (a zero Version is taken as Version), so what it writes always
// parses back to the same History.
func (h History) Encode() (string, error) {
	if h.Version == 0 {
		h.Version = Version
	}
	if len(h.Entries) == 0 {
		h.Entries = nil
	}
	if err := h.validate(); err != nil {
		return "", fmt.Errorf("encode %s: %w", Annotation, err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", Annotation, err)
	}
	if len(b) > MaxBytes {
		return "", fmt.Errorf("encode %s: %d bytes, more than %d", Annotation, len(b), MaxBytes)
	}
	return string(b), nil
}

func (h History) validate() error {
	if h.Version != Version {
		return fmt.Errorf("v: %d, want %d", h.Version, Version)
	}
	if len(h.Entries) > MaxEntries {
		return fmt.Errorf("entries: %d, more than %d", len(h.Entries), MaxEntries)
	}
	for i, e := range h.Entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("entries[%d].%w", i, err)
		}
		if i > 0 && e.Time.Before(h.Entries[i-1].Time) {
			return fmt.Errorf("entries[%d].time: %s is before entries[%d]'s %s", i, e.Time.Format(time.RFC3339Nano), i-1, h.Entries[i-1].Time.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// Validate says what is wrong with an entry, naming the field; nil when it
// is one Encode accepts.
func (e Entry) Validate() error {
	if e.Time.IsZero() || e.Time.Location() != time.UTC || e.Time.Year() > 9999 || e.Time.Year() < 0 {
		return fmt.Errorf("time: %q must be a UTC time between years 0 and 9999", e.Time.String())
	}
	if e.Bus != "" && (!normalBusRe.MatchString(e.Bus) || NormalizeBus(e.Bus) != e.Bus) {
		return fmt.Errorf("bus: %q is not a normalised PCI bus ID like 0000:3b:00.0", e.Bus)
	}
	if e.UUID != "" && !normalUUIDRe.MatchString(e.UUID) {
		return fmt.Errorf("uuid: %q is not a lower-case GPU UUID like GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", e.UUID)
	}
	switch e.Kind() {
	case KindFault:
		f := e.Fault
		if err := bounded("fault.condition", f.Condition, MaxName, true); err != nil {
			return err
		}
		if err := bounded("fault.reason", f.Reason, MaxWord, false); err != nil {
			return err
		}
		if err := bounded("fault.ecc", f.ECC, MaxWord, false); err != nil {
			return err
		}
		if f.Xid < 0 || f.Xid > maxXid {
			return fmt.Errorf("fault.xid: %d is not between 0 and %d", f.Xid, maxXid)
		}
	case KindOperation:
		o := e.Operation
		if err := bounded("op.name", o.Name, MaxName, true); err != nil {
			return err
		}
		if err := bounded("op.policy", o.Policy, MaxName, false); err != nil {
			return err
		}
		if err := bounded("op.operation", o.Operation, MaxName, true); err != nil {
			return err
		}
		if o.Step < 0 || o.Step > maxStep {
			return fmt.Errorf("op.step: %d is not between 0 and %d", o.Step, maxStep)
		}
		switch o.Outcome {
		case Succeeded, Failed, Skipped:
		default:
			return fmt.Errorf("op.outcome: %q is not one of Succeeded, Failed, Skipped", o.Outcome)
		}
	default:
		return errors.New("fault, op: exactly one must be set")
	}
	return nil
}

func bounded(field, s string, max int, required bool) error {
	switch {
	case required && s == "":
		return fmt.Errorf("%s: required", field)
	case len(s) > max:
		return fmt.Errorf("%s: %d bytes, more than %d", field, len(s), max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return fmt.Errorf("%s: %q has a control character or invalid UTF-8", field, s)
		}
	}
	return nil
}
