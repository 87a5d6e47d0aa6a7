package netlink

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// TestRealLoopback runs the check as shipped against this machine: lo is up
// (operstate unknown, carrier 1) and has 127.0.0.1, read over netlink.
func TestRealLoopback(t *testing.T) {
	if _, err := os.Stat("/sys/class/net/lo"); err != nil {
		t.Skipf("no /sys/class/net/lo on this machine: %v", err)
	}
	var out, errOut bytes.Buffer
	code := plugin.Main([]*plugin.Command{Command()}, []string{"network", "--interface", "lo"}, &out, &errOut)
	require.Equal(t, "1 interface up with an address (lo)\n", out.String(), "stderr: %s", errOut.String())
	require.Equal(t, 0, code)
}

// TestRealCarrierEINVAL reads the carrier of an interface of this machine
// that is not running: the kernel answers EINVAL, which is no carrier.
func TestRealCarrierEINVAL(t *testing.T) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Skipf("no /sys/class/net on this machine: %v", err)
	}
	for _, e := range ents {
		name := e.Name()
		oper, err := os.ReadFile("/sys/class/net/" + name + "/operstate")
		if err != nil || strings.TrimSpace(string(oper)) != "down" {
			continue
		}
		if _, err := os.ReadFile("/sys/class/net/" + name + "/carrier"); !errors.Is(err, syscall.EINVAL) {
			continue
		}
		l := sysfs{root: "/", readFile: os.ReadFile}.link(name)
		require.NoError(t, l.Err)
		require.False(t, l.Carrier)
		require.Equal(t, plugin.NonOK("LinkDown", "%s link down (operstate down, no carrier)", name).Line(),
			Decide(Config{}, Observation{Links: []Link{l}}).Line())
		return
	}
	t.Skip("no interface on this machine is administratively down (carrier EINVAL); TestLinkLifecycleInNetns covers it in a namespace")
}
