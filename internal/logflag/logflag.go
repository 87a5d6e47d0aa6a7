// Package logflag parses the --log-level flag of the controller binaries
// (remediator, janitor), so they accept the same values. It never sets up
// logging itself.
package logflag

import (
	"fmt"
	"strconv"

	"go.uber.org/zap/zapcore"
)

// Usage is the flag's help text.
const Usage = "debug, info, error, or a number of verbosity (2 = debug)"

// ParseZapLevel maps a level name or a verbosity number to a zap level.
func ParseZapLevel(s string) (zapcore.Level, error) {
	switch s {
	case "debug":
		return zapcore.Level(-2), nil
	case "info":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 10 {
		return 0, fmt.Errorf("%q is not debug, info, error or a verbosity from 0 to 10", s)
	}
	return zapcore.Level(-n), nil
}
