package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// TestHelpExitsZero asks every check, and kubemedic-detect itself, for
// --help and -h: a person asked, so the usage goes to stdout and the exit
// code is 0, never NPD's Unknown (2).
func TestHelpExitsZero(t *testing.T) {
	checks := 0
	for _, c := range commands() {
		if c.Internal {
			continue
		}
		checks++
		for _, flag := range []string{"--help", "-h"} {
			t.Run(c.Name+" "+flag, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := plugin.Main(commands(), []string{c.Name, flag}, &stdout, &stderr)
				if code != 0 {
					t.Errorf("kubemedic-detect %s %s exited %d, want 0; stdout %q", c.Name, flag, code, stdout.String())
				}
				out := stdout.String()
				for _, want := range []string{"usage: kubemedic-detect " + c.Name + " [flags]", c.Summary, "--timeout", "--root"} {
					if !strings.Contains(out, want) {
						t.Errorf("kubemedic-detect %s %s: stdout does not say %q:\n%s", c.Name, flag, want, out)
					}
				}
				if strings.Contains(out, "help requested") {
					t.Errorf("kubemedic-detect %s %s reports help as an error:\n%s", c.Name, flag, out)
				}
			})
		}
	}
	if checks < 6 {
		t.Fatalf("only %d checks listed; the test checks nothing", checks)
	}

	for _, arg := range []string{"--help", "-h", "help"} {
		var stdout, stderr bytes.Buffer
		if code := plugin.Main(commands(), []string{arg}, &stdout, &stderr); code != 0 {
			t.Errorf("kubemedic-detect %s exited %d, want 0", arg, code)
		}
		if !strings.Contains(stdout.String(), "checks:") {
			t.Errorf("kubemedic-detect %s: stdout lists no checks:\n%s", arg, stdout.String())
		}
	}
}

// TestBadFlagIsUnknown keeps a mistyped flag in a plugin config visible:
// Unknown (exit 2) with the flag named in the one line NPD reads.
func TestBadFlagIsUnknown(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := plugin.Main(commands(), []string{"gpu", "--no-such-flag"}, &stdout, &stderr); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if line := strings.TrimSpace(stdout.String()); !strings.Contains(line, "no-such-flag") || strings.Contains(line, "\n") {
		t.Errorf("stdout %q: want one line naming the flag", line)
	}
}
