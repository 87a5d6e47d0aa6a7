package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// vpolicy is a ValidationPolicy created two days ago that tests with
// validate-dcgm (timeout 20m): the join gate, and in the background
// every 168h, two nodes at once.
func vpolicy(opts ...func(*v1alpha1.ValidationPolicySpec)) *v1alpha1.ValidationPolicy {
	p := &v1alpha1.ValidationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus", Generation: 3, CreationTimestamp: metav1.NewTime(ago(48 * time.Hour))},
		Spec: v1alpha1.ValidationPolicySpec{
			Validate:   v1alpha1.ValidateSpec{Operation: "validate-dcgm", Timeout: dur(20 * time.Minute)},
			Join:       &v1alpha1.JoinSpec{},
			Background: &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: 168 * time.Hour}, MaxConcurrent: 2, PriorityClassName: v1alpha1.DefaultBackgroundPriorityClass},
		},
	}
	for _, o := range opts {
		o(&p.Spec)
	}
	return p
}

func unvalidated(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule})
}

func uid(u string) nodeOpt { return func(n *corev1.Node) { n.UID = types.UID(u) } }

func created(at time.Time) nodeOpt {
	return func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(at) }
}

func unschedulable(n *corev1.Node) { n.Spec.Unschedulable = true }

// vnode is a node with UID "uid-<name>", created three days ago.
func vnode(name string, opts ...nodeOpt) *corev1.Node {
	return node(name, append([]nodeOpt{uid("uid-" + name), created(ago(72 * time.Hour))}, opts...)...)
}

type recOpt func(*v1alpha1.NodeValidation)

func nvRecord(node string, opts ...recOpt) *v1alpha1.NodeValidation {
	r := &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: "7"},
		Spec: v1alpha1.NodeValidationSpec{NodeName: node, NodeUID: "uid-" + node, Policy: "gpus"}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// runningTest: attempt n of a test in mode, started at start.
func runningTest(mode v1alpha1.ValidationMode, n int32, start time.Time) recOpt {
	return func(r *v1alpha1.NodeValidation) {
		s := metav1.NewTime(start)
		r.Status.Mode = mode
		r.Status.Current = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: "validate-dcgm", Attempt: n, PodName: NodeTestPodName(r.Name, start, n), StartTime: &s}
		if n > 1 {
			r.Status.Current.NoAnswer = "no report after 20m0s"
		}
	}
}

func lastResult(res v1alpha1.ValidationResult, at time.Time) recOpt {
	return func(r *v1alpha1.NodeValidation) {
		t := metav1.NewTime(at)
		r.Status.Last = &v1alpha1.ValidationStatus{Result: res, Template: "validate-dcgm", CompletionTime: &t}
	}
}

func nextAt(at time.Time) recOpt {
	return func(r *v1alpha1.NodeValidation) { t := metav1.NewTime(at); r.Status.NextTime = &t }
}

// nodePod is the test pod of a record's current test, in phase, with msg
// as its termination message; bound to the node unless unbound.
func nodePod(r *v1alpha1.NodeValidation, phase corev1.PodPhase, msg string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: r.Status.Current.PodName},
		Spec: corev1.PodSpec{NodeName: r.Spec.NodeName}, Status: corev1.PodStatus{Phase: phase}}
	if phase == corev1.PodRunning {
		p.Status.StartTime = r.Status.Current.StartTime
	}
	endTestPod(p, msg)
	return p
}

// retryPending: attempt 2 waits for attempt 1's pod, started at start,
// to go.
func retryPending(start time.Time) recOpt {
	return func(r *v1alpha1.NodeValidation) {
		runningTest(v1alpha1.ValidationJoin, 1, start)(r)
		r.Status.Current.Attempt, r.Status.Current.PodName, r.Status.Current.NoAnswer = 2, "", "no report after 20m0s"
	}
}

