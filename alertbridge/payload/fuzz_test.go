package payload_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

// FuzzDecode checks that Decode never panics, that it rejects with a
// *payload.Error, and that what it accepts is valid.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"gpu-lost.json", "multi.json", "resolved.json", "truncated.json"} {
		f.Add(readFixture(f, name))
	}
	for _, s := range []string{
		"",
		"null",
		"[]",
		`{"version":"3"}`,
		`{"version":"4","receiver":"r","status":"firing","alerts":[{"status":"firing","fingerprint":"f"}]}}`,
		`{"version":"4","receiver":"r","status":"firing","alerts":[{"status":"firing"}]}`,
		`{"version":"4","receiver":"r","status":"firing","truncatedAlerts":-1,"alerts":[{"status":"firing","fingerprint":"f"}]}`,
		`{"version":"4","receiver":"r","status":"firing","alerts":[{"status":"firing","fingerprint":"f","startsAt":"10000-01-01T00:00:00Z"}]}`,
		"\xff\xfe{",
		`{"version":"4","receiver":"\ud800","status":"resolved","alerts":[{"status":"resolved","fingerprint":"f"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := payload.DecodeBytes(data)
		if err != nil {
			var pe *payload.Error
			if m != nil || !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "payload: ") {
				t.Fatalf("bad rejection: %v (message %v)", err, m)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid payload: %v", err)
		}
		fps := m.Firing()
		if !slices.IsSorted(fps) || len(slices.Compact(slices.Clone(fps))) != len(fps) {
			t.Fatalf("Firing() not sorted and unique: %q", fps)
		}
		for _, fp := range fps {
			if fp == "" {
				t.Fatal("empty fingerprint accepted")
			}
		}
	})
}
