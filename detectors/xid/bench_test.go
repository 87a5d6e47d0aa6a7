package xid

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// kernelLog1MiB is 1 MiB of /dev/kmsg records: mostly noise, one Xid in
// every 200 records, spread over 8 GPUs.
func kernelLog1MiB() []byte {
	noise := []string{
		"systemd[1]: Started Session 4711 of User ubuntu.",
		"audit: type=1400 audit(1718000000.123:99): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.lxd\" name=\"/proc/1/environ\"",
		"NVRM: GPU at PCI:0000:2b:00: GPU-4a1c7b3e-9f0d-2b8e-6c5a-0e3f1d7a9b21",
		"cali1234abcd: renamed from tmp5678",
		"IPv6: ADDRCONF(NETDEV_CHANGE): cali1234abcd: link becomes ready",
		"nfs: server 10.0.0.5 not responding, still trying",
	}
	xids := []int{13, 31, 43, 46, 48, 63, 74, 79, 94, 119}
	var b []byte
	for i := 0; len(b) < 1<<20; i++ {
		usec := int64(i) * 1000
		if i%200 == 199 {
			x := xids[(i/200)%len(xids)]
			b = fmt.Appendf(b, "4,%d,%d,-;NVRM: Xid (PCI:0000:%02x:00): %d, pid=%d, name=python3, some detail\n", i, usec, 0x10+(i/200)%8, x, 1000+i)
			continue
		}
		b = fmt.Appendf(b, "6,%d,%d,-;%s\n", i, usec, noise[i%len(noise)])
		if i%17 == 0 {
			b = append(b, " SUBSYSTEM=net\n DEVICE=n3\n"...)
		}
	}
	return b
}

// BenchmarkXid1MiB is the whole decision over 1 MiB of kernel log: scan,
// merge into a fresh state, compact, decide, format.
func BenchmarkXid1MiB(b *testing.B) {
	data := kernelLog1MiB()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var res string
	for b.Loop() {
		var found []Found
		ScanLog(data, func(f Found) { found = append(found, f) })
		st := NewState("boot")
		st.AddEvents(found)
		st.Compact(UnknownIgnore)
		res = Decide(st, UnknownIgnore).Result().Line()
	}
	require.Equal(b, "XidRebootRequired: Xid 79 on 0000:17:00.0 (+7 GPUs): fell off the bus; reboot required", res)
}
