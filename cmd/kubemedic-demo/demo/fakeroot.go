package demo

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// Paths inside a fake root, as the detectors read them with --root.
const (
	rootKmsg      = "/kmsg"
	rootBootID    = "/proc/sys/kernel/random/boot_id"
	rootUptime    = "/proc/uptime"
	rootMountinfo = "/proc/1/mountinfo"
	rootSMI       = "/usr/bin/nvidia-smi"
	rootSMIGPUs   = "/demo/nvidia-smi/query-gpu.csv"
	rootSMIRemap  = "/demo/nvidia-smi/query-remapped-rows.csv"
	rootSMIECC    = "/demo/nvidia-smi/q-d-ecc.txt"
	rootSMIQ      = "/demo/nvidia-smi/q.txt"
	// rootStateDir is kubemedic-detect's --state-dir inside the root, where
	// the reset-gpu template records a reset (xid-resets/<bus>).
	rootStateDir = "/var/lib/kubemedic/detect"
	// nfsMountPoint is the one NFS mount every demo node expects.
	nfsMountPoint = "/mnt/datasets"
)

// mountinfoBase is a node's mountinfo without the NFS mount.
const mountinfoBase = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
`

// smiGPUFields are the --query-gpu fields the fake nvidia-smi knows, in
// the order of rootSMIGPUs' columns, with a healthy GPU's value as
// nvidia-smi of driver 580 prints it on an H100 (see
// ../shared/fixtures/nvidia-h100-580.159.04) after the first three, which
// are the GPU's own.
var smiGPUFields = []struct{ name, healthy string }{
	{"index", ""},
	{"pci.bus_id", ""},
	{"uuid", ""},
	{"ecc.errors.uncorrected.volatile.total", "0"},
	{"retired_pages.pending", "[N/A]"},
	{"retired_pages.sbe", "[N/A]"},
	{"retired_pages.dbe", "[N/A]"},
	// The driver's own verdict (gpu-recovery and gpu-memory).
	{"gpu_recovery_action", "None"},
	{"ecc.errors.uncorrected.aggregate.sram.thresholdExceeded", "No"},
	{"remapped_rows.histogram.none", "0"},
	// The board's serial, for the diagnostics manifest (per GPU; see
	// queryGPU).
	{"serial", ""},
}

// fakeNVIDIASMI answers the queries of the gpu checks from files in the
// root, as nvidia-smi of driver 580 formats them: --query-gpu prints the
// fields asked, in the order asked, from the columns of rootSMIGPUs (named
// by smiGPUFields), and refuses a field it does not know with nvidia-smi's
// own message, which the nvidia-smi backend reads as a field this driver
// lacks; --query-remapped-rows prints rootSMIRemap; `-q -d ECC` prints
// rootSMIECC, exiting 15 when it names a lost GPU. Anything else is
// refused the way nvidia-smi refuses an unknown option.
var fakeNVIDIASMI = `#!/bin/sh
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$*" = "-q" ]; then cat "$root/demo/nvidia-smi/q.txt"; exit $?; fi
if [ "$*" = "-q -d ECC" ]; then
  cat "$root/demo/nvidia-smi/q-d-ecc.txt" || exit 1
  if grep -q '^Unable to determine the device handle' "$root/demo/nvidia-smi/q-d-ecc.txt"; then exit 15; fi
  exit 0
fi
for a in "$@"; do
  case "$a" in
    --query-gpu=*) exec awk -v want="${a#--query-gpu=}" -v known="` + smiFieldNames() + `" '
BEGIN {
  n = split(known, k, ","); for (i = 1; i <= n; i++) col[k[i]] = i
  m = split(want, w, ","); bad = 0
  for (i = 1; i <= m; i++) if (!(w[i] in col)) { printf "Field \"%s\" is not a valid field to query.\n", w[i]; bad = 1 }
  if (bad) exit 2
}
{ split($0, v, ", "); line = v[col[w[1]]]; for (i = 2; i <= m; i++) line = line ", " v[col[w[i]]]; print line }
' "$root/demo/nvidia-smi/query-gpu.csv" ;;
    --query-remapped-rows=*) cat "$root/demo/nvidia-smi/query-remapped-rows.csv"; exit $? ;;
  esac
