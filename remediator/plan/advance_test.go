package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// --- Advance inputs ---

func tpl(criterion v1alpha1.SuccessCriterion, opts ...func(*v1alpha1.NodeOperationTemplate)) *v1alpha1.NodeOperationTemplate {
	t := &v1alpha1.NodeOperationTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec:       v1alpha1.NodeOperationTemplateSpec{Image: "kubemedic/ops:1", SuccessCriterion: criterion, Timeout: dur(10 * time.Minute)},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func param(name, re string, required bool) func(*v1alpha1.NodeOperationTemplate) {
	return func(t *v1alpha1.NodeOperationTemplate) {
		t.Spec.Parameters = append(t.Spec.Parameters, v1alpha1.Parameter{Name: name, MessageRegex: re, Required: required})
	}
}

func trigger(msg string, since time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
			Reason: v1alpha1.ReasonXidRebootRequired, Message: msg, LastTransitionTime: metav1.NewTime(since)}
	}
}

// opCond sets a condition of the operation that changed at since.
func opCond(typ string, status metav1.ConditionStatus, reason string, since time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) {
		apimeta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)})
	}
}

func withDrain(o *v1alpha1.NodeOperation) {
	o.Spec.Cordon = true
	o.Spec.Drain = &v1alpha1.DrainSpec{Timeout: dur(10 * time.Minute)}
}

func cordoned(o *v1alpha1.NodeOperation) { o.Spec.Cordon = true }

func bootID(id string) opOpt { return func(o *v1alpha1.NodeOperation) { o.Status.BootID = id } }

func podName(o *v1alpha1.NodeOperation) { o.Status.PodName = o.Name }

func opTimeout(d time.Duration) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Spec.Timeout = dur(d) }
}

func recovery(d time.Duration) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Spec.RecoveryTimeout = dur(d) }
}

func healthyFor(d time.Duration) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Spec.HealthyFor = dur(d) }
}

func completed(at time.Time) opOpt {
	return func(o *v1alpha1.NodeOperation) { o.Status.CompletionTime = &metav1.Time{Time: at} }
}

func booted(id string) nodeOpt { return func(n *corev1.Node) { n.Status.NodeInfo.BootID = id } }

func unschedulableBy(by string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		if by != "" {
			n.Annotations = map[string]string{v1alpha1.AnnotationCordonedBy: by}
		}
	}
}

// opPod is the operation pod in the given phase; a finished one ended at
// finished.
func opPod(phase corev1.PodPhase, finished time.Time, exitCode int32) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: "op"}, Status: corev1.PodStatus{Phase: phase}}
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "operation", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Error", Message: "nvidia-smi -r: GPU busy", FinishedAt: metav1.NewTime(finished)}}}}
	}
	return p
}

// workload is a pod on the node that a drain evicts.
func workload(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(name + "-uid")},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// want is what a case expects of a Transition. Conditions are
// "Type=Status/Reason"; Events are their reasons in order.
type want struct {
	phase      v1alpha1.NodeOperationPhase
	effect     Effect
	message    string // a substring of status.message
	conditions []string
	events     []string
	requeue    time.Duration
	blocked    string
	remediated time.Duration
	check      func(t *testing.T, tr Transition)
}

