package demo

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/detectors/gpu"
	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/detectors/nfs"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
	"github.com/kubemedic/kubemedic/detectors/xid"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics/capture"
)

func TestScaleDuration(t *testing.T) {
	for _, tc := range []struct {
		in    string
		speed int
		want  string
	}{
		{"2m", 60, "2s"},
		{"5m", 60, "5s"},
		{"30s", 60, "500ms"},
		{"1h30m", 60, "90s"},
		{"168h", 60, "10080s"},
		{"45m", 60, "45s"},
		{"10ms", 60, "1ms"}, // never below 1 ms
		{"2m", 1, "2m"},     // speed 1 leaves it
		{"0", 60, "0"},
		{"5%", 60, "5%"},
		{"22:00", 60, "22:00"},
		{"1d", 60, "1d"}, // not a Go duration: left as is
		{"XidResetRequired", 60, "XidResetRequired"},
	} {
		require.Equal(t, tc.want, scaleDuration(tc.in, tc.speed), "%s / %d", tc.in, tc.speed)
	}
}

// TestSpeedUpExamples: every example object, sped up, still validates;
// durations are divided, resource quantities and windows' times are not, and
// windows are removed.
func TestSpeedUpExamples(t *testing.T) {
	docs, problems := policies.LoadFiles("../../../policies/examples")
	require.Empty(t, problems)
	var sped []*policies.Document
	windows := 0
	for _, d := range docs {
		obj, removed, err := speedUp(d.Object.(client.Object), DefaultSpeed)
		require.NoError(t, err)
		if removed {
			windows++
		}
		sped = append(sped, &policies.Document{File: d.File, Line: d.Line, Kind: d.Kind, Object: obj})
		switch o := obj.(type) {
		case *v1alpha1.RemediationPolicy:
			require.Empty(t, o.Spec.Safety.MaintenanceWindows, o.Name)
			orig := d.Object.(*v1alpha1.RemediationPolicy)
			require.Equal(t, orig.Spec.Conditions[0].For.Duration/DefaultSpeed, o.Spec.Conditions[0].For.Duration, o.Name)
			require.Equal(t, orig.Spec.Conditions[0].Reason, o.Spec.Conditions[0].Reason, "reasons are not durations")
		case *v1alpha1.ClusterReclaimPolicy:
			orig := d.Object.(*v1alpha1.ClusterReclaimPolicy)
			require.Equal(t, orig.Spec.GracePeriod.Duration/DefaultSpeed, o.Spec.GracePeriod.Duration, o.Name)
			require.Equal(t, orig.Spec.MaxSnooze, o.Spec.MaxSnooze, "%s: maxSnooze caps the Keep buttons, which keep for real hours", o.Name)
		case *v1alpha1.NodeOperationTemplate:
			orig := d.Object.(*v1alpha1.NodeOperationTemplate)
			require.Equal(t, orig.Spec.Resources, o.Spec.Resources, "%s: 50m is 50 millicores, not 50 minutes", o.Name)
			require.Equal(t, orig.Spec.Args, o.Spec.Args)
		}
	}
	require.Equal(t, 3, windows, "nfs-mounts, dstate-orphans and network-interface-down have windows")
	require.Empty(t, policies.ValidateSet(sped))
}

func TestNodeConditionMetrics(t *testing.T) {
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: "Ready", Status: corev1.ConditionTrue},
			{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: v1alpha1.ConditionNFSMountUnhealthy, Status: corev1.ConditionUnknown},
			{Type: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue},
		}}},
	}
	got := nodeConditionMetrics(nodes)
	require.Contains(t, got, `kube_node_status_condition{node="a",condition="GPUValidationFailed",status="true"} 1`, "the remediator's own, for KubemedicGPUValidationFailed")
	require.Contains(t, got, `kube_node_status_condition{node="a",condition="NFSMountUnhealthy",status="unknown"} 1`)
	require.Contains(t, got, `kube_node_status_condition{node="a",condition="NFSMountUnhealthy",status="true"} 0`)
	require.Contains(t, got, `kube_node_status_condition{node="b",condition="GPUXidError",status="true"} 1`)
	require.NotContains(t, got, `condition="Ready"`, "only kubemedic's conditions")
	require.Less(t, strings.Index(got, `node="a"`), strings.Index(got, `node="b"`), "sorted by node")
}

