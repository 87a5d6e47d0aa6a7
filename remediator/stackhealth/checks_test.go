package stackhealth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

var (
	now      = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	settings = Settings{PodNotReadyAfter: 5 * time.Minute, TerminatingAfter: 10 * time.Minute, MIGPendingAfter: 30 * time.Minute}
)

func rl(kv ...any) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i].(string))] = *resource.NewQuantity(int64(kv[i+1].(int)), resource.DecimalSI)
	}
	return out
}

type nodeOpt func(*corev1.Node)

func mkNode(opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func label(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }
func capacity(l corev1.ResourceList) nodeOpt {
	return func(n *corev1.Node) { n.Status.Capacity = l }
}
func allocatable(l corev1.ResourceList) nodeOpt {
	return func(n *corev1.Node) { n.Status.Allocatable = l }
}
func gpuLost(status corev1.ConditionStatus, msg string) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: status, Message: msg})
	}
}

func TestIsGPUNode(t *testing.T) {
	require.True(t, IsGPUNode(mkNode(label(LabelGPUCount, "8"))))
	require.True(t, IsGPUNode(mkNode(capacity(rl("nvidia.com/gpu", 0)))))
	require.False(t, IsGPUNode(mkNode(capacity(rl("cpu", 8)))))
}

func TestCheckAllocatable(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		node     *corev1.Node
		expected int
		status   corev1.ConditionStatus
		reason   string
		message  string
	}{
		{desc: "detector count wins over the label",
			node:   mkNode(gpuLost(corev1.ConditionFalse, "8 of 8 GPUs healthy (nvml)"), label(LabelGPUCount, "4"), allocatable(rl("nvidia.com/gpu", 6))),
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonAllocatableBelowHardware,
			message: "allocatable nvidia.com/gpu 6 < 8 GPUs (the GPU detector's GPULost condition)"},
		{desc: "detector message with a reason prefix",
			node:   mkNode(gpuLost(corev1.ConditionFalse, "KubemedicDetect: 7 of 8 GPUs healthy (dcgm)"), allocatable(rl("nvidia.com/gpu", 8))),
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonAllocatableMatches,
			message: "allocatable nvidia.com/gpu 8, 8 GPUs (the GPU detector's GPULost condition)"},
		{desc: "GFD label when the detector's message has no count",
			node:   mkNode(gpuLost(corev1.ConditionTrue, "GPUCountMismatch: 6 GPUs visible, 8 expected"), label(LabelGPUCount, "8"), allocatable(rl("nvidia.com/gpu", 6))),
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonAllocatableBelowHardware,
			message: "allocatable nvidia.com/gpu 6 < 8 GPUs (GPU feature discovery's nvidia.com/gpu.count)"},
		{desc: "detector's warning form has no expected count: label",
			node:   mkNode(gpuLost(corev1.ConditionFalse, "8 GPUs healthy (dcgm), 4 expected"), label(LabelGPUCount, "8"), allocatable(rl("nvidia.com/gpu", 8))),
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonAllocatableMatches,
			message: "allocatable nvidia.com/gpu 8, 8 GPUs (GPU feature discovery's nvidia.com/gpu.count)"},
		{desc: "device plugin not registered: allocatable 0",
			node:   mkNode(label(LabelGPUCount, "8")),
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonAllocatableBelowHardware,
			message: "allocatable nvidia.com/gpu 0 < 8 GPUs (GPU feature discovery's nvidia.com/gpu.count)"},
		{desc: "default count",
			node: mkNode(capacity(rl("nvidia.com/gpu", 8)), allocatable(rl("nvidia.com/gpu", 7))), expected: 8,
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonAllocatableBelowHardware,
			message: "allocatable nvidia.com/gpu 7 < 8 GPUs (the default expected count)"},
		{desc: "more allocatable than hardware is no mismatch",
			node: mkNode(capacity(rl("nvidia.com/gpu", 8)), allocatable(rl("nvidia.com/gpu", 8))), expected: 4,
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonAllocatableMatches,
			message: "allocatable nvidia.com/gpu 8, 4 GPUs (the default expected count)"},
		{desc: "Unknown: no source at all",
			node:   mkNode(capacity(rl("nvidia.com/gpu", 8)), allocatable(rl("nvidia.com/gpu", 2))),
			status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
		{desc: "Unknown: unparseable label and no default",
			node:   mkNode(label(LabelGPUCount, "eight"), allocatable(rl("nvidia.com/gpu", 2))),
			status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
		{desc: "MIG mixed: whole GPUs below the physical count is not a mismatch",
			node: mkNode(label(LabelGPUCount, "8"), label(LabelMIGStrategy, "mixed"),
				capacity(rl("nvidia.com/gpu", 4, "nvidia.com/mig-3g.40gb", 8)), allocatable(rl("nvidia.com/gpu", 4, "nvidia.com/mig-3g.40gb", 8))),
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonAllocatableMatches,
			message: "allocatable/capacity nvidia.com/gpu 4/4, nvidia.com/mig-3g.40gb 8/8 (MIG node: compared per resource)"},
		{desc: "MIG: an unhealthy instance",
			node:   mkNode(capacity(rl("nvidia.com/gpu", 4, "nvidia.com/mig-3g.40gb", 8)), allocatable(rl("nvidia.com/gpu", 4, "nvidia.com/mig-3g.40gb", 7))),
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonAllocatableBelowHardware,
			message: "allocatable nvidia.com/mig-3g.40gb 7 < capacity 8 (MIG node: allocatable against capacity per resource)"},
		{desc: "Unknown: MIG strategy but no GPU resource",
			node:   mkNode(label(LabelMIGStrategy, "single"), label(LabelGPUCount, "8")),
			status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := CheckAllocatable(tc.node, Settings{ExpectedGPUs: tc.expected}, now)
			require.Equal(t, corev1.NodeConditionType(v1alpha1.ConditionGPUAllocatableMismatch), c.Type)
			require.Equal(t, tc.status, c.Status, c.Message)
			require.Equal(t, tc.reason, c.Reason)
			if tc.message != "" {
				require.Equal(t, tc.message, c.Message)
			}
		})
	}
}