func TestAdvance(t *testing.T) {
	resetGPU := tpl(v1alpha1.SuccessPodSucceeded)
	reboot := tpl(v1alpha1.SuccessNodeRebooted)
	cases := []struct {
		desc string
		in   AdvanceInput
		want want
	}{
		// Pending
		{desc: "pending: a missing template fails the operation",
			in:   AdvanceInput{Op: op("op", "n1")},
			want: want{phase: v1alpha1.PhaseFailed, message: "TemplateNotFound: NodeOperationTemplate reset-gpu does not exist", events: []string{v1alpha1.ReasonTemplateNotFound}}},
		{desc: "pending: a quarantine needs no template",
			in:   AdvanceInput{Op: op("op", "n1", quarantineOp)},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, message: "checking the safety limits"}},
		{desc: "pending: parameters come from the trigger message",
			in: AdvanceInput{Op: op("op", "n1", trigger(xidMessage, ago(time.Hour))), Template: tpl(v1alpha1.SuccessPodSucceeded, param("BUS_ID", `on ([0-9a-f:.]+):`, true))},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, check: func(t *testing.T, tr Transition) {
				require.Equal(t, []v1alpha1.TemplateEnvVar{{Name: "BUS_ID", Value: "0000:3b:00.0"}}, tr.Status.Parameters)
			}}},
		{desc: "pending: a required parameter that does not match fails the operation",
			in:   AdvanceInput{Op: op("op", "n1", trigger("XidRebootRequired: no bus here", ago(time.Hour))), Template: tpl(v1alpha1.SuccessPodSucceeded, param("BUS_ID", `on ([0-9a-f:.]+):`, true))},
			want: want{phase: v1alpha1.PhaseFailed, message: `ParameterMissing: template reset-gpu: required parameter BUS_ID: trigger message "XidRebootRequired: no bus here" does not match`}},
		{desc: "pending: an optional parameter that does not match is left out",
			in:   AdvanceInput{Op: op("op", "n1"), Template: tpl(v1alpha1.SuccessPodSucceeded, param("BUS_ID", `on (x+)`, false))},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, check: func(t *testing.T, tr Transition) { require.Empty(t, tr.Status.Parameters) }}},

		// WaitingForBudget
		{desc: "admit: start reserves the ledger, records start time and boot ID, runs at once without cordon",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1", booted("boot-a")),
				Admission: Admission{Verdict: Start, Message: "every safety limit passed"}},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectReserve, conditions: []string{"Admitted=True/LimitsPassed"}, events: []string{v1alpha1.EventStarted},
				check: func(t *testing.T, tr Transition) {
					require.Equal(t, now, tr.Status.StartTime.Time)
					require.Equal(t, "boot-a", tr.Status.BootID)
				}}},
		{desc: "admit: start with a drain cordons first",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), withDrain), Node: node("n1"), Admission: Admission{Verdict: Start}},
			want: want{phase: v1alpha1.PhaseCordoning, effect: EffectReserve, conditions: []string{"Admitted=True/LimitsPassed"}, events: []string{v1alpha1.EventStarted}}},
		{desc: "admit: already in the ledger starts without admitting again or writing the ledger",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), cordoned), Node: node("n1"), Reserved: true, Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonMaxConcurrent}},
			want: want{phase: v1alpha1.PhaseCordoning, effect: EffectNone, conditions: []string{"Admitted=True/LimitsPassed"}}},
		{desc: "admit: a new limit waits, tells once and counts once",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1"),
				Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonMaxConcurrent, Message: "2 of 2 running"}},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, message: "MaxConcurrent: 2 of 2 running", conditions: []string{"Admitted=False/MaxConcurrent"},
				events: []string{v1alpha1.ReasonMaxConcurrent}, blocked: v1alpha1.ReasonMaxConcurrent, requeue: WaitingResync}},
		{desc: "admit: the same limit again neither tells nor counts",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), opCond(v1alpha1.OperationAdmitted, metav1.ConditionFalse, v1alpha1.ReasonMaxConcurrent, ago(time.Minute))), Node: node("n1"),
				Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonMaxConcurrent, Message: "2 of 2 running"}},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, conditions: []string{"Admitted=False/MaxConcurrent"}, requeue: WaitingResync}},
		{desc: "admit: a wait that ends sooner than the resync requeues then",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1"),
				Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonOutsideWindow, Next: now.Add(10 * time.Second)}},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, requeue: 10 * time.Second, blocked: v1alpha1.ReasonOutsideWindow, events: []string{v1alpha1.ReasonOutsideWindow}}},
		{desc: "admit: a wait whose end has passed requeues in a second, not at once",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1"),
				Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonNodeCooldown, Next: now.Add(-time.Second)}},
			want: want{phase: v1alpha1.PhaseWaitingForBudget, requeue: time.Second, blocked: v1alpha1.ReasonNodeCooldown, events: []string{v1alpha1.ReasonNodeCooldown}}},
		{desc: "admit: the attempt cap skips and quarantines",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1"),
				Admission: Admission{Verdict: Skip, Reason: v1alpha1.ReasonAttemptCapReached, Message: "3 attempts in 24h", Quarantine: true}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectQuarantine, message: "AttemptCapReached: 3 attempts in 24h",
				conditions: []string{"Quarantined=True/AttemptCapReached"}, events: []string{v1alpha1.ReasonAttemptCapReached}, blocked: v1alpha1.ReasonAttemptCapReached,
				check: func(t *testing.T, tr Transition) { require.Equal(t, now, tr.Status.CompletionTime.Time) }}},
		{desc: "admit: an opted-out node is skipped without quarantine",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget)), Node: node("n1"), Admission: Admission{Verdict: Skip, Reason: v1alpha1.ReasonOptedOut}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectNone, events: []string{v1alpha1.ReasonOptedOut}, blocked: v1alpha1.ReasonOptedOut}},
		{desc: "admit: dry run that would start ends Skipped and changes nothing",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), dryRunOp, withDrain), Node: node("n1"), Admission: Admission{Verdict: Start}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectNone, message: "DryRun: would cordon, drain (Evict) and run reset-gpu now; nothing was changed", blocked: v1alpha1.ReasonDryRun}},
		{desc: "admit: dry run that would wait says for what",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), dryRunOp), Node: node("n1"), Admission: Admission{Verdict: Wait, Reason: v1alpha1.ReasonMaxConcurrent, Message: "2 of 2"}},
			want: want{phase: v1alpha1.PhaseSkipped, message: "would run reset-gpu, after waiting for MaxConcurrent: 2 of 2", blocked: v1alpha1.ReasonDryRun}},
		{desc: "admit: dry run at the attempt cap does not quarantine",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseWaitingForBudget), dryRunOp), Node: node("n1"), Admission: Admission{Verdict: Skip, Quarantine: true, Message: "cap"}},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectNone, message: "would quarantine the node: cap", blocked: v1alpha1.ReasonDryRun}},

		// Cordoning
		{desc: "cordoning: a quarantine operation quarantines and succeeds",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), quarantineOp), Node: node("n1")},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectQuarantine, conditions: []string{"Quarantined=True/LadderExhausted"},
				message: "node n1 cordoned and tainted kubemedic.io/quarantined:NoSchedule", events: []string{v1alpha1.ReasonQuarantined}}},
		{desc: "cordoning: a node that is gone fails the operation",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), cordoned)},
			want: want{phase: v1alpha1.PhaseFailed, message: "NodeNotFound: node n1 does not exist"}},
		{desc: "cordoning: a schedulable node is cordoned by kubemedic",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), cordoned), Node: node("n1")},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, conditions: []string{"Cordoned=True/CordonedByKubemedic"}, events: []string{v1alpha1.EventCordoned}}},
		{desc: "cordoning: a node a human cordoned stays theirs",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), cordoned), Node: node("n1", unschedulableBy(""))},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, conditions: []string{"Cordoned=True/CordonedByHuman"}}},
		{desc: "cordoning: a node this operation cordoned in a lost pass is not patched again",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), cordoned), Node: node("n1", unschedulableBy("op"))},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, conditions: []string{"Cordoned=True/CordonedByKubemedic"}, events: []string{v1alpha1.EventCordoned}}},
		{desc: "cordoning: the cordon of the step before passes to this one",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), cordoned), Node: node("n1", unschedulableBy("op-step-0"))},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCordon, conditions: []string{"Cordoned=True/CordonedByKubemedic"}}},
		{desc: "cordoning: a drain comes next",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseCordoning), withDrain), Node: node("n1")},
			want: want{phase: v1alpha1.PhaseDraining, effect: EffectCordon, conditions: []string{"Cordoned=True/CordonedByKubemedic", "Drained=False/Draining"}}},

		// Draining
		{desc: "draining: nothing left to evict runs the operation",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain, opCond(v1alpha1.OperationDrained, metav1.ConditionFalse, v1alpha1.ReasonDraining, ago(time.Minute)))},
			want: want{phase: v1alpha1.PhaseRunning, conditions: []string{"Drained=True/Drained"}, events: []string{v1alpha1.ReasonDrained}}},
		{desc: "draining: pods to evict are the effect, looked at again soon",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain, opCond(v1alpha1.OperationDrained, metav1.ConditionFalse, v1alpha1.ReasonDraining, ago(time.Minute))),
				Pods: []corev1.Pod{workload("trainer-0")}},
			want: want{phase: v1alpha1.PhaseDraining, effect: EffectDrain, message: "draining: ", requeue: DrainPoll, check: func(t *testing.T, tr Transition) {
				require.Equal(t, []types.NamespacedName{{Namespace: "team-a", Name: "trainer-0"}}, tr.Drain.Evict)
			}}},
		{desc: "draining: a pod still there at the drain timeout fails the drain",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain, opCond(v1alpha1.OperationDrained, metav1.ConditionFalse, v1alpha1.ReasonDraining, ago(10*time.Minute))),
				Pods: []corev1.Pod{workload("trainer-0")}},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, conditions: []string{"Drained=False/DrainTimeout"}, events: []string{v1alpha1.ReasonDrainFailed}}},

		// Running
		{desc: "running: a template deleted since admission fails the operation",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning))},
			want: want{phase: v1alpha1.PhaseFailed, message: "TemplateNotFound"}},
		{desc: "running: a template that runs nothing goes to verification",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning)), Template: tpl(v1alpha1.SuccessNone)},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"OperationSucceeded=True/NothingToRun"}}},
		{desc: "running: the first pass creates the pod and waits for the template's timeout",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning)), Template: resetGPU, Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCreatePod, conditions: []string{"OperationSucceeded=False/Running"}, events: []string{v1alpha1.EventPodCreated},
				message: "waiting for pod kubemedic/op to succeed, until 2026-03-04T12:10:00Z", requeue: 10 * time.Minute,
				check: func(t *testing.T, tr Transition) { require.Equal(t, "op", tr.Status.PodName) }}},
		{desc: "running: the operation's timeout overrides the template's",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), opTimeout(3*time.Minute)), Template: resetGPU},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCreatePod, requeue: 3 * time.Minute}},
		{desc: "running: a template without a timeout takes the default",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning)), Template: tpl(v1alpha1.SuccessPodSucceeded, func(t *v1alpha1.NodeOperationTemplate) { t.Spec.Timeout = nil })},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCreatePod, requeue: policies.DefaultTemplateTimeout}},
		{desc: "running: a pod created before but gone is not created again",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(time.Minute))), Template: resetGPU},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, requeue: 9 * time.Minute}},
		{desc: "running: the pod succeeded",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName), Template: resetGPU, Pod: opPod(corev1.PodSucceeded, ago(time.Second), 0)},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"OperationSucceeded=True/PodSucceeded"}, events: []string{v1alpha1.EventOperationSucceeded}}},
		{desc: "running: the pod failed, and says why",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName), Template: resetGPU, Pod: opPod(corev1.PodFailed, ago(time.Second), 3)},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"OperationSucceeded=False/PodFailed"}, events: []string{v1alpha1.ReasonOperationFailed},
				message: "pod kubemedic/op failed: container operation exited 3 (Error): nvidia-smi -r: GPU busy"}},
		{desc: "running: a still running pod at the deadline times out and is deleted",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(10*time.Minute))),
				Template: resetGPU, Pod: opPod(corev1.PodRunning, time.Time{}, 0)},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectDeletePod, conditions: []string{"OperationSucceeded=False/OperationTimeout"},
				message: "no success after 10m0s (PodSucceeded); pod kubemedic/op was Running and is deleted"}},
		{desc: "running: a nanosecond before the deadline it still waits",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(10*time.Minute-time.Nanosecond))),
				Template: resetGPU, Pod: opPod(corev1.PodRunning, time.Time{}, 0)},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, requeue: time.Second}},
		{desc: "running: a timeout with no pod to delete",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(time.Hour))), Template: resetGPU},
			want: want{phase: v1alpha1.PhaseFailed, effect: EffectNone, message: "OperationTimeout: no success after 10m0s (PodSucceeded)"}},
		{desc: "reboot: a new boot ID on a Ready node is success",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-b")), Pod: opPod(corev1.PodRunning, time.Time{}, 0)},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"OperationSucceeded=True/NodeRebooted"}, events: []string{v1alpha1.EventOperationSucceeded},
				check: func(t *testing.T, tr Transition) {
					require.Contains(t, apimeta.FindStatusCondition(tr.Status.Conditions, v1alpha1.OperationSucceeded).Message, "boot ID boot-b, was boot-a")
				}}},
		{desc: "reboot: a new boot ID on a node not Ready yet waits",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-b"), notReady)},
			want: want{phase: v1alpha1.PhaseRunning, message: "waiting for the node to reboot (boot ID boot-a) and be Ready"}},
		{desc: "reboot: an unknown boot ID is no evidence of a reboot",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1")},
			want: want{phase: v1alpha1.PhaseRunning}},
		{desc: "reboot: a node that rebooted before the pod was created still runs the template",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-b"))},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectCreatePod}},
		{desc: "reboot: the pod gone with the reboot, a new boot ID is success",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-b"))},
			want: want{phase: v1alpha1.PhaseVerifying, effect: EffectNone}},
		{desc: "running: a pod created in a pass whose status write failed is recorded, not created again, and told",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), opCond(v1alpha1.OperationSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunning, ago(time.Minute))),
				Template: resetGPU, Pod: opPod(corev1.PodRunning, time.Time{}, 0), Namespace: "kubemedic"},
			want: want{phase: v1alpha1.PhaseRunning, effect: EffectNone, message: "waiting for pod kubemedic/op to succeed", events: []string{v1alpha1.EventPodCreated},
				check: func(t *testing.T, tr Transition) { require.Equal(t, "op", tr.Status.PodName) }}},
		{desc: "reboot: a failed pod gets the grace for the new boot ID to show",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-a")),
				Pod: opPod(corev1.PodFailed, ago(time.Minute), 137)},
			want: want{phase: v1alpha1.PhaseRunning, requeue: time.Minute}},
		{desc: "reboot: a failed pod past the grace fails the step",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-a")),
				Pod: opPod(corev1.PodFailed, ago(RebootPodGrace), 137)},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"OperationSucceeded=False/PodFailed"}, message: "exited 137"}},
		{desc: "reboot: a pod that succeeded is not success without a new boot ID",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseRunning), podName, bootID("boot-a")), Template: reboot, Node: node("n1", booted("boot-a")),
				Pod: opPod(corev1.PodSucceeded, ago(time.Minute), 0)},
			want: want{phase: v1alpha1.PhaseRunning}},

		// Verifying
		{desc: "verifying: a node that is gone fails the operation",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying))},
			want: want{phase: v1alpha1.PhaseFailed, message: "NodeNotFound"}},
		{desc: "verifying: a healthy node is uncordoned and the time to remediate counted",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute)),
				Node: node("n1", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(3*time.Minute)))},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectUncordon, conditions: []string{"Verified=True/Verified"}, events: []string{v1alpha1.ReasonVerified}, remediated: time.Hour}},
		{desc: "verifying: a condition healthy for less than healthyFor waits until then",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute), opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(time.Minute))),
				Node: node("n1", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(90*time.Second)))},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"Verified=False/Waiting"}, requeue: 30 * time.Second, message: "verifying: condition GPUXidError is False since"}},
		{desc: "verifying: the condition clearing sooner than the resync requeues then",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute), opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(time.Minute))),
				Node: node("n1", cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(110*time.Second)))},
			want: want{phase: v1alpha1.PhaseVerifying, requeue: 10 * time.Second}},
		{desc: "verifying: still unhealthy at the recovery timeout fails, to escalate",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute), recovery(5*time.Minute),
				opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(5*time.Minute))),
				Node: node("n1", xid(ago(time.Hour)))},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"Verified=False/RecoveryTimeout"}, message: "RecoveryTimeout: not verified 5m0s after the operation: condition GPUXidError is still True"}},
		{desc: "verifying: a node that shows no GPUs after a GPU repair is Unknown while it waits",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute), opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(time.Minute))),
				Node: node("n1", noGPUs, cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(time.Hour)))},
			want: want{phase: v1alpha1.PhaseVerifying, conditions: []string{"Verified=Unknown/Waiting"}, requeue: 30 * time.Second, message: "verifying: node n1 shows no GPUs"}},
		{desc: "verifying: still no GPUs at the recovery timeout fails, to escalate",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), trigger(xidMessage, ago(time.Hour)), healthyFor(2*time.Minute), recovery(5*time.Minute),
				opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(5*time.Minute))),
				Node: node("n1", noGPUs, cond(v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "", ago(time.Hour)))},
			want: want{phase: v1alpha1.PhaseFailed, conditions: []string{"Verified=False/RecoveryTimeout"}, message: "RecoveryTimeout: not verified 5m0s after the operation: node n1 shows no GPUs"}},
		{desc: "verifying: without a recovery timeout the default applies",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying), opCond(v1alpha1.OperationSucceeded, metav1.ConditionTrue, v1alpha1.ReasonPodSucceeded, ago(policies.DefaultRecoveryTimeout-time.Second))),
				Node: node("n1", notReady)},
			want: want{phase: v1alpha1.PhaseVerifying, requeue: time.Second}},

		// Finished
		{desc: "finished: a missing completion time is set",
			in: AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseFailed)), Retention: time.Hour},
			want: want{phase: v1alpha1.PhaseFailed, requeue: time.Hour, check: func(t *testing.T, tr Transition) {
				require.Equal(t, now, tr.Status.CompletionTime.Time)
			}}},
		{desc: "finished: kept until the retention passes",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseSucceeded), completed(ago(50*time.Minute))), Retention: time.Hour},
			want: want{phase: v1alpha1.PhaseSucceeded, effect: EffectNone, requeue: 10 * time.Minute}},
		{desc: "finished: deleted when the retention has passed",
			in:   AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseSkipped), completed(ago(time.Hour))), Retention: time.Hour},
			want: want{phase: v1alpha1.PhaseSkipped, effect: EffectDeleteOperation}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) { checkAdvance(t, tc.in, tc.want) })
	}
}

