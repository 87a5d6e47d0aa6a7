package gpuwire

import (
	"os"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics and that what it accepts
// round-trips: Parse(Encode(h)) == h, and Encode is canonical.
func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile("testdata/history.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"",
		`{"v":1}`,
		string(seed),
		`{"v":1,"entries":[{"time":"2026-03-04T12:00:00.5+02:00","fault":{"condition":"GPULost"}}]}`,
		`{"v":2}`,
		`{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := Parse(in)
		if err != nil {
			return
		}
		s, err := h.Encode()
		if err != nil {
			t.Fatalf("Encode of a parsed history: %v", err)
		}
		back, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(Encode(h)): %v\n%s", err, s)
		}
		if !reflect.DeepEqual(h, back) {
			t.Fatalf("round trip changed the history:\n%#v\n%#v", h, back)
		}
		again, err := back.Encode()
		if err != nil || again != s {
			t.Fatalf("Encode is not canonical: %v\n%s\n%s", err, s, again)
		}
	})
}
