package plugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// Status is a check's verdict, numerically NPD's exit code.
type Status int

// The statuses and their exit codes.
const (
	StatusOK      Status = 0
	StatusNonOK   Status = 1
	StatusUnknown Status = 2
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "OK"
	case StatusNonOK:
		return "NonOK"
	default:
		return "Unknown"
	}
}

// MaxLine is the longest line a check prints, and the max_output_length
// of every deploy/npd config (NPD's default is 80): room for a GPU's bus
// ID and UUID, which the remediator's per-GPU history and DeviceTaintRule
// exclusion read from the condition message.
const MaxLine = 160

// Result is what a check found.
type Result struct {
	Status Status
	// Reason is set for NonOK: one of the condition's reasons in
	// policies/v1alpha1, as repeated in detectors/reason.
	Reason string
	// Message says what is wrong and where, e.g.
	// "Xid 79 on 0000:3b:00.0: fell off the bus; reboot required".
	Message string
}

// OK is a healthy result.
func OK(format string, args ...any) Result {
	return Result{Status: StatusOK, Message: fmt.Sprintf(format, args...)}
}

// NonOK is a fault with its reason.
func NonOK(reason, format string, args ...any) Result {
	return Result{Status: StatusNonOK, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Unknown is a check that could not find out: missing evidence, a failed
// read, a timeout. Never report OK in its place.
func Unknown(format string, args ...any) Result {
	return Result{Status: StatusUnknown, Message: fmt.Sprintf(format, args...)}
}

// Line is the result as NPD shows it: "<Reason>: <message>" for NonOK, the
// message otherwise, on one line of at most MaxLine bytes, cut at a rune
// boundary.
func (r Result) Line() string {
	msg := r.Message
	if r.Status == StatusNonOK && r.Reason != "" {
		msg = r.Reason + ": " + msg
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= MaxLine {
		return msg
	}
	cut := MaxLine
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// Write prints r's line to w and returns the exit code.
func Write(w io.Writer, r Result) int {
	fmt.Fprintln(w, r.Line())
	switch r.Status {
	case StatusOK, StatusNonOK:
		return int(r.Status)
	default:
		return int(StatusUnknown)
	}
}

// Env is what every check gets from kubemedic-detect's global flags.
type Env struct {
	// Root prefixes every host path: /proc, /sys, the kernel log, mountinfo.
	Root host.Root
	// StateDir keeps what a check must remember between invocations. It is
	// on the host (a hostPath), so it survives NPD restarts but not reboots
	// that clear it; checks key their state by boot ID where that matters.
	StateDir string
	// Node is this node's name (flag --node, default $NODE_NAME).
	Node string
	// Now is the clock.
	Now func() time.Time
	// Log writes to stderr, which NPD logs; never to stdout.
	Log *slog.Logger
	// Executable is the path of kubemedic-detect itself, for checks that
	// run a probe in a child.
	Executable string
}

// Runner runs a check once.
type Runner func(ctx context.Context, env *Env) Result

// Command is one kubemedic-detect subcommand.
type Command struct {
	// Name is the subcommand, e.g. "xid".
	Name string
	// Summary is one line for the usage text.
	Summary string
	// Bind registers the check's flags on fs and returns the runner that
	// reads them.
	Bind func(fs *pflag.FlagSet) Runner
	// Internal commands (a probe child) are not listed, and Main replaces
	// Bind: it gets the raw arguments and returns the exit code.
	Internal bool
	Main     func(args []string) int
}
