package xid

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// fixtureRoot is a host root with a boot ID, an uptime and a kernel log
// file, and a state directory beside it.
type fixtureRoot struct {
	t     *testing.T
	root  string
	state string
}

func newFixtureRoot(t *testing.T, bootID, uptime, kmsgFixture string) *fixtureRoot {
	f := &fixtureRoot{t: t, root: t.TempDir(), state: filepath.Join(t.TempDir(), "detect")}
	f.write("/proc/sys/kernel/random/boot_id", bootID+"\n")
	f.write("/proc/uptime", uptime+" 12345.67\n")
	f.setLog(readFixture(t, kmsgFixture))
	return f
}

func (f *fixtureRoot) write(path, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, path)
	require.NoError(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(f.t, os.WriteFile(p, []byte(content), 0o644))
}

func (f *fixtureRoot) setLog(b []byte) { f.write("/var/log/kmsg.txt", string(b)) }

func (f *fixtureRoot) dropReset(name, content string) {
	f.t.Helper()
	dir := filepath.Join(f.state, ResetsDir)
	require.NoError(f.t, os.MkdirAll(dir, 0o755))
	require.NoError(f.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

// run runs kubemedic-detect xid and returns the exit code, the line and
// stderr.
func (f *fixtureRoot) run(args ...string) (int, string, string) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	all := append([]string{"xid", "--root=" + f.root, "--state-dir=" + f.state, "--kmsg=/var/log/kmsg.txt"}, args...)
	code := plugin.Main([]*plugin.Command{Command()}, all, &out, &errOut)
	return code, strings.TrimSuffix(out.String(), "\n"), errOut.String()
}

func (f *fixtureRoot) expect(wantCode int, wantLine string, args ...string) string {
	f.t.Helper()
	code, line, stderr := f.run(args...)
	require.Equal(f.t, wantLine, line, "stderr: %s", stderr)
	require.Equal(f.t, wantCode, code)
	return stderr
}

const (
	boot1 = "3f2a9c44-6e1d-4b7a-9c33-2d8e1f5a7b02"
	boot2 = "8d1e0b6a-2c4f-4e5d-a7b9-0c1d2e3f4a5b"
)

func TestRunnerEndToEnd(t *testing.T) {
	f := newFixtureRoot(t, boot1, "1800.00", "dmesg-two-gpus.txt")
	f.expect(1, "XidResetRequired: Xid 46 on 0000:3b:00.0 (+1 GPU): GPU timeout; reset required")

	// The state holds the events, by GPU.
	var st State
	b, err := os.ReadFile(filepath.Join(f.state, "xid.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	require.Equal(t, boot1, st.BootID)
	require.Equal(t, []string{"0000:03:00.0", "0000:3b:00.0", "0000:86:00.0"}, sortedBuses(&st))
	require.Len(t, st.GPUs[gpuA].Events, 3)

	// The reset-gpu operation resets the first GPU and records it.
	f.expect(0, "recorded GPU reset of 0000:3b:00.0", "--record-reset=00000000:3B:00.0")
	f.expect(1, "XidResetRequired: Xid 154 on 0000:86:00.0: driver asks reset; reset required")

	// The reset pod of the second GPU drops a file; junk beside it is
	// logged and skipped.
	f.dropReset("0000:86:00.0", boot1+" 1700.25\n")
	f.dropReset("0000:af:00.0", "not a reset record\n")
	f.dropReset("not-a-bus", boot1+" 1.0\n")
	stderr := f.expect(0, OKMessage)
	require.Contains(t, stderr, filepath.Join(f.state, ResetsDir, "0000:af:00.0"))
	require.Contains(t, stderr, filepath.Join(f.state, ResetsDir, "not-a-bus"))

	// Same again: nothing changes.
	f.expect(0, OKMessage)
}

func TestRunnerRingBufferWrapAndNewBoot(t *testing.T) {
	f := newFixtureRoot(t, boot1, "4000.00", "kmsg-fallen-off-bus.txt")
	want := "XidRebootRequired: Xid 79 on 0000:2b:00.0: fell off the bus; reboot required"
	f.expect(1, want)
	// The ring buffer wraps: the Xid records are gone, only noise is left.
	f.setLog([]byte("6,99999,5000000000,-;systemd[1]: Started Daily apt upgrade.\n"))
	f.expect(1, want)
	// A reset record of a previous boot does not clear it.
	f.dropReset("0000:2b:00.0", boot2+" 4500.0\n")
	f.expect(1, want)
	// A new boot discards the state.
	f.write("/proc/sys/kernel/random/boot_id", boot2+"\n")
	f.expect(0, OKMessage)
	f.setLog(readFixture(t, "kmsg-fallen-off-bus.txt"))
	// The Xid in the log is from the new boot now, but the reset record
	// (boot2, uptime 4500) is after it.
	f.expect(0, OKMessage)
}

func TestRunnerRecurringDBE(t *testing.T) {
	f := newFixtureRoot(t, boot1, "1000.0", "kmsg-dbe-recurring.txt")
	f.dropReset("0000:3b:00.0", boot1+" 500.0")
	f.expect(1, "XidResetRequired: Xid 48 on 0000:3b:00.0: DBE ECC again after reset; reset required")
}

func TestRunnerUnknownXid(t *testing.T) {
	f := newFixtureRoot(t, boot1, "1000.0", "kmsg-fallen-off-bus.txt")
	f.setLog([]byte("4,1,5000000,-;NVRM: Xid (PCI:0000:2b:00): 14, Channel 00000001\n"))
	stderr := f.expect(0, OKMessage)
	require.Contains(t, stderr, "Found Xid not in the catalog")
	f.expect(1, "XidResetRequired: Xid 14 on 0000:2b:00.0: unknown Xid; reset required", "--unknown-xid=reset")
}

func TestRunnerUnknown(t *testing.T) {
	f := newFixtureRoot(t, boot1, "1000.0", "kmsg-fallen-off-bus.txt")
	code, line, _ := f.run("--kmsg=/dev/nonexistent-kmsg")
	require.Equal(t, 2, code)
	require.Contains(t, line, filepath.Join(f.root, "/dev/nonexistent-kmsg"))

	code, line, _ = f.run("--unknown-xid=maybe")
	require.Equal(t, 2, code)
	require.Equal(t, `xid: --unknown-xid="maybe": want ignore or reset`, line)

	code, line, _ = f.run("--record-reset=gpu0")
	require.Equal(t, 2, code)
	require.Equal(t, `xid: --record-reset="gpu0" is not a PCI bus ID`, line)

	require.NoError(t, os.Remove(filepath.Join(f.root, "/proc/uptime")))
	code, line, _ = f.run("--record-reset=0000:3b:00.0")
	require.Equal(t, 2, code)
	require.Contains(t, line, "uptime")

	require.NoError(t, os.Remove(filepath.Join(f.root, "/proc/sys/kernel/random/boot_id")))
	code, line, _ = f.run()
	require.Equal(t, 2, code)
	require.Contains(t, line, "boot_id")
}

func TestRunnerDiscardsCorruptState(t *testing.T) {
	f := newFixtureRoot(t, boot1, "4000.00", "kmsg-fallen-off-bus.txt")
	require.NoError(t, os.MkdirAll(f.state, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.state, "xid.json"), []byte("{not json"), 0o644))
	stderr := f.expect(1, "XidRebootRequired: Xid 79 on 0000:2b:00.0: fell off the bus; reboot required")
	require.Contains(t, stderr, "Discarding unreadable state")
}

func TestParseResetRecord(t *testing.T) {
	for in, want := range map[string]int64{
		boot1 + " 1234.56\n": 1234560000,
		boot1 + "\t0.01":     10000,
		boot1 + " 5":         5000000,
		boot1:                -1,
		boot1 + " x":         -1,
		boot1 + " -1":        -1,
		boot1 + " NaN":       -1,
		boot1 + " 1 2":       -1,
		"":                   -1,
	} {
		id, usec, err := ParseResetRecord([]byte(in))
		if want < 0 {
			require.Error(t, err, in)
			continue
		}
		require.NoError(t, err, in)
		require.Equal(t, boot1, id)
		require.Equal(t, want, usec, in)
	}
}

// sortedBuses is the state's bus IDs in order.
func sortedBuses(st *State) []string {
	var out []string
	for b := range st.GPUs {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}