// TestFakeRootReadsAsTheDetectorsRead: what the fake root writes parses
// with the detectors' own parsers, and its nvidia-smi answers the
// nvidia-smi backend.
func TestFakeRootReadsAsTheDetectorsRead(t *testing.T) {
	r, err := NewFakeRoot(t.TempDir(), "gpu-node-000", 8, "127.0.0.1:2049")
	require.NoError(t, err)
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(r.Dir, p))
		require.NoError(t, err)
		return b
	}
	smi := &gpu.SMI{Path: filepath.Join(r.Dir, rootSMI), Root: host.Root(r.Dir), Timeout: 10 * time.Second, ECCSection: true}
	listed := func(what gpu.Read) []gpu.Device {
		devs, err := smi.Devices(context.Background(), what)
		require.NoError(t, err)
		for _, d := range devs {
			require.True(t, d.Usable(), "%+v", d)
			require.Empty(t, d.ReadErr)
		}
		return devs
	}
	devs := listed(gpu.ReadMemory)
	require.Len(t, devs, 8)
	for _, d := range devs {
		require.Equal(t, gpuaction.None, d.RecoveryAction.Action, "the driver asks no recovery")
		require.True(t, d.RecoveryAction.Known)
		require.NotContains(t, d.Unsupported, gpu.SignalRecoveryAction)
		// Read through -q -d ECC, as on a real H100: known, healthy.
		require.Empty(t, d.Unsupported)
		require.Equal(t, gpu.Flag{Known: true}, d.ChannelRepairPending)
		require.Equal(t, gpu.Flag{Known: true}, d.TPCRepairPending)
		require.Equal(t, gpu.Flag{Known: true}, d.UnrepairableMemory)
	}
	require.Equal(t, plugin.StatusOK, gpu.DecideMemory("nvidia-smi", devs, gpu.Thresholds{DBE: 1}).Status)
	// Each GPU's -q -d ECC section is the one captured on the H100.
	captured, err := os.ReadFile(filepath.Join("..", "..", "..", "detectors", "testdata", "gpu", "nvidia-smi-q-d-ecc-h100x1-captured.txt"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(captured), "GPU 00000000:00:06.0\n")
	require.True(t, ok)
	require.Equal(t, section, smiECCHealthy)
	eccLog := func() ([]gpu.Device, int) {
		out, err := exec.Command(smi.Path, "-q", "-d", "ECC").Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		devs, err := gpu.ParseQueryECC(out, code)
		require.NoError(t, err)
		return devs, code
	}
	eccDevs, code := eccLog()
	require.Zero(t, code)
	require.Len(t, eccDevs, 8)
	_, err = exec.Command(smi.Path, "-q", "-x").CombinedOutput()
	require.Error(t, err, "only -q -d ECC is answered")
	require.Equal(t, plugin.StatusOK, gpu.DecideRecovery("nvidia-smi", devs).Status)
	out, err := exec.Command(smi.Path, "--query-gpu=index,uuid,clocks.sm", "--format=csv,noheader").CombinedOutput()
	require.Error(t, err)
	require.Equal(t, "Field \"clocks.sm\" is not a valid field to query.\n", string(out), "nvidia-smi's refusal of a field it does not know")
	boot := r.BootID()

	require.NoError(t, r.Xid(0, 46, "GPU timeout"))
	var found []xid.Found
	xid.ScanLog(read(rootKmsg), func(f xid.Found) { found = append(found, f) })
	require.Len(t, found, 1)
	require.Equal(t, 46, found[0].Xid)
	require.Equal(t, "0000:18:00.0", found[0].Bus, "the bus the reset-gpu template extracts")

	require.Len(t, listed(gpu.ReadList), 8)
	require.NoError(t, r.LoseGPU(1))
	require.Len(t, listed(gpu.ReadList), 7, "a lost GPU is not listed")
	require.Len(t, listed(gpu.ReadMemory), 7)
	eccDevs, code = eccLog()
	require.Equal(t, 15, code, "nvidia-smi exits 15 when it cannot get a GPU's handle")
	require.Len(t, eccDevs, 8)
	require.Equal(t, gpu.Device{Index: -1, BusID: "0000:20:00.0", Lost: true, Err: "GPU is lost. Reboot the system to recover this GPU"}, eccDevs[1])

	mounts, err := nfs.ParseMountinfo("mountinfo", read(rootMountinfo))
	require.NoError(t, err)
	require.Equal(t, nfsMountPoint, mounts[len(mounts)-1].MountPoint)
	require.NoError(t, r.SetNFSMounted(false))
	mounts, err = nfs.ParseMountinfo("mountinfo", read(rootMountinfo))
	require.NoError(t, err)
	for _, m := range mounts {
		require.NotEqual(t, nfsMountPoint, m.MountPoint)
	}

	require.NoError(t, r.StuckProcess(4242, "python3", "8c909a73-2a4e-462a-bb03-46c5a3cc91a6"))
	st, err := procfs.ParseStat(read("/proc/4242/stat"))
	require.NoError(t, err)
	require.Equal(t, byte('D'), st.State)

	require.NoError(t, r.Reboot())
	require.NotEqual(t, boot, r.BootID(), "a reboot changes the boot ID")
	require.Equal(t, r.BootID()+"\n", string(read(rootBootID)))
	found = nil
	xid.ScanLog(read(rootKmsg), func(f xid.Found) { found = append(found, f) })
	require.Empty(t, found, "a fresh kernel log")
	_, err = os.Stat(filepath.Join(r.Dir, "/proc/4242"))
	require.True(t, os.IsNotExist(err), "no process survives a reboot")
	require.Len(t, listed(gpu.ReadList), 8, "the GPU is back on the bus")
}

