package capture

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// fakeNode is a host root with a kernel log holding an Xid, a boot ID, the
// detectors' state, and tools on PATH: an nvidia-smi that answers -q and
// the GPU list, and whatever else the test writes.
func fakeNode(t *testing.T) (host.Root, string) {
	t.Helper()
	root := t.TempDir()
	write := func(p, content string, mode os.FileMode) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), mode))
	}
	write("/dev/kmsg", "6,1,100,-;Linux version 6.8.0\n3,2,2000,-;NVRM: Xid (PCI:0000:18:00): 46, pid=12345, name=python3, GPU timeout\n6,3,3000,-;eth0: link up\n", 0o644)
	write("/proc/sys/kernel/random/boot_id", "b007b007-0000-4000-8000-000000000001\n", 0o644)
	write("/var/lib/kubemedic/detect/xid.json", `{"bootID":"b007"}`, 0o644)
	bin := filepath.Join(root, "tools")
	write("/tools/nvidia-smi", `#!/bin/sh
case "$1" in
  -q) echo "==============NVSMI LOG=============="; echo "GPU 00000000:18:00.0"; echo "    Product Name : NVIDIA H100 80GB HBM3";;
  --query-gpu=*) echo "0, 00000000:18:00.0, GPU-6ee485d3-0000-4000-8000-000000000000, 1650923000001";;
  *) exit 2;;
esac
`, 0o755)
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	return host.Root(root), bin
}

// untar reads a bundle in the spool: its file names in order, and their
// contents by base name.
func untar(t *testing.T, path string) ([]string, map[string][]byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return testsupport.Untar(t, b)
}

func TestCaptureMakesOneBundle(t *testing.T) {
	root, _ := fakeNode(t)
	spool := t.TempDir()
	c := &Capture{Root: root, Node: "gpu-node-002", Operation: "gpu-xid-reset.gpu-node-002.abc-0", Spool: spool,
		Trigger: &diagnostics.Trigger{Type: "GPUXidError", Reason: "KubemedicDetect", Message: "XidResetRequired: Xid 46 on 0000:18:00.0"},
		Parts:   DefaultParts(10*time.Second, DefaultKmsg), Now: func() time.Time { return time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC) }}
	m, sp, err := c.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, "gpu-node-002/gpu-xid-reset.gpu-node-002.abc-0.tar.gz", sp.Key)
	require.Equal(t, "b007b007-0000-4000-8000-000000000001", m.BootID)
	require.Equal(t, []diagnostics.GPU{{Index: "0", BusID: "00000000:18:00.0", UUID: "GPU-6ee485d3-0000-4000-8000-000000000000", Serial: "1650923000001"}}, m.GPUs)

	byName := map[string]diagnostics.PartResult{}
	for _, p := range m.Parts {
		byName[p.Name] = p
	}
	require.False(t, byName["nvidia-smi-q"].Failed(), "%+v", byName["nvidia-smi-q"])
	require.NotEmpty(t, byName["nvidia-bug-report"].Skipped, "not on this node: skipped, not failed")
	require.NotEmpty(t, byName["dcgmi-diag"].Skipped)

	// The spool holds the bundle and its sidecar, nothing else.
	entries, err := os.ReadDir(spool)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"gpu-node-002__gpu-xid-reset.gpu-node-002.abc-0.tar.gz", "gpu-node-002__gpu-xid-reset.gpu-node-002.abc-0.json"}, names)

	b, err := os.ReadFile(sp.Path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, hex.EncodeToString(sum[:]), sp.SHA256)
	require.EqualValues(t, len(b), sp.Size)

	tarNames, files := untar(t, sp.Path)
	require.Equal(t, "gpu-xid-reset.gpu-node-002.abc-0/manifest.json", tarNames[0], "the manifest first")
	var got diagnostics.Manifest
	require.NoError(t, json.Unmarshal(files["manifest.json"], &got))
	require.Equal(t, "gpu-node-002", got.Node)
	require.Equal(t, "GPUXidError", got.Trigger.Type)
	for _, f := range got.Files {
		content := files[f.Name]
		s := sha256.Sum256(content)
		require.Equal(t, hex.EncodeToString(s[:]), f.SHA256, f.Name)
		require.EqualValues(t, len(content), f.Size, f.Name)
	}
	require.Equal(t, "3,2,2000,-;NVRM: Xid (PCI:0000:18:00): 46, pid=12345, name=python3, GPU timeout\n", string(files["xid.log"]))
	require.Contains(t, string(files["kmsg.log"]), "Linux version 6.8.0")
	require.Contains(t, string(files["nvidia-smi-q.txt"]), "NVIDIA H100 80GB HBM3")
	require.Contains(t, string(files["kubemedic-detect-state.txt"]), "==> /var/lib/kubemedic/detect/xid.json <==")

	r := NewReport(m, sp, false, nil, 0)
	require.Equal(t, v1alpha1.DiagnosticsCaptured, r.Result)
	require.Contains(t, r.Message, "not on this node")
	require.Contains(t, r.Message, "no store configured")
	parsed, err := diagnostics.ParseReport(r.Encode())
	require.NoError(t, err)
	require.Equal(t, r, parsed)
}

