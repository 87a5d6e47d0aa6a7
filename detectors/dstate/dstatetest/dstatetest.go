// Package dstatetest builds fake host roots for the dstate check: a /proc
// with many processes, a few of them pod processes in D state. Tests,
// benchmarks and the scale script build the same fixture with it.
package dstatetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// BootID is the boot ID WriteFixture writes.
const BootID = "6f1c3a52-9b8e-4d7a-a1f0-2c3b4d5e6f70"

// FirstPID is the PID of the first ordinary process WriteFixture writes.
const FirstPID = 1000

// PodUID is the UID of the pod of the i-th D-state process (from 0).
func PodUID(i int) string {
	return fmt.Sprintf("74c13223-5a00-4e7d-9f2e-%012x", i)
}

// DPID is the PID of the i-th D-state process (from 0): the last dstate
// of the n processes.
func DPID(n, dstate, i int) int { return FirstPID + n - dstate + i }

// WriteFixture writes a host root under dir: proc/sys/kernel/random/boot_id
// and n processes under proc (PIDs FirstPID to FirstPID+n-1), plus init
// (pid 1), kthreadd (pid 2) and two kernel workers in D, which a check
// must skip. The last dstate processes are in state D, each in its own pod
// (PodUID(i)) under the systemd cgroup driver, named python3; the others
// sleep, and every tenth of them is a pod process too. Stat lines have all
// 52 fields, as the kernel writes them.
func WriteFixture(dir string, n, dstate int) error {
	if dstate > n {
		return fmt.Errorf("write fixture: %d D-state processes of %d", dstate, n)
	}
	proc := filepath.Join(dir, "proc")
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel/random"), 0o755); err != nil {
		return fmt.Errorf("write fixture: %w", err)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte(BootID+"\n"), 0o644); err != nil {
		return fmt.Errorf("write fixture: %w", err)
	}
	// Entries /proc also has, which are not processes.
	for _, name := range []string{"self", "thread-self", "sys", "net"} {
		if err := os.MkdirAll(filepath.Join(proc, name), 0o755); err != nil {
			return fmt.Errorf("write fixture: %w", err)
		}
	}
	write := func(pid int, comm string, state byte, ppid int, start uint64, cgroup string) error {
		d := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("write fixture: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(Stat(pid, comm, state, ppid, start)), 0o444); err != nil {
			return fmt.Errorf("write fixture: %w", err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte(cgroup), 0o444); err != nil {
			return fmt.Errorf("write fixture: %w", err)
		}
		return nil
	}
	if err := write(1, "systemd", 'S', 0, 23, "0::/init.scope\n"); err != nil {
		return err
	}
	if err := write(2, "kthreadd", 'S', 0, 23, "0::/\n"); err != nil {
		return err
	}
	for i, comm := range []string{"kworker/u8:2-events_unbound", "kworker/3:1H-kblockd"} {
		if err := write(100+i, comm, 'D', 2, 150, "0::/\n"); err != nil {
			return err
		}
	}
	for i := range n - dstate {
		pid := FirstPID + i
		cgroup := "0::/system.slice/sshd.service\n"
		if i%10 == 0 {
			cgroup = PodCgroup(fmt.Sprintf("11111111-2222-3333-4444-%012x", i))
		}
		if err := write(pid, "worker", 'S', 1, uint64(1000+i), cgroup); err != nil {
			return err
		}
	}
	for i := range dstate {
		pid := DPID(n, dstate, i)
		if err := write(pid, "python3", 'D', 1, uint64(1000+pid), PodCgroup(PodUID(i))); err != nil {
			return err
		}
	}
	return nil
}

// Stat is a /proc/<pid>/stat line.
func Stat(pid int, comm string, state byte, ppid int, start uint64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 2286 0 12 0 4 2 0 0 20 0 1 0 %d 23248896 1310 "+
		"18446744073709551615 94791135399936 94791135419817 140736353762496 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 "+
		"94791135435824 94791135437440 94791966478336 140736353766083 140736353766103 140736353766103 140736353767403 0\n",
		pid, comm, state, ppid, pid, pid, start)
}

// PodCgroup is the cgroup v2 file of a burstable pod's container under the
// systemd cgroup driver and containerd.
func PodCgroup(uid string) string {
	u := []byte(uid)
	for i, c := range u {
		if c == '-' {
			u[i] = '_'
		}
	}
	return fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%064x.scope\n", u, len(uid))
}
