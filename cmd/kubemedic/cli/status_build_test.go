package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// statusNow is a Saturday, noon UTC.
var statusNow = time.Date(2026, time.November, 21, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(statusNow.Add(-d)) }

func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func node(name string, conds ...corev1.NodeCondition) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: append([]corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: ago(48 * time.Hour)}}, conds...)}}
}

func cond(typ string, status corev1.ConditionStatus, reason, msg string, since time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: reason, Message: msg, LastTransitionTime: ago(since)}
}

func quarantined(n corev1.Node, since *metav1.Time) corev1.Node {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule},
		corev1.Taint{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule, TimeAdded: since})
	return n
}

func op(name, node, policy, step string, phase v1alpha1.NodeOperationPhase, created time.Duration, msg string) v1alpha1.NodeOperation {
	o := v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created)},
		Spec:   v1alpha1.NodeOperationSpec{NodeName: node, Policy: policy, Step: step, StepAction: v1alpha1.StepAction{Operation: "reboot"}},
		Status: v1alpha1.NodeOperationStatus{Phase: phase, Message: msg}}
	if phase.Finished() {
		o.Status.CompletionTime = agoPtr(created - time.Minute)
	}
	return o
}

func policy(name string, edit func(*v1alpha1.RemediationPolicy)) v1alpha1.RemediationPolicy {
	p := v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue}},
			Steps:      []v1alpha1.RemediationStep{{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot"}}}},
		Status: v1alpha1.RemediationPolicyStatus{MatchedNodes: 10, Conditions: []metav1.Condition{
			{Type: v1alpha1.PolicyReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonEvaluated, LastTransitionTime: ago(time.Hour)},
			{Type: v1alpha1.PolicyBreakerOpen, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBreakerWithinLimit, Message: "0 unhealthy nodes, limit 2", LastTransitionTime: ago(time.Hour)},
		}}}
	if edit != nil {
		edit(&p)
	}
	return p
}

func pod(ns, name string, annotations map[string]string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
}

// emptyStatus is the status of an empty cluster, which a case edits.
func emptyStatus(edit func(*Status)) Status {
	st := Status{Time: metav1.NewTime(statusNow), Server: "https://api.example:6443", Attention: []string{},
		NodeConditions: []NodeConditionStatus{}, ActiveOperations: []PhaseGroup{}, Policies: []PolicyStatus{},
		QuarantinedNodes: []QuarantinedNode{}, ReclaimNotices: []ReclaimNotice{},
		Validation: Validation{Policies: []ValidationPolicyStatus{}, Nodes: []ValidatedNode{}}}
	if edit != nil {
		edit(&st)
	}
	return st
}

// closedBreaker is the breaker of policy() as read.
func closedBreaker() BreakerStatus {
	return BreakerStatus{State: BreakerClosed, Reason: v1alpha1.ReasonBreakerWithinLimit, Message: "0 unhealthy nodes, limit 2", Since: agoPtr(time.Hour)}
}