done
echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2
exit 2
`

func smiFieldNames() string {
	names := make([]string, len(smiGPUFields))
	for i, f := range smiGPUFields {
		names[i] = f.name
	}
	return strings.Join(names, ",")
}

// GPU is one GPU of a fake node.
type GPU struct {
	Index int
	Bus   string // e.g. 0000:18:00.0
	UUID  string
}

// FakeRoot is the host file tree of one node whose detectors run for real:
// the kernel log, /proc (boot ID, uptime, processes and their cgroups,
// mountinfo), a fake nvidia-smi and the detectors' state directory. NPD
// runs kubemedic-detect with --root pointing here. Faults are written into
// it as the kernel and the driver would show them, and the node simulator
// plays operations on it (a reboot: a new boot ID, a fresh kernel log, no
// processes).
type FakeRoot struct {
	Dir  string
	Node string
	GPUs []GPU

	mu       sync.Mutex
	bootTime time.Time
	bootSeq  int
	seq      int // kmsg sequence number
	nfsAddr  string
	mounted  bool
	lost     map[int]bool
	// asks is the recovery action the driver asks per GPU index (absent:
	// None), as nvidia-smi's gpu_recovery_action shows it.
	asks map[int]gpuaction.Action
}

// NewFakeRoot creates the tree of a healthy node with gpus GPUs, its NFS
// mount served from nfsAddr (host:port) and mounted.
func NewFakeRoot(dir, node string, gpus int, nfsAddr string) (*FakeRoot, error) {
	r := &FakeRoot{Dir: dir, Node: node, nfsAddr: nfsAddr, mounted: true, lost: map[int]bool{}, asks: map[int]gpuaction.Action{}}
	for i := range gpus {
		r.GPUs = append(r.GPUs, GPU{Index: i, Bus: "0000" + kernelBus(i),
			UUID: gpuUUID(node, i)})
	}
	if err := os.MkdirAll(filepath.Join(dir, nfsMountPoint), 0o755); err != nil {
		return nil, err
	}
	if err := r.write(rootSMI, fakeNVIDIASMI, 0o755); err != nil {
		return nil, err
	}
	if err := r.Reboot(); err != nil {
		return nil, err
	}
	return r, nil
}

// BootID is the node's current boot ID.
func (r *FakeRoot) BootID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bootID()
}

func (r *FakeRoot) bootID() string {
	return fmt.Sprintf("%08x-b007-4000-8000-%012x", fnv32(r.Node), r.bootSeq)
}

// Reboot plays a reboot: a new boot ID, uptime from zero, a kernel log with
// only the boot lines, no processes, the NFS mount mounted again (when its
// server answers, the detector sees it healthy) and the GPUs back on the
// bus. The detectors' state directory survives, as /var/lib does.
func (r *FakeRoot) Reboot() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bootSeq++
	r.bootTime = time.Now()
	r.seq = 0
	r.mounted = true
	clear(r.lost)
	clear(r.asks)
	// No process survives; the files the checks read are replaced, never
	// missing, so a check running meanwhile sees the old or the new boot.
	if err := r.removeProcesses(); err != nil {
		return err
	}
	for _, f := range []struct{ path, content string }{
		{"/proc/1/stat", procStat(1, "systemd", 'S')},
		{"/proc/1/cgroup", "0::/init.scope\n"},
		{rootBootID, r.bootID() + "\n"},
		{rootUptime, "0.00 0.00\n"},
		{rootKmsg, r.kmsgLine(6, "Linux version 6.8.0-48-generic (buildd@lcy02-amd64-010)") +
			r.kmsgLine(6, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04")},
		{rootMountinfo, r.mountinfo()},
		{rootSMIGPUs, r.queryGPU()},
		{rootSMIRemap, r.queryRemap()},
		{rootSMIECC, r.queryECC()},
		{rootSMIQ, r.queryAll()},
	} {
		if err := r.write(f.path, f.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// removeProcesses removes every /proc/<pid> but PID 1's. r.mu is held.
func (r *FakeRoot) removeProcesses() error {
	entries, err := os.ReadDir(filepath.Join(r.Dir, "proc"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 {
			if err := os.RemoveAll(filepath.Join(r.Dir, "proc", e.Name())); err != nil {
				return fmt.Errorf("node %s: %w", r.Node, err)
			}
		}
	}
	return nil
}

// Tick writes the uptime; the world calls it every second, so that the
// timestamps of kernel log lines and of recorded resets line up.
func (r *FakeRoot) Tick() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	up := time.Since(r.bootTime).Seconds()
	return r.write(rootUptime, fmt.Sprintf("%.2f %.2f\n", up, up*1.9), 0o644)
}

// kmsgLine is one /dev/kmsg record at the current uptime. r.mu is held.
func (r *FakeRoot) kmsgLine(level int, text string) string {
	r.seq++
	return fmt.Sprintf("%d,%d,%d,-;%s\n", level, r.seq, time.Since(r.bootTime).Microseconds(), text)
}

// Xid appends an NVRM Xid line for the GPU to the kernel log, as the driver
// writes it.
func (r *FakeRoot) Xid(gpu, xid int, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gpu < 0 || gpu >= len(r.GPUs) {
		return fmt.Errorf("node %s has no GPU %d (it has %d)", r.Node, gpu, len(r.GPUs))
	}
	bus := r.GPUs[gpu].Bus[4:] // the kernel log uses the 4-digit domain
	line := r.kmsgLine(3, fmt.Sprintf("NVRM: Xid (PCI:%s): %d, pid=12345, name=python3, %s", strings.TrimSuffix(bus, ".0"), xid, text))
	return r.append(rootKmsg, line)
}

// LoseGPU makes nvidia-smi stop listing the GPU and logs Xid 79, as a GPU
// that fell off the bus does.
func (r *FakeRoot) LoseGPU(gpu int) error {
	if err := r.Xid(gpu, 79, "GPU has fallen off the bus."); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost[gpu] = true
	return r.writeSMI()
}

// AskRecovery plays a GSP fault after which the driver asks for action on
// the GPU: Xid 119 and then Xid 154 naming the action in the kernel log,
// and nvidia-smi's gpu_recovery_action showing it, with every ECC counter
// still 0. A reboot, or ClearRecovery (a reset of that GPU), clears it.
func (r *FakeRoot) AskRecovery(gpu int, action gpuaction.Action) error {
	if err := r.Xid(gpu, 119, "Timeout after 6s of waiting for RPC response from GPU0 GSP!"); err != nil {
		return err
	}
	if err := r.Xid(gpu, 154, fmt.Sprintf("GPU recovery action changed from 0x0 (None) to 0x%x (%s)", int(action), action)); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asks[gpu] = action
	return r.writeSMI()
}

// ClearRecovery plays a reset of the GPU on bus (any domain width): the
// driver asks nothing more of it.
func (r *FakeRoot) ClearRecovery(bus string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.GPUs {
		if strings.HasSuffix(g.Bus, strings.TrimPrefix(bus, "0000")) {
			delete(r.asks, g.Index)
		}
	}
	return r.writeSMI()
}

// writeSMI rewrites what the fake nvidia-smi answers from the GPUs' state:
// -q -d ECC, -q and --query-gpu. r.mu is held.
func (r *FakeRoot) writeSMI() error {
	for _, f := range []struct{ path, content string }{
		{rootSMIECC, r.queryECC()}, {rootSMIQ, r.queryAll()}, {rootSMIGPUs, r.queryGPU()},
	} {
		if err := r.write(f.path, f.content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SetNFSMounted mounts or unmounts the NFS mount in mountinfo.
func (r *FakeRoot) SetNFSMounted(mounted bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mounted = mounted
	return r.write(rootMountinfo, r.mountinfo(), 0o644)
}

// StuckProcess writes a process of the pod podUID in state D (uninterruptible
// sleep), with the pod's cgroup as the kubelet's systemd driver names it.
func (r *FakeRoot) StuckProcess(pid int, comm, podUID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	stat := procStat(pid, comm, 'D')
	cg := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
		strings.ReplaceAll(podUID, "-", "_") + ".slice/cri-containerd-0123456789abcdef.scope\n"
	if err := r.write(fmt.Sprintf("/proc/%d/stat", pid), stat, 0o644); err != nil {
		return err
	}
	return r.write(fmt.Sprintf("/proc/%d/cgroup", pid), cg, 0o644)
}

// procStat is /proc/<pid>/stat of a process in state.
func procStat(pid int, comm string, state byte) string {
	return fmt.Sprintf("%d (%s) %c 1 %d %d 0 -1 4194560 100 0 0 0 10 5 0 0 20 0 1 0 12345 10000000 500 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		pid, comm, state, pid, pid)
}

// mountinfo is the mount table. r.mu is held.
func (r *FakeRoot) mountinfo() string {
	if !r.mounted {
		return mountinfoBase
	}
	host, port, _ := strings.Cut(r.nfsAddr, ":")
	return mountinfoBase + fmt.Sprintf("612 22 0:57 / %s rw,relatime shared:301 - nfs4 %s:/export/datasets rw,vers=4.2,port=%s,addr=%s\n",
		nfsMountPoint, host, port, host)
}

// queryGPU is rootSMIGPUs: every field of smiGPUFields for each GPU on
// the bus. r.mu is held.
func (r *FakeRoot) queryGPU() string {
	var b strings.Builder
	for _, g := range r.GPUs {
		if r.lost[g.Index] {
			continue
		}
		fmt.Fprintf(&b, "%d, %s, %s", g.Index, g.Bus, g.UUID)
		for _, f := range smiGPUFields[3:] {
			v := f.healthy
			if a, ok := r.asks[g.Index]; ok && f.name == "gpu_recovery_action" {
				v = a.String()
			}
			if f.name == "serial" {
				v = gpuSerial(g.Index)
			}
			b.WriteString(", " + v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// queryRemap is nvidia-smi's --query-remapped-rows answer. r.mu is held.
func (r *FakeRoot) queryRemap() string {
	var b strings.Builder
	for _, g := range r.GPUs {
		if !r.lost[g.Index] {
			fmt.Fprintf(&b, "%s, No, No, 0\n", g.Bus)
		}
	}
	return b.String()
}

// smiECCHealthy is a healthy GPU's section of `nvidia-smi -q -d ECC` as
// driver 580.159.04 prints it on an H100
// (detectors/testdata/gpu/nvidia-smi-q-d-ecc-h100x1-captured.txt), after
// its "GPU <bus>" line: no repair pending, memory repairable.
const smiECCHealthy = `    ECC Mode
        Current                                        : Enabled
        Pending                                        : Enabled
    ECC Errors
        Volatile
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
        Aggregate
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
            SRAM Threshold Exceeded                    : No
        Aggregate Uncorrectable SRAM Sources
            SRAM L2                                    : 0
            SRAM SM                                    : 0
            SRAM Microcontroller                       : 0
            SRAM PCIE                                  : 0
            SRAM Other                                 : 0
        Channel Repair Pending                         : No
        TPC Repair Pending                             : No
        Unrepairable Memory                            : No