// TestNPDConfigs: deploy/npd's monitors are rewritten for a fake root, sped
// up but never faster than minInvokeInterval, and nothing else changes.
// TestFakeRootRecoveryAction: the driver-reset fault reads, through the
// real parsers, as a GSP fault whose driver asks for a reset: Xid 119 and
// 154 in the kernel log, gpu_recovery_action in nvidia-smi, and the
// gpu-recovery verdict names the bus the reset-gpu template extracts. A
// reset of that GPU, or a reboot, clears it.
func TestFakeRootRecoveryAction(t *testing.T) {
	r, err := NewFakeRoot(t.TempDir(), "gpu-node-000", 8, "127.0.0.1:2049")
	require.NoError(t, err)
	smi := &gpu.SMI{Path: filepath.Join(r.Dir, rootSMI), Root: host.Root(r.Dir), Timeout: 10 * time.Second, ECCSection: true}
	verdict := func() plugin.Result {
		devs, err := smi.Devices(context.Background(), gpu.ReadMemory)
		require.NoError(t, err)
		require.Equal(t, plugin.StatusOK, gpu.DecideMemory("nvidia-smi", devs, gpu.Thresholds{DBE: 1}).Status, "every ECC counter stays 0")
		return gpu.DecideRecovery("nvidia-smi", devs)
	}
	require.Equal(t, plugin.StatusOK, verdict().Status)

	require.NoError(t, r.AskRecovery(0, gpuaction.GPUReset))
	got := verdict()
	require.Equal(t, plugin.StatusNonOK, got.Status)
	require.Equal(t, v1alpha1.ReasonResetRequired, got.Reason)
	require.Contains(t, got.Message, "GPU reset on 0000:18:00.0 ("+gpuUUID("gpu-node-000", 0)+")")
	kmsg, err := os.ReadFile(filepath.Join(r.Dir, rootKmsg))
	require.NoError(t, err)
	var found []xid.Found
	xid.ScanLog(kmsg, func(f xid.Found) { found = append(found, f) })
	require.Len(t, found, 2)
	require.Equal(t, []int{119, 154}, []int{found[0].Xid, found[1].Xid})
	require.Equal(t, gpuaction.GPUReset, found[1].Named, "the Xid 154 line names the action")

	require.NoError(t, r.ClearRecovery("0000:18:00.0"))
	require.Equal(t, plugin.StatusOK, verdict().Status, "a reset of the GPU clears it")

	require.NoError(t, r.AskRecovery(0, gpuaction.NodeReboot))
	require.Equal(t, v1alpha1.ReasonRebootRequired, verdict().Reason)
	require.NoError(t, r.ClearRecovery("0000:20:00.0"))
	require.Equal(t, v1alpha1.ReasonRebootRequired, verdict().Reason, "another GPU's reset leaves it")
	require.NoError(t, r.Reboot())
	require.Equal(t, plugin.StatusOK, verdict().Status, "a reboot clears it")
}

