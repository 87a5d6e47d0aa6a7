package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// gated makes testOp an operation whose GPU test ended: passed
// (Succeeded) or failed on GPU 3's memory (Failed).
func gated(passed bool) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) {
		op.Labels = map[string]string{v1alpha1.LabelStepIndex: "0"}
		op.Spec.Validate = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}
		end := metav1.NewTime(noticeTime.Add(20 * time.Minute))
		v := &v1alpha1.ValidationStatus{Template: "validate-dcgm-diag", Attempt: 1, Test: "dcgm", Model: "NVIDIA H100 80GB HBM3", CompletionTime: &end,
			GPUs: []v1alpha1.ValidationGPU{{UUID: "GPU-0000-aaaa", Verdict: "Pass"}, {UUID: "GPU-0003-dddd", Verdict: "Fail", Failed: []string{"memory"}}}}
		if passed {
			op.Status.Phase, v.Result, v.Message = v1alpha1.PhaseSucceeded, v1alpha1.ValidationPassed, "dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3)"
			v.GPUs[1].Verdict, v.GPUs[1].Failed = "Pass", nil
		} else {
			op.Status.Phase, v.Result, v.Message = v1alpha1.PhaseFailed, v1alpha1.ValidationFailed, "dcgm failed on GPU GPU-0003-dddd (memory): memory test failed"
		}
		op.Status.Validation = v
	}
}

func noAnswerTwice(op *v1alpha1.NodeOperation) {
	gated(false)(op)
	v := op.Status.Validation
	v.Test, v.GPUs, v.Attempt = "", nil, 2
	v.Message = "no answer from the GPU test twice, which counts as a failure: no report after 20m0s; the first attempt: image pull failed"
}

// ladderPolicy is gpu-lost's ladder reset → reboot → quarantine, acting
// on GPUValidationFailed when onValidation.
func ladderPolicy(onValidation bool) *v1alpha1.RemediationPolicy {
	p := &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpu-lost"}, Spec: v1alpha1.RemediationPolicySpec{
		Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPULost}},
		Steps: []v1alpha1.RemediationStep{{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}},
			{Name: "reboot", StepAction: v1alpha1.StepAction{Operation: "reboot"}}, {Name: "hold", StepAction: v1alpha1.StepAction{Quarantine: true}}},
	}}
	if onValidation {
		p.Spec.Conditions = append(p.Spec.Conditions, v1alpha1.ConditionMatch{Type: v1alpha1.ConditionGPUValidationFailed})
	}
	return p
}

