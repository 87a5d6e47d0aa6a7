package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeBusID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"00000000:3B:00.0", "0000:3b:00.0", true},
		{"0000:3b:00.0", "0000:3b:00.0", true},
		{" 00000001:3B:1F.7 ", "0001:3b:1f.7", true},
		{"00010000:3B:00.0", "00010000:3b:00.0", true},
		{"3b:00.0", "3b:00.0", false},
		{"0000:3b:00", "0000:3b:00", false},
		{"0000:3b:00.8", "0000:3b:00.8", false},
		{"0000:3b:20.0", "0000:3b:20.0", false},
		{"0000:3g:00.0", "0000:3g:00.0", false},
		{"000000000:3b:00.0", "000000000:3b:00.0", false},
		{"", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := NormalizeBusID(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.ok, ok)
		})
	}
}