// TestFakeRootIsCapturedWhole: the capture the demo plays on a fake root,
// with the parts it runs on a real node, collects every part a real node
// would have but the tools the fake does not provide (they are skipped,
// not failed), and the bundle holds the injected Xid and nvidia-smi -q.
func TestFakeRootIsCapturedWhole(t *testing.T) {
	r, err := NewFakeRoot(t.TempDir(), "gpu-node-001", 8, "127.0.0.1:2049")
	require.NoError(t, err)
	require.NoError(t, r.Xid(0, 46, "GPU timeout"))
	c := &capture.Capture{Root: host.Root(r.Dir), Node: r.Node, Operation: "op", Spool: t.TempDir(), NoChroot: true,
		Parts: capture.DefaultParts(5*time.Second, rootKmsg), Now: time.Now}
	m, sp, err := c.Run(context.Background())
	require.NoError(t, err)
	for _, p := range m.Parts {
		require.False(t, p.Failed(), "part %s: %+v", p.Name, p)
	}
	require.Len(t, m.GPUs, 8)
	require.Equal(t, gpuSerial(3), m.GPUs[3].Serial)
	require.Equal(t, v1alpha1.DiagnosticsCaptured, capture.NewReport(m, sp, false, nil, 0).Result)
	require.Contains(t, sp.Files, "xid.log")
	require.Contains(t, sp.Files, "nvidia-smi-q.txt")
}

func TestNPDConfigs(t *testing.T) {
	w := &World{opts: Options{RepoRoot: "../../../", Dir: t.TempDir()}, Speed: DefaultSpeed}
	for _, name := range []string{"xid.json", "dstate.json"} {
		p, err := w.npdConfig("gpu-node-000", name, "/bin/kubemedic-detect", []string{"--root=/r", "--state-dir=/r/s"})
		require.NoError(t, err)
		var cfg struct {
			PluginConfig struct {
				InvokeInterval string `json:"invoke_interval"`
			} `json:"pluginConfig"`
			Rules []struct {
				Path string   `json:"path"`
				Args []string `json:"args"`
			} `json:"rules"`
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &cfg))
		d, err := time.ParseDuration(cfg.PluginConfig.InvokeInterval)
		require.NoError(t, err)
		require.Equal(t, minInvokeInterval, d, "30 s / 60 is faster than a 2-core machine can afford")
		require.Equal(t, "/bin/kubemedic-detect", cfg.Rules[0].Path)
		args := strings.Join(cfg.Rules[0].Args, " ")
		require.Contains(t, args, "--root=/r")
		require.NotContains(t, args, "--root=/host")
		require.Contains(t, args, "--timeout=10s", "check timeouts are not sped up")
		if name == "dstate.json" {
			require.Contains(t, args, "--min-duration=5s", "5m / 60")
		}
	}
}

// TestAlertmanagerConfig: the shipped receiver, pointed at the local
// bridge with its token file, with durations divided and matchers intact.
func TestAlertmanagerConfig(t *testing.T) {
	w := &World{opts: Options{RepoRoot: "../../../", Dir: "/d"}, Speed: DefaultSpeed, bridgeAddr: "127.0.0.1:9"}
	out, err := w.alertmanagerConfig()
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &cfg))
	require.Contains(t, out, "url: http://127.0.0.1:9/webhook")
	require.Contains(t, out, "credentials_file: /d/webhook-token")
	require.Contains(t, out, "group_wait: 500ms")
	require.Contains(t, out, "group_interval: 5s")
	require.Contains(t, out, `alertname=~"Kubemedic.+"`)
}