type podOpt func(*corev1.Pod)

func mkPod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func ready(status corev1.ConditionStatus, since time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-since))})
	}
}

func crashLoop(p *corev1.Pod) {
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
		Name: "plugin", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}})
}

func deleting(ago time.Duration) podOpt {
	return func(p *corev1.Pod) {
		t := metav1.NewTime(now.Add(-ago))
		p.DeletionTimestamp = &t
		p.DeletionGracePeriodSeconds = new(int64(30))
	}
}

func dp(deployed bool, missingFor time.Duration, pods ...corev1.Pod) Component {
	c := Component{Name: "device-plugin", Pods: pods, Deployed: deployed,
		MissingReason: v1alpha1.ReasonDevicePluginMissing, NotReadyReason: v1alpha1.ReasonDevicePluginNotReady}
	if missingFor > 0 {
		c.MissingSince = now.Add(-missingFor)
	}
	return c
}

func dcgm(deployed bool, missingFor time.Duration, pods ...corev1.Pod) Component {
	c := dp(deployed, missingFor, pods...)
	c.Name, c.MissingReason, c.NotReadyReason = "dcgm-exporter", v1alpha1.ReasonDCGMExporterMissing, v1alpha1.ReasonDCGMExporterNotReady
	return c
}

func TestCheckStackPods(t *testing.T) {
	okDP := mkPod("dp-1", ready(corev1.ConditionTrue, time.Hour))
	okDCGM := mkPod("dcgm-1", ready(corev1.ConditionTrue, time.Hour))
	for _, tc := range []struct {
		desc    string
		comps   []Component
		status  corev1.ConditionStatus
		reason  string
		message string
	}{
		{desc: "both Ready", comps: []Component{dp(true, 0, okDP), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady,
			message: "device-plugin pod dp-1 Ready; dcgm-exporter pod dcgm-1 Ready"},
		{desc: "device plugin missing past the threshold", comps: []Component{dp(true, 6*time.Minute), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDevicePluginMissing,
			message: "no device-plugin pod on the node since 2026-11-25T11:54:00Z"},
		{desc: "device plugin missing within the threshold", comps: []Component{dp(true, 4*time.Minute), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady},
		{desc: "missing, first seen now", comps: []Component{dp(true, 0), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady},
		{desc: "terminating pod counts as missing", comps: []Component{dp(true, 10*time.Minute, mkPod("dp-old", ready(corev1.ConditionTrue, time.Hour), deleting(time.Minute))), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDevicePluginMissing},
		{desc: "dcgm-exporter not Ready past the threshold", comps: []Component{dp(true, 0, okDP), dcgm(true, 0, mkPod("dcgm-1", ready(corev1.ConditionFalse, 6*time.Minute)))},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDCGMExporterNotReady,
			message: "dcgm-exporter pod gpu-operator/dcgm-1 not Ready since 2026-11-25T11:54:00Z"},
		{desc: "not Ready within the threshold", comps: []Component{dp(true, 0, mkPod("dp-1", ready(corev1.ConditionFalse, 4*time.Minute))), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady,
			message: "device-plugin pod dp-1 starting; dcgm-exporter pod dcgm-1 Ready"},
		{desc: "not Ready since a time in the future (the kubelet's clock ahead): not past the threshold", comps: []Component{dp(true, 0, mkPod("dp-1", ready(corev1.ConditionFalse, -time.Hour))), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady},
		{desc: "crash-looping, no Ready condition: since the start", comps: []Component{dp(true, 0, mkPod("dp-1", crashLoop)), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDevicePluginNotReady,
			message: "device-plugin pod gpu-operator/dp-1 crash-looping (container plugin, 7 restarts) since 2026-11-25T11:00:00Z"},
		{desc: "both faulty: device plugin gives the reason", comps: []Component{dp(true, 0, mkPod("dp-1", ready(corev1.ConditionFalse, time.Hour))), dcgm(true, time.Hour)},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDevicePluginNotReady,
			message: "device-plugin pod gpu-operator/dp-1 not Ready since 2026-11-25T11:00:00Z; no dcgm-exporter pod on the node since 2026-11-25T11:00:00Z"},
		{desc: "a Ready pod among two speaks", comps: []Component{dp(true, 0, mkPod("dp-0", ready(corev1.ConditionFalse, time.Hour)), okDP), dcgm(true, 0, okDCGM)},
			status: corev1.ConditionFalse, reason: v1alpha1.ReasonGPUStackPodsReady},
		{desc: "Unknown: dcgm-exporter not deployed anywhere", comps: []Component{dp(true, 0, okDP), dcgm(false, 0)},
			status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing,
			message: "no dcgm-exporter pod in the cluster: DaemonSet not deployed or selector wrong"},
		{desc: "Unknown: neither deployed", comps: []Component{dp(false, 0), dcgm(false, 0)},
			status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing,
			message: "no device-plugin or dcgm-exporter pod in the cluster: DaemonSet not deployed or selector wrong"},
		{desc: "a fault wins over the other not deployed", comps: []Component{dp(true, time.Hour), dcgm(false, 0)},
			status: corev1.ConditionTrue, reason: v1alpha1.ReasonDevicePluginMissing},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := CheckStackPods(tc.comps, settings, now)
			require.Equal(t, corev1.NodeConditionType(v1alpha1.ConditionGPUStackPodNotReady), c.Type)
			require.Equal(t, tc.status, c.Status, c.Message)
			require.Equal(t, tc.reason, c.Reason)
			if tc.message != "" {
				require.Equal(t, tc.message, c.Message)
			}
		})
	}
}

func TestCheckTerminating(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		pods    []corev1.Pod
		status  corev1.ConditionStatus
		message string
	}{
		{desc: "none", pods: []corev1.Pod{mkPod("a")}, status: corev1.ConditionFalse,
			message: "no pod terminating more than 10m0s past its grace period"},
		{desc: "within the threshold", pods: []corev1.Pod{mkPod("a", deleting(9*time.Minute))}, status: corev1.ConditionFalse},
		{desc: "deletionTimestamp in the future (clock skew)", pods: []corev1.Pod{mkPod("a", deleting(-time.Hour))}, status: corev1.ConditionFalse},
		{desc: "two stuck, the oldest named", pods: []corev1.Pod{mkPod("a", deleting(11*time.Minute)), mkPod("b", deleting(2*time.Hour)), mkPod("c", deleting(time.Minute))},
			status:  corev1.ConditionTrue,
			message: "2 pods terminating more than 10m0s past the grace period; oldest gpu-operator/b, due to be gone at 2026-11-25T10:00:00Z"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := CheckTerminating(tc.pods, settings, now)
			require.Equal(t, corev1.NodeConditionType(v1alpha1.ConditionPodsStuckTerminating), c.Type)
			require.Equal(t, tc.status, c.Status, c.Message)
			want := v1alpha1.ReasonNoPodsStuckTerminating
			if tc.status == corev1.ConditionTrue {
				want = v1alpha1.ReasonPodsStuckTerminating
			}
			require.Equal(t, want, c.Reason)
			if tc.message != "" {
				require.Equal(t, tc.message, c.Message)
			}
		})
	}
}

func TestCheckMIG(t *testing.T) {
	mig := func(state string) *corev1.Node {
		return mkNode(label(LabelMIGConfig, "all-3g.40gb"), label(LabelMIGConfigState, state))
	}
	for _, tc := range []struct {
		desc      string
		node      *corev1.Node
		pendingOf time.Duration
		set       bool
		status    corev1.ConditionStatus
		reason    string
	}{
		{desc: "no MIG labels: not set", node: mkNode(label(LabelGPUCount, "8"))},
		{desc: "failed", node: mig("failed"), set: true, status: corev1.ConditionTrue, reason: v1alpha1.ReasonMIGConfigStateFailed},
		{desc: "success", node: mig("success"), set: true, status: corev1.ConditionFalse, reason: v1alpha1.ReasonMIGConfigApplied},
		{desc: "pending within the threshold", node: mig("pending"), pendingOf: 29 * time.Minute, set: true, status: corev1.ConditionFalse, reason: v1alpha1.ReasonMIGConfigApplied},
		{desc: "pending first seen now", node: mig("pending"), set: true, status: corev1.ConditionFalse, reason: v1alpha1.ReasonMIGConfigApplied},
		{desc: "rebooting past the threshold", node: mig("rebooting"), pendingOf: 31 * time.Minute, set: true, status: corev1.ConditionTrue, reason: v1alpha1.ReasonMIGConfigNotApplied},
		{desc: "Unknown: unparseable state", node: mig("exploded"), set: true, status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
		{desc: "Unknown: empty state", node: mig(""), set: true, status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
		{desc: "Unknown: config without state", node: mkNode(label(LabelMIGConfig, "all-disabled")), set: true, status: corev1.ConditionUnknown, reason: v1alpha1.ReasonStackEvidenceMissing},
		{desc: "state without config", node: mkNode(label(LabelMIGConfigState, "failed")), set: true, status: corev1.ConditionTrue, reason: v1alpha1.ReasonMIGConfigStateFailed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var since time.Time
			if tc.pendingOf > 0 {
				since = now.Add(-tc.pendingOf)
			}
			c, ok := CheckMIG(tc.node, since, settings, now)
			require.Equal(t, tc.set, ok)
			if !ok {
				return
			}
			require.Equal(t, corev1.NodeConditionType(v1alpha1.ConditionMIGConfigFailed), c.Type)
			require.Equal(t, tc.status, c.Status, c.Message)
			require.Equal(t, tc.reason, c.Reason)
		})
	}
}

// detectorCond is a detector condition node-problem-detector last wrote
// ago before now; ago < 0: without a heartbeat.
func detectorCond(t string, ago time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(t), Status: corev1.ConditionFalse, Reason: v1alpha1.DetectReason}
		if ago >= 0 {
			c.LastHeartbeatTime = metav1.NewTime(now.Add(-ago))
		}
		n.Status.Conditions = append(n.Status.Conditions, c)
	}
}

// allDetectorConds are the seven conditions of deploy/npd, written ago.
func allDetectorConds(ago time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		for _, t := range DetectorConditions {
			detectorCond(t, ago)(n)
		}
	}
}

func TestCheckDetectors(t *testing.T) {
	s := Settings{DetectorStaleAfter: 8 * time.Minute}
	npd := mkPod("kubemedic-npd-x1", ready(corev1.ConditionTrue, time.Hour))
	notReady := mkPod("kubemedic-npd-x1", ready(corev1.ConditionFalse, time.Minute), crashLoop)
	leaving := mkPod("kubemedic-npd-x1", ready(corev1.ConditionTrue, time.Hour), deleting(time.Second))
	for _, tc := range []struct {
		desc    string
		node    *corev1.Node
		pods    []corev1.Pod
		reason  string
		message string
	}{
		{desc: "Ready pod, fresh heartbeats", node: mkNode(allDetectorConds(time.Minute)), pods: []corev1.Pod{npd},
			message: "7 of 7 detector conditions, heartbeats within 8m0s"},
		{desc: "heartbeat a whole NPD heartbeat period old is fresh", node: mkNode(allDetectorConds(DetectorHeartbeatPeriod + time.Second)), pods: []corev1.Pod{npd},
			message: "7 of 7 detector conditions, heartbeats within 8m0s"},
		{desc: "heartbeat exactly at the threshold is fresh", node: mkNode(allDetectorConds(8 * time.Minute)), pods: []corev1.Pod{npd},
			message: "7 of 7 detector conditions, heartbeats within 8m0s"},
		{desc: "heartbeat in the future (node clock ahead) is fresh", node: mkNode(func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionFalse,
				LastHeartbeatTime: metav1.NewTime(now.Add(time.Hour))})
		}), pods: []corev1.Pod{npd},
			message: "1 of 7 detector conditions, heartbeats within 8m0s"},
		{desc: "no heartbeat anywhere", node: mkNode(allDetectorConds(-1)), pods: []corev1.Pod{npd},
			reason: DetectorsStaleHeartbeat, message: "GPULost without a heartbeat, GPUMemoryUnhealthy without a heartbeat, GPURecoveryRequired without a heartbeat, GPUXidError without a heartbeat, NFSMountUnhealthy without a heartbeat, NetworkInterfaceDown without a heartbeat, PodProcessesStuck without a heartbeat: older than 8m0s"},
		{desc: "no pod at all", node: mkNode(allDetectorConds(time.Minute)),
			reason: DetectorsNoPod, message: "no detector pod on the node"},
		{desc: "pod crash-looping: not Ready", node: mkNode(allDetectorConds(time.Minute)), pods: []corev1.Pod{notReady},
			reason: DetectorsNoPod, message: "no Ready detector pod on the node: gpu-operator/kubemedic-npd-x1"},
		{desc: "terminating pod does not count", node: mkNode(allDetectorConds(time.Minute)), pods: []corev1.Pod{leaving},
			reason: DetectorsNoPod, message: "no Ready detector pod on the node: gpu-operator/kubemedic-npd-x1"},
		{desc: "a Ready pod beside a terminating one", node: mkNode(allDetectorConds(time.Minute)), pods: []corev1.Pod{leaving, npd}},
		{desc: "no pod wins over missing conditions", node: mkNode(),
			reason: DetectorsNoPod, message: "no detector pod on the node"},
		{desc: "pod but no conditions", node: mkNode(), pods: []corev1.Pod{npd},
			reason: DetectorsNoConditions, message: "none of the detector conditions (GPULost, GPUMemoryUnhealthy, GPURecoveryRequired, GPUXidError, NFSMountUnhealthy, NetworkInterfaceDown, PodProcessesStuck) on the node"},
		{desc: "only other conditions are no conditions",
			node: mkNode(detectorCond(string(corev1.NodeReady), 0), detectorCond(v1alpha1.ConditionGPUStackPodNotReady, 0)), pods: []corev1.Pod{npd},
			reason: DetectorsNoConditions, message: "none of the detector conditions (GPULost, GPUMemoryUnhealthy, GPURecoveryRequired, GPUXidError, NFSMountUnhealthy, NetworkInterfaceDown, PodProcessesStuck) on the node"},
		{desc: "one condition is enough", node: mkNode(detectorCond(v1alpha1.ConditionGPULost, time.Minute)), pods: []corev1.Pod{npd},
			message: "1 of 7 detector conditions, heartbeats within 8m0s"},
		{desc: "all stale", node: mkNode(detectorCond(v1alpha1.ConditionGPULost, 9*time.Minute), detectorCond(v1alpha1.ConditionGPUXidError, 9*time.Minute)), pods: []corev1.Pod{npd},
			reason: DetectorsStaleHeartbeat, message: "GPULost heartbeat 2026-11-25T11:51:00Z, GPUXidError heartbeat 2026-11-25T11:51:00Z: older than 8m0s"},
		{desc: "one monitor's condition left behind", node: mkNode(allDetectorConds(time.Minute), func(n *corev1.Node) {
			c := findCondition(n, v1alpha1.ConditionNFSMountUnhealthy)
			c.LastHeartbeatTime = metav1.NewTime(now.Add(-24 * time.Hour))
		}), pods: []corev1.Pod{npd},
			reason: DetectorsStaleHeartbeat, message: "NFSMountUnhealthy heartbeat 2026-11-24T12:00:00Z: older than 8m0s"},
		{desc: "a condition without a heartbeat is stale", node: mkNode(detectorCond(v1alpha1.ConditionGPULost, time.Minute), detectorCond(v1alpha1.ConditionGPUXidError, -1)), pods: []corev1.Pod{npd},
			reason: DetectorsStaleHeartbeat, message: "GPUXidError without a heartbeat: older than 8m0s"},
		{desc: "a True condition with a stale heartbeat is stale too", node: mkNode(func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.NewTime(now.Add(-time.Hour))})
		}), pods: []corev1.Pod{npd},
			reason: DetectorsStaleHeartbeat, message: "GPULost heartbeat 2026-11-25T11:00:00Z: older than 8m0s"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reason, msg := CheckDetectors(tc.node, tc.pods, s, now)
			require.Equal(t, tc.reason, reason, msg)
			if tc.message != "" {
				require.Equal(t, tc.message, msg)
			}
		})
	}
}

// TestDetectorConditions pins the list the check reads to
// the conditions the detectors set.
func TestDetectorConditions(t *testing.T) {
	require.Equal(t, []string{v1alpha1.ConditionGPULost, v1alpha1.ConditionGPUMemoryUnhealthy, v1alpha1.ConditionGPURecoveryRequired,
		v1alpha1.ConditionGPUXidError, v1alpha1.ConditionNFSMountUnhealthy, v1alpha1.ConditionNetworkInterfaceDown, v1alpha1.ConditionPodProcessesStuck},
		DetectorConditions)
}