func TestBuildStatus(t *testing.T) {
	const xidMsg = "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus"
	deadline := statusNow.Add(30 * time.Minute)
	notice := (&decide.Notice{Rule: decide.RuleIdle, Evidence: "0% GPU use over 4h", NoticedAt: statusNow.Add(-time.Hour),
		Deadline: deadline, Sent: true, Recipient: "email alice@example.com"}).Encode()
	claimed := (&decide.Notice{Rule: decide.RuleExpired, ClaimedAt: statusNow.Add(-time.Minute), Claimer: "janitor-0"}).Encode()
	reclaimed := (&decide.Notice{Rule: decide.RuleMaxLifetime, Deadline: deadline.Add(-time.Hour), ReclaimedAt: statusNow, DryRun: true}).Encode()

	cases := []struct {
		desc string
		in   statusInput
		want Status
	}{{
		desc: "an empty cluster is OK and has empty lists, not null ones",
		want: emptyStatus(nil),
	}, {
		desc: "detector conditions True or Unknown are listed by node then type, with the effective reason; False ones and the kubelet's are not",
		in: statusInput{Nodes: []corev1.Node{
			node("gpu-b", cond(v1alpha1.ConditionNFSMountUnhealthy, corev1.ConditionUnknown, "NoData", "probe timed out", 5*time.Minute),
				cond(v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason, xidMsg, 2*time.Hour)),
			node("gpu-a", cond(v1alpha1.ConditionGPULost, corev1.ConditionFalse, "GPUsOK", "8 of 8", time.Hour),
				cond(string(corev1.NodeMemoryPressure), corev1.ConditionTrue, "KubeletHasMemoryPressure", "", time.Hour),
				cond(v1alpha1.ConditionNetworkInterfaceDown, corev1.ConditionTrue, v1alpha1.ReasonLinkDown, "ib0 has no carrier", time.Minute)),
			node("gpu-c"),
		}},
		want: emptyStatus(func(s *Status) {
			s.NodeConditions = []NodeConditionStatus{
				{Node: "gpu-a", Condition: v1alpha1.ConditionNetworkInterfaceDown, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonLinkDown, Since: ago(time.Minute), Message: "ib0 has no carrier"},
				{Node: "gpu-b", Condition: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonXidRebootRequired, Since: ago(2 * time.Hour), Message: xidMsg},
				{Node: "gpu-b", Condition: v1alpha1.ConditionNFSMountUnhealthy, Status: corev1.ConditionUnknown, Reason: "NoData", Since: ago(5 * time.Minute), Message: "probe timed out"},
			}
			s.Validation.Counts.NotSelected = 3
		}),
	}, {
		desc: "the remediator's own conditions are listed too: the GPU stack's and a failed GPU test's (issue 31)",
		in: statusInput{Nodes: []corev1.Node{
			node("gpu-a", cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionTrue, v1alpha1.ReasonDCGMDiagFailed, "dcgm failed on GPU GPU-66666666-7777-8888-9999-000000000000 (memory)", 3*time.Minute),
				cond(v1alpha1.ConditionGPUStackPodNotReady, corev1.ConditionTrue, v1alpha1.ReasonDevicePluginNotReady, "nvidia-device-plugin-x is not Ready", time.Minute)),
			node("gpu-b", cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionFalse, v1alpha1.ReasonValidated, "dcgm passed on 8 GPU(s)", time.Minute)),
		}},
		want: emptyStatus(func(s *Status) {
			s.NodeConditions = []NodeConditionStatus{
				{Node: "gpu-a", Condition: v1alpha1.ConditionGPUStackPodNotReady, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonDevicePluginNotReady, Since: ago(time.Minute), Message: "nvidia-device-plugin-x is not Ready"},
				{Node: "gpu-a", Condition: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonDCGMDiagFailed, Since: ago(3 * time.Minute), Message: "dcgm failed on GPU GPU-66666666-7777-8888-9999-000000000000 (memory)"},
			}
			s.Validation.Counts.NotSelected = 2
		}),
	}, {
		desc: "active operations are grouped by phase in lifecycle order, oldest first; finished ones are left out; no phase is Pending",
		in: statusInput{Ops: []v1alpha1.NodeOperation{
			op("xid.gpu-a-1", "gpu-a", "xid", "reboot", v1alpha1.PhaseRunning, 3*time.Minute, "pod reboot-x running"),
			op("xid.gpu-b-0", "gpu-b", "xid", "reset", v1alpha1.PhaseWaitingForBudget, 10*time.Minute, "maxConcurrent: 2 of 2"),
			op("xid.gpu-c-0", "gpu-c", "xid", "reset", v1alpha1.PhaseRunning, 20*time.Minute, ""),
			op("xid.gpu-d-0", "gpu-d", "xid", "reset", v1alpha1.PhaseSucceeded, 30*time.Minute, "verified"),
			op("xid.gpu-e-0", "gpu-e", "xid", "reset", v1alpha1.PhaseFailed, 30*time.Minute, "pod failed"),
			op("xid.gpu-f-0", "gpu-f", "xid", "reset", v1alpha1.PhaseSkipped, 30*time.Minute, "dry run"),
			op("manual", "gpu-g", "", "", "", time.Second, ""),
		}},
		want: emptyStatus(func(s *Status) {
			s.ActiveOperations = []PhaseGroup{
				{Phase: v1alpha1.PhasePending, Operations: []OperationStatus{
					{Name: "manual", Node: "gpu-g", Step: "reboot", Phase: v1alpha1.PhasePending, Created: ago(time.Second)}}},
				{Phase: v1alpha1.PhaseWaitingForBudget, Operations: []OperationStatus{
					{Name: "xid.gpu-b-0", Node: "gpu-b", Policy: "xid", Step: "reset", Phase: v1alpha1.PhaseWaitingForBudget, Created: ago(10 * time.Minute), Message: "maxConcurrent: 2 of 2"}}},
				{Phase: v1alpha1.PhaseRunning, Operations: []OperationStatus{
					{Name: "xid.gpu-c-0", Node: "gpu-c", Policy: "xid", Step: "reset", Phase: v1alpha1.PhaseRunning, Created: ago(20 * time.Minute)},
					{Name: "xid.gpu-a-1", Node: "gpu-a", Policy: "xid", Step: "reboot", Phase: v1alpha1.PhaseRunning, Created: ago(3 * time.Minute), Message: "pod reboot-x running"}}},
			}
		}),
	}, {
		desc: "an open breaker calls for attention; budgets scale maxConcurrent by the matched nodes; paused and dry run are shown",
		in: statusInput{Policies: []v1alpha1.RemediationPolicy{
			policy("zz-open", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.Safety.MaxConcurrent = ptrIntStr(intstr.FromString("30%"))
				p.Status.ActiveOperations = 2
				p.Status.UnhealthyNodes, p.Status.QuarantinedNodes = 4, 1
				p.Status.Conditions[1] = metav1.Condition{Type: v1alpha1.PolicyBreakerOpen, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonBreakerTripped, Message: "4 unhealthy nodes, limit 2", LastTransitionTime: ago(12 * time.Minute)}
			}),
			policy("aa-paused", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.Paused, p.Spec.DryRun = true, true
				p.Status.MatchedNodes = 0
			}),
		}},
		want: emptyStatus(func(s *Status) {
			s.Attention = []string{"policy zz-open: breaker open: 4 unhealthy nodes, limit 2"}
			s.Policies = []PolicyStatus{
				{Name: "aa-paused", Paused: true, DryRun: true, Budget: Budget{Limit: 1, MaxConcurrent: "1"},
					Breaker: closedBreaker(), Window: WindowStatus{Open: true}},
				{Name: "zz-open", Budget: Budget{Active: 2, Limit: 3, MaxConcurrent: "30%"}, MatchedNodes: 10, UnhealthyNodes: 4, QuarantinedNodes: 1,
					Breaker: BreakerStatus{State: BreakerOpen, Reason: v1alpha1.ReasonBreakerTripped, Message: "4 unhealthy nodes, limit 2", Since: agoPtr(12 * time.Minute)},
					Window:  WindowStatus{Open: true}},
			}
		}),
	}, {
		desc: "maintenance windows: open until it closes, closed until the next opens, unreadable; no breaker condition is Unknown; not ready says why",
		in: statusInput{Policies: []v1alpha1.RemediationPolicy{
			policy("in-window", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "10:00", End: "14:00"}, {Days: []v1alpha1.Weekday{"Mon"}, Start: "00:00", End: "24:00"}}
			}),
			policy("night", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"}}
			}),
			policy("bad-zone", func(p *v1alpha1.RemediationPolicy) {
				p.Spec.Safety.MaintenanceWindows = []v1alpha1.MaintenanceWindow{{Start: "22:00", End: "23:00", TimeZone: "Mars/Olympus"}}
				p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PolicyReady, Status: metav1.ConditionFalse, Reason: "TemplateNotFound", Message: "NodeOperationTemplate reboot does not exist"}}
			}),
		}},
		want: emptyStatus(func(s *Status) {
			s.Policies = []PolicyStatus{
				{Name: "bad-zone", NotReady: "TemplateNotFound: NodeOperationTemplate reboot does not exist", Budget: Budget{Limit: 1, MaxConcurrent: "1"},
					MatchedNodes: 10, Breaker: BreakerStatus{State: BreakerUnknown},
					Window: WindowStatus{Windows: 1, Error: `spec.safety.maintenanceWindows[0].timeZone: Invalid value: "Mars/Olympus": not an IANA time zone name such as UTC, Europe/Berlin or America/New_York`}},
				{Name: "in-window", Budget: Budget{Limit: 1, MaxConcurrent: "1"}, MatchedNodes: 10, Breaker: closedBreaker(),
					Window: WindowStatus{Windows: 2, Open: true, Until: ptrTime(statusNow.Add(2 * time.Hour))}},
				// 22:00 in Berlin (UTC+1 in November) is 21:00 UTC.
				{Name: "night", Budget: Budget{Limit: 1, MaxConcurrent: "1"}, MatchedNodes: 10, Breaker: closedBreaker(),
					Window: WindowStatus{Windows: 1, NextOpen: ptrTime(time.Date(2026, time.November, 21, 21, 0, 0, 0, time.UTC))}},
			}
		}),
	}, {
		desc: "a quarantined node calls for attention and lists every operation on it, oldest first",
		in: statusInput{
			Nodes: []corev1.Node{quarantined(node("gpu-q"), agoPtr(time.Hour)), node("gpu-ok")},
			Ops: []v1alpha1.NodeOperation{
				op("xid.gpu-q-2", "gpu-q", "xid", "quarantine", v1alpha1.PhaseSucceeded, 70*time.Minute, "quarantined"),
				op("xid.gpu-ok-0", "gpu-ok", "xid", "reset", v1alpha1.PhaseSucceeded, 5*time.Hour, ""),
				op("xid.gpu-q-0", "gpu-q", "xid", "reset", v1alpha1.PhaseFailed, 3*time.Hour, "pod failed: exit 1"),
				op("xid.gpu-q-1", "gpu-q", "xid", "reboot", v1alpha1.PhaseFailed, 2*time.Hour, "condition did not clear within 10m"),
			},
		},
		want: emptyStatus(func(s *Status) {
			s.Attention = []string{"node gpu-q: quarantined"}
			s.QuarantinedNodes = []QuarantinedNode{{Node: "gpu-q", Since: agoPtr(time.Hour), Unschedulable: true, Attempts: []OperationStatus{
				{Name: "xid.gpu-q-0", Node: "gpu-q", Policy: "xid", Step: "reset", Phase: v1alpha1.PhaseFailed, Created: ago(3 * time.Hour), Finished: agoPtr(3*time.Hour - time.Minute), Message: "pod failed: exit 1"},
				{Name: "xid.gpu-q-1", Node: "gpu-q", Policy: "xid", Step: "reboot", Phase: v1alpha1.PhaseFailed, Created: ago(2 * time.Hour), Finished: agoPtr(2*time.Hour - time.Minute), Message: "condition did not clear within 10m"},
				{Name: "xid.gpu-q-2", Node: "gpu-q", Policy: "xid", Step: "quarantine", Phase: v1alpha1.PhaseSucceeded, Created: ago(70 * time.Minute), Finished: agoPtr(69 * time.Minute), Message: "quarantined"},
			}}}
			s.Validation.Counts.NotSelected = 2
		}),
	}, {
		desc: "reclaim notices: noticed with deadline and snooze, claimed, reclaimed in dry run, unreadable; pods without one are left out",
		in: statusInput{Pods: []metav1.PartialObjectMetadata{
			pod("team-b", "train-0", map[string]string{v1alpha1.AnnotationReclaimNotice: notice, v1alpha1.AnnotationReclaimSnoozeUntil: "2026-11-23"}),
			pod("team-a", "notebook", map[string]string{v1alpha1.AnnotationReclaimNotice: claimed, "kubemedic.io/owner": "bob@example.com"}),
			pod("team-a", "old", map[string]string{v1alpha1.AnnotationReclaimNotice: reclaimed}),
			pod("team-a", "broken", map[string]string{v1alpha1.AnnotationReclaimNotice: "{not json", v1alpha1.AnnotationReclaimSnoozeUntil: "soon"}),
			pod("team-a", "quiet", map[string]string{"other": "x"}),
		}},
		want: emptyStatus(func(s *Status) {
			s.ReclaimNotices = []ReclaimNotice{
				{Namespace: "team-a", Pod: "broken", State: NoticeInvalid,
					Problem: "annotation kubemedic.io/reclaim-notice: invalid character 'n' looking for beginning of object key string; " +
						`annotation kubemedic.io/reclaim-snooze-until: "soon" is not a time like 2026-12-01T18:00:00Z, 2026-12-01T18:00 or 2026-12-01`},
				{Namespace: "team-a", Pod: "notebook", Owner: "email bob@example.com (from pod annotation kubemedic.io/owner)", State: NoticeClaimed, Rule: decide.RuleExpired},
				{Namespace: "team-a", Pod: "old", State: NoticeReclaimed, Rule: decide.RuleMaxLifetime, Deadline: ptrTime(deadline.Add(-time.Hour)), DryRun: true},
				{Namespace: "team-b", Pod: "train-0", Owner: "email alice@example.com", State: NoticeNoticed, Rule: decide.RuleIdle, Evidence: "0% GPU use over 4h",
					Deadline: ptrTime(deadline), SnoozeUntil: ptrTime(time.Date(2026, time.November, 23, 0, 0, 0, 0, time.UTC))},
			}
		}),
	}}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			tc.in.Server = "https://api.example:6443"
			before := deepCopyInput(tc.in)
			got := buildStatus(tc.in, statusNow)
			require.Equal(t, tc.want, got)
			require.Equal(t, before, tc.in, "buildStatus changed its input")
		})
	}
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func deepCopyInput(in statusInput) statusInput {
	out := statusInput{Server: in.Server}
	for i := range in.Nodes {
		out.Nodes = append(out.Nodes, *in.Nodes[i].DeepCopy())
	}
	for i := range in.Ops {
		out.Ops = append(out.Ops, *in.Ops[i].DeepCopy())
	}
	for i := range in.Policies {
		out.Policies = append(out.Policies, *in.Policies[i].DeepCopy())
	}
	for i := range in.Pods {
		out.Pods = append(out.Pods, *in.Pods[i].DeepCopy())
	}
	for i := range in.ValidationPolicies {
		out.ValidationPolicies = append(out.ValidationPolicies, *in.ValidationPolicies[i].DeepCopy())
	}
	for i := range in.NodeValidations {
		out.NodeValidations = append(out.NodeValidations, *in.NodeValidations[i].DeepCopy())
	}
	out.OpsErr, out.ValidationErr = in.OpsErr, in.ValidationErr
	return out
}

