package netlink

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// classNet is where the kernel lists network interfaces.
const classNet = "/sys/class/net"

// AddrSource gives the addresses of an interface. It is the seam between the
// check and the kernel's address table, which a fixture tree cannot hold.
type AddrSource interface {
	Addrs(name string) ([]netip.Addr, error)
}

// NetAddrs reads addresses from the kernel over netlink
// (net.InterfaceByName(name).Addrs()), in the caller's network namespace.
type NetAddrs struct{}

var _ AddrSource = NetAddrs{}

// Addrs implements AddrSource.
func (NetAddrs) Addrs(name string) ([]netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("look up interface %s: %w", name, err)
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	var out []netip.Addr
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// Pattern is an --interface-regex, anchored at both ends.
type Pattern struct {
	re *regexp.Regexp
	// text is the anchored form shown in messages.
	text string
}

// CompilePattern anchors and compiles an RE2 expression: "ib[0-9]+" matches
// ib0 but not vib0 or ib0.8001.
func CompilePattern(expr string) (Pattern, error) {
	// Compile the expression alone first, so that a syntax error quotes
	// what the user wrote.
	if _, err := regexp.Compile(expr); err != nil {
		return Pattern{}, err
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return Pattern{}, err
	}
	text := "^" + expr + "$"
	if strings.Contains(expr, "|") {
		text = "^(" + expr + ")$"
	}
	return Pattern{re: re, text: text}, nil
}

// String is the anchored expression, e.g. "^ib[0-9]+$".
func (p Pattern) String() string { return p.text }

// Selection is which interfaces a Config asks for, given the node's list.
type Selection struct {
	// Present are the interfaces to read, sorted and without duplicates.
	Present []string
	// Missing are --interface names the node does not list.
	Missing []string
	// Unmatched are the patterns that match no interface.
	Unmatched []string
}

// Select picks, from the interfaces the node lists, the ones cfg names or
// matches. It is pure.
func Select(cfg Config, names []string) Selection {
	var s Selection
	listed := map[string]bool{}
	for _, n := range names {
		listed[n] = true
	}
	picked := map[string]bool{}
	for _, n := range cfg.Names {
		if listed[n] {
			picked[n] = true
		} else if !slices.Contains(s.Missing, n) {
			s.Missing = append(s.Missing, n)
		}
	}
	for _, p := range cfg.Patterns {
		matched := false
		for _, n := range names {
			if p.re.MatchString(n) {
				picked[n] = true
				matched = true
			}
		}
		if !matched && !slices.Contains(s.Unmatched, p.text) {
			s.Unmatched = append(s.Unmatched, p.text)
		}
	}
	for n := range picked {
		s.Present = append(s.Present, n)
	}
	slices.Sort(s.Present)
	slices.Sort(s.Missing)
	return s
}

// sysfs reads /sys/class/net under a root.
type sysfs struct {
	root host.Root
	// readFile reads a file by its full path: os.ReadFile, or in tests a
	// reader that returns the errors only sysfs gives (EINVAL).
	readFile func(string) ([]byte, error)
}

// interfaces lists the interfaces, leaving out the plain files that share the
// directory (bonding_masters).
func (s sysfs) interfaces() ([]string, error) {
	dir := s.root.Path(classNet)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, cause(err))
	}
	var names []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// operStates are the values of /sys/class/net/<if>/operstate (RFC 2863
// ifOperStatus as the kernel spells it, Documentation/ABI/testing/sysfs-class-net).
var operStates = []string{"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"}

// link reads one interface's operstate and carrier. Read errors go to
// Link.Err, naming the file.
func (s sysfs) link(name string) Link {
	l := Link{Name: name}
	p := s.root.Path(path.Join(classNet, name, "operstate"))
	b, err := s.readFile(p)
	if err != nil {
		l.Err = fmt.Errorf("read %s: %w", p, cause(err))
		return l
	}
	l.OperState = strings.TrimSpace(string(b))
	if !slices.Contains(operStates, l.OperState) {
		l.Err = fmt.Errorf("%s: unexpected operstate %q", p, l.OperState)
		return l
	}
	p = s.root.Path(path.Join(classNet, name, "carrier"))
	l.Carrier, err = parseCarrier(s.readFile(p))
	if err != nil {
		l.Err = fmt.Errorf("read %s: %w", p, err)
	}
	return l
}

// parseCarrier reads the result of reading a carrier file. The kernel answers
// EINVAL for an interface that is not running (administratively down): that
// is no carrier, not a failed read. A missing file is a failed read.
func parseCarrier(b []byte, err error) (bool, error) {
	if errors.Is(err, syscall.EINVAL) {
		return false, nil
	}
	if err != nil {
		return false, cause(err)
	}
	switch v := strings.TrimSpace(string(b)); v {
	case "1":
		return true, nil
	case "0":
		return false, nil
	default:
		return false, fmt.Errorf("unexpected carrier %q", v)
	}
}

// cause drops the path from a *fs.PathError: messages name the file
// themselves, once.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Observe reads the selected interfaces' state and, when addrs is not nil,
// the addresses of those whose link is up. It reads only; Decide judges.
func Observe(sys sysfs, cfg Config, addrs AddrSource) (Observation, error) {
	names, err := sys.interfaces()
	if err != nil {
		return Observation{}, err
	}
	sel := Select(cfg, names)
	obs := Observation{Missing: sel.Missing, Unmatched: sel.Unmatched, AddrsChecked: addrs != nil}
	for _, n := range sel.Present {
		l := sys.link(n)
		if l.Err == nil && addrs != nil && Up(l.OperState, l.Carrier) {
			l.Addrs, l.Err = addrs.Addrs(n)
		}
		obs.Links = append(obs.Links, l)
	}
	return obs, nil
}
