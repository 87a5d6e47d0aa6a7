package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/internal/procgroup"
	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/dcgmdiag"
	"github.com/kubemedic/kubemedic/remediator/validation/nccltests"
	"github.com/kubemedic/kubemedic/remediator/validation/nvbandwidth"
)

// Exit statuses.
const (
	ExitPass     = 0
	ExitFail     = 1
	ExitNoAnswer = 2
)

// DefaultTimeout bounds the whole test, nvidia-smi included.
const DefaultTimeout = 15 * time.Minute

// maxOutput is the most of a tool's output that is kept; more is no
// answer (a tool that prints without end is broken).
const maxOutput = 16 << 20

// tools are the tests and the binary each runs by default.
var tools = map[string]string{
	validation.TestDCGM:        "dcgmi",
	validation.TestNCCL:        "all_reduce_perf",
	validation.TestNVBandwidth: "nvbandwidth",
}

// Config is one test to run.
type Config struct {
	// Test is dcgm, nccl or nvbandwidth.
	Test string
	// Tool is the tool's binary: a path, or a name looked up on PATH.
	Tool string
	// SMI is nvidia-smi's binary.
	SMI string
	// Timeout bounds the whole test.
	Timeout time.Duration
	// Floors are the template's overrides.
	Floors validation.Floors
	// DCGMLevel is dcgmi diag's -r.
	DCGMLevel int
}

