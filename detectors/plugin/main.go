package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// DefaultTimeout bounds one invocation. NPD's rule timeout must be larger
// (deploy/npd uses the check's --timeout plus 10s), so that the check, not
// NPD, reports the timeout and says what hung.
const DefaultTimeout = 20 * time.Second

// Main runs kubemedic-detect: args[0] names the command, the rest are its
// flags. It prints one line on stdout and returns NPD's exit code. A check
// that does not return by --timeout (plus a short grace) is reported
// Unknown, and so is a panic.
func Main(cmds []*Command, args []string, stdout, stderr io.Writer) int {
	byName := map[string]*Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	if len(args) == 0 {
		usage(stderr, cmds)
		return Write(stdout, Unknown("usage: kubemedic-detect <check> [flags]"))
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		// Asked for, not a misconfigured plugin: the usage is the output.
		usage(stdout, cmds)
		return int(StatusOK)
	}
	cmd, ok := byName[args[0]]
	if !ok {
		usage(stderr, cmds)
		return Write(stdout, Unknown("unknown check %q", args[0]))
	}
	if cmd.Main != nil {
		return cmd.Main(args[1:])
	}

	fs := pflag.NewFlagSet("kubemedic-detect "+cmd.Name, pflag.ContinueOnError)
	// pflag prints the usage on --help and on a bad flag; which one it was
	// is known only after Parse, and the two go to different places.
	var parseOut strings.Builder
	fs.SetOutput(&parseOut)
	fs.Usage = func() {
		fmt.Fprintf(&parseOut, "usage: kubemedic-detect %s [flags]\n\n%s\n\nflags:\n%s", cmd.Name, cmd.Summary, fs.FlagUsages())
	}
	root := fs.String("root", "/", "prefix for host paths (/proc, /sys, the kernel log, mountinfo)")
	stateDir := fs.String("state-dir", "/var/lib/kubemedic/detect", "directory for state kept between invocations")
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	timeout := fs.Duration("timeout", DefaultTimeout, "give up, and report Unknown, after this long")
	verbose := fs.Bool("verbose", false, "log detail to stderr")
	run := cmd.Bind(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			// --help is asked for by a person, never by NPD: the usage
			// is the output, and asking succeeded.
			fmt.Fprint(stdout, parseOut.String())
			return int(StatusOK)
		}
		fmt.Fprint(stderr, parseOut.String())
		return Write(stdout, Unknown("%s: %v", cmd.Name, err))
	}
	if fs.NArg() > 0 {
		return Write(stdout, Unknown("%s: unexpected argument %q", cmd.Name, fs.Arg(0)))
	}

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	exe, exeErr := os.Executable()
	env := &Env{
		Root:       host.Root(*root),
		StateDir:   *stateDir,
		Node:       *node,
		Now:        time.Now,
		Log:        slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("check", cmd.Name),
		Executable: exe,
	}
	if exeErr != nil {
		// Checks that run a probe child report Unknown when they need it.
		env.Log.Warn("Cannot find kubemedic-detect's own executable", "err", exeErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				env.Log.Error("Check panicked", "panic", p)
				done <- Unknown("%s: internal error: %v", cmd.Name, p)
			}
		}()
		done <- run(ctx, env)
	}()
	select {
	case r := <-done:
		return Write(stdout, r)
	case <-ctx.Done():
		// Give the check a moment to report its own timeout, which says
		// more than ours.
		select {
		case r := <-done:
			return Write(stdout, r)
		case <-time.After(500 * time.Millisecond):
			return Write(stdout, Unknown("%s: timed out after %s", cmd.Name, *timeout))
		}
	}
}

func usage(w io.Writer, cmds []*Command) {
	var lines []string
	for _, c := range cmds {
		if !c.Internal {
			lines = append(lines, fmt.Sprintf("  %-12s %s", c.Name, c.Summary))
		}
	}
	sort.Strings(lines)
	fmt.Fprintf(w, "usage: kubemedic-detect <check> [flags]\n\nchecks:\n%s\n\n"+
		"Exit 0 OK, 1 NonOK, 2 Unknown; one line of at most %d characters on stdout.\n"+
		"Run kubemedic-detect <check> --help for its flags.\n", strings.Join(lines, "\n"), MaxLine)
}