// nvidia-bug-report.sh hangs on a lost GPU: the part is killed with its
// whole process group at its timeout, the capture goes on and is Partial.
func TestHungPartIsKilledWithItsGroup(t *testing.T) {
	root, bin := fakeNode(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "nvidia-bug-report.sh"), []byte("#!/bin/sh\nsleep 300 &\necho $! > "+pidFile+"\nwait\n"), 0o755))
	c := &Capture{Root: root, Node: "n1", Operation: "op", Spool: t.TempDir(), Parts: DefaultParts(time.Second, DefaultKmsg), Now: time.Now}
	start := time.Now()
	m, sp, err := c.Run(context.Background())
	require.NoError(t, err)
	require.Less(t, time.Since(start), 8*time.Second, "the hung part held the capture")
	var bug diagnostics.PartResult
	for _, p := range m.Parts {
		if p.Name == "nvidia-bug-report" {
			bug = p
		}
	}
	require.True(t, bug.TimedOut, "%+v", bug)
	require.True(t, bug.Failed())
	require.GreaterOrEqual(t, bug.Millis, int64(1000), "its duration is recorded: at least its timeout")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }, 5*time.Second, 50*time.Millisecond,
		"the tool's child %d outlived the timeout", pid)

	r := NewReport(m, sp, false, nil, 0)
	require.Equal(t, v1alpha1.DiagnosticsPartial, r.Result)
	require.Equal(t, []string{"nvidia-bug-report (timed out after " + (time.Duration(bug.Millis) * time.Millisecond).String() + ")"}, r.FailedParts)
	_, err = diagnostics.ParseReport(r.Encode())
	require.NoError(t, err)
}

// nvidia-bug-report.sh writes its own file (with .gz appended): that file
// is the part's.
func TestToolOutputFileIsThePart(t *testing.T) {
	root, bin := fakeNode(t)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "nvidia-bug-report.sh"), []byte(`#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --output-file) out=$2; shift;; esac; shift; done
echo "bug report" | gzip > "$out.gz"
echo "nvidia-bug-report.sh: wrote $out.gz"
`), 0o755))
	dir := t.TempDir()
	p := DefaultParts(10*time.Second, DefaultKmsg)[7]
	require.Equal(t, "nvidia-bug-report", p.Name)
	r := runPart(context.Background(), p, root, dir, false)
	require.False(t, r.Failed(), "%+v", r)
	f, err := os.Open(filepath.Join(dir, "nvidia-bug-report.log.gz"))
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(gz)
	require.NoError(t, err)
	require.Equal(t, "bug report\n", string(b))
	left, err := filepath.Glob(filepath.Join(dir, ".out-*"))
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestPartResults(t *testing.T) {
	root, bin := fakeNode(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "fails"), []byte("#!/bin/sh\necho broken; exit 3\n"), 0o755))
	r := runPart(context.Background(), Part{Name: "x", File: "x.txt", Command: []string{"fails"}, Timeout: 5 * time.Second}, root, dir, false)
	require.True(t, r.Failed())
	require.Equal(t, "x (exit status 3)", r.Why())
	b, err := os.ReadFile(filepath.Join(dir, "x.txt"))
	require.NoError(t, err)
	require.Equal(t, "broken\n", string(b), "the output of a failed command is kept")

	r = runPart(context.Background(), Part{Name: "gone", File: "g.txt", Command: []string{"no-such-tool"}, Timeout: time.Second}, root, dir, false)
	require.True(t, r.Failed(), "a required tool that is missing fails the part")
	require.Contains(t, r.Why(), "no-such-tool: not on PATH")

	r = runPart(context.Background(), Part{Name: "big", File: "big.txt", Command: []string{"sh", "-c", "head -c 10000 /dev/zero"}, Timeout: 5 * time.Second, MaxBytes: 100}, root, dir, false)
	require.False(t, r.Failed())
	require.True(t, r.Truncated)
	fi, err := os.Stat(filepath.Join(dir, "big.txt"))
	require.NoError(t, err)
	require.EqualValues(t, 100, fi.Size())
}