func goingPod(p *corev1.Pod) *corev1.Pod {
	t := metav1.NewTime(ago(time.Second))
	p.DeletionTimestamp = &t
	return p
}

func unbound(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = ""; return p }

func preempted(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"})
	return p
}

func passIn(in *ValidationPassInput, nodes []*corev1.Node, recs []*v1alpha1.NodeValidation, pods ...*corev1.Pod) {
	in.Nodes = nodes
	in.Records = map[string]*v1alpha1.NodeValidation{}
	for _, r := range recs {
		in.Records[r.Name] = r
	}
	in.Pods = map[string]*corev1.Pod{}
	for _, p := range pods {
		in.Pods[p.Name] = p
	}
}

func TestPlanValidations(t *testing.T) {
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "validate-dcgm"}}
	start := ago(5 * time.Minute)
	joinRun := nvRecord("n1", runningTest(v1alpha1.ValidationJoin, 1, start))
	joinRun2 := nvRecord("n1", runningTest(v1alpha1.ValidationJoin, 2, start))
	bgRun := nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, start))

	type want struct {
		// pods: "node/mode/attempt" of the pods started, in order.
		pods []string
		// deleted: how many pods are deleted.
		deleted    int
		addTaint   []string
		rmTaint    []string
		condition  string // "True/<reason>", "False/Validated" or ""
		last       v1alpha1.ValidationResult
		current    bool   // the acted node's record has a test running
		message    string // in the acted node's record's message
		event      string // a reason among the acted node's events
		next       time.Duration
		preempted  int32
		status     v1alpha1.ValidationPolicyStatus
		noActions  bool
		requeueMax time.Duration
	}
	cases := []struct {
		desc   string
		policy *v1alpha1.ValidationPolicy
		nodes  []*corev1.Node
		recs   []*v1alpha1.NodeValidation
		pods   []*corev1.Pod
		noTpl  bool
		// unsafePC: the priority class would let a test delay real pods.
		unsafePC bool
		want     want
	}{
		{
			desc:  "join: a node with the taint gets a bound test, and keeps the taint meanwhile",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			want: want{pods: []string{"n1/Join/1"}, current: true, event: v1alpha1.EventValidationStarted, message: "keeps the taint kubemedic.io/unvalidated",
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a pass removes the taint and records the result; the next background test is due in every",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{joinRun},
			pods:  []*corev1.Pod{nodePod(joinRun, corev1.PodSucceeded, "")},
			want: want{rmTaint: []string{"n1"}, deleted: 1, condition: "False/Validated", last: v1alpha1.ValidationPassed, event: v1alpha1.ReasonValidationPassed,
				message: "the taint kubemedic.io/unvalidated is removed", next: 168 * time.Hour,
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Passed: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a failure sets GPUValidationFailed with the test's reason and keeps the taint",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{joinRun},
			pods:  []*corev1.Pod{nodePod(joinRun, corev1.PodFailed, "")},
			want: want{deleted: 1, condition: "True/" + v1alpha1.ReasonDCGMDiagFailed, last: v1alpha1.ValidationFailed, event: v1alpha1.ReasonValidationFailed,
				message: "keeps the taint", next: 168 * time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Failed: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: no report is no answer, tried once more with a new pod",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{joinRun},
			pods:  []*corev1.Pod{nodePod(joinRun, corev1.PodFailed, "")},
			want:  want{pods: []string{"n1/Join/2"}, deleted: 1, current: true, event: v1alpha1.ReasonValidationNoAnswer, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: no answer twice is a failure that says both",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{joinRun2},
			want: want{condition: "True/" + v1alpha1.ReasonNoValidationAnswer, last: v1alpha1.ValidationFailed, message: "the first attempt: no report after 20m0s",
				next: 168 * time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Failed: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a test past its timeout is no answer",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", runningTest(v1alpha1.ValidationJoin, 1, ago(21*time.Minute)))},
			pods:  []*corev1.Pod{nodePod(nvRecord("n1", runningTest(v1alpha1.ValidationJoin, 1, ago(21*time.Minute))), corev1.PodPending, "")},
			want: want{deleted: 1, current: true, event: v1alpha1.ReasonValidationNoAnswer, message: "trying once more once pod kubemedic/",
				requeueMax: ValidationRetryPoll, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: the retry waits while the first attempt's pod goes (it may hold the GPUs)",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", retryPending(start))},
			pods:  []*corev1.Pod{goingPod(nodePod(nvRecord("n1", runningTest(v1alpha1.ValidationJoin, 1, start)), corev1.PodRunning, ""))},
			want:  want{noActions: true, requeueMax: ValidationRetryPoll, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: the retry starts once the first attempt's pod is gone",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", retryPending(start))},
			want:  want{pods: []string{"n1/Join/2"}, current: true, event: v1alpha1.EventValidationStarted, message: "attempt 2 of 2", status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a running test is waited for until its timeout",
			nodes: []*corev1.Node{vnode("n1", unvalidated)},
			recs:  []*v1alpha1.NodeValidation{joinRun},
			pods:  []*corev1.Pod{nodePod(joinRun, corev1.PodRunning, "")},
			want:  want{noActions: true, requeueMax: 15 * time.Minute, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a new node whose GPUs are not allocatable yet is waited for",
			nodes: []*corev1.Node{vnode("n1", unvalidated, noGPUs, created(ago(time.Minute)))},
			want:  want{noActions: true, requeueMax: JoinWaitPoll, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: still no GPUs after the timeout is no answer, a failure",
			nodes: []*corev1.Node{vnode("n1", unvalidated, noGPUs)},
			want: want{condition: "True/" + v1alpha1.ReasonNoValidationAnswer, last: v1alpha1.ValidationFailed, message: "has no nvidia.com/* resource allocatable",
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Failed: 1, Unvalidated: 1}, next: 168 * time.Hour},
		},
		{
			desc:  "join: a node that failed keeps the taint and is not tested again in a loop",
			nodes: []*corev1.Node{vnode("n1", unvalidated, cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionTrue, v1alpha1.ReasonDCGMDiagFailed, "", ago(time.Hour)))},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", lastResult(v1alpha1.ValidationFailed, ago(time.Hour)))},
			want:  want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Failed: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a node that failed, then passed a repair's test, loses the taint",
			nodes: []*corev1.Node{vnode("n1", unvalidated, cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionFalse, v1alpha1.ReasonValidated, "dcgm passed on 8 GPU(s)", ago(time.Minute)))},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", lastResult(v1alpha1.ValidationFailed, ago(time.Hour)))},
			want: want{rmTaint: []string{"n1"}, last: v1alpha1.ValidationPassed, event: v1alpha1.ReasonValidationPassed, message: "passed a repair's GPU test",
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Passed: 1, Unvalidated: 1}},
		},
		{
			desc:  "join: a node replaced under the same name starts over",
			nodes: []*corev1.Node{vnode("n1", unvalidated, uid("uid-new"))},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", lastResult(v1alpha1.ValidationPassed, ago(time.Hour)))},
			want:  want{pods: []string{"n1/Join/1"}, current: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1, Unvalidated: 1}},
		},
		{
			desc:   "taintNewNodes: a node that joined after the policy without the taint gets it; an older one does not",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) { s.Join.TaintNewNodes = true; s.Background = nil }),
			nodes:  []*corev1.Node{vnode("new", created(ago(time.Minute))), vnode("old")},
			want:   want{addTaint: []string{"new"}, event: v1alpha1.EventUnvalidatedTainted, message: "set join.taintNewNodes: false", status: v1alpha1.ValidationPolicyStatus{Matched: 2}},
		},
		{
			desc:   "taintNewNodes: not a node that joined after the policy but long ago (it serves; it was selected later, or its record deleted)",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) { s.Join.TaintNewNodes = true; s.Background = nil }),
			nodes:  []*corev1.Node{vnode("later", created(ago(time.Hour)))},
			want:   want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc: "taintNewNodes: not while the policy is suspended",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) {
				s.Join.TaintNewNodes, s.Background, s.Suspend = true, nil, true
			}),
			nodes: []*corev1.Node{vnode("new", created(ago(time.Minute)))},
			want:  want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:  "background: the budget goes to the nodes tested longest ago, never-tested first; the rest are due",
			nodes: []*corev1.Node{vnode("a"), vnode("b"), vnode("c"), vnode("d")},
			recs: []*v1alpha1.NodeValidation{
				nvRecord("a", lastResult(v1alpha1.ValidationPassed, ago(200*time.Hour))),
				nvRecord("c", lastResult(v1alpha1.ValidationPassed, ago(300*time.Hour))),
				nvRecord("d", lastResult(v1alpha1.ValidationPassed, ago(time.Hour)), nextAt(now.Add(167*time.Hour))),
			},
			want: want{pods: []string{"b/Background/1", "c/Background/1"}, current: true, event: v1alpha1.EventValidationStarted, message: "at priority class kubemedic-background-validation",
				status: v1alpha1.ValidationPolicyStatus{Matched: 4, Validating: 2, Passed: 3, Due: 1}},
		},
		{
			desc:  "background: nodes whose tests were put off take turns: the one due longest ago first, never-tested before all",
			nodes: []*corev1.Node{vnode("a"), vnode("b"), vnode("c"), vnode("z")},
			recs: []*v1alpha1.NodeValidation{
				nvRecord("a", nextAt(ago(time.Second))),
				nvRecord("b", nextAt(ago(time.Minute))),
				nvRecord("c", nextAt(ago(10*time.Second))),
			},
			want: want{pods: []string{"z/Background/1", "b/Background/1"}, current: true, status: v1alpha1.ValidationPolicyStatus{Matched: 4, Validating: 2, Due: 2}},
		},
		{
			desc:  "background: a running test holds the budget",
			nodes: []*corev1.Node{vnode("n1"), vnode("b"), vnode("c")},
			recs:  []*v1alpha1.NodeValidation{bgRun},
			pods:  []*corev1.Pod{nodePod(bgRun, corev1.PodRunning, "")},
			want:  want{pods: []string{"b/Background/1"}, current: true, status: v1alpha1.ValidationPolicyStatus{Matched: 3, Validating: 2, Due: 1}},
		},
		{
			desc: "background: nodes that do not serve, are not Ready, failed a test or have no GPU are not tested",
			nodes: []*corev1.Node{vnode("a", unschedulable), vnode("b", quarantinedNode), vnode("c", notReady), vnode("d", noGPUs),
				vnode("e", cond(v1alpha1.ConditionGPUValidationFailed, corev1.ConditionTrue, v1alpha1.ReasonDCGMDiagFailed, "", ago(time.Hour)))},
			want: want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 5}},
		},
		{
			desc:   "background: suspended, nothing starts",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) { s.Suspend = true }),
			nodes:  []*corev1.Node{vnode("a")},
			want:   want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Due: 1}},
		},
		{
			desc:     "background: a priority class that could delay real pods, nothing starts",
			nodes:    []*corev1.Node{vnode("a")},
			unsafePC: true,
			want:     want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Due: 1}},
		},
		{
			desc:  "background: no template, nothing starts",
			nodes: []*corev1.Node{vnode("a"), vnode("b", unvalidated)},
			noTpl: true,
			want:  want{noActions: true, status: v1alpha1.ValidationPolicyStatus{Matched: 2, Due: 1, Unvalidated: 1}},
		},
		{
			desc:  "background: a pass is recorded, the node never had a failure to clear",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{bgRun},
			pods:  []*corev1.Pod{nodePod(bgRun, corev1.PodSucceeded, "")},
			want: want{deleted: 1, condition: "False/Validated", last: v1alpha1.ValidationPassed, next: 168 * time.Hour,
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Passed: 1}},
		},
		{
			desc:   "background: a policy that no longer has a background section stops its running test, no result",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) { s.Background = nil }),
			nodes:  []*corev1.Node{vnode("n1")},
			recs:   []*v1alpha1.NodeValidation{bgRun},
			pods:   []*corev1.Pod{nodePod(bgRun, corev1.PodRunning, "")},
			want:   want{deleted: 1, event: v1alpha1.EventValidationPutOff, message: "no longer tests in the background", status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:   "background: a retry waiting for its first pod, under a policy that lost its background section, is stopped too",
			policy: vpolicy(func(s *v1alpha1.ValidationPolicySpec) { s.Background = nil }),
			nodes:  []*corev1.Node{vnode("n1")},
			recs: []*v1alpha1.NodeValidation{nvRecord("n1", retryPending(start), func(r *v1alpha1.NodeValidation) {
				r.Status.Mode = v1alpha1.ValidationBackground
			})},
			pods: []*corev1.Pod{nodePod(nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, start)), corev1.PodRunning, "")},
			want: want{deleted: 1, event: v1alpha1.EventValidationPutOff, message: "no longer tests in the background", status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:  "background: a node cordoned mid-test (a repair) stops the test, whose result would not be the repair's",
			nodes: []*corev1.Node{vnode("n1", unschedulable)},
			recs:  []*v1alpha1.NodeValidation{bgRun},
			pods:  []*corev1.Pod{nodePod(bgRun, corev1.PodSucceeded, "")},
			want:  want{deleted: 1, event: v1alpha1.EventValidationPutOff, message: "no longer serves", next: time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:  "background: a failure sets GPUValidationFailed",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{bgRun},
			pods:  []*corev1.Pod{nodePod(bgRun, corev1.PodFailed, "")},
			want: want{deleted: 1, condition: "True/" + v1alpha1.ReasonDCGMDiagFailed, last: v1alpha1.ValidationFailed, next: 168 * time.Hour,
				status: v1alpha1.ValidationPolicyStatus{Matched: 1, Failed: 1}},
		},
		{
			desc:  "background: preempted by the scheduler is no result, tried again after retryAfter",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, start), lastResult(v1alpha1.ValidationPassed, ago(200*time.Hour)))},
			pods:  []*corev1.Pod{preempted(nodePod(bgRun, corev1.PodFailed, ""))},
			want: want{deleted: 1, last: v1alpha1.ValidationPassed, preempted: 1, event: v1alpha1.EventValidationPreempted, message: "was preempted by a pod of higher priority: no result",
				next: time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Passed: 1}},
		},
		{
			desc:  "background: a pod gone before it ended is no result",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{bgRun},
			want:  want{preempted: 1, event: v1alpha1.EventValidationPreempted, message: "is gone before it ended", next: time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:  "background: a pod that waited for the GPUs past waitFor is put off",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, ago(31*time.Minute)))},
			pods:  []*corev1.Pod{unbound(nodePod(nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, ago(31*time.Minute))), corev1.PodPending, ""))},
			want:  want{deleted: 1, event: v1alpha1.EventValidationPutOff, message: "were not free for 30m0s", next: time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1}},
		},
		{
			desc:  "background: the timeout counts from the pod's start on the node, not its wait",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, ago(25*time.Minute)))},
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := nodePod(nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, ago(25*time.Minute))), corev1.PodRunning, "")
				s := metav1.NewTime(ago(time.Minute))
				p.Status.StartTime = &s
				return p
			}()},
			want: want{noActions: true, requeueMax: 19 * time.Minute, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Validating: 1}},
		},
		{
			desc:  "background: not due until nextTime",
			nodes: []*corev1.Node{vnode("n1")},
			recs:  []*v1alpha1.NodeValidation{nvRecord("n1", lastResult(v1alpha1.ValidationPassed, ago(time.Hour)), nextAt(now.Add(2*time.Hour)))},
			want:  want{noActions: true, requeueMax: 2 * time.Hour, status: v1alpha1.ValidationPolicyStatus{Matched: 1, Passed: 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			// Fill the reports of the ended pods by the case's wording.
			for _, p := range tc.pods {
				fillReport(t, tc.desc, p)
			}
			in := ValidationPassInput{Now: now, Policy: tc.policy, Template: tpl, Namespace: "kubemedic"}
			if in.Policy == nil {
				in.Policy = vpolicy()
			}
			if tc.noTpl {
				in.Template = nil
			}
			if tc.unsafePC {
				in.NoBackground = "PriorityClass x has value 1000"
			}
			passIn(&in, tc.nodes, tc.recs, tc.pods...)
			got := PlanValidations(in)
			w := tc.want
			w.status.ObservedGeneration = 3
			require.Equal(t, w.status, got.Status)
			if w.noActions {
				require.Empty(t, got.Actions)
			} else {
				require.NotEmpty(t, got.Actions)
			}
			if w.requeueMax > 0 {
				require.NotZero(t, got.RequeueAfter)
				require.LessOrEqual(t, got.RequeueAfter, w.requeueMax)
			}
			var started, added, removed []string
			deleted := 0
			for _, a := range got.Actions {
				if a.Pod != nil {
					started = append(started, a.Node.Name+"/"+string(a.Pod.Mode)+"/"+string(rune('0'+a.Pod.Attempt)))
					require.Equal(t, a.Pod.Name, a.Record.Status.Current.PodName, "the record names its pod before it exists")
				}
				if a.AddTaint {
					added = append(added, a.Node.Name)
				}
				if a.RemoveTaint {
					removed = append(removed, a.Node.Name)
				}
				deleted += len(a.DeletePods)
				require.Equal(t, string(a.Node.UID), a.Record.Spec.NodeUID)
				require.Equal(t, "gpus", a.Record.Spec.Policy)
				require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a.Node.Name, UID: a.Node.UID}}, a.Record.OwnerReferences,
					"owned by its Node, so that the record of a node that is gone goes too")
			}
			require.Equal(t, w.pods, started)
			require.Equal(t, w.addTaint, added)
			require.Equal(t, w.rmTaint, removed)
			require.Equal(t, w.deleted, deleted)
			if len(got.Actions) == 0 {
				return
			}
			a := got.Actions[0]
			st := a.Record.Status
			if w.condition == "" {
				require.Nil(t, a.Condition)
			} else {
				require.NotNil(t, a.Condition)
				c := a.Condition.Condition()
				require.Equal(t, w.condition, string(c.Status)+"/"+c.Reason)
			}
			if w.last == "" {
				require.Nil(t, st.Last)
			} else {
				require.NotNil(t, st.Last)
				require.Equal(t, w.last, st.Last.Result)
				require.NotNil(t, st.Last.CompletionTime)
			}
			require.Equal(t, w.current, st.Current != nil)
			require.Contains(t, st.Message, w.message)
			if w.event != "" {
				var reasons []string
				for _, e := range a.Events {
					reasons = append(reasons, e.Reason)
				}
				require.Contains(t, reasons, w.event)
			}
			if w.next == 0 {
				if !w.current {
					require.Nil(t, st.NextTime)
				}
			} else {
				require.NotNil(t, st.NextTime)
				require.Equal(t, now.Add(w.next), st.NextTime.Time)
			}
			require.Equal(t, w.preempted, st.Preemptions)
		})
	}
}