// gpuNode is a Ready node with 8 GPUs allocatable and the labels.
func gpuNode(name string, lbls map[string]string, edit func(*corev1.Node)) corev1.Node {
	n := node(name)
	n.Labels = lbls
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	if edit != nil {
		edit(&n)
	}
	return n
}

func withUnvalidatedTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule})
}

// vpol is a ValidationPolicy selecting gpu=true, with a background test
// every 7 days, 2 at once, that the remediator found Ready.
func vpol(name string, edit func(*v1alpha1.ValidationPolicy)) v1alpha1.ValidationPolicy {
	p := v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.ValidationPolicySpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "true"}},
			Validate:   v1alpha1.ValidateSpec{Operation: "validate-dcgm"},
			Background: &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: week}, MaxConcurrent: 2}},
		Status: v1alpha1.ValidationPolicyStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			{Type: v1alpha1.PolicyReady, Status: metav1.ConditionTrue, Reason: "TemplateFound", Message: "tests with NodeOperationTemplate validate-dcgm"}}}}
	if edit != nil {
		edit(&p)
	}
	return p
}

const week = 7 * 24 * time.Hour

// nval is a node's record, of the node's UID (none in these tests).
func nval(node, policy string, edit func(*v1alpha1.NodeValidationStatus)) v1alpha1.NodeValidation {
	r := v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: v1alpha1.NodeValidationSpec{NodeName: node, Policy: policy}}
	if edit != nil {
		edit(&r.Status)
	}
	return r
}

