package nfs

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkNFS100 is the in-process part of one invocation on a node with
// 100 NFS mounts (plus the usual system and container mounts): parse
// mountinfo, list the expected mounts, decide. The probe child (one
// fork+exec for all mounts) and the TCP connects are not in it.
func BenchmarkNFS100(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&sb, "%d 27 0:%d / /run/containerd/io.containerd.runtime.v2.task/k8s.io/%040d/rootfs rw,relatime shared:%d master:12 - overlay overlay rw,lowerdir=/var/lib/containerd/snapshots/%d/fs,upperdir=/var/lib/containerd/snapshots/%d/fs,workdir=/var/lib/containerd/snapshots/%d/work\n", 1000+i, 200+i, i, 400+i, i, i+1, i+1)
	}
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "%d 27 0:%d / /mnt/data%03d rw,relatime shared:%d - nfs4 fs%02d.example.com:/export/data%03d rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.12,local_lock=none,addr=10.0.1.%d\n", 500+i, 100+i, i, 300+i, i%8, i, i%8)
	}
	mountinfo := []byte(sb.String())
	types := []string{"nfs", "nfs4"}
	probes := map[string]Probe{}
	for i := 0; i < 100; i++ {
		probes[fmt.Sprintf("/mnt/data%03d", i)] = Probe{State: ProbeOK}
	}
	probes["/mnt/data042"] = Probe{State: ProbeHung, Op: "stat"}
	b.ReportAllocs()
	for b.Loop() {
		ms, err := ParseMountinfo("mountinfo", mountinfo)
		if err != nil {
			b.Fatal(err)
		}
		exp := ExpectedMounts(ms, nil, nil, types)
		if len(exp) != 100 {
			b.Fatalf("%d mounts", len(exp))
		}
		r := Decide(Input{Mounts: exp, Probes: probes, Timeout: 5 * time.Second})
		if r.Reason != "MountHung" {
			b.Fatal(r.Line())
		}
	}
}
