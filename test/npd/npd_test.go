package npd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// TestNPDEndToEnd runs the real node-problem-detector with the monitor
// configs from deploy/npd, pointed at kubemedic-detect and fixture host
// trees, against a real API server. For xid, nfs, dstate, gpu-memory and
// gpu-recovery the condition must appear on the Node with the detector's
// reason and message, and clear once the fixture heals.
func TestNPDEndToEnd(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	nodes, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{GPUs: 8})
	require.NoError(t, err)
	node := nodes[0].Name
	detect := harness.GoBuild(t, "./cmd/kubemedic-detect")
	npdBin := filepath.Join(env.BinDir, "node-problem-detector")

	root := t.TempDir()
	stateDir := t.TempDir()
	bootID := "6f1b2c3d-0000-4000-8000-000000000001"
	writeFile(t, root, "/proc/sys/kernel/random/boot_id", bootID+"\n")
	writeFile(t, root, "/proc/uptime", "1000.00 1900.00\n")

	// xid: a kernel log file with noise and, later, an Xid 79.
	writeFile(t, root, "/kmsg", "6,1,1000,-;Linux version 6.8.0 (buildd@lcy02)\n"+
		"6,2,2000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07\n")

	// nfs: /mnt/datasets is expected but not mounted yet. The listener stays
	// open as the NFS server, whose port the check connects to once the
	// mount appears (not a free port: it must answer).
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { listener.Close() })
	nfsPort := listener.Addr().(*net.TCPAddr).Port
	writeFile(t, root, "/proc/1/mountinfo", mountinfoBase)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "mnt/datasets"), 0o755))

	// dstate: a process of a pod that does not exist, stuck in D.
	const podUID = "74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77"
	writeProc(t, root, 4242, "python3", 'D', podUID)
	writeProc(t, root, 4300, "sshd", 'S', "")

	// gpu-memory: nvidia-smi answers with the output captured on a real
	// H100, its remapped rows from a fixture file that first says the row
	// remap failed. The message, with bus ID and UUID, is longer than NPD's
	// default 80 bytes.
	captured := filepath.Join(repoRoot(t), "detectors/testdata/gpu/query-gpu-h100x1-captured.txt")
	rows := filepath.Join(root, "remapped-rows.txt")
	writeFile(t, root, "/remapped-rows.txt", "00000000:00:06.0, No, Yes, 1\n")
	// Both answer -q -d ECC (channel/TPC repair pending, unrepairable
	// memory) with the healthy section captured on the same H100.
	ecc := filepath.Join(repoRoot(t), "detectors/testdata/gpu/nvidia-smi-q-d-ecc-h100x1-captured.txt")
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\ncase \"$1\" in --query-gpu=*) cat '"+captured+"';; -q) cat '"+ecc+"';; *) cat '"+rows+"';; esac\n"), 0o755))

	// gpu-recovery: another nvidia-smi, whose --query-gpu answer is a
	// fixture file that first has the driver ask for a GPU reset
	// (gpu_recovery_action "Reset"), its remapped rows healthy.
	recovery := filepath.Join(root, "query-gpu-recovery.txt")
	healthyRows := filepath.Join(root, "remapped-rows-healthy.txt")
	writeFile(t, root, "/query-gpu-recovery.txt", readFixture(t, "query-gpu-h100x1-recovery-reset.txt"))
	writeFile(t, root, "/remapped-rows-healthy.txt", "00000000:00:06.0, No, No, 0\n")
	smiRecovery := filepath.Join(t.TempDir(), "nvidia-smi")
	require.NoError(t, os.WriteFile(smiRecovery, []byte("#!/bin/sh\ncase \"$1\" in --query-gpu=*) cat '"+recovery+"';; -q) cat '"+ecc+"';; *) cat '"+healthyRows+"';; esac\n"), 0o755))

	configs := []string{
		npdConfig(t, "xid.json", detect, root, "--state-dir="+stateDir, "--kmsg=/kmsg"),
		npdConfig(t, "nfs.json", detect, root, "--state-dir="+stateDir, "--mountinfo=/proc/1/mountinfo",
			"--mount=/mnt/datasets", "--probe-timeout=2s", "--fstab=false"),
		npdConfig(t, "dstate.json", detect, root, "--state-dir="+stateDir, "--min-duration=0s",
			"--kubeconfig="+env.Kubeconfig, "--kubelet-url=", "--node="+node),
		npdConfig(t, "gpu-memory.json", detect, root, "--backend=nvidia-smi", "--nvidia-smi="+smi),
		npdConfig(t, "gpu-recovery.json", detect, root, "--backend=nvidia-smi", "--nvidia-smi="+smiRecovery),
	}
	npd, err := env.StartProcess(localcluster.ProcessSpec{
		Name: "node-problem-detector",
		Path: npdBin,
		Args: []string{
			"--config.custom-plugin-monitor=" + strings.Join(configs, ","),
			"--apiserver-override=" + env.Config.Host + "?inClusterConfig=false&auth=" + env.Kubeconfig,
			"--hostname-override=" + node,
			"--port=0", "--prometheus-port=0",
			"--k8s-exporter-heartbeat-period=10s",
			"--logtostderr", "--v=2",
		},
	})
	require.NoError(t, err)
	// Stopped here, not only by the cluster's cleanup, so that NPD and
	// its plugins are gone before the fixture directories are removed.
	t.Cleanup(func() {
		require.NoError(t, npd.Stop())
		if t.Failed() {
			t.Logf("node-problem-detector log:%s", npd.LogTail(60))
		}
	})

	expect := func(condType string, status corev1.ConditionStatus, reason, messagePart string) {
		t.Helper()
		var last *corev1.NodeCondition
		what := fmt.Sprintf("node %s condition %s with status %s, reason %s, message containing %q", node, condType, status, reason, messagePart)
		testsupport.Eventually(t, what, 60*time.Second, 200*time.Millisecond, func() bool {
			if err := npd.Exited(); err != nil {
				t.Fatal(err)
			}
			var n corev1.Node
			require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
			last = localcluster.FindNodeCondition(&n, corev1.NodeConditionType(condType))
			return last != nil && last.Status == status &&
				v1alpha1.EffectiveReason(string(last.Type), last.Reason, last.Message) == reason &&
				strings.Contains(last.Message, messagePart)
		}, func() string { return fmt.Sprintf("last seen %+v", last) })
	}

	// Faults appear with the detector's reason and message.
	appendFile(t, root, "/kmsg", "3,3,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
	expect(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.ReasonXidRebootRequired, "0000:3b:00.0")
	expect(v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionTrue, v1alpha1.ReasonMountMissing, "/mnt/datasets")
	expect(v1alpha1.ConditionPodProcessesStuck, corev1.ConditionTrue, v1alpha1.ReasonDStateOrphans, podUID)
	const gpuUUID = "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced"
	expect(v1alpha1.ConditionGPUMemoryUnhealthy, corev1.ConditionTrue, v1alpha1.ReasonRowRemapFailed, gpuUUID)
	expect(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionTrue, v1alpha1.ReasonResetRequired, "0000:00:06.0 ("+gpuUUID+")")

	var n corev1.Node
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
	c := localcluster.FindNodeCondition(&n, corev1.NodeConditionType(v1alpha1.ConditionGPUXidError))
	require.NotNil(t, c)
	require.Equal(t, v1alpha1.DetectReason, c.Reason, "NPD writes its rule's reason")
	require.LessOrEqual(t, len(c.Message), plugin.MaxLine)

	// NPD passes the whole 104-byte line: the remediator finds the GPU's
	// bus ID and UUID in it.
	c = localcluster.FindNodeCondition(&n, corev1.NodeConditionType(v1alpha1.ConditionGPUMemoryUnhealthy))
	require.NotNil(t, c)
	require.Equal(t, "RowRemapFailed: row remap failed on 0000:00:06.0 ("+gpuUUID+"); replace GPU", c.Message)
	bus, uuid := gpuwire.GPUFromMessage(c.Message)
	require.Equal(t, "0000:00:06.0", bus)
	require.Equal(t, gpuUUID, uuid)

	// The fixtures heal: the node rebooted (new boot ID, empty kernel log),
	// the mount is there and its server answers, the process left D.
	writeFile(t, root, "/proc/sys/kernel/random/boot_id", "6f1b2c3d-0000-4000-8000-000000000002\n")
	writeFile(t, root, "/proc/uptime", "30.00 50.00\n")
	writeFile(t, root, "/kmsg", "6,1,1000,-;Linux version 6.8.0 (buildd@lcy02)\n")
	writeFile(t, root, "/proc/1/mountinfo", mountinfoBase+
		fmt.Sprintf("612 29 0:57 / /mnt/datasets rw,relatime shared:301 - nfs4 127.0.0.1:/export rw,vers=4.2,port=%d,addr=127.0.0.1\n", nfsPort))
	writeProc(t, root, 4242, "python3", 'S', podUID)
	writeFile(t, root, "/remapped-rows.txt", "00000000:00:06.0, No, No, 0\n")
	writeFile(t, root, "/query-gpu-recovery.txt", readFixture(t, "query-gpu-h100x1-captured.txt"))

	expect(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXidError", "")
	expect(v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionFalse, "NFSMountsHealthy", "")
	expect(v1alpha1.ConditionPodProcessesStuck, corev1.ConditionFalse, "NoStuckProcesses", "")
	expect(v1alpha1.ConditionGPUMemoryUnhealthy, corev1.ConditionFalse, "GPUMemoryHealthy", "")
	expect(v1alpha1.ConditionGPURecoveryRequired, corev1.ConditionFalse, "GPURecoveryNotRequired", "")
}

// readFixture is a file of detectors/testdata/gpu.
func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "detectors/testdata/gpu", name))
	require.NoError(t, err)
	return string(b)
}