// fillReport gives an ended test pod the report its case describes: a
// pass for a pod that succeeded; for one that failed, a DCGM failure,
// unless the case is about no answer (no report at all).
func fillReport(t *testing.T, desc string, p *corev1.Pod) {
	if len(p.Status.ContainerStatuses) == 0 {
		return
	}
	term := p.Status.ContainerStatuses[0].State.Terminated
	switch {
	case p.Status.Phase == corev1.PodSucceeded:
		term.Message = encoded(t, validation.VerdictPass, pass(gpuA), pass(gpuB))
	case strings.Contains(desc, "no answer") || strings.Contains(desc, "no report"):
		term.Message = ""
	default:
		term.Message = encoded(t, validation.VerdictFail, pass(gpuA), fail(gpuB, "memory"))
	}
}

// TestPlanValidationsOrphans: a test pod of the policy that no record
// names (its record moved on after a delete that failed, or its node left
// the policy) is deleted once the cache had time to show its record.
func TestPlanValidationsOrphans(t *testing.T) {
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "validate-dcgm"}}
	rec := nvRecord("n1", runningTest(v1alpha1.ValidationBackground, 1, ago(5*time.Minute)))
	named := nodePod(rec, corev1.PodRunning, "")
	pod := func(name string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: name, CreationTimestamp: metav1.NewTime(ago(age))}}
	}
	old, fresh, going := pod("n2-validate-1-1", 2*time.Minute), pod("n3-validate-1-1", 10*time.Second), goingPod(pod("n4-validate-1-1", time.Hour))
	in := ValidationPassInput{Now: now, Policy: vpolicy(), Template: tpl, Namespace: "kubemedic"}
	passIn(&in, []*corev1.Node{vnode("n1")}, []*v1alpha1.NodeValidation{rec}, named)
	in.PolicyPods = []*corev1.Pod{named, old, fresh, going}
	got := PlanValidations(in)
	require.Equal(t, []*corev1.Pod{old}, got.Orphans, "only the old pod no record names, not one being deleted, not one the cache may not show the record of yet")
}

