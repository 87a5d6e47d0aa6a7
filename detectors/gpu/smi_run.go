package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// smiWaitDelay bounds how long we wait for nvidia-smi's output pipes to
// close after it exits or is killed: a child stuck in D state cannot be
// killed and would otherwise keep Wait blocked.
const smiWaitDelay = time.Second

type smiOutput struct {
	output   []byte
	exitCode int
}

// run runs nvidia-smi with args. The child reads /dev/null and writes into
// pipes of its own (never our stdout or stderr, which NPD reads: a hung
// child holding them wedges NPD, its issue #1050); it runs in its own
// process group, which is killed at the timeout, and Wait gives up on the
// pipes smiWaitDelay later.
func (s *SMI) run(ctx context.Context, path string, args ...string) (smiOutput, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = nil // the null device
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = smiWaitDelay
	err := cmd.Run()
	if ctx.Err() != nil {
		if parent.Err() != nil {
			return smiOutput{}, fmt.Errorf("nvidia-smi: %w", parent.Err())
		}
		return smiOutput{}, fmt.Errorf("nvidia-smi: no answer in %s", s.Timeout)
	}
	out := smiOutput{output: append(stdout.Bytes(), stderr.Bytes()...)}
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: it exited 0 but left something holding its
		// pipes; what it wrote is complete.
	case errors.As(err, &exitErr):
		out.exitCode = exitErr.ExitCode()
	default:
		return smiOutput{}, fmt.Errorf("nvidia-smi: %w", err)
	}
	return out, nil
}

// smiDirs are where nvidia-smi lives on GPU nodes when it is not on PATH:
// the distribution's driver packages, the GPU operator's driver container
// (/run/nvidia/driver) and its toolkit (/usr/local/nvidia).
var smiDirs = []string{"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/run/nvidia/driver/usr/bin", "/bin"}

// findSMI resolves the --nvidia-smi flag: a path with a slash is used as
// given; a bare name is looked up on PATH, then in smiDirs under root.
func findSMI(name string, root host.Root) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("nvidia-smi: %w", err)
		}
		return name, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range smiDirs {
		p := root.Path(dir + "/" + name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if name == "nvidia-smi" {
		return "", fmt.Errorf("nvidia-smi: not found on PATH or under %s", root.Path("/"))
	}
	return "", fmt.Errorf("nvidia-smi: %s not found on PATH or under %s", name, root.Path("/"))
}
