package gpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
)

func TestSMIRunnerTimeout(t *testing.T) {
	for _, tc := range []struct{ desc, script string }{
		{"hangs", "sleep 30"},
		// A grandchild holds the pipes after the shell is killed; the
		// process-group kill and WaitDelay must still return.
		{"child holds the pipes", "sleep 30 & sleep 30"},
		{"prints then hangs", "echo '0, 00000000:18:00.0, GPU-x, 0, [N/A], [N/A], [N/A]'; sleep 30"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := &SMI{Path: writeScript(t, tc.script), Timeout: 300 * time.Millisecond}
			start := time.Now()
			devs, err := s.Devices(context.Background(), ReadList)
			elapsed := time.Since(start)
			require.ErrorContains(t, err, "nvidia-smi: no answer in")
			require.Nil(t, devs)
			require.Less(t, elapsed, 300*time.Millisecond+smiWaitDelay+500*time.Millisecond)
		})
	}
}

func TestSMIExitedChildHoldsPipes(t *testing.T) {
	// nvidia-smi exits 0 but leaves a child holding stdout: the output is
	// used once WaitDelay gives up on the pipe.
	s := &SMI{Path: writeScript(t, "echo 'No devices were found'; (sleep 30) &"), Timeout: 10 * time.Second}
	start := time.Now()
	devs, err := s.Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.Empty(t, devs)
	require.Less(t, time.Since(start), smiWaitDelay+2*time.Second)
}

func TestFindSMI(t *testing.T) {
	_, err := (&SMI{Path: "/nonexistent/nvidia-smi", Timeout: time.Second}).Devices(context.Background(), ReadList)
	require.ErrorContains(t, err, "nvidia-smi: stat /nonexistent/nvidia-smi")

	root := t.TempDir()
	_, err = findSMI("kubemedic-test-no-such-smi", host.Root(root))
	require.ErrorContains(t, err, "not found on PATH or under "+root)

	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/local/nvidia/bin"), 0o755))
	want := filepath.Join(root, "usr/local/nvidia/bin/kubemedic-test-no-such-smi")
	require.NoError(t, os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755))
	got, err := findSMI("kubemedic-test-no-such-smi", host.Root(root))
	require.NoError(t, err)
	require.Equal(t, want, got)
}