`

// queryECC is rootSMIECC, nvidia-smi's `-q -d ECC` log: a healthy section
// for each GPU on the bus, and for a lost GPU the line nvidia-smi prints
// when it cannot get the GPU's handle. r.mu is held.
func (r *FakeRoot) queryECC() string {
	return r.smiLog(func(GPU) string { return smiECCHealthy })
}

// gpuSerial is a GPU's board serial number in the fake.
func gpuSerial(i int) string { return fmt.Sprintf("165092300%04d", i) }

// queryAll is rootSMIQ, a short `nvidia-smi -q`: per GPU its bus ID,
// product, serial, UUID and recovery action, then its ECC section as in
// queryECC; a lost GPU as nvidia-smi prints one it cannot reach. r.mu is
// held.
func (r *FakeRoot) queryAll() string {
	return r.smiLog(func(g GPU) string {
		action := "None"
		if a, ok := r.asks[g.Index]; ok {
			action = a.String()
		}
		return fmt.Sprintf("    %-51s: NVIDIA H100 80GB HBM3\n    %-51s: %s\n    %-51s: %s\n    %-51s: %s\n%s",
			"Product Name", "Serial Number", gpuSerial(g.Index), "GPU UUID", g.UUID, "GPU Recovery Action", action, smiECCHealthy)
	})
}

// smiLog is an nvidia-smi -q log as driver 580 prints it: the header, then
// per GPU "GPU <bus>" and its section, or for a lost GPU the line
// nvidia-smi prints when it cannot get its handle. r.mu is held.
func (r *FakeRoot) smiLog(section func(GPU) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n==============NVSMI LOG==============\n\n%-55s: %s\n%-55s: 580.159.04\n%-55s: 13.0\n\n%-55s: %d\n",
		"Timestamp", r.bootTime.UTC().Format("Mon Jan  2 15:04:05 2006"), "Driver Version", "CUDA Version", "Attached GPUs", len(r.GPUs))
	for _, g := range r.GPUs {
		if r.lost[g.Index] {
			fmt.Fprintf(&b, "Unable to determine the device handle for GPU %s: GPU is lost. Reboot the system to recover this GPU\n", g.Bus)
			continue
		}
		fmt.Fprintf(&b, "GPU %s\n%s", g.Bus, section(g))
	}
	return b.String()
}

// write replaces a file of the root atomically, so that a check never reads
// half of it.
func (r *FakeRoot) write(p, content string, mode os.FileMode) error {
	full := filepath.Join(r.Dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	tmp := full + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	if err := os.Rename(tmp, full); err != nil {
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	return nil
}

func (r *FakeRoot) append(p, content string) error {
	f, err := os.OpenFile(filepath.Join(r.Dir, p), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return fmt.Errorf("node %s: %w", r.Node, err)
	}
	return f.Close()
}

// kernelBus is the PCI bus ID of a node's i-th GPU as the kernel log and
// the detectors' conditions write it (4-digit domain); nvidia-smi prints it
// with an 8-digit domain.
func kernelBus(i int) string { return localcluster.GPUBus(i) }

// gpuUUID is the UUID of a node's GPU, the same in nvidia-smi, on
// dcgm-exporter and in the node's ResourceSlice.
func gpuUUID(node string, i int) string { return localcluster.GPUUUID(node, i) }

// fnv32 is a short stable hash for IDs derived from a node name.
func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