func TestResultMessage(t *testing.T) {
	web := notice("web-0", v1alpha1.OwnerNoticeSent, func(n *v1alpha1.OwnerNotice) {
		n.ControllerKind, n.ControllerName, n.Channel, n.TS = "ReplicaSet", "web-7d9f", "D0ALICE", "1700000000.000100"
	})
	bare := notice("notebook", v1alpha1.OwnerNoticeSent, func(n *v1alpha1.OwnerNotice) { n.Channel, n.TS = "D0ALICE", "1700000000.000200" })
	tests := []struct {
		desc        string
		op          *v1alpha1.NodeOperation
		notice      v1alpha1.OwnerNotice
		policy      *v1alpha1.RemediationPolicy
		issue       string
		wantText    []string
		wantBlocks  []string
		notInText   []string
		notInBlocks []string
	}{
		{
			desc: "passed: the node serves again, the controller's pod needs nothing", op: testOp(gated(true)), notice: web, issue: testIssue,
			wantText: []string{
				"Update on your pod team-a/web-0: node gpu-017 passed its GPU test, dcgm (template validate-dcgm-diag), after the repair and serves again. Passed: dcgm passed on 8 GPU(s) (NVIDIA H100 80GB HBM3).",
				"Its controller, ReplicaSet web-7d9f, recreated it on another node; nothing to do.",
				"Follow the repair: kubectl get nodeoperation gpu-lost.gpu-017.1a2b3c-0 or " + testIssue,
			},
			wantBlocks: []string{
				`"text":"Node gpu-017 passed its GPU test"`,
				"node `gpu-017` *passed* its GPU test after the repair and serves again.",
				"*Test*\\n`dcgm` (template `validate-dcgm-diag`)",
				"*Node*\\n`gpu-017` (uncordoned)",
				"*What happens next*: the node is back in service.",
				"<" + testIssue + "|acme/gpu-fleet#42>",
			},
			notInText:   []string{"To stop it", "cordoned"},
			notInBlocks: []string{"Failing GPUs", "To stop it"},
		},
		{
			desc: "passed: a bare pod may come back", op: testOp(gated(true)), notice: bare,
			wantText:    []string{"A bare pod is not recreated: submit it again if you have not; gpu-017 takes pods again."},
			notInText:   []string{" or https://"},
			notInBlocks: []string{"*Issue*"},
		},
		{
			desc: "failed: the GPUs, the reason, the next step, how to stop it", op: testOp(gated(false)), notice: bare, policy: ladderPolicy(true), issue: testIssue,
			wantText: []string{
				"Update on your pod team-a/notebook: node gpu-017 failed its GPU test, dcgm (template validate-dcgm-diag), after the repair and stays cordoned. Failed: dcgm failed on GPU GPU-0003-dddd (memory): memory test failed.",
				"Policy gpu-lost takes its next step, reboot, on GPUValidationFailed.",
				"A bare pod is not recreated: submit it again; it will not be scheduled on gpu-017 while it stays cordoned.",
				"To stop it, label the node kubemedic.io/remediation=disabled.",
				"or " + testIssue,
			},
			wantBlocks: []string{
				`"text":"Node gpu-017 failed its GPU test"`,
				"*Failing GPUs*\\n`GPU-0003-dddd`",
				"*Result*\\nFailed: dcgm failed on GPU GPU-0003-dddd (memory): memory test failed",
				"*When*\\n<!date^",
				"*Node*\\n`gpu-017` (cordoned)",
				"*What happens next*: the node stays cordoned; policy `gpu-lost` takes its next step, `reboot`, on `GPUValidationFailed`.",
				"*To stop it*: label the node `kubemedic.io/remediation=disabled`",
			},
			notInBlocks: []string{"GPU-0000-aaaa", "back in service"},
		},
		{
			desc: "no answer twice: said as the reason, no GPU named", op: testOp(noAnswerTwice), notice: web, policy: ladderPolicy(true),
			wantText: []string{
				"failed its GPU test, template validate-dcgm-diag, after the repair and stays cordoned. Failed: no answer from the GPU test twice, which counts as a failure: no report after 20m0s; the first attempt: image pull failed.",
				"Its controller, ReplicaSet web-7d9f, recreated it on another node; nothing to do.",
			},
			notInBlocks: []string{"Failing GPUs"},
		},
		{
			desc: "failed, by hand: nothing to stop", op: testOp(gated(false), func(op *v1alpha1.NodeOperation) { op.Spec.Policy, op.Spec.Step = "", "" }), notice: bare,
			wantText:  []string{"Nothing more happens by itself: the NodeOperation was made by hand, and a human decides what becomes of the node."},
			notInText: []string{"To stop it", "Policy"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := resultMessage(tc.op, tc.notice, tc.policy, tc.issue)
			blocks := blocksJSON(t, m)
			for _, w := range tc.wantText {
				require.Contains(t, m.Text, w)
			}
			for _, w := range tc.notInText {
				require.NotContains(t, m.Text, w)
			}
			for _, w := range tc.wantBlocks {
				require.Contains(t, blocks, w)
			}
			for _, w := range tc.notInBlocks {
				require.NotContains(t, blocks, w)
			}
			require.NotContains(t, m.Text, "..")
		})
	}
}

func TestAfterFailure(t *testing.T) {
	at := func(idx string) *v1alpha1.NodeOperation {
		return testOp(gated(false), func(op *v1alpha1.NodeOperation) { op.Labels[v1alpha1.LabelStepIndex] = idx })
	}
	twoSteps := ladderPolicy(true)
	twoSteps.Spec.Steps = twoSteps.Spec.Steps[:2]
	for _, tc := range []struct {
		desc   string
		op     *v1alpha1.NodeOperation
		policy *v1alpha1.RemediationPolicy
		want   string
		wantMD string
	}{
		{desc: "the next step", op: at("0"), policy: ladderPolicy(true),
			want: "Policy gpu-lost takes its next step, reboot, on GPUValidationFailed.", wantMD: "policy `gpu-lost` takes its next step, `reboot`, on `GPUValidationFailed`."},
		{desc: "a quarantine step next", op: at("1"), policy: ladderPolicy(true),
			want: "Policy gpu-lost quarantines the node next (step hold): a human decides when it serves again."},
		{desc: "the last step was an operation: the ladder's quarantine", op: at("1"), policy: twoSteps,
			want: "Policy gpu-lost quarantines the node next, after the last step of its ladder: a human decides when it serves again."},
		{desc: "a policy that does not act on the test's condition", op: at("0"), policy: ladderPolicy(false),
			want: "Policy gpu-lost does not act on GPUValidationFailed: a human decides what becomes of the node."},
		{desc: "the policy could not be read", op: at("0"),
			want: "Policy gpu-lost decides what comes next: its next step, or a quarantine after its last."},
		{desc: "no step index", op: at("x"), policy: ladderPolicy(true),
			want: "Policy gpu-lost takes its next step, or quarantines the node after its last."},
		{desc: "by hand", op: testOp(gated(false), func(op *v1alpha1.NodeOperation) { op.Spec.Policy = "" }), policy: ladderPolicy(true),
			want:   "Nothing more happens by itself: the NodeOperation was made by hand, and a human decides what becomes of the node.",
			wantMD: "nothing more happens by itself: the NodeOperation was made by hand, and a human decides what becomes of the node."},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, md := afterFailure(tc.op, tc.policy)
			require.Equal(t, tc.want, got)
			if tc.wantMD != "" {
				require.Equal(t, tc.wantMD, md)
			}
		})
	}
}

