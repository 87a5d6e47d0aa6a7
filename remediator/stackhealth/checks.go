package stackhealth

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Labels and resources of the NVIDIA GPU Operator that the checks read.
const (
	// ResourceGPU is the device plugin's whole-GPU resource.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// resourceMIGPrefix starts the device plugin's MIG resources
	// (nvidia.com/mig-3g.40gb, ...).
	resourceMIGPrefix = "nvidia.com/mig-"
	// LabelGPUCount is GPU feature discovery's count of physical GPUs.
	LabelGPUCount = "nvidia.com/gpu.count"
	// LabelMIGStrategy is GPU feature discovery's MIG strategy.
	LabelMIGStrategy = "nvidia.com/mig.strategy"
	// LabelMIGConfig is the MIG configuration asked of the MIG manager.
	LabelMIGConfig = "nvidia.com/mig.config"
	// LabelMIGConfigState is the MIG manager's progress on it: pending,
	// rebooting, success or failed.
	LabelMIGConfigState = "nvidia.com/mig.config.state"
)

// Settings are the checks' thresholds.
type Settings struct {
	// ExpectedGPUs is the hardware count when neither the GPU detector nor
	// GPU feature discovery gives one; 0 means no default.
	ExpectedGPUs int
	// PodNotReadyAfter is how long a stack pod may be missing, not Ready or
	// crash-looping before it is a fault.
	PodNotReadyAfter time.Duration
	// TerminatingAfter is how long past its deletionTimestamp a pod may
	// still exist before it counts as stuck.
	TerminatingAfter time.Duration
	// MIGPendingAfter is how long the MIG manager may stay pending or
	// rebooting on one desired configuration.
	MIGPendingAfter time.Duration
	// DetectorStaleAfter is how old a detector condition's
	// lastHeartbeatTime may be before the detectors count as not
	// reporting (CheckDetectors).
	DetectorStaleAfter time.Duration
}

// IsGPUNode says whether the checks apply to node: GPU feature discovery
// counted GPUs on it, or the device plugin advertises nvidia.com/gpu.
func IsGPUNode(node *corev1.Node) bool {
	if _, ok := node.Labels[LabelGPUCount]; ok {
		return true
	}
	_, ok := node.Status.Capacity[ResourceGPU]
	return ok
}

func condition(t, reason string, status corev1.ConditionStatus, format string, args ...any) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type:    corev1.NodeConditionType(t),
		Status:  status,
		Reason:  reason,
		Message: fmt.Sprintf(format, args...),
	}
}

// stamp formats a time for a message: to the second, UTC, so that the
// message stays the same from one pass to the next.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ---- GPUAllocatableMismatch ----

// healthyRe reads the GPU detector's OK message, "8 of 8 GPUs healthy
// (nvml)", which NPD copies into the GPULost condition; the second number is
// the count the node should have. A reason may precede it ("Reason: ...").
var healthyRe = regexp.MustCompile(`^(?:[A-Za-z]+: )?(\d+) of (\d+) GPUs healthy\b`)

// hardwareCount returns the node's GPU count and where it came from, in
// order: the GPU detector's GPULost message, GPU feature discovery's label,
// the default. ok is false when no source gives one.
func hardwareCount(node *corev1.Node, s Settings) (n int, source string, ok bool) {
	for _, c := range node.Status.Conditions {
		if c.Type != v1alpha1.ConditionGPULost {
			continue
		}
		if m := healthyRe.FindStringSubmatch(c.Message); m != nil {
			if v, err := strconv.Atoi(m[2]); err == nil && v > 0 {
				return v, "the GPU detector's GPULost condition", true
			}
		}
	}
	if v, err := strconv.Atoi(node.Labels[LabelGPUCount]); err == nil && v > 0 {
		return v, "GPU feature discovery's " + LabelGPUCount, true
	}
	if s.ExpectedGPUs > 0 {
		return s.ExpectedGPUs, "the default expected count", true
	}
	return 0, "", false
}

// isMIGNode says whether GPUs of node may be split into MIG instances: GPU
// feature discovery reports a MIG strategy, or the device plugin
// advertises a MIG resource.
func isMIGNode(node *corev1.Node) bool {
	switch node.Labels[LabelMIGStrategy] {
	case "mixed", "single":
		return true
	}
	for name := range node.Status.Capacity {
		if strings.HasPrefix(string(name), resourceMIGPrefix) {
			return true
		}
	}
	return false
}

