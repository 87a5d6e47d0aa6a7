package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTestImports: the shipped janitor carries no test code: not the
// harness, not the Slack or GitHub stand-ins.
func TestNoTestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/kubemedic/kubemedic/test/",
		"github.com/kubemedic/kubemedic/internal/notify/notifytest",
		"github.com/slack-go/slack/slacktest",
		"testing",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") || strings.HasPrefix(pkg, f) && strings.HasSuffix(f, "/") {
				t.Errorf("kubemedic-janitor imports %s", pkg)
			}
		}
	}
}
