package netlink

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// netnsChildEnv marks the copy of the test binary that runs inside a fresh
// network and mount namespace.
const netnsChildEnv = "KUBEMEDIC_NETLINK_NETNS_CHILD"

// TestLinkLifecycleInNetns takes a real interface through down, up without an
// address, and up with one, with the kernel's own sysfs and netlink. It runs
// in a copy of the test binary in new network and mount namespaces, so the
// host's interfaces are never touched: the namespace, and the interface in
// it, go away when the copy exits.
func TestLinkLifecycleInNetns(t *testing.T) {
	if os.Getenv(netnsChildEnv) == "1" {
		linkLifecycle(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs ip(8) to create an interface: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLinkLifecycleInNetns$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	// Go makes / private (MS_REC|MS_PRIVATE) in the child when it unshares
	// the mount namespace, so the sysfs mounted there stays there.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		t.Skipf("cannot create network and mount namespaces here: %v", err)
	}
	t.Logf("in a new network namespace:\n%s", out)
	require.NoError(t, err)
	if m := regexp.MustCompile(`(?m)^\s+netns_linux_test.go:\d+: (SKIP: .*)$`).FindSubmatch(out); m != nil {
		t.Skip(string(m[1]))
	}
	require.Contains(t, string(out), "--- PASS: TestLinkLifecycleInNetns")
}

// linkLifecycle runs in the new namespaces.
func linkLifecycle(t *testing.T) {
	root := t.TempDir()
	sys := filepath.Join(root, "sys")
	require.NoError(t, os.Mkdir(sys, 0o755))
	if err := syscall.Mount("sysfs", sys, "sysfs", 0, ""); err != nil {
		t.Skipf("SKIP: cannot mount sysfs in the new namespace: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(sys, syscall.MNT_DETACH) })

	// A fresh network namespace has only lo, and it is down. Anything else
	// means this is not a new namespace: stop before touching any interface.
	ents, err := os.ReadDir(filepath.Join(sys, "class/net"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"lo"}, names, "not a fresh network namespace")

	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace("ip " + strings.Join(args, " ") + ": " + string(out) + " " + err.Error()))
		}
		return nil
	}
	// dummy is the usual test device; kernels built without it have ifb,
	// which behaves the same here (operstate unknown, carrier 1 when up).
	var tried []string
	for _, kind := range []string{"dummy", "ifb"} {
		err := ip("link", "add", "kmtest0", "type", kind)
		if err == nil {
			t.Logf("created kmtest0 of type %s", kind)
			tried = nil
			break
		}
		tried = append(tried, err.Error())
	}
	if tried != nil {
		t.Skipf("SKIP: cannot create a test interface: %s", strings.Join(tried, "; "))
	}
	t.Cleanup(func() { _ = ip("link", "del", "kmtest0") })

	check := func(args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		// The address source is netlink in this namespace; the root is the
		// sysfs mounted for it, which shows this namespace's interfaces.
		cmd := newCommand(deps{readFile: os.ReadFile, addrs: func(host.Root) AddrSource { return NetAddrs{} }})
		code := plugin.Main([]*plugin.Command{cmd}, append([]string{"network", "--root", root}, args...), &out, &errOut)
		require.Empty(t, errOut.String())
		return code, strings.TrimSuffix(out.String(), "\n")
	}

	code, line := check("--interface", "lo")
	require.Equal(t, "LinkDown: lo link down (operstate down, no carrier)", line)
	require.Equal(t, 1, code)

	code, line = check("--interface", "kmtest0")
	require.Equal(t, "LinkDown: kmtest0 link down (operstate down, no carrier)", line)
	require.Equal(t, 1, code)

	require.NoError(t, ip("link", "set", "kmtest0", "up"))
	require.NoError(t, ip("-6", "addr", "add", "fe80::1/64", "dev", "kmtest0", "nodad"))
	code, line = check("--interface", "kmtest0")
	require.Equal(t, "NoAddress: kmtest0 has no address", line)
	require.Equal(t, 1, code)
	code, line = check("--interface", "kmtest0", "--ignore-link-local=false")
	require.Equal(t, "1 interface up with an address (kmtest0)", line)
	require.Equal(t, 0, code)

	require.NoError(t, ip("addr", "add", "198.51.100.7/32", "dev", "kmtest0"))
	require.NoError(t, ip("link", "set", "lo", "up"))
	code, line = check("--interface-regex", "kmtest[0-9]+|lo")
	require.Equal(t, "2 interfaces up with addresses (kmtest0, lo)", line)
	require.Equal(t, 0, code)

	require.NoError(t, ip("link", "set", "kmtest0", "down"))
	code, line = check("--interface-regex", "kmtest[0-9]+|lo")
	require.Equal(t, "LinkDown: kmtest0 link down (operstate down, no carrier)", line)
	require.Equal(t, 1, code)
}
