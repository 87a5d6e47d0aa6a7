package decide_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

func TestEvidenceTooOld(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		readAt   time.Time
		interval time.Duration
		wantAge  time.Duration
		want     bool
	}{
		{desc: "read just now", readAt: t0, interval: time.Minute, wantAge: 0, want: false},
		{desc: "younger than the interval", readAt: t0.Add(-59 * time.Second), interval: time.Minute, wantAge: 59 * time.Second, want: false},
		{desc: "exactly the interval old is still used", readAt: t0.Add(-time.Minute), interval: time.Minute, wantAge: time.Minute, want: false},
		{desc: "a nanosecond past the interval is too old", readAt: t0.Add(-time.Minute - time.Nanosecond), interval: time.Minute, wantAge: time.Minute + time.Nanosecond, want: true},
		{desc: "older than the interval", readAt: t0.Add(-61 * time.Second), interval: time.Minute, wantAge: 61 * time.Second, want: true},
		{desc: "a long interval allows older evidence", readAt: t0.Add(-4 * time.Minute), interval: 5 * time.Minute, wantAge: 4 * time.Minute, want: false},
		{desc: "exactly a long interval old is still used", readAt: t0.Add(-5 * time.Minute), interval: 5 * time.Minute, wantAge: 5 * time.Minute, want: false},
		{desc: "past a long interval is too old", readAt: t0.Add(-5*time.Minute - time.Second), interval: 5 * time.Minute, wantAge: 5*time.Minute + time.Second, want: true},
		{desc: "a short interval still allows a minute", readAt: t0.Add(-time.Minute), interval: 10 * time.Second, wantAge: time.Minute, want: false},
		{desc: "a short interval: past a minute is too old", readAt: t0.Add(-time.Minute - time.Second), interval: 10 * time.Second, wantAge: time.Minute + time.Second, want: true},
		{desc: "a zero interval allows a minute", readAt: t0.Add(-30 * time.Second), wantAge: 30 * time.Second, want: false},
		{desc: "evidence from after now (a clock stepped back) is not too old", readAt: t0.Add(time.Minute), interval: time.Minute, wantAge: -time.Minute, want: false},
		{desc: "never read (zero time) is too old", readAt: time.Time{}, interval: time.Minute, wantAge: t0.Sub(time.Time{}), want: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			age, old := decide.EvidenceTooOld(tc.readAt, t0, tc.interval)
			require.Equal(t, tc.wantAge, age)
			require.Equal(t, tc.want, old)
		})
	}
}