func passed(d time.Duration) *v1alpha1.ValidationStatus {
	return &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed, Template: "validate-dcgm", Test: "dcgm", CompletionTime: agoPtr(d),
		Message: "dcgm passed on 2 GPU(s)", GPUs: []v1alpha1.ValidationGPU{{UUID: "GPU-1", Verdict: "Pass"}, {UUID: "GPU-2", Verdict: "Pass"}}}
}

func TestBuildValidation(t *testing.T) {
	gpu := map[string]string{"gpu": "true"}
	failed := &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, Template: "validate-dcgm", Test: "dcgm", CompletionTime: agoPtr(time.Hour),
		Message: "dcgm failed on GPU-2 (memory): memory test failed",
		GPUs:    []v1alpha1.ValidationGPU{{UUID: "GPU-1", Verdict: "Pass"}, {UUID: "GPU-2", Verdict: "Fail", Failed: []string{"memory"}}}}
	cases := []struct {
		desc string
		in   statusInput
		want Validation
		// attention is what the status adds to Attention.
		attention []string
	}{{
		desc: "no ValidationPolicy and no taint: no node is listed, none counts as validated, they are counted as not selected",
		in:   statusInput{Nodes: []corev1.Node{gpuNode("gpu-a", gpu, nil), node("cpu-a")}},
		want: Validation{Policies: []ValidationPolicyStatus{}, Nodes: []ValidatedNode{}, Counts: ValidationCounts{NotSelected: 2}},
	}, {
		desc: "a node with the join taint that no policy selects waits for a join test nothing will run",
		in:   statusInput{Nodes: []corev1.Node{gpuNode("gpu-a", nil, withUnvalidatedTaint)}},
		want: Validation{Policies: []ValidationPolicyStatus{}, Counts: ValidationCounts{WaitingForJoin: 1}, Nodes: []ValidatedNode{
			{Node: "gpu-a", State: ValidationStateWaitingForJoin, Unvalidated: true,
				Detail: "no ValidationPolicy selects it: no test will remove the taint kubemedic.io/unvalidated"}}},
	}, {
		desc: "the policies as their status says: background or join only, Ready True, False or not yet evaluated, suspended, counts of an older generation, a selector that does not parse",
		in: statusInput{ValidationPolicies: []v1alpha1.ValidationPolicy{
			vpol("zz-background", func(p *v1alpha1.ValidationPolicy) {
				p.Status.Matched, p.Status.Validating, p.Status.Passed, p.Status.Failed, p.Status.Due, p.Status.Unvalidated = 10, 2, 6, 1, 3, 1
			}),
			vpol("join-only", func(p *v1alpha1.ValidationPolicy) {
				p.Spec.Background, p.Spec.Join = nil, &v1alpha1.JoinSpec{}
				p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PolicyReady, Status: metav1.ConditionFalse, Reason: "TemplateNotFound",
					Message: "NodeOperationTemplate validate-dcgm does not exist"}}
			}),
			vpol("new", func(p *v1alpha1.ValidationPolicy) {
				p.Spec.Suspend = true
				p.Status = v1alpha1.ValidationPolicyStatus{}
			}),
			vpol("edited", func(p *v1alpha1.ValidationPolicy) { p.Generation = 3 }),
			vpol("bad-selector", func(p *v1alpha1.ValidationPolicy) {
				p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu", Operator: "Near"}}}
			}),
		}},
		want: Validation{Nodes: []ValidatedNode{}, Policies: []ValidationPolicyStatus{
			{Name: "bad-selector", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionTrue,
				Problem: `spec.nodeSelector does not parse, which stops the remediator's tests: "Near" is not a valid label selector operator`},
			{Name: "edited", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionTrue,
				Problem: "the counts are of generation 1; the spec is at 3"},
			{Name: "join-only", Test: "validate-dcgm", Ready: metav1.ConditionFalse, NotReady: "TemplateNotFound: NodeOperationTemplate validate-dcgm does not exist"},
			{Name: "new", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Suspended: true, Ready: metav1.ConditionUnknown},
			{Name: "zz-background", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionTrue,
				Matched: 10, Validating: 2, Passed: 6, Failed: 1, Due: 3, Unvalidated: 1},
		}},
	}, {
		desc: "each node by its record: failed, waiting, unknown, testing, due (never tested, overdue, put off, cordoned, a replaced node), passed, not tested; most pressing first; the first policy by name tests a node",
		in: statusInput{
			Nodes: []corev1.Node{
				gpuNode("gpu-pass", gpu, nil),
				gpuNode("gpu-fail", gpu, withUnvalidatedTaint),
				gpuNode("gpu-test", gpu, nil),
				gpuNode("gpu-join", gpu, withUnvalidatedTaint),
				gpuNode("gpu-never", gpu, nil),
				gpuNode("gpu-late", gpu, nil),
				gpuNode("gpu-cordoned", gpu, func(n *corev1.Node) { n.Spec.Unschedulable = true }),
				gpuNode("gpu-replaced", gpu, func(n *corev1.Node) { n.UID = "new-uid" }),
				gpuNode("gpu-odd", gpu, nil),
				node("cpu-0"),
				gpuNode("pool-0", map[string]string{"pool": "new"}, nil),
				gpuNode("pool-1", map[string]string{"pool": "new"}, nil),
				gpuNode("other", map[string]string{"gpu": "false"}, nil),
			},
			ValidationPolicies: []v1alpha1.ValidationPolicy{
				vpol("gpus", func(p *v1alpha1.ValidationPolicy) {
					// Selects every node, but "b-pool" comes first for its nodes.
					p.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gpu", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}}}}
				}),
				vpol("b-pool", func(p *v1alpha1.ValidationPolicy) {
					p.Spec.NodeSelector.MatchLabels = map[string]string{"pool": "new"}
					p.Spec.Background = nil
				}),
			},
			NodeValidations: []v1alpha1.NodeValidation{
				nval("gpu-pass", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					s.Mode, s.Last, s.NextTime = v1alpha1.ValidationBackground, passed(2*time.Hour), ptrTime(statusNow.Add(week-2*time.Hour+time.Second))
				}),
				nval("gpu-fail", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					s.Mode, s.Last, s.NextTime = v1alpha1.ValidationJoin, failed, ptrTime(statusNow.Add(week-time.Hour))
					s.Message = "node gpu-fail failed validate-dcgm"
				}),
				nval("gpu-test", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					s.Mode, s.Last, s.Preemptions = v1alpha1.ValidationBackground, passed(8*24*time.Hour), 2
					s.Current = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: "validate-dcgm", Attempt: 2,
						PodName: "gpu-test-validate-1-2", StartTime: agoPtr(5 * time.Minute)}
				}),
				nval("gpu-late", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					// Passed 8 days ago; its test was preempted and is tried in 40 minutes.
					s.Mode, s.Last, s.Preemptions = v1alpha1.ValidationBackground, passed(8*24*time.Hour), 1
					s.NextTime = ptrTime(statusNow.Add(40 * time.Minute))
				}),
				nval("gpu-cordoned", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					s.Last, s.NextTime = passed(9*24*time.Hour), ptrTime(statusNow.Add(-2*24*time.Hour))
				}),
				nval("gpu-replaced", "gpus", func(s *v1alpha1.NodeValidationStatus) { s.Last = failed }),
				nval("gpu-odd", "gpus", func(s *v1alpha1.NodeValidationStatus) {
					s.Last = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, CompletionTime: agoPtr(time.Hour)}
				}),
				nval("pool-1", "b-pool", func(s *v1alpha1.NodeValidationStatus) { s.Mode, s.Last = v1alpha1.ValidationJoin, passed(24*time.Hour) }),
				nval("gone", "gpus", func(s *v1alpha1.NodeValidationStatus) { s.Last = failed }),
			},
		},
		want: Validation{
			Policies: []ValidationPolicyStatus{
				{Name: "b-pool", Test: "validate-dcgm", Ready: metav1.ConditionTrue},
				{Name: "gpus", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionTrue},
			},
			Counts: ValidationCounts{Failed: 1, WaitingForJoin: 1, Unknown: 1, Testing: 1, Due: 4, Passed: 2, NotTested: 2, NotSelected: 1},
			Nodes: []ValidatedNode{
				{Node: "gpu-fail", Policy: "gpus", State: ValidationStateFailed, Unvalidated: true, NextTime: ptrTime(statusNow.Add(week - time.Hour)),
					Last: &ValidationTestResult{Result: v1alpha1.ValidationFailed, Time: agoPtr(time.Hour), Test: "dcgm", GPUs: 2, FailedGPUs: 1,
						Message: "dcgm failed on GPU-2 (memory): memory test failed"},
					Message: "node gpu-fail failed validate-dcgm", Detail: "keeps the taint kubemedic.io/unvalidated until a test passes"},
				{Node: "gpu-join", Policy: "gpus", State: ValidationStateWaitingForJoin, Unvalidated: true, Detail: "waiting for its join test"},
				{Node: "gpu-odd", Policy: "gpus", State: ValidationStateUnknown,
					Last:   &ValidationTestResult{Result: v1alpha1.ValidationValidating, Time: agoPtr(time.Hour)},
					Detail: `the last result "Validating" is neither Passed nor Failed`},
				{Node: "gpu-test", Policy: "gpus", State: ValidationStateTesting, Preemptions: 2,
					Last:    &ValidationTestResult{Result: v1alpha1.ValidationPassed, Time: agoPtr(8 * 24 * time.Hour), Test: "dcgm", GPUs: 2, Message: "dcgm passed on 2 GPU(s)"},
					Current: &ValidationTestRun{Mode: v1alpha1.ValidationBackground, Template: "validate-dcgm", Since: agoPtr(5 * time.Minute), Attempt: 2, Pod: "gpu-test-validate-1-2"},
					Detail:  "preempted 2 times"},
				{Node: "gpu-cordoned", Policy: "gpus", State: ValidationStateDue, Due: true, DueTime: ptrTime(statusNow.Add(-2 * 24 * time.Hour)),
					NextTime: ptrTime(statusNow.Add(-2 * 24 * time.Hour)),
					Last:     &ValidationTestResult{Result: v1alpha1.ValidationPassed, Time: agoPtr(9 * 24 * time.Hour), Test: "dcgm", GPUs: 2, Message: "dcgm passed on 2 GPU(s)"},
					Detail:   "not tested in the background while cordoned"},
				{Node: "gpu-late", Policy: "gpus", State: ValidationStateDue, Due: true, DueTime: agoPtr(24 * time.Hour), NextTime: ptrTime(statusNow.Add(40 * time.Minute)), Preemptions: 1,
					Last:   &ValidationTestResult{Result: v1alpha1.ValidationPassed, Time: agoPtr(8 * 24 * time.Hour), Test: "dcgm", GPUs: 2, Message: "dcgm passed on 2 GPU(s)"},
					Detail: "preempted once"},
				{Node: "gpu-never", Policy: "gpus", State: ValidationStateDue, Due: true},
				{Node: "gpu-replaced", Policy: "gpus", State: ValidationStateDue, Due: true, Detail: "its NodeValidation is of an earlier node of this name"},
				{Node: "gpu-pass", Policy: "gpus", State: ValidationStatePassed, DueTime: ptrTime(statusNow.Add(week - 2*time.Hour)),
					NextTime: ptrTime(statusNow.Add(week - 2*time.Hour + time.Second)),
					Last:     &ValidationTestResult{Result: v1alpha1.ValidationPassed, Time: agoPtr(2 * time.Hour), Test: "dcgm", GPUs: 2, Message: "dcgm passed on 2 GPU(s)"}},
				{Node: "pool-1", Policy: "b-pool", State: ValidationStatePassed,
					Last: &ValidationTestResult{Result: v1alpha1.ValidationPassed, Time: agoPtr(24 * time.Hour), Test: "dcgm", GPUs: 2, Message: "dcgm passed on 2 GPU(s)"}},
				{Node: "cpu-0", Policy: "gpus", State: ValidationStateNotTested, Detail: "no nvidia.com/* allocatable: not tested in the background"},
				{Node: "pool-0", Policy: "b-pool", State: ValidationStateNotTested,
					Detail: "policy b-pool has no background section: tested only with the taint kubemedic.io/unvalidated"},
			},
		},
	}, {
		desc: "a suspended policy and one whose template is missing start no test: their waiting and due nodes say so",
		in: statusInput{
			Nodes: []corev1.Node{gpuNode("a-0", map[string]string{"p": "a"}, withUnvalidatedTaint), gpuNode("a-1", map[string]string{"p": "a"}, nil),
				gpuNode("b-0", map[string]string{"p": "b"}, nil)},
			ValidationPolicies: []v1alpha1.ValidationPolicy{
				vpol("a", func(p *v1alpha1.ValidationPolicy) {
					p.Spec.NodeSelector.MatchLabels = map[string]string{"p": "a"}
					p.Spec.Suspend = true
				}),
				vpol("b", func(p *v1alpha1.ValidationPolicy) {
					p.Spec.NodeSelector.MatchLabels = map[string]string{"p": "b"}
					p.Status.Conditions[0].Status, p.Status.Conditions[0].Reason = metav1.ConditionFalse, "TemplateNotFound"
				}),
			},
		},
		want: Validation{
			Policies: []ValidationPolicyStatus{
				{Name: "a", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Suspended: true, Ready: metav1.ConditionTrue},
				{Name: "b", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionFalse,
					NotReady: "TemplateNotFound: tests with NodeOperationTemplate validate-dcgm"},
			},
			Counts: ValidationCounts{WaitingForJoin: 1, Due: 2},
			Nodes: []ValidatedNode{
				{Node: "a-0", Policy: "a", State: ValidationStateWaitingForJoin, Unvalidated: true, Detail: "waiting for its join test; policy a is suspended: no test starts"},
				{Node: "a-1", Policy: "a", State: ValidationStateDue, Due: true, Detail: "policy a is suspended: no test starts"},
				{Node: "b-0", Policy: "b", State: ValidationStateDue, Due: true, Detail: "policy b is not ready (TemplateNotFound): no test starts"},
			},
		},
	}, {
		desc:      "records that cannot be read are Unknown, never a pass, and call for attention",
		in:        statusInput{Nodes: []corev1.Node{gpuNode("gpu-a", nil, withUnvalidatedTaint)}, ValidationErr: errors.New("https://x:6443: list nodevalidations.kubemedic.io: forbidden")},
		want:      Validation{Unknown: "https://x:6443: list nodevalidations.kubemedic.io: forbidden", Policies: []ValidationPolicyStatus{}, Nodes: []ValidatedNode{}},
		attention: []string{"GPU validation unknown: https://x:6443: list nodevalidations.kubemedic.io: forbidden"},
	}}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			before := deepCopyInput(tc.in)
			st := buildStatus(tc.in, statusNow)
			require.Equal(t, tc.want, st.Validation)
			require.Equal(t, append([]string{}, tc.attention...), st.Attention)
			require.Equal(t, before, tc.in, "buildStatus changed its input")
		})
	}
}