// checkAdvance runs Advance on in at now and checks the transition
// against w.
func checkAdvance(t *testing.T, in AdvanceInput, w want) {
	t.Helper()
	in.Now = now
	if in.Op.Name == "op" && in.Pod != nil {
		in.Pod.Name = "op"
	}
	before := in.Op.DeepCopy()
	tr := Advance(in)
	require.Equal(t, before, in.Op, "Advance changed its input")
	require.Equal(t, w.phase, tr.Status.Phase, "phase; message %q", tr.Status.Message)
	require.Equal(t, w.effect, tr.Effect, "effect")
	if w.message != "" {
		require.Contains(t, tr.Status.Message, w.message)
	}
	for _, c := range w.conditions {
		typ, rest, _ := strings.Cut(c, "=")
		status, reason, _ := strings.Cut(rest, "/")
		got := apimeta.FindStatusCondition(tr.Status.Conditions, typ)
		require.NotNil(t, got, "condition %s", typ)
		require.Equal(t, c, typ+"="+string(got.Status)+"/"+got.Reason)
		require.Equal(t, status, string(got.Status))
		require.Equal(t, reason, got.Reason)
	}
	if w.events != nil || tr.Events != nil {
		var reasons []string
		for _, e := range tr.Events {
			reasons = append(reasons, e.Reason)
		}
		if w.events != nil {
			require.Equal(t, w.events, reasons)
		}
	}
	if w.requeue != 0 {
		require.Equal(t, w.requeue, tr.RequeueAfter, "requeue")
	}
	require.Equal(t, w.blocked, tr.Blocked, "blocked")
	require.Equal(t, w.remediated, tr.Remediated, "remediated")
	if tr.Status.Phase.Finished() && before.Status.CompletionTime == nil {
		require.NotNil(t, tr.Status.CompletionTime, "a finished operation has a completion time")
	}
	if w.check != nil {
		w.check(t, tr)
	}
}