// CheckAllocatable sets GPUAllocatableMismatch.
//
// Without MIG, allocatable nvidia.com/gpu is compared with the hardware
// count (the GPU detector's, else GPU feature discovery's, else the
// default); none of them: Unknown. An allocatable that is not advertised
// counts as 0.
//
// With MIG, whole GPUs split into instances are not in nvidia.com/gpu, and
// which GPUs carry the instances cannot be known from the node, so the
// hardware count cannot be compared. There each GPU resource
// (nvidia.com/gpu and every nvidia.com/mig-*) is compared with its own
// capacity: the kubelet counts every device the device plugin registered in
// capacity and only the healthy ones in allocatable, so allocatable below
// capacity is a device the plugin marked unhealthy. No such resource in
// capacity: Unknown.
func CheckAllocatable(node *corev1.Node, s Settings, _ time.Time) corev1.NodeCondition {
	const t = v1alpha1.ConditionGPUAllocatableMismatch
	if isMIGNode(node) {
		return checkAllocatableMIG(node)
	}
	hw, source, ok := hardwareCount(node, s)
	if !ok {
		return condition(t, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
			"no GPU count: no %q in the GPULost condition, no %s label, no default", "N of M GPUs healthy", LabelGPUCount)
	}
	alloc := node.Status.Allocatable[ResourceGPU]
	if n := alloc.Value(); n < int64(hw) {
		return condition(t, v1alpha1.ReasonAllocatableBelowHardware, corev1.ConditionTrue,
			"allocatable %s %d < %d GPUs (%s)", ResourceGPU, n, hw, source)
	}
	return condition(t, v1alpha1.ReasonAllocatableMatches, corev1.ConditionFalse,
		"allocatable %s %d, %d GPUs (%s)", ResourceGPU, alloc.Value(), hw, source)
}

func checkAllocatableMIG(node *corev1.Node) corev1.NodeCondition {
	const t = v1alpha1.ConditionGPUAllocatableMismatch
	var names []string
	for name := range node.Status.Capacity {
		if name == ResourceGPU || strings.HasPrefix(string(name), resourceMIGPrefix) {
			names = append(names, string(name))
		}
	}
	if len(names) == 0 {
		return condition(t, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
			"MIG node without %s or %s* capacity", ResourceGPU, resourceMIGPrefix)
	}
	slices.Sort(names)
	var below, all []string
	for _, name := range names {
		c := node.Status.Capacity[corev1.ResourceName(name)]
		a := node.Status.Allocatable[corev1.ResourceName(name)]
		all = append(all, fmt.Sprintf("%s %d/%d", name, a.Value(), c.Value()))
		if a.Value() < c.Value() {
			below = append(below, fmt.Sprintf("allocatable %s %d < capacity %d", name, a.Value(), c.Value()))
		}
	}
	if len(below) > 0 {
		return condition(t, v1alpha1.ReasonAllocatableBelowHardware, corev1.ConditionTrue,
			"%s (MIG node: allocatable against capacity per resource)", strings.Join(below, ", "))
	}
	return condition(t, v1alpha1.ReasonAllocatableMatches, corev1.ConditionFalse,
		"allocatable/capacity %s (MIG node: compared per resource)", strings.Join(all, ", "))
}

// ---- GPUStackPodNotReady ----

// Component is one DaemonSet of the GPU stack as the check sees it.
type Component struct {
	// Name is what messages call it, e.g. "device-plugin".
	Name string
	// Pods are the pods matching its selector on the node.
	Pods []corev1.Pod
	// Deployed is whether any pod matches its selector in the cluster; false
	// means the DaemonSet is not there, which is missing evidence, not a
	// missing pod.
	Deployed bool
	// MissingSince is when the reconciler first saw no pod on the node
	// (zero: now). Only it knows: a missing pod leaves no timestamp.
	MissingSince time.Time
	// MissingReason and NotReadyReason are the condition's reasons.
	MissingReason, NotReadyReason string
}

// CheckStackPods sets GPUStackPodNotReady from the device plugin's and
// dcgm-exporter's components, in that order: the first fault gives the
// reason, the message names every fault. A pod is a fault when it is
// missing, not Ready or crash-looping (a container in CrashLoopBackOff) for
// longer than s.PodNotReadyAfter, measured from MissingSince, the Ready
// condition's lastTransitionTime, or else the pod's start or creation. A
// component not deployed anywhere makes the condition Unknown unless the
// other one has a fault. Terminating pods count as missing.
func CheckStackPods(comps []Component, s Settings, now time.Time) corev1.NodeCondition {
	const t = v1alpha1.ConditionGPUStackPodNotReady
	var faults, undeployed, ok []string
	reason := ""
	for _, c := range comps {
		if !c.Deployed {
			undeployed = append(undeployed, c.Name)
			continue
		}
		r, msg, bad := checkComponent(c, s, now)
		if !bad {
			ok = append(ok, msg)
			continue
		}
		if reason == "" {
			reason = r
		}
		faults = append(faults, msg)
	}
	switch {
	case len(faults) > 0:
		return condition(t, reason, corev1.ConditionTrue, "%s", strings.Join(faults, "; "))
	case len(undeployed) > 0:
		return condition(t, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
			"no %s pod in the cluster: DaemonSet not deployed or selector wrong", strings.Join(undeployed, " or "))
	}
	return condition(t, v1alpha1.ReasonGPUStackPodsReady, corev1.ConditionFalse, "%s", strings.Join(ok, "; "))
}

