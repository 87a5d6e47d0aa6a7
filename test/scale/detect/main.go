// Command detect times whole kubemedic-detect invocations on large fixtures
// and the shell plugins ops write by hand for the same job, on the same
// fixtures, and prints wall time, CPU time and peak RSS for each.
//
//	go run ./test/scale/detect [-n 30] [-bin path/to/kubemedic-detect] [-keep]
//
// Fixtures: dstate with 10,000 processes (a few of them pods stuck in D),
// xid with 1 MiB of kernel log, nfs with 100 mounts. The targets from the
// detectors issue are printed beside the numbers: each invocation at most
// 30 ms wall and 20 MiB peak RSS, and at least 5x less CPU than the shell.
// A last section shows the floor under every check: kubemedic-detect with
// no check, and Go's hello world with and without cgo. The numbers are
// measurements, not a gate: CI does not run this.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kubemedic/kubemedic/detectors/dstate/dstatetest"
)

func main() {
	n := flag.Int("n", 30, "invocations per case")
	bin := flag.String("bin", "", "kubemedic-detect binary (default: go build it)")
	keep := flag.Bool("keep", false, "keep the fixtures and shell plugins, and print their directory (to profile one case)")
	flag.Parse()
	if err := run(*n, *bin, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "detect scale:", err)
		os.Exit(1)
	}
}

type sample struct {
	wall time.Duration
	cpu  time.Duration
	rss  int64 // KiB
	code int
	out  string
}

type stats struct {
	wallMedian, wallP90, cpuMedian time.Duration
	rssMax                         int64
	out                            string
	codes                          []int
}

func run(n int, bin string, keep bool) error {
	work, err := os.MkdirTemp("", "kubemedic-detect-scale-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("fixtures kept in %s\n\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	if bin == "" {
		bin = filepath.Join(work, "kubemedic-detect")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubemedic-detect")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build (run from the repository root): %w", err)
		}
	}

	// The kubelet's /pods, empty: every D-state pod process is an orphan.
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","items":[]}`)
	}))
	defer kubelet.Close()
	token := filepath.Join(work, "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		return err
	}
	// An NFS "server" that accepts connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	root := filepath.Join(work, "root")
	if err := dstatetest.WriteFixture(root, 10000, 3); err != nil {
		return fmt.Errorf("dstate fixture: %w", err)
	}
	if err := writeHostFiles(root); err != nil {
		return err
	}
	if err := writeKmsg(filepath.Join(root, "kmsg"), 1<<20); err != nil {
		return err
	}
	if err := writeMounts(root, 100, port); err != nil {
		return err
	}
	shells := filepath.Join(work, "sh")
	if err := writeShellPlugins(shells); err != nil {
		return err
	}

	cases := []struct {
		name   string
		detect []string
		shell  []string
	}{
		{"dstate, 10,000 processes",
			[]string{"dstate", "--root=" + root, "--state-dir=" + filepath.Join(work, "state-dstate"), "--min-duration=0s",
				"--kubelet-url=" + kubelet.URL, "--token-file=" + token, "--node=n"},
			[]string{filepath.Join(shells, "dstate.sh"), root, kubelet.URL}},
		{"xid, 1 MiB kernel log",
			[]string{"xid", "--root=" + root, "--state-dir=" + filepath.Join(work, "state-xid"), "--kmsg=/kmsg"},
			[]string{filepath.Join(shells, "xid.sh"), root}},
		{"nfs, 100 mounts",
			[]string{"nfs", "--root=" + root, "--state-dir=" + filepath.Join(work, "state-nfs"), "--mountinfo=/proc/1/mountinfo",
				"--fstab=false", "--probe-timeout=5s"},
			[]string{filepath.Join(shells, "nfs.sh"), root}},
	}

	fmt.Printf("kubemedic-detect invocation cost, %d runs each (median wall, p90 wall, median CPU user+sys, max peak RSS)\n\n", n)
	fmt.Printf("%-26s %-16s %9s %9s %9s %9s  %s\n", "case", "implementation", "wall", "wall p90", "CPU", "RSS MiB", "output")
	for _, c := range cases {
		d, err := measure(n, append([]string{bin}, c.detect...))
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		s, err := measure(n, c.shell)
		if err != nil {
			return fmt.Errorf("%s (shell): %w", c.name, err)
		}
		row(c.name, "kubemedic-detect", d)
		row("", "shell plugin", s)
		ratio := float64(s.cpuMedian) / float64(max(d.cpuMedian, time.Microsecond))
		fmt.Printf("%-26s %-16s wall<=30ms:%s rss<=20MiB:%s cpu %.1fx less than shell (>=5x:%s)\n\n", "", "targets",
			ok(d.wallMedian <= 30*time.Millisecond), ok(d.rssMax <= 20*1024), ratio, ok(ratio >= 5))
	}
	return floor(n, bin, work)
}

