package netlink

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

const fixtures = "../testdata/network"

// fixtureReader reads fixture files, and answers EINVAL, as sysfs does for
// the carrier of an interface that is not running, where the fixture has
// "<file>.einval" (see testdata/network/README.md).
func fixtureReader(p string) ([]byte, error) {
	if _, err := os.Stat(p + ".einval"); err == nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: syscall.EINVAL}
	}
	return os.ReadFile(p)
}

// fakeAddrs is an AddrSource with fixed answers; names it does not know have
// no address.
type fakeAddrs struct {
	addrs map[string][]string
	errs  map[string]error
}

func (f fakeAddrs) Addrs(name string) ([]netip.Addr, error) {
	if err := f.errs[name]; err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range f.addrs[name] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// run runs the check as kubemedic-detect does and returns the exit code and
// the line.
func run(t *testing.T, d deps, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := plugin.Main([]*plugin.Command{newCommand(d)}, append([]string{"network"}, args...), &out, &errOut)
	t.Logf("stderr: %s", errOut.String())
	line := out.String()
	require.True(t, strings.HasSuffix(line, "\n"), "line %q", line)
	line = strings.TrimSuffix(line, "\n")
	require.LessOrEqual(t, len(line), plugin.MaxLine)
	return code, line
}

func withAddrs(src AddrSource) deps {
	return deps{readFile: fixtureReader, addrs: func(host.Root) AddrSource { return src }}
}

func TestFixtures(t *testing.T) {
	healthy := filepath.Join(fixtures, "healthy")
	faulty := filepath.Join(fixtures, "faulty")
	broken := filepath.Join(fixtures, "broken")
	noAddrSource := deps{readFile: fixtureReader, addrs: realAddrs}
	fabricAddrs := fakeAddrs{addrs: map[string][]string{
		"lo": {"127.0.0.1", "::1"}, "eth0": {"10.0.0.5", "fe80::1"}, "ib0": {"192.168.1.5"}, "ib1": {"fd00::1"}, "ib2": {"192.168.1.7"},
	}}
	linkLocalOnly := fakeAddrs{addrs: map[string][]string{"eth0": {"fe80::1"}, "ib0": {"192.168.1.5"}}}
	eacces := func(p string) ([]byte, error) {
		if strings.HasSuffix(p, "/ib0/operstate") {
			return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
		}
		return fixtureReader(p)
	}

	for _, tc := range []struct {
		desc string
		deps deps
		args []string
		want plugin.Result
	}{
		{"IB and Ethernet up with addresses", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface-regex", "ib[0-9]+|eth[0-9]+"},
			plugin.OK("3 interfaces up with addresses (eth0, ib0, ib1)")},
		{"loopback up (operstate unknown, carrier 1)", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface", "lo"},
			plugin.OK("1 interface up with an address (lo)")},
		{"a fixture root has no address source", noAddrSource,
			[]string{"--root", healthy, "--interface", "lo", "--interface", "eth0"},
			plugin.OK("2 interfaces up (eth0, lo)")},
		{"named and matched once", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface", "ib0", "--interface-regex", "ib[0-9]+", "--interface", "ib0"},
			plugin.OK("2 interfaces up with addresses (ib0, ib1)")},
		{"the pattern is anchored", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface-regex", "b[0-9]"},
			plugin.NonOK("LinkDown", "no interface matches ^b[0-9]$")},
		{"bonding_masters is not an interface; down with EINVAL carrier", noAddrSource,
			[]string{"--root", healthy, "--interface-regex", ".*"},
			plugin.NonOK("LinkDown", "docker0 link down (operstate down, no carrier)")},
		{"a named interface that does not exist", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface", "ib0", "--interface", "ib7"},
			plugin.NonOK("LinkDown", "ib7 missing")},
		{"a pattern that matches nothing", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface-regex", "mlx5_[0-9]+"},
			plugin.NonOK("LinkDown", "no interface matches ^mlx5_[0-9]+$")},
		{"link-local does not count; the first by name, and the rest counted", withAddrs(linkLocalOnly),
			[]string{"--root", healthy, "--interface-regex", "ib[0-9]+|eth[0-9]+"},
			plugin.NonOK("NoAddress", "eth0 has no address (+1 more)")},
		{"--ignore-link-local=false counts fe80::", withAddrs(linkLocalOnly),
			[]string{"--root", healthy, "--interface-regex", "ib[0-9]+|eth[0-9]+", "--ignore-link-local=false"},
			plugin.NonOK("NoAddress", "ib1 has no address")},
		{"--require-address=false", withAddrs(linkLocalOnly),
			[]string{"--root", healthy, "--interface-regex", "ib[0-9]+|eth[0-9]+", "--require-address=false"},
			plugin.OK("3 interfaces up (eth0, ib0, ib1)")},
		{"several links down: the first by name", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface-regex", "ib[0-9]+"},
			plugin.NonOK("LinkDown", "ib0 link down (operstate down, no carrier) (+3 more)")},
		{"dormant with carrier", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface", "ib3"},
			plugin.NonOK("LinkDown", "ib3 link down (operstate dormant, carrier)")},
		{"lowerlayerdown", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface", "ib1"},
			plugin.NonOK("LinkDown", "ib1 link down (operstate lowerlayerdown, no carrier)")},
		{"notpresent", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface", "ib4"},
			plugin.NonOK("LinkDown", "ib4 link down (operstate notpresent, no carrier)")},
		{"operstate unknown without carrier is down", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface", "veth0"},
			plugin.NonOK("LinkDown", "veth0 link down (operstate unknown, no carrier)")},
		{"LinkDown before NoAddress", withAddrs(fakeAddrs{}),
			[]string{"--root", faulty, "--interface", "eth0", "--interface", "ib1"},
			plugin.NonOK("LinkDown", "ib1 link down (operstate lowerlayerdown, no carrier) (+1 more)")},
		{"a pattern that matches nothing before single links", withAddrs(fabricAddrs),
			[]string{"--root", faulty, "--interface", "ib0", "--interface-regex", "mlx[0-9]+|hsn[0-9]+"},
			plugin.NonOK("LinkDown", "no interface matches ^(mlx[0-9]+|hsn[0-9]+)$ (+1 more)")},
		{"missing operstate", withAddrs(fabricAddrs),
			[]string{"--root", broken, "--interface", "eth0"},
			plugin.Unknown("network: read %s: no such file or directory", filepath.Join(broken, "sys/class/net/eth0/operstate"))},
		{"an operstate the kernel never writes", withAddrs(fabricAddrs),
			[]string{"--root", broken, "--interface", "eth1"},
			plugin.Unknown("network: %s: unexpected operstate \"sideways\"", filepath.Join(broken, "sys/class/net/eth1/operstate"))},
		{"a missing carrier is not EINVAL", withAddrs(fabricAddrs),
			[]string{"--root", broken, "--interface", "eth2"},
			plugin.Unknown("network: read %s: no such file or directory", filepath.Join(broken, "sys/class/net/eth2/carrier"))},
		{"carrier neither 0 nor 1", withAddrs(fabricAddrs),
			[]string{"--root", broken, "--interface", "eth4"},
			plugin.Unknown("network: read %s: unexpected carrier \"2\"", filepath.Join(broken, "sys/class/net/eth4/carrier"))},
		{"a read error does not hide a fault elsewhere", withAddrs(fabricAddrs),
			[]string{"--root", broken, "--interface", "eth0", "--interface", "eth9"},
			plugin.NonOK("LinkDown", "eth9 missing")},
		{"a read error makes an otherwise healthy node Unknown", withAddrs(fakeAddrs{addrs: map[string][]string{"eth3": {"10.0.0.3"}}}),
			[]string{"--root", broken, "--interface", "eth3", "--interface", "eth1"},
			plugin.Unknown("network: %s: unexpected operstate \"sideways\"", filepath.Join(broken, "sys/class/net/eth1/operstate"))},
		{"permission denied names the file", deps{readFile: eacces, addrs: realAddrs},
			[]string{"--root", healthy, "--interface", "ib0"},
			plugin.Unknown("network: read %s: permission denied", filepath.Join(healthy, "sys/class/net/ib0/operstate"))},
		{"an address lookup that fails", withAddrs(fakeAddrs{errs: map[string]error{"eth0": errors.New("netlink: boom")}}),
			[]string{"--root", healthy, "--interface", "eth0"},
			plugin.Unknown("network: netlink: boom")},
		{"no sysfs", withAddrs(fabricAddrs),
			[]string{"--root", filepath.Join(fixtures, "nonexistent"), "--interface", "eth0"},
			plugin.Unknown("network: list %s: no such file or directory", filepath.Join(fixtures, "nonexistent", "sys/class/net"))},
		{"no interface flag", withAddrs(fabricAddrs),
			[]string{"--root", healthy},
			plugin.Unknown("network: give --interface NAME or --interface-regex RE")},
		{"a bad expression quotes what was given", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface-regex", "ib[0-9"},
			plugin.Unknown("network: --interface-regex \"ib[0-9\": error parsing regexp: missing closing ]: `[0-9`")},
		{"a name that is a path", withAddrs(fabricAddrs),
			[]string{"--root", healthy, "--interface", "../../etc"},
			plugin.Unknown("network: --interface \"../../etc\" is not an interface name")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, line := run(t, tc.deps, tc.args...)
			require.Equal(t, tc.want.Line(), line)
			require.Equal(t, int(tc.want.Status), code)
		})
	}
}

// TestMessageIsStable: the same fault gives the same line, whatever else is
// healthy around it, so NPD does not move the condition's transition time.
func TestMessageIsStable(t *testing.T) {
	args := []string{"--root", filepath.Join(fixtures, "faulty"), "--interface-regex", "ib[0-9]+"}
	_, first := run(t, withAddrs(fakeAddrs{}), args...)
	for range 3 {
		_, again := run(t, withAddrs(fakeAddrs{}), args...)
		require.Equal(t, first, again)
	}
}

func TestParseCarrier(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		b       string
		err     error
		want    bool
		wantErr string
	}{
		{"carrier", "1\n", nil, true, ""},
		{"no carrier", "0\n", nil, false, ""},
		{"EINVAL: the interface is not running", "", &fs.PathError{Op: "read", Path: "/sys/class/net/ib0/carrier", Err: syscall.EINVAL}, false, ""},
		{"a missing file is a failed read", "", &fs.PathError{Op: "open", Path: "/sys/class/net/ib0/carrier", Err: syscall.ENOENT}, false, "no such file or directory"},
		{"EIO is a failed read", "", &fs.PathError{Op: "read", Path: "/sys/class/net/ib0/carrier", Err: syscall.EIO}, false, "input/output error"},
		{"garbage", "yes\n", nil, false, `unexpected carrier "yes"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseCarrier([]byte(tc.b), tc.err)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestUp(t *testing.T) {
	for _, tc := range []struct {
		oper    string
		carrier bool
		want    bool
	}{
		{"up", true, true},
		{"up", false, true},
		{"unknown", true, true},
		{"unknown", false, false},
		{"down", false, false},
		{"down", true, false},
		{"lowerlayerdown", false, false},
		{"dormant", true, false},
		{"testing", true, false},
		{"notpresent", false, false},
	} {
		require.Equal(t, tc.want, Up(tc.oper, tc.carrier), "%s carrier=%v", tc.oper, tc.carrier)
	}
}

func TestDecideFitsTheLine(t *testing.T) {
	down := func(name, oper string) Link { return Link{Name: name, OperState: oper} }
	// Interface names are at most 15 bytes, so real faults fit in their
	// long form; a name (as in a fixture) that leaves room for the short
	// form only, and a pattern longer than the line, exercise the rest.
	shortOnly := "enp175s0f1np1" + strings.Repeat("n", plugin.MaxLine-len("LinkDown: enp175s0f1np1"+" link down (lowerlayerdown, no carrier)"+" (+3 more)"))
	longPattern := "^(" + strings.Repeat("mlx5_[0-9]+|", plugin.MaxLine/len("mlx5_[0-9]+|")) + "ib[0-9]+)$"
	for _, tc := range []struct {
		desc string
		obs  Observation
		cfg  Config
		want string
	}{
		{"long name and state: the short form keeps the count",
			Observation{Links: []Link{down(shortOnly, "lowerlayerdown"), down("enp175s0f2np2", "down"), down("enp175s0f3np3", "down"), down("enp175s0f4np4", "down")}},
			Config{}, "LinkDown: " + shortOnly + " link down (lowerlayerdown, no carrier) (+3 more)"},
		{"the long form when it fits",
			Observation{Links: []Link{down("ib0", "lowerlayerdown"), down("ib1", "down")}},
			Config{}, "LinkDown: ib0 link down (operstate lowerlayerdown, no carrier) (+1 more)"},
		{"the longest real name and state fit the long form",
			Observation{Links: []Link{down("enp175s0f1np1xx", "lowerlayerdown"), down("enp175s0f2np2", "down"), down("enp175s0f3np3", "down"), down("enp175s0f4np4", "down")}},
			Config{}, "LinkDown: enp175s0f1np1xx link down (operstate lowerlayerdown, no carrier) (+3 more)"},
		{"a long pattern is cut, the count kept",
			Observation{Unmatched: []string{longPattern}, Missing: []string{"eth0"}},
			Config{}, ("LinkDown: no interface matches " + longPattern)[:plugin.MaxLine-len(" (+1 more)")] + " (+1 more)"},
		{"OK lists the names that fit",
			Observation{AddrsChecked: true, Links: func() []Link {
				var ls []Link
				for i := range 12 {
					ls = append(ls, Link{Name: fmt.Sprintf("enp%ds0f0np0", 10+i), OperState: "up", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}})
				}
				return ls
			}()},
			Config{RequireAddress: true}, "12 interfaces up with addresses (enp10s0f0np0, enp11s0f0np0, enp12s0f0np0, enp13s0f0np0, " +
				"enp14s0f0np0, enp15s0f0np0, enp16s0f0np0, enp17s0f0np0, +4 more)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			line := Decide(tc.cfg, tc.obs).Line()
			require.Equal(t, tc.want, line)
			require.LessOrEqual(t, len(line), plugin.MaxLine)
		})
	}
}

// FuzzDecideKeepsTheCount: whatever the names, the line fits and ends with
// the number of other faults.
func FuzzDecideKeepsTheCount(f *testing.F) {
	f.Add("ib0", "down", uint8(0))
	f.Add("enp175s0f1np1", "lowerlayerdown", uint8(3))
	f.Add("a-very-long-interface-name-from-a-fixture", "notpresent", uint8(200))
	f.Fuzz(func(t *testing.T, name, oper string, more uint8) {
		// Line collapses white space; interface names have none.
		if name == "" || strings.IndexFunc(name+oper, unicode.IsSpace) >= 0 {
			t.Skip()
		}
		obs := Observation{Links: []Link{{Name: name, OperState: oper}}}
		for i := range int(more) {
			obs.Missing = append(obs.Missing, fmt.Sprintf("~%d", i))
		}
		r := Decide(Config{}, obs)
		line := r.Line()
		require.LessOrEqual(t, len(line), plugin.MaxLine)
		if Up(oper, false) {
			return
		}
		require.Equal(t, plugin.StatusNonOK, r.Status)
		require.True(t, strings.HasPrefix(line, "LinkDown: "), line)
		if more > 0 {
			require.True(t, strings.HasSuffix(line, fmt.Sprintf(" (+%d more)", more)), line)
		}
	})
}