// Main runs kubemedic-validate with args (the test, then flags) and
// returns its exit status.
func Main(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	// Where a usage error's report goes, before the flags are parsed.
	termLog := flagValue(args, "termination-log", "/dev/termination-log")
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "kubemedic-validate: "+msg)
		r := validation.Report{Schema: validation.Schema, Test: "unknown", Verdict: validation.VerdictNoAnswer, Reason: "kubemedic-validate: " + msg}
		if len(args) > 0 && tools[args[0]] != "" {
			r.Test = args[0]
		}
		write(termLog, r, stdout, stderr)
		return ExitNoAnswer
	}
	if len(args) == 0 || tools[args[0]] == "" {
		return usage("usage: kubemedic-validate dcgm|nccl|nvbandwidth [--timeout 15m] [--floor name=GB/s]... [--tool-path PATH] [--nvidia-smi PATH] [--termination-log PATH]")
	}
	cfg := Config{Test: args[0]}
	fs := pflag.NewFlagSet("kubemedic-validate "+args[0], pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultTimeout, "bound on the whole test, nvidia-smi included; the tool's process group is killed at it")
	floors := fs.StringArray("floor", nil, "override a floor, name=GB/s (names: "+strings.Join(validation.FloorNames, ", ")+"); repeatable")
	fs.StringVar(&cfg.Tool, "tool-path", tools[args[0]], "the tool's binary, a path or a name on PATH")
	fs.StringVar(&cfg.SMI, "nvidia-smi", "nvidia-smi", "nvidia-smi's binary, a path or a name on PATH")
	fs.StringVar(&termLog, "termination-log", termLog, "where the report for the remediator is written")
	fs.IntVar(&cfg.DCGMLevel, "dcgm-level", 2, "dcgmi diag's run level (-r), for dcgm")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitNoAnswer
		}
		return usage(err.Error())
	}
	if fs.NArg() > 0 {
		return usage(fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if cfg.Timeout <= 0 {
		return usage("--timeout must be positive")
	}
	if cfg.DCGMLevel < 1 || cfg.DCGMLevel > 4 {
		return usage("--dcgm-level must be 1 to 4")
	}
	for _, f := range *floors {
		name, v, err := validation.ParseFloor(f)
		if err != nil {
			return usage("--floor: " + err.Error())
		}
		if cfg.Floors == nil {
			cfg.Floors = validation.Floors{}
		}
		cfg.Floors[name] = v
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r := Run(ctx, cfg, time.Now)
	write(termLog, r, stdout, stderr)
	switch r.Verdict {
	case validation.VerdictPass:
		return ExitPass
	case validation.VerdictFail:
		return ExitFail
	}
	return ExitNoAnswer
}

// Run runs the test and judges it; every way it can go wrong is a report
// of NoAnswer that says why.
func Run(ctx context.Context, cfg Config, now func() time.Time) validation.Report {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	noAnswer := func(why string) validation.Report {
		return validation.Report{Schema: validation.Schema, Test: cfg.Test, Verdict: validation.VerdictNoAnswer, Reason: why}
	}
	gpus, err := listGPUs(ctx, cfg.SMI)
	if err != nil {
		return noAnswer(err.Error())
	}
	if len(gpus) == 0 {
		return noAnswer("no GPU visible in the test pod (nvidia-smi lists none)")
	}
	args := toolArgs(cfg, len(gpus))
	command := strings.Join(append([]string{baseName(cfg.Tool)}, args...), " ")
	start := now()
	out, exit, err := runTool(ctx, cfg.Tool, args)
	seconds := int64(now().Sub(start).Round(time.Second) / time.Second)
	var r validation.Report
	var versions string
	switch {
	case err != nil:
		r = noAnswer(command + ": " + err.Error() + lastLine(out))
		r.Model, _ = validation.ModelName(gpus)
	default:
		r, versions, err = judge(cfg, out, gpus)
		if err != nil {
			r = noAnswer(fmt.Sprintf("%s (exit status %d): %v", command, exit, err))
			r.Model, _ = validation.ModelName(gpus)
		} else if exit != 0 && r.Verdict == validation.VerdictPass {
			// A pass needs the tool to say so too.
			r.Verdict, r.Reason = validation.VerdictNoAnswer, fmt.Sprintf("%s exited with status %d after output that passes%s; %s", command, exit, lastLine(out), r.Reason)
			for i := range r.GPUs {
				r.GPUs[i].Verdict = validation.VerdictNoAnswer
			}
		}
	}
	r.Tool, r.Seconds = command, seconds
	if versions != "" {
		r.Tool += " (" + versions + ")"
	}
	return r
}

// toolArgs are the tool's arguments for a node of n GPUs.
func toolArgs(cfg Config, n int) []string {
	switch cfg.Test {
	case validation.TestDCGM:
		return []string{"diag", "-r", strconv.Itoa(cfg.DCGMLevel), "-j"}
	case validation.TestNCCL:
		return []string{"-b", "8", "-e", "8G", "-f", "2", "-g", strconv.Itoa(n)}
	}
	var a []string
	for _, f := range nvbandwidth.Floors {
		a = append(a, "-t", nvbandwidth.TestOf(f))
	}
	return a
}

// judge parses the tool's output and judges it.
func judge(cfg Config, out []byte, gpus []validation.GPU) (validation.Report, string, error) {
	switch cfg.Test {
	case validation.TestDCGM:
		d, err := dcgmdiag.Parse(out)
		if err != nil {
			return validation.Report{}, "", err
		}
		return dcgmdiag.Judge(d, gpus), d.Versions(), nil
	case validation.TestNCCL:
		run, err := nccltests.Parse(out)
		if err != nil {
			return validation.Report{}, "", err
		}
		return nccltests.Judge(run, gpus, cfg.Floors), run.Versions(), nil
	}
	run, err := nvbandwidth.Parse(out)
	if err != nil {
		return validation.Report{}, "", err
	}
	return nvbandwidth.Judge(run, gpus, cfg.Floors), run.Versions(), nil
}

// lastLine is "; its last line: <line>" of a tool's output, or "".
func lastLine(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return "; it wrote nothing"
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "; its last line: " + strconv.Quote(validation.Cut(strings.TrimSpace(s), 200))
}

// runTool runs the tool in its own process group under ctx, with CUDA
// numbering devices in PCI order (as nvidia-smi does), and kills what is
// left of the group when it ends. Its stdout and stderr are one pipe, in
// the order written: an abort's message (nvbandwidth's ASSERT on stderr)
// stays inside the test it ended. err is set when there is no output to
// judge: the tool could not start, timed out, or wrote more than
// maxOutput.
func runTool(ctx context.Context, tool string, args []string) ([]byte, int, error) {
	cmd := procgroup.Command(ctx, 5*time.Second, tool, args...)
	w := &capped{max: maxOutput}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = append(os.Environ(), "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	err := cmd.Run()
	// Whatever the tool's children left behind must not hold the GPUs.
	procgroup.KillGroup(cmd)
	out := w.buf.Bytes()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return out, -1, errors.New("timed out; its process group was killed")
		}
		return out, -1, fmt.Errorf("stopped (%v); its process group was killed", ctx.Err())
	}
	var ee *exec.ExitError
	exit := 0
	switch {
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited, and a child held its output open: what it wrote
		// is all there is.
	case err != nil:
		return out, -1, err
	}
	if w.cut {
		return out, exit, fmt.Errorf("wrote more than %d MiB: not a run kubemedic can read", maxOutput>>20)
	}
	return out, exit, nil
}

// capped keeps the first max bytes written and remembers whether it cut.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if left := c.max - c.buf.Len(); len(p) > left {
		c.cut = true
		c.buf.Write(p[:max(left, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

// flagValue is the value args give the flag --name, or def.
func flagValue(args []string, name, def string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return def
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// write writes the report to the termination log and a summary to
// stdout. A report that does not fit goes as its verdict and reason
// alone; one that cannot be written is said on stderr (the gate then
// sees no report: no answer).
func write(path string, r validation.Report, stdout, stderr io.Writer) {
	s, err := validation.Encode(r)
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic-validate: %v\n", err)
		short := validation.Report{Schema: validation.Schema, Test: r.Test, Model: r.Model, Verdict: r.Verdict, Tool: r.Tool, Seconds: r.Seconds,
			Reason: fmt.Sprintf("%d GPUs, %d failing (%s); the full report did not fit: %s", len(r.GPUs), len(validation.Failing(r)), strings.Join(validation.Failing(r), ", "), r.Reason)}
		if short.Verdict == validation.VerdictPass {
			short.Verdict = validation.VerdictNoAnswer
		}
		if s, err = validation.Encode(short); err != nil {
			fmt.Fprintf(stderr, "kubemedic-validate: %v\n", err)
		}
	}
	if s != "" {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			fmt.Fprintf(stderr, "kubemedic-validate: write the report to %s: %v\n", path, err)
		}
	}
	fmt.Fprint(stdout, Summary(r))
}

// Summary is the report for people: the verdict, the tool, then a line
// per GPU.
func Summary(r validation.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kubemedic-validate %s: %s", r.Test, r.Verdict)
	var about []string
	for _, s := range []string{r.Model, r.Tool} {
		if s != "" {
			about = append(about, s)
		}
	}
	if r.Seconds > 0 {
		about = append(about, fmt.Sprintf("%d s", r.Seconds))
	}
	if len(about) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(about, "; "))
	}
	b.WriteString("\n")
	if r.Reason != "" {
		fmt.Fprintf(&b, "  %s\n", r.Reason)
	}
	for _, m := range r.Measured {
		fmt.Fprintf(&b, "  %s\n", m)
	}
	for _, g := range r.GPUs {
		fmt.Fprintf(&b, "  %s  %-8s", g.UUID, g.Verdict)
		if len(g.Failed) > 0 {
			fmt.Fprintf(&b, "  failed: %s", strings.Join(g.Failed, ", "))
		}
		for _, m := range g.Measured {
			fmt.Fprintf(&b, "  %s", m)
		}
		if g.Detail != "" {
			fmt.Fprintf(&b, "  %s", g.Detail)
		}
		b.WriteString("\n")
	}
	return b.String()
}