// floor measures what starting a process costs before any check runs:
// kubemedic-detect with no check (it prints its usage and exits 2), and
// Go's hello world built with cgo, as kubemedic-detect is for NVML and
// DCGM, and without.
func floor(n int, bin, work string) error {
	d, err := measure(n, []string{bin})
	if err != nil {
		return fmt.Errorf("start-up: %w", err)
	}
	row("start-up floor", "no check", d)
	for _, h := range []struct {
		name, cgo, src string
	}{
		{"hello, cgo", "1", "package main\n\n// #include <stdlib.h>\nimport \"C\"\n\nimport \"os\"\n\nfunc main() { C.free(nil); os.Stdout.WriteString(\"ok\\n\") }\n"},
		{"hello, static", "0", "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"ok\\n\") }\n"},
	} {
		dir := filepath.Join(work, "hello-cgo"+h.cgo)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(h.src), 0o644); err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-o", "hello", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+h.cgo, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("%-26s %-16s not built: %v: %s\n", "", h.name, err, out)
			continue
		}
		s, err := measure(n, []string{filepath.Join(dir, "hello")})
		if err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		row("", h.name, s)
	}
	return nil
}

func ok(b bool) string {
	if b {
		return "met"
	}
	return "MISSED"
}

func row(name, impl string, s stats) {
	fmt.Printf("%-26s %-16s %9s %9s %9s %9.1f  exit %v: %s\n", name, impl,
		s.wallMedian.Round(10*time.Microsecond), s.wallP90.Round(10*time.Microsecond), s.cpuMedian.Round(10*time.Microsecond),
		float64(s.rssMax)/1024, slices.Compact(s.codes), s.out)
}

func measure(n int, argv []string) (stats, error) {
	var samples []sample
	for i := 0; i < n+1; i++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		var out strings.Builder
		cmd.Stdout = &out
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if cmd.ProcessState == nil {
			return stats{}, err
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		rss, err := peakRSS(argv)
		if err != nil {
			return stats{}, err
		}
		s := sample{
			wall: wall,
			cpu:  time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
			rss:  rss,
			code: cmd.ProcessState.ExitCode(),
			out:  strings.TrimSpace(out.String()),
		}
		if i > 0 { // the first run warms the page cache
			samples = append(samples, s)
		}
	}
	var st stats
	walls := make([]time.Duration, len(samples))
	cpus := make([]time.Duration, len(samples))
	for i, s := range samples {
		walls[i], cpus[i] = s.wall, s.cpu
		st.rssMax = max(st.rssMax, s.rss)
		st.codes = append(st.codes, s.code)
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	slices.Sort(st.codes)
	st.wallMedian, st.wallP90, st.cpuMedian = walls[len(walls)/2], walls[len(walls)*9/10], cpus[len(cpus)/2]
	st.out = samples[len(samples)-1].out
	if len(st.out) > 60 {
		st.out = st.out[:60] + "..."
	}
	return st, nil
}

// peakRSS runs argv under GNU time and returns the peak RSS in KiB of the
// process and its descendants. Not from our own wait4: Go starts children
// with CLONE_VM|CLONE_VFORK, so at exec the kernel carries this program's
// own RSS into the child's ru_maxrss, and every number would read ~15 MiB.
func peakRSS(argv []string) (int64, error) {
	f, err := os.CreateTemp("", "rss")
	if err != nil {
		return 0, err
	}
	f.Close()
	defer os.Remove(f.Name())
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", f.Name()}, argv...)...)
	_ = cmd.Run() // the exit code is the measured command's
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return 0, fmt.Errorf("/usr/bin/time (GNU time): %w", err)
	}
	lines := strings.Fields(string(b))
	if len(lines) == 0 {
		return 0, fmt.Errorf("/usr/bin/time printed nothing for %v", argv)
	}
	var kib int64
	if _, err := fmt.Sscan(lines[len(lines)-1], &kib); err != nil {
		return 0, fmt.Errorf("/usr/bin/time output %q: %w", b, err)
	}
	return kib, nil
}