const mountinfoBase = `22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
`

// npdConfig rewrites the deploy/npd monitor config name to run detect on
// root every second, with extra flags appended, and returns its path.
func npdConfig(t *testing.T, name, detect, root string, extra ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/npd", name))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	cfg["pluginConfig"].(map[string]any)["invoke_interval"] = "1s"
	for _, r := range cfg["rules"].([]any) {
		rule := r.(map[string]any)
		rule["path"] = detect
		var args []any
		for _, a := range rule["args"].([]any) {
			s := a.(string)
			if strings.HasPrefix(s, "--root=") {
				s = "--root=" + root
			}
			args = append(args, s)
		}
		for _, e := range extra {
			args = append(args, e)
		}
		rule["args"] = args
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return p
}

// writeProc writes /proc/<pid>/stat and cgroup (a pod's cgroup when podUID
// is set) under root.
func writeProc(t *testing.T, root string, pid int, comm string, state byte, podUID string) {
	t.Helper()
	stat := fmt.Sprintf("%d (%s) %c 1 %d %d 0 -1 4194560 100 0 0 0 10 5 0 0 20 0 1 0 12345 10000000 500 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		pid, comm, state, pid, pid)
	writeFile(t, root, fmt.Sprintf("/proc/%d/stat", pid), stat)
	cg := "0::/system.slice/sshd.service\n"
	if podUID != "" {
		cg = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
			strings.ReplaceAll(podUID, "-", "_") + ".slice/cri-containerd-0123456789abcdef.scope\n"
	}
	writeFile(t, root, fmt.Sprintf("/proc/%d/cgroup", pid), cg)
}

// writeFile replaces a fixture file atomically, so that a check never reads
// half of it.
func writeFile(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	tmp := full + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, full))
}

func appendFile(t *testing.T, root, p, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	require.NoError(t, err)
	writeFile(t, root, p, string(b)+content)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	return root
}
