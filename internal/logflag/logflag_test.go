package logflag

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestParseZapLevel(t *testing.T) {
	for in, want := range map[string]zapcore.Level{"debug": -2, "info": zapcore.InfoLevel, "error": zapcore.ErrorLevel, "0": 0, "5": -5} {
		got, err := ParseZapLevel(in)
		if err != nil || got != want {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "verbose", "-1", "11"} {
		if _, err := ParseZapLevel(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