func writeHostFiles(root string) error {
	files := map[string]string{
		"proc/sys/kernel/random/boot_id": "6f1b2c3d-0000-4000-8000-0000000000aa\n",
		"proc/uptime":                    "86400.00 170000.00\n",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeKmsg writes size bytes of kernel log in /dev/kmsg record format:
// ordinary boot and runtime noise with a handful of Xids among it.
func writeKmsg(path string, size int) error {
	noise := []string{
		"6,%d,%d,-;EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
		"6,%d,%d,-;IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
		"4,%d,%d,-;mlx5_core 0000:1a:00.0: mlx5_pcie_event:301:(pid 812): PCIe slot advertised sufficient power (75W).",
		"6,%d,%d,-;NVRM: GPU at PCI:0000:3b:00: GPU-6d6a5c1e-4b0e-7f1c-2a3b-9c8d7e6f5a4b",
		"5,%d,%d,-;audit: type=1400 audit(1732181234.123:456): apparmor=\"STATUS\" operation=\"profile_load\" name=\"nvidia_modprobe\"",
	}
	xids := []string{
		"4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=40123, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address",
		"4,%d,%d,-;NVRM: Xid (PCI:0000:5d:00): 31, pid=40124, name=python3, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS",
		"4,%d,%d,-;NVRM: Xid (PCI:0000:3b:00): 119, pid=40125, name=python3, Timeout after 6s of waiting for RPC response from GPU0 GSP!",
	}
	var b strings.Builder
	seq, usec := 1, 1000
	for i := 0; b.Len() < size; i++ {
		tmpl := noise[i%len(noise)]
		if i%997 == 500 {
			tmpl = xids[(i/997)%len(xids)]
		}
		fmt.Fprintf(&b, tmpl+"\n", seq, usec)
		seq++
		usec += 1370
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// writeMounts writes a host mountinfo with n NFS mounts (on the local
// "server") among the usual system mounts, and their mount points.
func writeMounts(root string, n, port int) error {
	var b strings.Builder
	b.WriteString("22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n")
	b.WriteString("23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")
	b.WriteString("24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n")
	for i := 0; i < n; i++ {
		mp := fmt.Sprintf("/mnt/project%03d", i)
		if err := os.MkdirAll(filepath.Join(root, mp), 0o755); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%d 22 0:%d / %s rw,relatime shared:%d - nfs4 127.0.0.1:/export/project%03d rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,port=%d,timeo=600,retrans=2,sec=sys,clientaddr=127.0.0.1,local_lock=none,addr=127.0.0.1\n",
			100+i, 60+i, mp, 300+i, i, port)
	}
	p := filepath.Join(root, "proc/1/mountinfo")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(b.String()), 0o644)
}

// The shell plugins are written the way hand-made NPD plugins are: small,
// readable, one tool per step. They are not strawmen: each uses one awk over
// all files where a naive loop would fork per process.
var shellPlugins = map[string]string{
	"dstate.sh": `#!/bin/bash
# D-state processes whose pod is gone.
root=$1 kubelet=$2
pods=$(curl -sk --max-time 5 "$kubelet/pods" | grep -o '"uid":"[^"]*"' | cut -d'"' -f4)
count=0 first=""
for f in $(awk '$3 == "D" { print FILENAME }' "$root"/proc/[0-9]*/stat); do
  dir=${f%/stat}
  uid=$(grep -o 'pod[0-9a-f_-]\{36\}' "$dir/cgroup" | head -1 | sed 's/^pod//; s/_/-/g')
  [ -z "$uid" ] && continue
  if ! grep -q "$uid" <<<"$pods"; then
    count=$((count+1)); [ -z "$first" ] && first=$uid
  fi
done
if [ "$count" -gt 0 ]; then echo "$count D-state processes of deleted pods; pod $first"; exit 1; fi
echo "no D-state orphans"
`,
	"xid.sh": `#!/bin/bash
# The worst Xid in the kernel log.
root=$1
worst=$(grep -o 'NVRM: Xid (PCI:[0-9a-f:]*): [0-9]*' "$root/kmsg" | awk '{ x=$NF+0; if (x==79) r=2; else if (x==46||x==62||x==64||x==95||x==109||x==119||x==120||x==140) r=1; else r=0; if (r>best) {best=r; line=$0} } END { if (best>0) print best, line }')
if [ -n "$worst" ]; then echo "Xid: $worst"; exit 1; fi
echo "no actionable Xid"
`,
	"nfs.sh": `#!/bin/bash
# Every NFS mount answers a stat within 5s and its server takes connections.
root=$1
bad=""
while read -r mp src port; do
  timeout 5 stat -f "$root$mp" >/dev/null 2>&1 || bad="$bad $mp(hung)"
  host=${src%%:*}
  timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null || bad="$bad $mp(server)"
done < <(awk '{ for (i=1;i<=NF;i++) if ($i=="-") break; if ($(i+1) ~ /^nfs/) { p=2049; if (match($(i+3), /port=[0-9]+/)) p=substr($(i+3), RSTART+5, RLENGTH-5); print $5, $(i+2), p } }' "$root/proc/1/mountinfo")
if [ -n "$bad" ]; then echo "NFS:$bad"; exit 1; fi
echo "NFS mounts healthy"
`,
}

func writeShellPlugins(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range shellPlugins {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	return nil
}