// TestAdvanceWalksTheLifecycle feeds each transition's status back in, as
// the controller does, from Pending to Succeeded for a drained reset, and
// checks the effects come in order.
func TestAdvanceWalksTheLifecycle(t *testing.T) {
	o := op("op", "n1", withDrain, trigger(xidMessage, ago(time.Hour)))
	effects, _ := walk(o, 12, func(in *AdvanceInput) {})
	require.Equal(t, []Effect{EffectNone, EffectReserve, EffectCordon, EffectNone, EffectCreatePod, EffectNone, EffectUncordon, EffectNone, EffectDeleteOperation}, effects)
}

// walk feeds each transition's status back into Advance, as the controller
// does, at most steps times or until the operation is deleted, moving the
// clock by each requeue. Each input has a booted node n1, a reset template,
// a Start admission and, once Running with its pod created, that pod
// succeeded; more adds to it. It returns the effects, in order, and the
// operation as last recorded.
func walk(o *v1alpha1.NodeOperation, steps int, more func(in *AdvanceInput)) ([]Effect, *v1alpha1.NodeOperation) {
	n := node("n1", booted("boot-a"))
	var effects []Effect
	clock := now
	for range steps {
		in := AdvanceInput{Op: o, Node: n, Template: tpl(v1alpha1.SuccessPodSucceeded), Admission: Admission{Verdict: Start}, Now: clock, Retention: time.Hour}
		if o.Status.Phase == v1alpha1.PhaseRunning && o.Status.PodName != "" {
			in.Pod = opPod(corev1.PodSucceeded, clock, 0)
		}
		more(&in)
		tr := Advance(in)
		effects = append(effects, tr.Effect)
		o = o.DeepCopy()
		o.Status = tr.Status
		if tr.Effect == EffectDeleteOperation {
			break
		}
		if tr.RequeueAfter > 0 {
			clock = clock.Add(tr.RequeueAfter)
		}
	}
	return effects, o
}

