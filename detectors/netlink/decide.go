package netlink

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/reason"
)

// Config is what the check looks for.
type Config struct {
	// Names must each exist and be up (--interface).
	Names []string
	// Patterns must each match at least one interface, and every interface
	// they match must be up (--interface-regex).
	Patterns []Pattern
	// RequireAddress: an up interface without an address is a fault
	// (--require-address). Honoured only where addresses can be read.
	RequireAddress bool
	// IgnoreLinkLocal: IPv6 link-local addresses (fe80::/10), which the
	// kernel adds to every up interface, do not count (--ignore-link-local).
	IgnoreLinkLocal bool
}

// Link is what the node says about one selected interface.
type Link struct {
	Name string
	// OperState is the content of operstate, e.g. "up", "down".
	OperState string
	// Carrier is carrier = 1; false for 0 and for an interface that is not
	// running (the kernel's EINVAL).
	Carrier bool
	// Addrs are the interface's addresses; nil unless they were looked up
	// (Observation.AddrsChecked and the link is up).
	Addrs []netip.Addr
	// Err is the first failed read; the fields after it are unset.
	Err error
}

// Observation is what Observe read for a Config.
type Observation struct {
	// Missing are the --interface names that /sys/class/net does not list.
	Missing []string
	// Unmatched are the anchored patterns that match no interface.
	Unmatched []string
	// Links are the selected interfaces, sorted by name.
	Links []Link
	// AddrsChecked: the addresses of up links were looked up.
	AddrsChecked bool
}

// Up is the kernel's view of a usable link: operstate up, or operstate
// unknown with carrier (loopback and virtual devices that do not report an
// operational state).
func Up(operState string, carrier bool) bool {
	return operState == "up" || (operState == "unknown" && carrier)
}

// hasAddress says whether addrs has an address that counts.
func hasAddress(addrs []netip.Addr, ignoreLinkLocal bool) bool {
	for _, a := range addrs {
		if ignoreLinkLocal && a.Is6() && a.IsLinkLocalUnicast() {
			continue
		}
		if a.IsValid() {
			return true
		}
	}
	return false
}

// fault is one thing wrong, in the order the message names them: LinkDown
// before NoAddress, a pattern that matches nothing (a whole kind of link
// absent) before single interfaces, then by name.
type fault struct {
	reason string
	rank   int
	key    string
	// long is the message; short is a shorter form for when long and the
	// "(+N more)" tail do not fit on the line.
	long, short string
}

func (f fault) less(g fault) bool {
	if f.rank != g.rank {
		return f.rank < g.rank
	}
	return f.key < g.key
}

const (
	rankUnmatched = iota
	rankLinkDown
	rankNoAddress
)

// Decide judges an observation. It is pure.
//
// Every fault makes the result NonOK: LinkDown for a missing interface, a
// pattern that matches nothing, or a link that is not up; NoAddress for an up
// link without an address. The message names the first fault and counts the
// others: "ib0 link down (operstate down, no carrier) (+2 more)". A failed
// read of one interface does not hide faults found on others; with no fault,
// it makes the result Unknown: OK needs every selected interface read.
func Decide(cfg Config, obs Observation) plugin.Result {
	var faults []fault
	for _, p := range obs.Unmatched {
		m := "no interface matches " + p
		faults = append(faults, fault{reason.LinkDown, rankUnmatched, p, m, m})
	}
	for _, n := range obs.Missing {
		m := n + " missing"
		faults = append(faults, fault{reason.LinkDown, rankLinkDown, n, m, m})
	}
	var up []string
	var firstErr error
	for _, l := range obs.Links {
		switch {
		case l.Err != nil:
			if firstErr == nil {
				firstErr = l.Err
			}
		case !Up(l.OperState, l.Carrier):
			carrier := "no carrier"
			if l.Carrier {
				carrier = "carrier"
			}
			faults = append(faults, fault{reason.LinkDown, rankLinkDown, l.Name,
				fmt.Sprintf("%s link down (operstate %s, %s)", l.Name, l.OperState, carrier),
				fmt.Sprintf("%s link down (%s, %s)", l.Name, l.OperState, carrier)})
		case obs.AddrsChecked && cfg.RequireAddress && !hasAddress(l.Addrs, cfg.IgnoreLinkLocal):
			m := l.Name + " has no address"
			faults = append(faults, fault{reason.NoAddress, rankNoAddress, l.Name, m, m})
		default:
			up = append(up, l.Name)
		}
	}
	if len(faults) > 0 {
		first := faults[0]
		for _, f := range faults[1:] {
			if f.less(first) {
				first = f
			}
		}
		tail := ""
		if n := len(faults) - 1; n > 0 {
			tail = fmt.Sprintf(" (+%d more)", n)
		}
		return plugin.NonOK(first.reason, "%s", fit(len(first.reason)+2, tail, first.long, first.short))
	}
	if firstErr != nil {
		return plugin.Unknown("network: %v", firstErr)
	}
	return plugin.OK("%s", okMessage(up, obs.AddrsChecked && cfg.RequireAddress))
}

// fit returns the first of the candidates that, after prefix bytes and
// followed by tail, fits on a line; failing that, the last candidate cut
// short so that tail still shows.
func fit(prefix int, tail string, candidates ...string) string {
	room := plugin.MaxLine - prefix - len(tail)
	for _, c := range candidates {
		if len(c) <= room {
			return c + tail
		}
	}
	return cut(candidates[len(candidates)-1], room) + tail
}

// cut shortens s to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// okMessage is "2 interfaces up with addresses (eth0, ib0)", listing as many
// names as fit: "8 interfaces up with addresses (ib0, ib1, ib2, +5 more)".
func okMessage(up []string, withAddrs bool) string {
	head := fmt.Sprintf("%d interfaces up", len(up))
	if len(up) == 1 {
		head = "1 interface up"
	}
	if withAddrs {
		if len(up) == 1 {
			head += " with an address"
		} else {
			head += " with addresses"
		}
	}
	all := head + " (" + strings.Join(up, ", ") + ")"
	if len(all) <= plugin.MaxLine {
		return all
	}
	for k := len(up) - 1; k >= 0; k-- {
		m := head + " (" + strings.Join(append(up[:k:k], fmt.Sprintf("+%d more", len(up)-k)), ", ") + ")"
		if len(m) <= plugin.MaxLine {
			return m
		}
	}
	return head
}