// TestAlertbridgeConfig: the shipped config with the demo's repository and
// storm guard, accepted by the alertbridge's own strict decoder.
func TestAlertbridgeConfig(t *testing.T) {
	for _, standIn := range []bool{true, false} {
		w := &World{opts: Options{RepoRoot: "../../../"}, Speed: DefaultSpeed, repo: "someone/gpus"}
		if standIn {
			w.GitHub = &ghfake.Fake{}
		}
		b, err := w.alertbridgeConfig()
		require.NoError(t, err)
		cfg, err := config.Parse("alertbridge.yaml", b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, "someone/gpus", cfg.DefaultRepo.String())
		require.Equal(t, 4, cfg.StormGuard.MaxNewIssues)
		require.Equal(t, 10*time.Second, cfg.StormGuard.Window)
		require.True(t, cfg.NodeHistory.Enabled, "the handoff issue lists the attempts")
		require.Equal(t, standIn, len(cfg.Routes) > 0, "routes to the example's other repository only on the stand-in, which has it")
	}
}

// TestOKReasons: the reasons the simulator clears conditions with are the
// ones deploy/npd's monitors give when their check passes.
func TestOKReasons(t *testing.T) {
	files, err := filepath.Glob("../../../deploy/npd/*.json")
	require.NoError(t, err)
	seen := map[string]string{}
	for _, f := range files {
		var cfg struct {
			Conditions []struct{ Type, Reason string } `json:"conditions"`
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &cfg), f)
		for _, c := range cfg.Conditions {
			seen[c.Type] = c.Reason
		}
	}
	require.Equal(t, seen, okReason)
	require.Len(t, okReason, len(v1alpha1.ConditionReasons), "one per detector condition")
}

// TestRuleFile: every group of the shipped PrometheusRule, "for:" divided.
func TestRuleFile(t *testing.T) {
	w := &World{opts: Options{RepoRoot: "../../../"}, Speed: DefaultSpeed}
	b, err := w.ruleFile()
	require.NoError(t, err)
	var rf struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert string
				For   string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &rf))
	require.NotEmpty(t, rf.Groups)
	fors := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			fors[r.Alert] = r.For
		}
	}
	require.Equal(t, "2s", fors["KubemedicGPUXidError"], "for: 2m")
	require.Equal(t, "", fors["KubemedicNodeQuarantined"], "no for: fires at once")
	require.Equal(t, "360s", fors["KubemedicRemediationBlocked"], "for: 6h")
}

func TestSmallHelpers(t *testing.T) {
	_, err := FindScenario("xid")
	require.NoError(t, err)
	_, err = FindScenario("xdi")
	require.ErrorContains(t, err, `unknown scenario "xdi"; known: xid, driver-reset, escalate, nfs-storm, idle, dstate, exclusion`)
	require.Equal(t, "abc", oneLine("abc\ndef", 10))
	require.Equal(t, "abcd…", oneLine("abcdefgh", 5))
	require.Equal(t, "4th node is", migEvery(4))
	require.Equal(t, "3rd node is", migEvery(3))
	require.Equal(t, "none is", migEvery(-1))
	require.Equal(t, "500ms", formatDuration(500*time.Millisecond))
	require.Equal(t, "90s", formatDuration(90*time.Second))
}

// TestInjectRefusesUnknown: an unknown node or fault is the caller's error
// (BadRequestError, 400 on the control server), naming what exists; a GPU
// replacement on a node without a broken GPU too. None touches the cluster.
func TestInjectRefusesUnknown(t *testing.T) {
	w := &World{Nodes: []string{"gpu-node-000", "gpu-node-001"}, faulty: map[string]bool{}}
	var bad *BadRequestError
	_, err := w.Inject(t.Context(), "xid", "gpu-node-999")
	require.ErrorAs(t, err, &bad)
	require.ErrorContains(t, err, `no node "gpu-node-999"; the nodes are gpu-node-000 … gpu-node-001`)
	_, err = w.Inject(t.Context(), "meltdown", "gpu-node-000")
	require.ErrorAs(t, err, &bad)
	require.ErrorContains(t, err, `unknown fault "meltdown"; known: xid, xid-reboot, broken-gpu`)
	_, err = w.Inject(t.Context(), "replace-gpu", "gpu-node-001")
	require.ErrorAs(t, err, &bad)
	require.ErrorContains(t, err, "has no broken GPU")
}

func TestIncidentOf(t *testing.T) {
	for _, tc := range []struct {
		title string
		want  bool
	}{
		{"[critical] Node gpu-node-001: GPUXidError — repairing", true},
		{"[info] Node gpu-node-001 — repairing", true},
		{"[critical] Node gpu-node-0010: GPUXidError — detected", false},
		{"[critical] KubemedicGPUXidError on gpu-node-001", false},
		{"gpu-node-001: GPU replaced (a person's title)", false},
	} {
		require.Equal(t, tc.want, incidentOf(&github.Issue{Title: &tc.title}, "gpu-node-001"), tc.title)
	}
}

