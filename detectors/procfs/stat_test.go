package procfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const fixtures = "../testdata/procfs"

func readFixture(t testing.TB, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{fixtures}, elem...)...))
	require.NoError(t, err)
	return b
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Stat
	}{
		{"systemd", Stat{PID: 1, Comm: "systemd", State: 'S', PPID: 0, StartTicks: 23}},
		{"kthreadd", Stat{PID: 2, Comm: "kthreadd", State: 'S', PPID: 0, StartTicks: 23}},
		{"sd-pam", Stat{PID: 1235, Comm: "(sd-pam)", State: 'S', PPID: 1, StartTicks: 4567}},
		{"kworker", Stat{PID: 123, Comm: "kworker/u8:2-events_unbound", State: 'I', PPID: 2, StartTicks: 150}},
		{"parens", Stat{PID: 4242, Comm: "a) b) c", State: 'D', PPID: 1, StartTicks: 987654321}},
		{"space", Stat{PID: 77, Comm: " ", State: 'D', PPID: 1, StartTicks: 4567}},
		{"empty-comm", Stat{PID: 78, Comm: "", State: 'S', PPID: 1, StartTicks: 4567}},
		{"tab", Stat{PID: 79, Comm: "py\tthon3", State: 'S', PPID: 1, StartTicks: 4567}},
		{"newline", Stat{PID: 80, Comm: "evil\n1 (x) R", State: 'S', PPID: 1, StartTicks: 4567}},
		{"non-utf8", Stat{PID: 81, Comm: "\xff\xfe\x80bin", State: 'D', PPID: 1, StartTicks: 4567}},
		{"python3-d", Stat{PID: 31337, Comm: "python3", State: 'D', PPID: 31300, StartTicks: 18446744073709551615}},
		{"no-trailing-newline", Stat{PID: 82, Comm: "nvidia-smi", State: 'S', PPID: 1, StartTicks: 4567}},
		{"zombie", Stat{PID: 83, Comm: "defunct", State: 'Z', PPID: 1, StartTicks: 4567}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := readFixture(t, "stat", tc.file)
			got, err := ParseStat(b)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)

			raw, comm, err := ParseStatRaw(b)
			require.NoError(t, err)
			require.Empty(t, raw.Comm)
			require.Equal(t, tc.want.Comm, string(comm))
		})
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, tc := range []struct {
		file    string
		wantErr string
	}{
		{"bad-truncated", "fields, want at least 22"},
		{"bad-no-comm", "no (comm)"},
		{"bad-pid", `pid "-1" is not a number`},
		{"bad-pid-overflow", "is not a number"},
		{"bad-state", `state "?" is not one letter`},
		{"bad-starttime-overflow", `starttime "18446744073709551616" is not a number`},
		{"bad-double-space", "state \"\" is not one letter"},
		{"bad-empty", "no (comm)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := ParseStat(readFixture(t, "stat", tc.file))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestKernelThread(t *testing.T) {
	require.True(t, Stat{PID: 2}.KernelThread())
	require.True(t, Stat{PID: 123, PPID: 2}.KernelThread())
	require.False(t, Stat{PID: 1}.KernelThread())
	require.False(t, Stat{PID: 4242, PPID: 1}.KernelThread())
}

func TestParseStatRawAllocatesNothing(t *testing.T) {
	b := readFixture(t, "stat", "python3-d")
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := ParseStatRaw(b); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func fixtureSeeds(f *testing.F, dir string) {
	entries, err := os.ReadDir(filepath.Join(fixtures, dir))
	require.NoError(f, err)
	for _, e := range entries {
		f.Add(readFixture(f, dir, e.Name()))
	}
}

// FuzzParseStat checks that ParseStat never panics, agrees with
// ParseStatRaw, and that what it accepts it reads back from the same line
// written anew.
func FuzzParseStat(f *testing.F) {
	fixtureSeeds(f, "stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		if open := bytes.IndexByte(b, '('); open >= 0 {
			want := bytes.LastIndexByte(b, ')')
			if want < open {
				want = -1
			}
			if got := lastCloseParen(b, open); got != want {
				t.Fatalf("lastCloseParen(%q, %d) = %d, want %d", b, open, got, want)
			}
		}
		s, err := ParseStat(b)
		raw, comm, rawErr := ParseStatRaw(b)
		if (err == nil) != (rawErr == nil) {
			t.Fatalf("ParseStat error %v, ParseStatRaw error %v", err, rawErr)
		}
		if err != nil {
			return
		}
		raw.Comm = string(comm)
		if raw != s {
			t.Fatalf("ParseStat %+v, ParseStatRaw %+v", s, raw)
		}
		if s.PID < 0 || s.PPID < 0 || !isLetter(s.State) {
			t.Fatalf("bad stat %+v", s)
		}
		line := []byte(formatStat(s))
		again, err := ParseStat(line)
		if err != nil {
			t.Fatalf("reparse %q: %v", line, err)
		}
		if again != s {
			t.Fatalf("reparse %q: got %+v, want %+v", line, again, s)
		}
	})
}

func formatStat(s Stat) string {
	return itoa(uint64(s.PID)) + " (" + s.Comm + ") " + string(s.State) + " " + itoa(uint64(s.PPID)) +
		" 0 0 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " + itoa(s.StartTicks) + " 0 0\n"
}

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// BenchmarkParseStatRaw is the per-process cost of the dstate scan's parse.
func BenchmarkParseStatRaw(b *testing.B) {
	line := []byte("4242 (python3) S 1 4242 4242 0 -1 4194560 2286 0 12 0 4 2 0 0 20 0 1 0 5242 23248896 1310 " +
		"18446744073709551615 94791135399936 94791135419817 140736353762496 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 " +
		"94791135435824 94791135437440 94791966478336 140736353766083 140736353766103 140736353766103 140736353767403 0\n")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, _, err := ParseStatRaw(line); err != nil {
			b.Fatal(err)
		}
	}
}