// checkComponent returns the reason and message of a component, and
// whether it is a fault. Messages of pods within the threshold are the
// same as of healthy ones, so that a pod going through a restart does not
// cause writes.
func checkComponent(c Component, s Settings, now time.Time) (reason, msg string, fault bool) {
	var live []corev1.Pod
	for _, p := range c.Pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		since := c.MissingSince
		if since.IsZero() || since.After(now) {
			since = now
		}
		if now.Sub(since) > s.PodNotReadyAfter {
			return c.MissingReason, fmt.Sprintf("no %s pod on the node since %s", c.Name, stamp(since)), true
		}
		return "", fmt.Sprintf("%s pod starting", c.Name), false
	}
	// The best pod speaks for the component: a Ready one if any.
	best := live[0]
	for _, p := range live[1:] {
		if podReady(&p) && !podReady(&best) {
			best = p
		}
	}
	if podReady(&best) && crashLooping(&best) == "" {
		return "", fmt.Sprintf("%s pod %s Ready", c.Name, best.Name), false
	}
	since := notReadySince(&best)
	if now.Sub(since) <= s.PodNotReadyAfter {
		return "", fmt.Sprintf("%s pod %s starting", c.Name, best.Name), false
	}
	what := "not Ready"
	if cl := crashLooping(&best); cl != "" {
		what = "crash-looping (" + cl + ")"
	}
	return c.NotReadyReason, fmt.Sprintf("%s pod %s/%s %s since %s", c.Name, best.Namespace, best.Name, what, stamp(since)), true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notReadySince is when the pod last became not Ready: its Ready
// condition's transition, else when it started, else when it was created.
func notReadySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	return p.CreationTimestamp.Time
}

// crashLooping names the first container in CrashLoopBackOff and its
// restart count, or returns "".
func crashLooping(p *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			return fmt.Sprintf("container %s, %d restarts", cs.Name, cs.RestartCount)
		}
	}
	return ""
}

// ---- PodsStuckTerminating ----

// CheckTerminating sets PodsStuckTerminating from the pods on the node. The
// API server sets a pod's deletionTimestamp to the time of the delete
// request plus its grace period: the time by which the kubelet should have
// removed it. A pod still there s.TerminatingAfter after that is stuck. A
// deletionTimestamp in the future (the grace period runs, or clocks are
// skewed) is not stuck. There is no Unknown: the pods come from the API
// server, and no pod is no evidence of a fault.
func CheckTerminating(pods []corev1.Pod, s Settings, now time.Time) corev1.NodeCondition {
	const t = v1alpha1.ConditionPodsStuckTerminating
	var oldest *corev1.Pod
	n := 0
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil || !now.After(p.DeletionTimestamp.Add(s.TerminatingAfter)) {
			continue
		}
		n++
		if oldest == nil || p.DeletionTimestamp.Before(oldest.DeletionTimestamp) ||
			(p.DeletionTimestamp.Equal(oldest.DeletionTimestamp) && p.Namespace+"/"+p.Name < oldest.Namespace+"/"+oldest.Name) {
			oldest = p
		}
	}
	if n == 0 {
		return condition(t, v1alpha1.ReasonNoPodsStuckTerminating, corev1.ConditionFalse,
			"no pod terminating more than %s past its grace period", s.TerminatingAfter)
	}
	pods1 := "pods"
	if n == 1 {
		pods1 = "pod"
	}
	return condition(t, v1alpha1.ReasonPodsStuckTerminating, corev1.ConditionTrue,
		"%d %s terminating more than %s past the grace period; oldest %s/%s, due to be gone at %s",
		n, pods1, s.TerminatingAfter, oldest.Namespace, oldest.Name, stamp(oldest.DeletionTimestamp.Time))
}

// ---- MIGConfigFailed ----

// MIGDesired returns the desired MIG configuration of node and whether the
// node has MIG manager labels at all.
func MIGDesired(node *corev1.Node) (config string, ok bool) {
	config, hasConfig := node.Labels[LabelMIGConfig]
	_, hasState := node.Labels[LabelMIGConfigState]
	return config, hasConfig || hasState
}

