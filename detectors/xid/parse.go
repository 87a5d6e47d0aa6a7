package xid

import (
	"bytes"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
)

// Record is one kernel log record.
type Record struct {
	// Seq is the kmsg sequence number, -1 when unknown (a dmesg line).
	Seq int64
	// Usec is the time since boot in microseconds.
	Usec int64
	// Msg is the message; it aliases the input.
	Msg []byte
}

// Largest numbers the parsers accept: a field with more digits is not a
// record, which also keeps the arithmetic from overflowing.
const (
	maxSeqDigits  = 18
	maxSecDigits  = 12
	maxXidDigits  = 5
	maxXid        = 65535
	maxPrioDigits = 4
)

// ParseRecord parses one line of kernel log, in either of two shapes:
//
//	6,1234,5678901,-;NVRM: Xid ...       /dev/kmsg: prio,seq,usec,flags[,...];message
//	[ 5678.901234] NVRM: Xid ...         dmesg: [seconds.fraction] message
//
// A dmesg line may start with a raw priority ("<4>[ 12.3] ..."). ok is
// false for anything else: kmsg continuation lines (" SUBSYSTEM=pci"),
// dmesg lines without a timestamp or with a human one (dmesg -T), blank or
// malformed lines. A trailing "\r" and "\n" are dropped from Msg.
func ParseRecord(line []byte) (r Record, ok bool) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return Record{}, false
	}
	if line[0] == '<' {
		end := bytes.IndexByte(line, '>')
		if end < 2 || end > maxPrioDigits+1 || !allDigits(line[1:end]) {
			return Record{}, false
		}
		line = line[end+1:]
		if len(line) == 0 || line[0] != '[' {
			return Record{}, false
		}
	}
	if line[0] == '[' {
		return parseDmesg(line)
	}
	return parseKmsg(line)
}

func parseKmsg(line []byte) (Record, bool) {
	semi := bytes.IndexByte(line, ';')
	if semi < 0 {
		return Record{}, false
	}
	hdr := line[:semi]
	// prio
	c := bytes.IndexByte(hdr, ',')
	if c < 1 || c > maxPrioDigits || !allDigits(hdr[:c]) {
		return Record{}, false
	}
	hdr = hdr[c+1:]
	// seq
	c = bytes.IndexByte(hdr, ',')
	if c < 0 {
		return Record{}, false
	}
	seq, ok := parseUint(hdr[:c], maxSeqDigits)
	if !ok {
		return Record{}, false
	}
	hdr = hdr[c+1:]
	// usec, then flags and any fields a newer kernel adds (caller ID).
	c = bytes.IndexByte(hdr, ',')
	if c < 0 {
		return Record{}, false
	}
	usec, ok := parseUint(hdr[:c], maxSeqDigits)
	if !ok {
		return Record{}, false
	}
	return Record{Seq: seq, Usec: usec, Msg: line[semi+1:]}, true
}

