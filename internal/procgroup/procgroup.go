package procgroup

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// Command is exec.CommandContext(ctx, name, args...) in a process group of
// its own: when ctx ends, SIGKILL goes to the whole group, and Wait gives
// up on the output pipes waitDelay after the kill (or after the leader
// exits), so that a child that outlived the kill, or one stuck in D state,
// cannot hold the caller. The caller may set more of SysProcAttr (a
// chroot) before starting it, but not replace it.
func Command(ctx context.Context, waitDelay time.Duration, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// KillGroup kills what is left of a started command's process group: the
// children of a leader that exited, or died first at the timeout. A group
// that is gone already is no error.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