func TestDrainProgress(t *testing.T) {
	var d = Advance(AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseDraining), withDrain), Pods: []corev1.Pod{workload("a"), workload("b")}, Now: now}).Drain
	require.NotEmpty(t, d.Message)
	require.Equal(t, "draining: "+d.Message, DrainProgress(d, nil))
	require.Equal(t, "draining: "+d.Message+"; blocked: team-a/a: budget (and 1 more)", DrainProgress(d, []string{"team-a/a: budget", "team-a/b: budget"}))
}

// TestAdvanceRebootPodAfterReboot: the reboot a reboot pod waits for is the
// pod's (TestAdvanceMachineRebootAfterRequest is the same for a machine
// request). A node that rebooted between admission and the pod's creation
// (a long drain, the fault) waits for the reboot the pod makes.
func TestAdvanceRebootPodAfterReboot(t *testing.T) {
	reboot := tpl(v1alpha1.SuccessNodeRebooted)
	o := op("op", "n1", phase(v1alpha1.PhaseRunning), bootID("boot-a"))
	n := node("n1", booted("boot-b"))
	tr := Advance(AdvanceInput{Op: o, Node: n, Template: reboot, Now: now})
	require.Equal(t, EffectCreatePod, tr.Effect)
	require.Equal(t, "boot-b", tr.Status.BootID, "the boot ID when the pod is created")
	require.Contains(t, tr.Status.Message, "boot ID boot-b")

	o.Status = tr.Status
	tr = Advance(AdvanceInput{Op: o, Node: n, Template: reboot, Pod: opPod(corev1.PodRunning, time.Time{}, 0), Now: now.Add(time.Second)})
	require.Equal(t, v1alpha1.PhaseRunning, tr.Status.Phase, "a reboot before the pod is not the pod's: %s", tr.Status.Message)

	tr = Advance(AdvanceInput{Op: o, Node: node("n1", booted("boot-c")), Template: reboot, Pod: opPod(corev1.PodRunning, time.Time{}, 0), Now: now.Add(time.Minute)})
	require.Equal(t, v1alpha1.PhaseVerifying, tr.Status.Phase, tr.Status.Message)
}