func TestResultsClaimable(t *testing.T) {
	now := noticeTime
	inThread := func(n *v1alpha1.OwnerNotice) { n.Channel, n.TS = "D0ALICE", "1700000000.000100" }
	reply := func(s v1alpha1.OwnerNoticeState, at time.Time) func(*v1alpha1.OwnerNotice) {
		return func(n *v1alpha1.OwnerNotice) {
			n.ResultReply = s
			if !at.IsZero() {
				n.ClaimedAt = ptrTime(at)
			}
		}
	}
	told := []v1alpha1.OwnerNotice{
		notice("a", v1alpha1.OwnerNoticeSent, inThread),
		notice("b", v1alpha1.OwnerNoticeFailed),
		notice("c", v1alpha1.OwnerNoticePending),
		notice("d", v1alpha1.OwnerNoticeSent, inThread),
		notice("e", v1alpha1.OwnerNoticeSent), // no thread recorded
	}
	with := func(notices []v1alpha1.OwnerNotice, mut ...func(*v1alpha1.NodeOperation)) *v1alpha1.NodeOperation {
		return testOp(append(mut, func(op *v1alpha1.NodeOperation) { op.Status.OwnerNotices = notices })...)
	}
	for _, tc := range []struct {
		desc     string
		op       *v1alpha1.NodeOperation
		want     []int
		wantNext time.Time
	}{
		{desc: "passed: each owner told of the drain, in a thread", op: with(told, gated(true)), want: []int{0, 3}},
		{desc: "failed: the same", op: with(told, gated(false)), want: []int{0, 3}},
		{desc: "no answer twice: the same", op: with(told, noAnswerTwice), want: []int{0, 3}},
		{desc: "no test in the spec: nothing", op: with(told, gated(true), func(op *v1alpha1.NodeOperation) { op.Spec.Validate = nil })},
		{desc: "still validating: nothing", op: with(told, gated(true), func(op *v1alpha1.NodeOperation) {
			op.Status.Phase, op.Status.Validation.Result = v1alpha1.PhaseValidating, v1alpha1.ValidationValidating
		})},
		{desc: "failed before the test gave a verdict: nothing", op: with(told, gated(false), func(op *v1alpha1.NodeOperation) {
			op.Status.Validation.Result = v1alpha1.ValidationValidating
		})},
		{desc: "failed before the test: nothing", op: with(told, func(op *v1alpha1.NodeOperation) {
			op.Spec.Validate, op.Status.Phase = &v1alpha1.ValidateSpec{Operation: "validate-dcgm-diag"}, v1alpha1.PhaseFailed
		})},
		{desc: "sent and failed replies: never again", op: with([]v1alpha1.OwnerNotice{
			notice("a", v1alpha1.OwnerNoticeSent, inThread, reply(v1alpha1.OwnerNoticeSent, time.Time{})),
			notice("b", v1alpha1.OwnerNoticeSent, inThread, reply(v1alpha1.OwnerNoticeFailed, time.Time{})),
		}, gated(false))},
		{desc: "a reply claimed just now is held; one claimed before the timeout is anyone's", op: with([]v1alpha1.OwnerNotice{
			notice("a", v1alpha1.OwnerNoticeSent, inThread, reply(v1alpha1.OwnerNoticeClaimed, now.Add(-time.Minute))),
			notice("b", v1alpha1.OwnerNoticeSent, inThread, reply(v1alpha1.OwnerNoticeClaimed, now.Add(-noticeClaimTimeout))),
		}, gated(true)), want: []int{1}, wantNext: now.Add(noticeClaimTimeout - time.Minute)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, next := resultsClaimable(tc.op, now)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantNext, next)
			owed, _ := owedNow(tc.op, now)
			require.Equal(t, len(tc.want) > 0, owed)
		})
	}
}

func TestGPUList(t *testing.T) {
	var ten []string
	for i := range 10 {
		ten = append(ten, fmt.Sprintf("GPU-%d", i))
	}
	require.Equal(t, "`GPU-0`, `GPU-1`", gpuList(ten[:2]))
	require.Equal(t, "`GPU-0`, `GPU-1`, `GPU-2`, `GPU-3`, `GPU-4`, `GPU-5`, `GPU-6`, `GPU-7` and 2 more", gpuList(ten))
}
