package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		desc string
		r    Result
		want string
	}{
		{"NonOK starts with the reason", NonOK("XidRebootRequired", "Xid 79 on 0000:3b:00.0: fell off the bus"), "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus"},
		{"OK has no reason", OK("8 GPUs"), "8 GPUs"},
		{"newlines and runs of space collapse", Unknown("nvidia-smi:\n  No devices\twere found\n"), "nvidia-smi: No devices were found"},
		{"a line of MaxLine bytes is kept whole", OK("%s", strings.Repeat("x", MaxLine)), strings.Repeat("x", MaxLine)},
		{"cut to MaxLine bytes", OK("%s", strings.Repeat("x", MaxLine+20)), strings.Repeat("x", MaxLine)},
		{"cut at a rune boundary", OK("%s", strings.Repeat("x", MaxLine-1)+"é"), strings.Repeat("x", MaxLine-1)},
		{"the reason counts toward MaxLine", NonOK("GPUMemoryUnhealthy", "%s", strings.Repeat("x", MaxLine)), "GPUMemoryUnhealthy: " + strings.Repeat("x", MaxLine-len("GPUMemoryUnhealthy: "))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := tc.r.Line()
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), MaxLine)
		})
	}
}

func testCommands(run Runner) []*Command {
	return []*Command{{
		Name: "check", Summary: "a test check",
		Bind: func(fs *pflag.FlagSet) Runner {
			fs.String("thing", "", "a flag")
			return run
		},
	}}
}

func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		args     []string
		run      Runner
		wantCode int
		wantLine string
	}{
		{"OK", []string{"check"}, func(context.Context, *Env) Result { return OK("fine") }, 0, "fine"},
		{"NonOK", []string{"check", "--thing=x"}, func(context.Context, *Env) Result { return NonOK("MountHung", "/data") }, 1, "MountHung: /data"},
		{"Unknown", []string{"check"}, func(context.Context, *Env) Result { return Unknown("no NVML") }, 2, "no NVML"},
		{"no check", nil, nil, 2, "usage: kubemedic-detect <check> [flags]"},
		{"unknown check", []string{"nope"}, nil, 2, `unknown check "nope"`},
		{"bad flag", []string{"check", "--nope"}, nil, 2, "check: unknown flag: --nope"},
		{"stray argument", []string{"check", "extra"}, nil, 2, `check: unexpected argument "extra"`},
		{"panic is Unknown", []string{"check"}, func(context.Context, *Env) Result { panic("boom") }, 2, "check: internal error: boom"},
		{"a hung check is Unknown", []string{"check", "--timeout=50ms"}, func(context.Context, *Env) Result { select {} }, 2, "check: timed out after 50ms"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out, errOut bytes.Buffer
			start := time.Now()
			code := Main(testCommands(tc.run), tc.args, &out, &errOut)
			require.Equal(t, tc.wantCode, code, "stderr: %s", errOut.String())
			require.Equal(t, tc.wantLine+"\n", out.String())
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

func TestMainPassesGlobalFlags(t *testing.T) {
	var got *Env
	code := Main(testCommands(func(_ context.Context, env *Env) Result { got = env; return OK("ok") }),
		[]string{"check", "--root=/fixture", "--state-dir=/tmp/s", "--node=gpu-1"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Equal(t, 0, code)
	require.Equal(t, "/fixture/proc/uptime", got.Root.Path("/proc/uptime"))
	require.Equal(t, "/tmp/s", got.StateDir)
	require.Equal(t, "gpu-1", got.Node)
}
