package decide_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

// FuzzParseTTL: never panics; a TTL that parses is positive or zero and
// round-trips through its own unit: the duration divided by the unit is the
// number written, so a product that wrapped around (107000w) fails.
func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"24h", "7d", "2w", "forever", "0s", "999999999w", "15250w", "15251w", "107000w", "1.5h", "", "h", "-1d"} {
		f.Add(s)
	}
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok, err := decide.ParseTTL(s)
		if err != nil && ok {
			t.Fatalf("%q: error %v with ok", s, err)
		}
		if !ok {
			return
		}
		if d < 0 {
			t.Fatalf("%q: negative TTL %s", s, d)
		}
		n, perr := strconv.ParseInt(s[:len(s)-1], 10, 64)
		unit, known := units[s[len(s)-1]]
		if perr != nil || !known {
			t.Fatalf("%q parsed to %s but is not a number and a unit", s, d)
		}
		if d%unit != 0 || int64(d/unit) != n {
			t.Fatalf("%q parsed to %s, which is not %d × %s", s, d, n, unit)
		}
	})
}

// FuzzParseTime: never panics; what parses is a real time.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-12-01", "2026-12-01T18:00", "2026-12-01T18:00:00Z", "2026-13-01", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := decide.ParseTime(s)
		if err != nil {
			return
		}
		again, err := decide.ParseTime(tm.Format(time.RFC3339Nano))
		if err != nil || !again.Equal(tm) {
			t.Fatalf("%q parsed to %s, which does not parse back (%v)", s, tm, err)
		}
	})
}

// FuzzParseNotice: never panics; what parses re-encodes to something that
// parses to the same notice.
func FuzzParseNotice(f *testing.F) {
	f.Add(`{"rule":"Idle","deadline":"2026-11-25T12:00:00Z","sent":true}`)
	f.Add(`{"rule":"Idle","claimedAt":"2026-11-25T12:00:00Z"}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		n, err := decide.ParseNotice(s)
		if err != nil || n == nil {
			return
		}
		again, err := decide.ParseNotice(n.Encode())
		if err != nil {
			t.Fatalf("re-encoded notice does not parse: %v", err)
		}
		if again.Encode() != n.Encode() {
			t.Fatalf("round trip changed the notice: %s vs %s", again.Encode(), n.Encode())
		}
	})
}
