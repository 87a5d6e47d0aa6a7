package xid

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/stretchr/testify/require"
)

const fixtures = "../testdata/xid"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	require.NoError(t, err)
	return b
}

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		desc string
		line string
		ok   bool
		want Record
	}{
		{"kmsg", "4,2208,118220104,-;NVRM: hello", true, Record{Seq: 2208, Usec: 118220104, Msg: []byte("NVRM: hello")}},
		{"kmsg continuation flag", "4,2209,7,c;part", true, Record{Seq: 2209, Usec: 7, Msg: []byte("part")}},
		{"kmsg with caller ID field", "6,12,345,-,caller=T1;msg", true, Record{Seq: 12, Usec: 345, Msg: []byte("msg")}},
		{"kmsg message with semicolons", "6,1,2,-;a;b", true, Record{Seq: 1, Usec: 2, Msg: []byte("a;b")}},
		{"kmsg CRLF", "6,1,2,-;msg\r\n", true, Record{Seq: 1, Usec: 2, Msg: []byte("msg")}},
		{"kmsg empty message", "6,1,2,-;", true, Record{Seq: 1, Usec: 2, Msg: []byte{}}},
		{"continuation line", " SUBSYSTEM=pci", false, Record{}},
		{"kmsg missing usec", "6,1;msg", false, Record{}},
		{"kmsg non-numeric seq", "6,x,2,-;msg", false, Record{}},
		{"kmsg seq too long", "6,1234567890123456789,2,-;msg", false, Record{}},
		{"kmsg empty prio", ",1,2,-;msg", false, Record{}},
		{"dmesg", "[ 1234.567890] NVRM: x", true, Record{Seq: -1, Usec: 1234567890, Msg: []byte("NVRM: x")}},
		{"dmesg short fraction", "[ 1600.5] m", true, Record{Seq: -1, Usec: 1600500000, Msg: []byte("m")}},
		{"dmesg nanoseconds", "[1.123456789] m", true, Record{Seq: -1, Usec: 1123456, Msg: []byte("m")}},
		{"dmesg zero", "[    0.000000] Linux", true, Record{Seq: -1, Usec: 0, Msg: []byte("Linux")}},
		{"dmesg raw priority", "<4>[   12.000001] m", true, Record{Seq: -1, Usec: 12000001, Msg: []byte("m")}},
		{"dmesg -T", "[Tue Jun 11 10:00:00 2024] m", false, Record{}},
		{"dmesg no fraction", "[ 12] m", false, Record{}},
		{"dmesg unterminated", "[ 12.5 m", false, Record{}},
		{"bare message", "NVRM: Xid (PCI:0000:3b:00): 79, x", false, Record{}},
		{"empty", "", false, Record{}},
		{"bad raw priority", "<x>[ 1.0] m", false, Record{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := ParseRecord([]byte(tc.line))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseXid(t *testing.T) {
	for _, tc := range []struct {
		desc string
		msg  string
		ok   bool
		want XidLine
	}{
		{"new format, quoted unknown pid", "NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", true, XidLine{Bus: "0000:2b:00.0", Xid: 79}},
		{"pid without name", "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.", true, XidLine{Bus: "0000:10:1c.0", Xid: 63}},
		{"old format, no PCI:, no pid", "NVRM: Xid (0000:03:00): 14, Channel 00000001", true, XidLine{Bus: "0000:03:00.0", Xid: 14}},
		{"8-digit domain, upper case, function", "NVRM: Xid (00000000:3B:00.0): 62, pid=1, PMU halt", true, XidLine{Bus: "0000:3b:00.0", Xid: 62}},
		{"8-digit non-zero domain keeps its digits", "NVRM: Xid (PCI:00010000:3b:00.1): 46, x", true, XidLine{Bus: "10000:3b:00.1", Xid: 46}},
		{"number at end of message", "NVRM: Xid (PCI:0000:3b:00): 46", true, XidLine{Bus: "0000:3b:00.0", Xid: 46}},
		{"leading blank", "  NVRM: Xid (PCI:0000:3b:00): 46, x", true, XidLine{Bus: "0000:3b:00.0", Xid: 46}},
		{"154 reset", "NVRM: Xid (PCI:0000:3b:00): 154, pid=1, name=x, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.GPUReset}},
		{"154 reboot", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.NodeReboot}},
		{"154 drain p2p", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.DrainP2P}},
		{"154 drain and reset", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.DrainAndReset}},
		{"154 back to none", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.None}},
		{"154 name wins over code", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x8 (Drain and Reset)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.DrainAndReset}},
		{"154 code without name", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 to 0x2", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.NodeReboot}},
		{"154 IMEX domain by code", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x5", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.RecoverIMEXDomain}},
		{"154 bus reset by name", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x6 (Bus Reset)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.BusReset}},
		{"154 unknown action", "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x40 (Something New)", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.Unknown}},
		{"154 without action text", "NVRM: Xid (PCI:0000:3b:00): 154", true, XidLine{Bus: "0000:3b:00.0", Xid: 154, Named: gpuaction.Unknown}},
		{"GPU at line", "NVRM: GPU at PCI:0000:2b:00: GPU-4a1c7b3e-9f0d-2b8e-6c5a-0e3f1d7a9b21", false, XidLine{}},
		{"SXid", "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, NVLink: fatal error", false, XidLine{}},
		{"quoted in another message", `audit: info="echo NVRM: Xid (PCI:0000:2b:00): 46, fake"`, false, XidLine{}},
		{"number glued to text", "NVRM: Xid (PCI:0000:2b:00): 79x, y", false, XidLine{}},
		{"no number", "NVRM: Xid (PCI:0000:2b:00): , y", false, XidLine{}},
		{"zero", "NVRM: Xid (PCI:0000:2b:00): 0, y", false, XidLine{}},
		{"too big", "NVRM: Xid (PCI:0000:2b:00): 99999, y", false, XidLine{}},
		{"no colon after address", "NVRM: Xid (PCI:0000:3b:00) 31, x", false, XidLine{}},
		{"unclosed address", "NVRM: Xid (PCI:0000:2b:00: 79, x", false, XidLine{}},
		{"bad hex", "NVRM: Xid (PCI:zzzz:2b:00): 79, x", false, XidLine{}},
		{"short domain", "NVRM: Xid (PCI:00:2b:00): 79, x", false, XidLine{}},
		{"function 8", "NVRM: Xid (PCI:0000:2b:00.8): 79, x", false, XidLine{}},
		{"empty", "", false, XidLine{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := ParseXid([]byte(tc.msg))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNormalizeBus(t *testing.T) {
	for in, want := range map[string]string{
		"0000:2b:00":       "0000:2b:00.0",
		"0000:3B:00.0":     "0000:3b:00.0",
		"00000000:3B:00.0": "0000:3b:00.0",
		"00000001:3b:00.7": "0001:3b:00.7",
		"0000:3b:00.":      "",
		"0000:3b:0":        "",
		"0000:3b:00:0":     "",
		"000000000:3b:00":  "",
		"../../etc":        "",
	} {
		got, ok := NormalizeBus([]byte(in))
		require.Equal(t, want, got, in)
		require.Equal(t, want != "", ok, in)
	}
}

// resetGPURegex is the reset-gpu operation template's pattern for the bus
// ID it resets (deploy/: it takes the first match in the message).
var resetGPURegex = regexp.MustCompile(`\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b`)

func scanAll(data []byte) []Found {
	var out []Found
	ScanLog(data, func(f Found) { out = append(out, f) })
	return out
}

func TestScanLogFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []Found
	}{
		{"kmsg-fallen-off-bus.txt", []Found{
			{"0000:10:1c.0", Event{Xid: 63, Usec: 118220104, Seq: 2208}},
			{"0000:2b:00.0", Event{Xid: 13, Usec: 118220107, Seq: 2209}},
			{"0000:2b:00.0", Event{Xid: 79, Usec: 3411290881, Seq: 2210}},
			// "79 pid broken ...": the number is followed by a blank, so it counts.
			{"0000:2b:00.0", Event{Xid: 79, Usec: 3411300002, Seq: 2213}},
		}},
		{"dmesg-two-gpus.txt", []Found{
			{"0000:03:00.0", Event{Xid: 14, Usec: 301551020, Seq: -1}},
			{"0000:86:00.0", Event{Xid: 43, Usec: 1200000001, Seq: -1}},
			{"0000:3b:00.0", Event{Xid: 46, Usec: 1500250000, Seq: -1}},
			{"0000:86:00.0", Event{Xid: 154, Usec: 1600500000, Seq: -1, Named: gpuaction.GPUReset}},
			{"0000:3b:00.0", Event{Xid: 62, Usec: 1700000000, Seq: -1}},
			{"0000:3b:00.0", Event{Xid: 13, Usec: 1901000000, Seq: -1}},
		}},
		{"kmsg-dbe-recurring.txt", []Found{
			{"0000:3b:00.0", Event{Xid: 48, Usec: 100000000, Seq: 200}},
			{"0000:3b:00.0", Event{Xid: 63, Usec: 100000100, Seq: 201}},
			{"0000:3b:00.0", Event{Xid: 48, Usec: 900000000, Seq: 300}},
			{"0000:3b:00.0", Event{Xid: 154, Usec: 900000010, Seq: 301, Named: gpuaction.None}},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := scanAll(readFixture(t, tc.file))
			require.Equal(t, tc.want, got)
			for _, f := range got {
				require.Equal(t, []string{f.Bus, f.Bus}, resetGPURegex.FindStringSubmatch(f.Bus))
			}
		})
	}
}

func TestScanLogReadsKmsgRecordsOneByOne(t *testing.T) {
	// What one read of /dev/kmsg returns: a record and its continuation lines.
	rec := "3,2210,3411290881,-;NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:2b:00.0\n"
	require.Equal(t, []Found{{"0000:2b:00.0", Event{Xid: 79, Usec: 3411290881, Seq: 2210}}}, scanAll([]byte(rec)))
	// A record without its newline, and a line far longer than a kmsg record.
	long := "[ 5.000000] NVRM: Xid (PCI:0000:2b:00): 46, " + strings.Repeat("y", 1<<20)
	require.Equal(t, []Found{{"0000:2b:00.0", Event{Xid: 46, Usec: 5000000, Seq: -1}}}, scanAll([]byte(long)))
}

// FuzzParseKmsg checks that parsing arbitrary kernel log text never panics
// and that whatever it finds is well formed: a bus ID the reset-gpu
// template's regex takes whole, an Xid in range, a time that is not
// negative.
func FuzzParseKmsg(f *testing.F) {
	for _, name := range []string{"kmsg-fallen-off-bus.txt", "dmesg-two-gpus.txt", "kmsg-dbe-recurring.txt"} {
		data := readFixture(f, name)
		f.Add(data)
		for _, line := range strings.Split(string(data), "\n") {
			if len(line) < 400 {
				f.Add([]byte(line))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ScanLog(data, func(x Found) {
			if m := resetGPURegex.FindStringSubmatch(x.Bus); m == nil || m[1] != x.Bus {
				t.Fatalf("bus %q does not match the reset-gpu regex", x.Bus)
			}
			if x.Xid < 1 || x.Xid > maxXid {
				t.Fatalf("xid %d out of range", x.Xid)
			}
			if x.Usec < 0 || x.Seq < -1 {
				t.Fatalf("usec %d seq %d", x.Usec, x.Seq)
			}
			if x.Xid != 154 && x.Named != gpuaction.None {
				t.Fatalf("xid %d names an action", x.Xid)
			}
			if b, ok := NormalizeBus([]byte(x.Bus)); !ok || b != x.Bus {
				t.Fatalf("bus %q does not normalise to itself: %q", x.Bus, b)
			}
		})
		// A record re-emitted in either format parses to the same record.
		line, _, _ := bytes.Cut(data, []byte("\n"))
		r, ok := ParseRecord(line)
		if !ok {
			return
		}
		if r.Usec < 0 {
			t.Fatalf("negative usec %d", r.Usec)
		}
		kmsg := fmt.Appendf(nil, "6,%d,%d,-;%s", max(r.Seq, 0), r.Usec, r.Msg)
		if k, ok := ParseRecord(kmsg); !ok || k.Usec != r.Usec || !bytes.Equal(k.Msg, r.Msg) {
			t.Fatalf("kmsg %q: got %+v, %v; want %+v", kmsg, k, ok, r)
		}
		dmesg := fmt.Appendf(nil, "[%5d.%06d] %s", r.Usec/1e6, r.Usec%1e6, r.Msg)
		if d, ok := ParseRecord(dmesg); !ok || d.Usec != r.Usec || d.Seq != -1 || !bytes.Equal(d.Msg, r.Msg) {
			t.Fatalf("dmesg %q: got %+v, %v; want %+v", dmesg, d, ok, r)
		}
	})
}