// TestPlanValidationsWalksAJoin plays a join from the taint to its
// removal: each pass's record is the next pass's input.
func TestPlanValidationsWalksAJoin(t *testing.T) {
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "validate-dcgm"}}
	n := vnode("n1", unvalidated)
	in := ValidationPassInput{Now: now, Policy: vpolicy(), Template: tpl, Namespace: "kubemedic"}
	passIn(&in, []*corev1.Node{n}, nil)
	first := PlanValidations(in)
	require.Len(t, first.Actions, 1)
	rec := first.Actions[0].Record
	require.True(t, first.Actions[0].Create)
	rec.ResourceVersion = "1"

	// Again before the pod is seen: the record names it, and a missing
	// bound pod is no answer, so the controller reads it fresh first.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic", Name: rec.Status.Current.PodName}, Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	in.Now = now.Add(time.Minute)
	passIn(&in, []*corev1.Node{n}, []*v1alpha1.NodeValidation{rec}, pod)
	require.Empty(t, PlanValidations(in).Actions)

	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "validate", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Message: encoded(t, validation.VerdictPass, pass(gpuA)), FinishedAt: metav1.NewTime(now.Add(2 * time.Minute))}}}}
	in.Now = now.Add(3 * time.Minute)
	done := PlanValidations(in)
	require.Len(t, done.Actions, 1)
	a := done.Actions[0]
	require.False(t, a.Create)
	require.True(t, a.RemoveTaint)
	require.Equal(t, v1alpha1.ValidationPassed, a.Result)
	require.Equal(t, 2*time.Minute, a.Took, "from the pod's creation to its container's end")
	require.Equal(t, "dcgm", a.Record.Status.Last.Test)
	require.Len(t, a.Record.Status.Last.GPUs, 1)

	// The taint is gone: with nothing due, the node is left alone.
	n.Spec.Taints = nil
	passIn(&in, []*corev1.Node{n}, []*v1alpha1.NodeValidation{a.Record})
	require.Empty(t, PlanValidations(in).Actions)
}
