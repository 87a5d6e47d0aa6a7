package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/xid"
	"github.com/kubemedic/kubemedic/internal/procgroup"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

// Part is one thing a capture collects into one file of the bundle. Each
// part has its own timeout and fails alone.
type Part struct {
	// Name names the part in the manifest, the report and FailedParts.
	Name string
	// File is its file in the bundle.
	File string
	// Command is run with its output (stdout and stderr) as the file; its
	// first word is looked up on PATH, then in the host's usual binary
	// directories under the root; "{root}" in an argument is the root's
	// path. OutputArg, when set, is an argument
	// that names a file the command writes instead (nvidia-bug-report.sh
	// --output-file): the part's file is then that file.
	Command   []string
	OutputArg string
	// Collect makes the file in-process instead of a command.
	Collect func(ctx context.Context, root host.Root, w io.Writer) error
	// Timeout bounds the part. A command runs in its own process group,
	// and the whole group is killed at the timeout: a tool hung on a lost
	// GPU (nvidia-bug-report.sh) cannot hold the capture.
	Timeout time.Duration
	// MaxBytes bounds the file; what is past it is cut and the part is
	// marked truncated, not failed.
	MaxBytes int64
	// Optional: a command that is not installed (dcgmi without DCGM) is
	// skipped, not failed.
	Optional bool
}

// hostBinDirs are where a host's tools are, under the root, when they are
// not on the capture container's PATH.
var hostBinDirs = []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/sbin"}

// lookCommand finds a part's command: on PATH (the capture image's, where
// the NVIDIA container runtime puts nvidia-smi), then among the host's
// binaries under the root. hostTool is true for the latter: it runs
// chrooted into the root, so that it finds the host's libraries and tools.
func lookCommand(name string, root host.Root) (path string, hostTool bool, err error) {
	executable := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if executable(name) {
			return name, false, nil
		}
		if executable(root.Path(name)) {
			return name, true, nil
		}
		return "", false, fmt.Errorf("%s: not found", name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, false, nil
	}
	for _, d := range hostBinDirs {
		if p := filepath.Join(d, name); executable(root.Path(p)) {
			return p, true, nil
		}
	}
	return "", false, fmt.Errorf("%s: not on PATH nor in %s under %s", name, strings.Join(hostBinDirs, ", "), root.Path("/"))
}