// CheckMIG sets MIGConfigFailed from the MIG manager's labels. pendingSince
// is when the reconciler first saw the current desired configuration
// pending or rebooting (zero: now): labels carry no time. ok is false when
// the node has no MIG manager labels: it does not use MIG and gets no
// condition. "failed" is a fault at once; "pending" or "rebooting" is one
// after s.MIGPendingAfter; "success" is not; any other value, or a config
// without a state, is Unknown.
func CheckMIG(node *corev1.Node, pendingSince time.Time, s Settings, now time.Time) (cond corev1.NodeCondition, ok bool) {
	const t = v1alpha1.ConditionMIGConfigFailed
	config, ok := MIGDesired(node)
	if !ok {
		return corev1.NodeCondition{}, false
	}
	state, hasState := node.Labels[LabelMIGConfigState]
	switch {
	case !hasState:
		return condition(t, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
			"%s=%q without %s", LabelMIGConfig, config, LabelMIGConfigState), true
	case state == "failed":
		return condition(t, v1alpha1.ReasonMIGConfigStateFailed, corev1.ConditionTrue,
			"the MIG manager failed to apply %s=%q (%s=failed)", LabelMIGConfig, config, LabelMIGConfigState), true
	case state == "success":
		return condition(t, v1alpha1.ReasonMIGConfigApplied, corev1.ConditionFalse,
			"%s=%q applied", LabelMIGConfig, config), true
	case state == "pending" || state == "rebooting":
		if pendingSince.IsZero() || pendingSince.After(now) {
			pendingSince = now
		}
		if now.Sub(pendingSince) > s.MIGPendingAfter {
			return condition(t, v1alpha1.ReasonMIGConfigNotApplied, corev1.ConditionTrue,
				"%s=%q not applied: %s pending or rebooting since %s (as seen by this remediator)",
				LabelMIGConfig, config, LabelMIGConfigState, stamp(pendingSince)), true
		}
		return condition(t, v1alpha1.ReasonMIGConfigApplied, corev1.ConditionFalse,
			"%s=%q being applied (%s=%s)", LabelMIGConfig, config, LabelMIGConfigState, state), true
	}
	return condition(t, v1alpha1.ReasonStackEvidenceMissing, corev1.ConditionUnknown,
		"%s=%q: unknown state", LabelMIGConfigState, state), true
}

// ---- detectors ----

// Values of kubemedic_remediation_node_detectors_missing's reason label,
// in the order CheckDetectors tries them: the first that holds is the one
// reported.
const (
	// DetectorsNoPod: no Ready detector pod on the node.
	DetectorsNoPod = "no-detector-pod"
	// DetectorsNoConditions: none of the detectors' conditions on the node.
	DetectorsNoConditions = "no-conditions"
	// DetectorsStaleHeartbeat: a detector condition's lastHeartbeatTime is
	// older than Settings.DetectorStaleAfter.
	DetectorsStaleHeartbeat = "stale-heartbeat"
)

// DetectorConditions are the node conditions kubemedic's detectors set
// through node-problem-detector, sorted.
var DetectorConditions = slices.Sorted(maps.Keys(v1alpha1.ConditionReasons))

// CheckDetectors says whether kubemedic's detectors report on node: pods
// are the detector pods on the node (node-problem-detector's DaemonSet),
// terminating ones included. It returns reason "" when a detector pod is
// Ready and the node carries detector conditions whose heartbeats are all
// newer than s.DetectorStaleAfter; else the first reason that holds of
// DetectorsNoPod, DetectorsNoConditions, DetectorsStaleHeartbeat, and a
// message naming the evidence. A heartbeat that is not set is stale; one
// in the future (the node's clock ahead) is not. It never says more than
// that the evidence is missing: the conditions the node carries stay what
// they are.
func CheckDetectors(node *corev1.Node, pods []corev1.Pod, s Settings, now time.Time) (reason, message string) {
	ready := slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil && podReady(&p) })
	if !ready {
		if len(pods) == 0 {
			return DetectorsNoPod, "no detector pod on the node"
		}
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		slices.Sort(names)
		return DetectorsNoPod, fmt.Sprintf("no Ready detector pod on the node: %s", strings.Join(names, ", "))
	}
	var stale []string
	found := 0
	for _, t := range DetectorConditions {
		c := findCondition(node, t)
		if c == nil {
			continue
		}
		found++
		if c.LastHeartbeatTime.IsZero() {
			stale = append(stale, t+" without a heartbeat")
		} else if now.Sub(c.LastHeartbeatTime.Time) > s.DetectorStaleAfter {
			stale = append(stale, fmt.Sprintf("%s heartbeat %s", t, stamp(c.LastHeartbeatTime.Time)))
		}
	}
	switch {
	case found == 0:
		return DetectorsNoConditions, fmt.Sprintf("none of the detector conditions (%s) on the node", strings.Join(DetectorConditions, ", "))
	case len(stale) > 0:
		return DetectorsStaleHeartbeat, fmt.Sprintf("%s: older than %s", strings.Join(stale, ", "), s.DetectorStaleAfter)
	}
	return "", fmt.Sprintf("%d of %d detector conditions, heartbeats within %s", found, len(DetectorConditions), s.DetectorStaleAfter)
}