// TestSchedulerReason: the timeline prints the scheduler's reasons and
// drops what its post-filter plugins add after them.
func TestSchedulerReason(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"0/17 nodes are available: 1 cannot allocate all claims, 16 node(s) didn't match Pod's node affinity/selector. still not schedulable, preemption: 0/17 nodes are available: 17 Preemption is not helpful for scheduling.",
			"0/17 nodes are available: 1 cannot allocate all claims, 16 node(s) didn't match Pod's node affinity/selector"},
		{"0/17 nodes are available: 1 Insufficient nvidia.com/gpu, 16 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/17 nodes are available: 1 No preemption victims found for incoming pod.",
			"0/17 nodes are available: 1 Insufficient nvidia.com/gpu, 16 node(s) didn't match Pod's node affinity/selector"},
		{"0/3 nodes are available: 3 node(s) were unschedulable.", "0/3 nodes are available: 3 node(s) were unschedulable"},
	} {
		require.Equal(t, tc.want, schedulerReason(tc.msg), tc.msg)
	}
	require.Equal(t, "gpu-node-016", nodeOfRule("GPU 70e24a62 (gpu.nvidia.com/gpu-node-016/gpu-0)"))
	require.Equal(t, "", nodeOfRule("GPU 70e24a62 (?)"))
}

// TestGPUBook: a device-plugin pod gets its node's lowest GPUs no other pod
// holds, as the plugin hands them out; a DRA pod the devices its claims
// were allocated, and none until they are.
func TestGPUBook(t *testing.T) {
	b := &gpuBook{held: map[string]map[int]types.UID{"n": {0: "a", 1: "a", 2: "a", 3: "a", 5: "b"}}}
	pod := func(gpus int64) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	}
	require.Equal(t, []int{4, 6, 7}, b.gpusOf(pod(3), nil))
	require.Equal(t, []int{4, 6, 7}, b.gpusOf(pod(4), nil), "no more than the node has free")

	claimed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n",
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus"}}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("c")}}}}
	claim := &resourcev1.ResourceClaim{}
	claims := map[string]*resourcev1.ResourceClaim{"ns/c": claim}
	require.Empty(t, b.gpusOf(claimed, claims), "not allocated yet")
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-5"}}}}
	require.Equal(t, []int{5}, b.gpusOf(claimed, claims))
}

// TestDRAPolicy: the demo's policy for DRA nodes loads and validates with
// the examples, selects only nodes whose GPUs the device plugin does not
// serve, outranks gpu-xid-reset there, and its reset step cordons without
// draining, which is what makes the remediator exclude the one GPU by
// DeviceTaintRule instead of cordoning the node.
func TestDRAPolicy(t *testing.T) {
	docs, problems := policies.Load(draPolicyFile, draPolicy)
	require.Empty(t, problems)
	require.Len(t, docs, 1)
	examples, problems := policies.LoadFiles("../../../policies/examples")
	require.Empty(t, problems)
	require.Empty(t, policies.ValidateSet(append(examples, docs...)))
	p := docs[0].Object.(*v1alpha1.RemediationPolicy)
	require.Equal(t, draPolicyName, p.Name)
	require.Equal(t, "false", p.Spec.NodeSelector.MatchLabels[labelDevicePlugin])
	var reset *v1alpha1.RemediationPolicy
	for _, d := range examples {
		if rp, ok := d.Object.(*v1alpha1.RemediationPolicy); ok && rp.Name == "gpu-xid-reset" {
			reset = rp
		}
	}
	require.NotNil(t, reset)
	require.Greater(t, p.Spec.Priority, reset.Spec.Priority)
	step := p.Spec.Steps[0]
	require.Equal(t, "reset-gpu", step.Operation)
	require.True(t, step.Cordon)
	require.Nil(t, step.Drain, "a drain empties the node: the remediator would cordon it")
	require.NotNil(t, reset.Spec.Steps[0].Drain, "gpu-xid-reset drains, hence this policy")
}
