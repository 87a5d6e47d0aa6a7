package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/alertmanager/template"
)

// Version is the only webhook payload version the bridge accepts.
const Version = "4"

// Alert statuses as Alertmanager sends them.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Message is Alertmanager's webhook payload: the template data of one alert
// group plus the webhook envelope.
type Message struct {
	template.Data

	Version         string `json:"version"`
	GroupKey        string `json:"groupKey"`
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// Error is a payload that cannot be used. Field names the JSON path.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "payload: " + e.Msg
	}
	return fmt.Sprintf("payload: %s: %s", e.Field, e.Msg)
}

// Decode reads one payload. Unknown fields are allowed (Alertmanager adds
// fields over time); an unknown version is not.
func Decode(r io.Reader) (*Message, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("payload: read: %w", err)
	}
	return DecodeBytes(data)
}

// DecodeBytes is Decode on a byte slice.
func DecodeBytes(data []byte) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var m Message
	if err := dec.Decode(&m); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, &Error{Msg: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)}
		case errors.As(err, &te):
			// The path runs through the embedded template.Data, which is
			// no part of the JSON.
			return nil, &Error{Field: strings.TrimPrefix(te.Field, "Data."), Msg: fmt.Sprintf("want %s, got JSON %s", te.Type, te.Value)}
		case errors.Is(err, io.EOF):
			return nil, &Error{Msg: "empty body"}
		default:
			return nil, &Error{Msg: fmt.Sprintf("malformed JSON: %v", err)}
		}
	}
	// dec.More would miss a stray ] or } after the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Msg: "malformed JSON: data after the payload object"}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks what the bridge relies on.
func (m *Message) Validate() error {
	if m.Version != Version {
		if m.Version == "" {
			return &Error{Field: "version", Msg: "missing (want \"4\")"}
		}
		return &Error{Field: "version", Msg: fmt.Sprintf("unsupported version %q (want \"4\")", m.Version)}
	}
	if m.Receiver == "" {
		return &Error{Field: "receiver", Msg: "missing"}
	}
	if m.Status != StatusFiring && m.Status != StatusResolved {
		return &Error{Field: "status", Msg: fmt.Sprintf("%q is neither firing nor resolved", m.Status)}
	}
	if len(m.Alerts) == 0 {
		return &Error{Field: "alerts", Msg: "empty"}
	}
	for i, a := range m.Alerts {
		if a.Fingerprint == "" {
			return &Error{Field: fmt.Sprintf("alerts[%d].fingerprint", i), Msg: "missing"}
		}
		if a.Status != StatusFiring && a.Status != StatusResolved {
			return &Error{Field: fmt.Sprintf("alerts[%d].status", i), Msg: fmt.Sprintf("%q is neither firing nor resolved", a.Status)}
		}
	}
	return nil
}

// Firing returns the sorted, de-duplicated fingerprints of the firing alerts.
func (m *Message) Firing() []string {
	var fps []string
	for _, a := range m.Alerts {
		if a.Status == StatusFiring {
			fps = append(fps, a.Fingerprint)
		}
	}
	sort.Strings(fps)
	return slices.Compact(fps)
}

// Annotated reports whether any alert of the group carries the annotation
// name with a value other than "" or "false".
func (m *Message) Annotated(name string) bool {
	if v, ok := m.CommonAnnotations[name]; ok && v != "" && v != "false" {
		return true
	}
	for _, a := range m.Alerts {
		if v, ok := a.Annotations[name]; ok && v != "" && v != "false" {
			return true
		}
	}
	return false
}
