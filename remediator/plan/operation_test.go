package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		desc string
		pols []*Policy
		want time.Duration
	}{
		{"no policies: the base", nil, time.Hour},
		{"a longer attempt-cap window stretches it", []*Policy{policy(t, "p", capAttempts(3, 48*time.Hour))}, 48 * time.Hour},
		{"a longer node cooldown stretches it", []*Policy{policy(t, "p", nodeCooldown(2*time.Hour))}, 2 * time.Hour},
		{"shorter limits leave the base", []*Policy{policy(t, "p", nodeCooldown(time.Minute))}, time.Hour},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, Retention(time.Hour, tc.pols))
		})
	}
}

func TestTruncate(t *testing.T) {
	require.Equal(t, "abc", Truncate("abc", 3))
	require.Equal(t, "a...", Truncate("abcdef", 4))
}