func parseDmesg(line []byte) (Record, bool) {
	end := bytes.IndexByte(line, ']')
	if end < 0 {
		return Record{}, false
	}
	ts := bytes.TrimLeft(line[1:end], " ")
	dot := bytes.IndexByte(ts, '.')
	if dot < 0 {
		return Record{}, false
	}
	sec, ok := parseUint(ts[:dot], maxSecDigits)
	if !ok {
		return Record{}, false
	}
	frac := ts[dot+1:]
	if len(frac) == 0 || len(frac) > 9 || !allDigits(frac) {
		return Record{}, false
	}
	var us int64
	for i := range 6 {
		us *= 10
		if i < len(frac) {
			us += int64(frac[i] - '0')
		}
	}
	msg := line[end+1:]
	if len(msg) > 0 && msg[0] == ' ' {
		msg = msg[1:]
	}
	return Record{Seq: -1, Usec: sec*1_000_000 + us, Msg: msg}, true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseUint parses 1 to maxDigits decimal digits.
func parseUint(b []byte, maxDigits int) (int64, bool) {
	if len(b) == 0 || len(b) > maxDigits {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// XidLine is an Xid parsed from an NVRM message.
type XidLine struct {
	// Bus is the GPU's PCI address, normalised (NormalizeBus).
	Bus string
	Xid int
	// Named is the action an Xid 154 names; gpuaction.Unknown when it names
	// none we know; 0 (gpuaction.None) for other Xids.
	Named gpuaction.Action
}

var xidMarker = []byte("NVRM: Xid (")

// ParseXid parses an NVIDIA driver Xid message, old and new formats:
//
//	NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, ...
//	NVRM: Xid (0000:03:00): 14, Channel 00000001
//	NVRM: Xid (PCI:0000:3b:00): 154, pid=..., name=..., GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
//
// The marker must start the message (leading blanks aside): the same text
// quoted inside another message (an audit record of a command line, say)
// is not an Xid. NVSwitch "SXid" lines and anything else are not Xids
// (ok false).
func ParseXid(msg []byte) (XidLine, bool) {
	msg = bytes.TrimLeft(msg, " \t")
	if !bytes.HasPrefix(msg, xidMarker) {
		return XidLine{}, false
	}
	rest := msg[len(xidMarker):]
	closing := bytes.IndexByte(rest, ')')
	if closing < 0 {
		return XidLine{}, false
	}
	addr := rest[:closing]
	if len(addr) > 4 && (bytes.EqualFold(addr[:4], []byte("PCI:"))) {
		addr = addr[4:]
	}
	bus, ok := NormalizeBus(addr)
	if !ok {
		return XidLine{}, false
	}
	rest = rest[closing+1:]
	if len(rest) == 0 || rest[0] != ':' {
		return XidLine{}, false
	}
	rest = bytes.TrimLeft(rest[1:], " ")
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	xid, ok := parseUint(rest[:n], maxXidDigits)
	if !ok || xid < 1 || xid > maxXid {
		return XidLine{}, false
	}
	rest = rest[n:]
	if len(rest) > 0 && rest[0] != ',' && rest[0] != ' ' {
		return XidLine{}, false
	}
	x := XidLine{Bus: bus, Xid: int(xid)}
	if xid == 154 {
		x.Named = parseRecoveryAction(rest)
	}
	return x, true
}

var recoveryMarker = []byte(" to 0x")

// parseRecoveryAction reads "... changed from 0x0 (None) to 0x1 (GPU Reset
// Required)". The name in parentheses wins when we know it; otherwise the
// number, read as NVML's nvmlDeviceGpuRecoveryAction_t.
func parseRecoveryAction(text []byte) gpuaction.Action {
	i := bytes.LastIndex(text, recoveryMarker)
	if i < 0 {
		return gpuaction.Unknown
	}
	rest := text[i+len(recoveryMarker):]
	n := 0
	var code int64
	for n < len(rest) && n < 8 && hexVal(rest[n]) >= 0 {
		code = code*16 + int64(hexVal(rest[n]))
		n++
	}
	if n == 0 {
		return gpuaction.Unknown
	}
	rest = rest[n:]
	if len(rest) > 2 && rest[0] == ' ' && rest[1] == '(' {
		if end := bytes.IndexByte(rest, ')'); end > 2 {
			name := rest[2:end]
			if a, ok := gpuaction.Parse(string(name)); ok {
				return a
			}
		}
	}
	a, _ := gpuaction.FromCode(code)
	return a
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	default:
		return -1
	}
}

// NormalizeBus turns a PCI address as the driver prints it into
// "dddd:bb:dd.f", lowercase: "0000:2b:00" -> "0000:2b:00.0",
// "00000000:3B:00.0" -> "0000:3b:00.0". A domain of more than four digits
// loses its leading zeros down to four; the function defaults to 0.
func NormalizeBus(addr []byte) (string, bool) {
	// domain:bus:device[.function]
	c1 := bytes.IndexByte(addr, ':')
	if c1 < 0 {
		return "", false
	}
	domain := addr[:c1]
	rest := addr[c1+1:]
	c2 := bytes.IndexByte(rest, ':')
	if c2 != 2 {
		return "", false
	}
	busNo := rest[:2]
	rest = rest[3:]
	var dev, fn []byte
	switch len(rest) {
	case 2:
		dev, fn = rest, []byte("0")
	case 4:
		if rest[2] != '.' {
			return "", false
		}
		dev, fn = rest[:2], rest[3:]
	default:
		return "", false
	}
	if len(domain) < 4 || len(domain) > 8 || !allHex(domain) || !allHex(busNo) || !allHex(dev) || fn[0] < '0' || fn[0] > '7' {
		return "", false
	}
	for len(domain) > 4 && domain[0] == '0' {
		domain = domain[1:]
	}
	var buf [8 + 1 + 2 + 1 + 2 + 2]byte
	out := buf[:0]
	out = appendLower(out, domain)
	out = append(out, ':')
	out = appendLower(out, busNo)
	out = append(out, ':')
	out = appendLower(out, dev)
	out = append(out, '.', fn[0])
	return string(out), true
}

func allHex(b []byte) bool {
	for _, c := range b {
		if hexVal(c) < 0 {
			return false
		}
	}
	return true
}

func appendLower(dst, src []byte) []byte {
	for _, c := range src {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// Found is an Xid found in the kernel log.
type Found struct {
	Bus string
	Event
}

// ScanLog calls fn for every Xid record in data: kmsg records or dmesg
// lines, one per line, as ParseRecord reads them. It is pure, so that it can
// be fuzzed, and allocates only for the Xids it finds.
func ScanLog(data []byte, fn func(Found)) {
	for len(data) > 0 {
		var line []byte
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			line, data = data, nil
		}
		// Cheap filter first: almost every line is noise.
		if !bytes.Contains(line, xidMarker) {
			continue
		}
		r, ok := ParseRecord(line)
		if !ok {
			continue
		}
		x, ok := ParseXid(r.Msg)
		if !ok {
			continue
		}
		fn(Found{Bus: x.Bus, Event: Event{Xid: x.Xid, Usec: r.Usec, Seq: r.Seq, Named: x.Named}})
	}
}