// inRoot is p as the chrooted tool sees it; ok is false when p is not
// under the root.
func inRoot(root host.Root, p string) (string, bool) {
	rel, err := filepath.Rel(root.Path("/"), p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	return "/" + rel, true
}

// runPart collects one part into dir/part.File. noChroot runs the host's
// tools in place, for a root that is a plain directory (tests, the demo).
func runPart(ctx context.Context, p Part, root host.Root, dir string, noChroot bool) (res diagnostics.PartResult) {
	res = diagnostics.PartResult{Name: p.Name, File: p.File}
	start := time.Now()
	// A named result: the duration is set on what is returned.
	defer func() { res.Millis = time.Since(start).Milliseconds() }()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	out := filepath.Join(dir, p.File)
	f, err := os.OpenFile(out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer f.Close()
	w := &limitWriter{w: f, left: p.MaxBytes}
	if p.Collect != nil {
		done := make(chan error, 1)
		go func() { done <- p.Collect(ctx, root, w) }()
		select {
		case err := <-done:
			if err != nil {
				res.Error = diagnostics.Truncate(err.Error(), 256)
			}
		case <-ctx.Done():
			res.TimedOut = true
		}
		res.Truncated = w.cut
		return res
	}
	res.Command = p.Command
	path, hostTool, err := lookCommand(p.Command[0], root)
	chroot := hostTool && root.Path("/") != "/" && !noChroot
	if hostTool && !chroot {
		path = root.Path(path)
	}
	if err != nil {
		if p.Optional {
			res.Skipped = err.Error()
			f.Close()
			_ = os.Remove(out)
			res.File = ""
			return res
		}
		res.Error = err.Error()
		return res
	}
	rootArg := root.Path("/")
	if chroot {
		rootArg = "/"
	}
	args := make([]string, 0, len(p.Command)+1)
	for _, a := range p.Command[1:] {
		args = append(args, strings.ReplaceAll(a, "{root}", rootArg))
	}
	var fileOut string
	if p.OutputArg != "" {
		fileOut = filepath.Join(dir, ".out-"+p.File)
		arg := fileOut
		if chroot {
			var ok bool
			if arg, ok = inRoot(root, fileOut); !ok {
				res.Error = fmt.Sprintf("the scratch directory %s is not under the root %s, so the host's %s cannot write into it", dir, root.Path("/"), p.Command[0])
				return res
			}
		}
		args = append(args, p.OutputArg, arg)
	}
	// Its own process group, all of it killed at the timeout: the tool's
	// children (nvidia-bug-report.sh starts many) included. A child that
	// outlives the kill and holds the output open must not hold the
	// capture either.
	cmd := procgroup.Command(ctx, 2*time.Second, path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Dir = dir
	if chroot {
		// A host tool runs in the host's root: its libraries, its
		// helpers, its /proc (the pod shares the host's PID namespace).
		cmd.SysProcAttr.Chroot = root.Path("/")
		cmd.Dir = "/"
	}
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		res.TimedOut = true
		// What is left of the group, if the leader died first.
		procgroup.KillGroup(cmd)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = ptrInt(0)
	case errors.As(err, &ee) && !res.TimedOut:
		res.ExitCode = ptrInt(ee.ExitCode())
	case !res.TimedOut:
		res.Error = diagnostics.Truncate(err.Error(), 256)
	}
	if fileOut != "" {
		// The tool's own file replaces its output, which then goes to the
		// manifest's error when the tool failed.
		// nvidia-bug-report.sh appends .gz when it compresses.
		wrote := ""
		for _, c := range []string{fileOut + ".gz", fileOut} {
			if fi, serr := os.Stat(c); serr == nil && fi.Size() > 0 {
				wrote = c
				break
			}
		}
		switch {
		case wrote != "":
			f.Close()
			if err := os.Rename(wrote, out); err != nil {
				res.Error = err.Error()
			}
		case res.Error == "" && !res.TimedOut:
			res.Error = "wrote no " + filepath.Base(p.File)
		}
		_ = os.Remove(fileOut)
		_ = os.Remove(fileOut + ".gz")
	}
	res.Truncated = w.cut
	return res
}

func ptrInt(i int) *int { return &i }

// limitWriter writes at most left bytes (0: no limit) and then drops the
// rest, remembering that it cut.
type limitWriter struct {
	w    io.Writer
	left int64
	n    int64
	cut  bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left > 0 && l.n+int64(len(p)) > l.left {
		keep := l.left - l.n
		l.cut = true
		if keep > 0 {
			if _, err := l.w.Write(p[:keep]); err != nil {
				return 0, err
			}
			l.n += keep
		}
		return len(p), nil
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// KernelLogTail is a part's Collect: the last max bytes of the kernel log
// (whole records), from the kmsg path under the root.
func KernelLogTail(kmsg string, max int) func(context.Context, host.Root, io.Writer) error {
	return func(ctx context.Context, root host.Root, w io.Writer) error {
		var lines [][]byte
		size := 0
		err := xid.ForEachRecord(ctx, root.Path(kmsg), func(rec []byte) {
			line := append(bytes.TrimRight(bytes.Clone(rec), "\n"), '\n')
			lines = append(lines, line)
			size += len(line)
			for size > max && len(lines) > 1 {
				size -= len(lines[0])
				lines = lines[1:]
			}
		})
		for _, l := range lines {
			if _, werr := w.Write(l); werr != nil {
				return werr
			}
		}
		return err
	}
}

// XidLines is a part's Collect: every NVRM Xid record in the kernel log.
func XidLines(kmsg string) func(context.Context, host.Root, io.Writer) error {
	return func(ctx context.Context, root host.Root, w io.Writer) error {
		var werr error
		err := xid.ForEachRecord(ctx, root.Path(kmsg), func(rec []byte) {
			if werr == nil && bytes.Contains(rec, []byte("NVRM: Xid")) {
				_, werr = w.Write(append(bytes.TrimRight(bytes.Clone(rec), "\n"), '\n'))
			}
		})
		if werr != nil {
			return werr
		}
		return err
	}
}

// DirFiles is a part's Collect: the files under dir (the detectors' state
// directory) as one text file, each headed by its path.
func DirFiles(dir string) func(context.Context, host.Root, io.Writer) error {
	return func(ctx context.Context, root host.Root, w io.Writer) error {
		base := root.Path(dir)
		if _, err := os.Stat(base); errors.Is(err, os.ErrNotExist) {
			// A fact about the node, not a failure of the capture.
			_, err := fmt.Fprintf(w, "%s does not exist: the detectors have written no state on this node\n", dir)
			return err
		}
		return filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(base, p)
			_, err = fmt.Fprintf(w, "==> %s <==\n%s\n", filepath.Join(dir, rel), bytes.TrimRight(b, "\n"))
			return err
		})
	}
}

// DefaultKmsg is the kernel log a capture reads.
const DefaultKmsg = "/dev/kmsg"

// DefaultParts are what collect-gpu-diagnostics takes, with the issue's
// timeouts: nvidia-bug-report.sh under a hard timeout (it hangs on a lost
// GPU), nvidia-smi -q, the kernel log's Xid lines and its last 4 MiB, the
// kubelet's and containerd's journal of the last two hours, lspci for
// NVIDIA devices, the detectors' state, and dcgmi diag -r 1 where DCGM is.
//
// kmsg is the kernel log under the root: /dev/kmsg, or a file of kmsg
// records or dmesg lines (DefaultKmsg).
func DefaultParts(bugReportTimeout time.Duration, kmsg string) []Part {
	return []Part{
		{Name: "gpu-list", File: "nvidia-smi-gpus.csv", Timeout: 30 * time.Second, MaxBytes: 64 << 10,
			Command: []string{"nvidia-smi", "--query-gpu=index,pci.bus_id,uuid,serial", "--format=csv,noheader"}},
		{Name: "nvidia-smi-q", File: "nvidia-smi-q.txt", Timeout: time.Minute, MaxBytes: 8 << 20,
			Command: []string{"nvidia-smi", "-q"}},
		{Name: "xid-lines", File: "xid.log", Timeout: 30 * time.Second, MaxBytes: 4 << 20, Collect: XidLines(kmsg)},
		{Name: "kernel-log", File: "kmsg.log", Timeout: 30 * time.Second, MaxBytes: 4 << 20, Collect: KernelLogTail(kmsg, 4<<20)},
		{Name: "detect-state", File: "kubemedic-detect-state.txt", Timeout: 10 * time.Second, MaxBytes: 4 << 20, Collect: DirFiles("/var/lib/kubemedic/detect")},
		{Name: "lspci", File: "lspci.txt", Timeout: 30 * time.Second, MaxBytes: 4 << 20, Optional: true,
			Command: []string{"lspci", "-vvv", "-d", "10de:"}},
		{Name: "journal", File: "journal-kubelet-containerd.log", Timeout: time.Minute, MaxBytes: 32 << 20, Optional: true,
			Command: []string{"journalctl", "--root={root}", "--no-pager", "-u", "kubelet", "-u", "containerd", "--since", "-2h"}},
		{Name: "nvidia-bug-report", File: "nvidia-bug-report.log.gz", Timeout: bugReportTimeout, Optional: true,
			Command: []string{"nvidia-bug-report.sh", "--safe-mode"}, OutputArg: "--output-file"},
		{Name: "dcgmi-diag", File: "dcgmi-diag.txt", Timeout: 5 * time.Minute, MaxBytes: 4 << 20, Optional: true,
			Command: []string{"dcgmi", "diag", "-r", "1"}},
	}
}
