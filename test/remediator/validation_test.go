package remediator_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/run"
)

// opValidate is a validation template no kwok stage ends: the test plays
// its pods, ending each with a kubemedic-validate report.
const opValidate = "test-validate"

// gatePolicy resets a GPU on an Xid, after a drain, and, when the GPU
// test fails after the reset, resets again on GPUValidationFailed, then
// quarantines; each reset is tested before the uncordon.
func gatePolicy(nodes ...string) *v1alpha1.RemediationPolicy {
	all := intstr.FromString("100%")
	two := intstr.FromInt32(2)
	step := func(name string) v1alpha1.RemediationStep {
		return v1alpha1.RemediationStep{Name: name, StepAction: v1alpha1.StepAction{Operation: opSucceed, Cordon: true, Timeout: dur(20 * time.Second),
			Validate: &v1alpha1.ValidateSpec{Operation: opValidate, Timeout: dur(30 * time.Second)}},
			HealthyFor: dur(time.Second), RecoveryTimeout: dur(30 * time.Second)}
	}
	reset := step("reset")
	reset.Drain = &v1alpha1.DrainSpec{Timeout: dur(time.Minute)}
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-xid-validated"},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}},
			Conditions: []v1alpha1.ConditionMatch{
				{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonXidResetRequired, For: dur(time.Second)},
				{Type: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue, For: dur(time.Second)},
			},
			Steps:  []v1alpha1.RemediationStep{reset, step("reset-again"), {Name: "hold", StepAction: v1alpha1.StepAction{Quarantine: true}}},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(time.Hour)},
		},
	}
}

// testPodOf waits for the operation's test pod of attempt n to be Running
// (kwok runs it) and returns it.
func testPodOf(t *testing.T, env *localcluster.Cluster, opName string, attempt int32) *corev1.Pod {
	t.Helper()
	name := plan.ValidationPodName(&v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: opName}}, attempt)
	var pod corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: opNamespace, Name: name}, &pod))
		require.Equal(c, corev1.PodRunning, pod.Status.Phase)
	}, 30*time.Second, 100*time.Millisecond, "test pod %s Running; operations:%s", name, describeOps(env))
	return &pod
}

// dcgmPass is DCGM 3.1.0's real dcgmi diag -r 2 -j output on 8 GPUs, all
// passing (remediator/validation/dcgmdiag/testdata/SOURCES.md says where
// it comes from).
const dcgmPass = "../../remediator/validation/dcgmdiag/testdata/dcgm-3.1.0-8gpu-pass.txt"

// playTest plays a test pod on the node as its kubelet would: the real
// kubemedic-validate dcgm runs with the pod's arguments against a fake
// dcgmi (script, a shell snippet printing its output) and a fake
// nvidia-smi listing the node's 8 GPUs, and the pod ends with the
// program's exit status and its report as the termination message.
func playTest(t *testing.T, env *localcluster.Cluster, pod *corev1.Pod, script string) validation.Report {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}
	var smi strings.Builder
	for i := range 8 {
		fmt.Fprintf(&smi, "%d, %s, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 16549220084%02d\n", i, localcluster.GPUUUID(pod.Spec.NodeName, i), 0x18+i, i)
	}
	term := filepath.Join(dir, "termination-log")
	args := append(append([]string(nil), pod.Spec.Containers[0].Args...),
		"--tool-path", write("dcgmi", script), "--nvidia-smi", write("nvidia-smi", "cat <<'EOF'\n"+smi.String()+"EOF"), "--termination-log", term)
	var out, errOut bytes.Buffer
	code := run.Main(args, &out, &errOut, func(string) string { return "" })
	b, err := os.ReadFile(term)
	require.NoError(t, err, "kubemedic-validate wrote no report: %s", errOut.String())
	r, err := validation.Decode(string(b))
	require.NoError(t, err)
	t.Logf("kubemedic-validate exited %d: %s", code, out.String())
	require.NoError(t, localcluster.FinishPod(context.Background(), env.Client, pod, code == run.ExitPass, string(b)))
	return r
}

// waitOp waits for the node's operation of step to reach phase.
func waitOp(t *testing.T, env *localcluster.Cluster, node, step string, phase v1alpha1.NodeOperationPhase) v1alpha1.NodeOperation {
	t.Helper()
	var found v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ok := false
		for _, op := range opsOnNode(c, env, node) {
			if op.Spec.Step == step && op.Status.Phase == phase {
				found, ok = op, true
			}
		}
		require.True(c, ok, "an operation of step %s in %s", step, phase)
	}, 45*time.Second, 100*time.Millisecond, "operations:%s", describeOps(env))
	return found
}

// TestValidationGate: a reset that passes every passive check is tested
// before the uncordon, by the real kubemedic-validate on DCGM's real output
// (playTest). The test fails one GPU: the node stays cordoned,
// the step fails ValidationFailed, GPUValidationFailed is set with the
// test as reason and the GPU joins the node's GPU history, the owner of
// the pod the reset drained gets the result in the thread of the message
// about the drain (the GPU, the next step), and the ladder's next step
// runs. Its first test gives no answer and is retried
// with a new pod once the first is gone; the retry passes, the node is
// uncordoned and GPUValidationFailed cleared. The test pods ask for every
// GPU of the node, bound to it past its cordon.
func TestValidationGate(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: opValidate},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-diag:test", Command: []string{"/ko-app/kubemedic-validate"},
			Args: []string{"dcgm"}, Privileged: true}}))
	node := gpuNodes(t, env, "gate", 1)[0]
	createPolicy(t, env, gatePolicy(node))
	slack := notifytest.New(t)
	const aliceID = "U0ALICE001"
	slack.AddUser(aliceID, "alice@example.com")
	train, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-g", Name: "train-0", NodeName: node, GPUs: 1,
		Annotations: map[string]string{notify.AnnotationOwner: aliceID}})
	require.NoError(t, err)
	rem := newRemediator(t, env)
	rem.opts.Notifier = notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: slack.URL()})
	rem.start()

	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidResetRequired: Xid 48 on 0000:3b:00.0: double-bit ECC error; reset required")
	// The reset's pod succeeds (kwok); the Xid clears, as after a reset.
	op := waitOp(t, env, node, "reset", v1alpha1.PhaseVerifying)
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXid", "no Xid since the reset")

	// Verified by every passive check, yet tested first, cordoned.
	pod := testPodOf(t, env, op.Name, 1)
	require.Equal(t, node, pod.Spec.NodeName, "bound to the node")
	gpu := resource.MustParse("8")
	require.True(t, gpu.Equal(pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]), "every GPU of the node: %v", pod.Spec.Containers[0].Resources)
	require.True(t, gpu.Equal(pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]))
	require.Equal(t, corev1.TerminationMessageReadFile, pod.Spec.Containers[0].TerminationMessagePolicy)
	require.True(t, getNode(t, env, node).Spec.Unschedulable, "cordoned while the test runs")
	cur := getOp(t, env, op.Name)
	require.Equal(t, v1alpha1.PhaseValidating, cur.Status.Phase)

	// GPU 3 fails a DCGM test: the real output with GPU 3's result FAIL.
	r := playTest(t, env, pod, `sed '/"gpu_ids" : 3,/{n;s/PASS/FAIL/}' `+dcgmPass+`; exit 226`)
	require.Equal(t, []string{localcluster.GPUUUID(node, 3)}, validation.Failing(r))
	failed := waitOp(t, env, node, "reset", v1alpha1.PhaseFailed)
	require.Contains(t, failed.Status.Message, "ValidationFailed: verified, but dcgm failed on GPU "+localcluster.GPUUUID(node, 3)+" (software)")
	require.Equal(t, []string{localcluster.GPUUUID(node, 3)}, plan.FailingGPUs(failed.Status.Validation))
	n := getNode(t, env, node)
	require.True(t, n.Spec.Unschedulable, "a failed test leaves the node cordoned")
	c := localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUValidationFailed)
	require.NotNil(t, c, "GPUValidationFailed set")
	require.Equal(t, corev1.ConditionTrue, c.Status)
	require.Equal(t, v1alpha1.ReasonDCGMDiagFailed, c.Reason)
	require.NotNil(t, localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUXidError), "the detectors' conditions are left alone")
	h, err := gpuwire.Parse(n.Annotations[gpuwire.Annotation])
	require.NoError(t, err)
	faults := 0
	for _, e := range h.Entries {
		if e.Fault != nil && e.Fault.Condition == v1alpha1.ConditionGPUValidationFailed {
			faults++
			require.Equal(t, gpuwire.NormalizeUUID(localcluster.GPUUUID(node, 3)), e.UUID)
		}
	}
	require.Equal(t, 1, faults, "the failing GPU is in the node's GPU history, once: %+v", h.Entries)
	// Events are written asynchronously by the recorder: wait for it.
	require.Eventually(t, func() bool {
		return slices.Contains(eventReasons(t, env, "NodeOperation", op.Name), v1alpha1.ReasonValidationFailed)
	}, 10*time.Second, 100*time.Millisecond, "the NodeOperation's Events never hold %s", v1alpha1.ReasonValidationFailed)
	// The drained pod's owner: told of the drain, then of the result, in
	// its thread.
	msgs := slack.WaitMessages(t, 2, 30*time.Second)
	require.Contains(t, msgs[0].Text, "Your pod team-g/"+train.Name+" on node "+node+" was stopped")
	require.Empty(t, msgs[0].ThreadTS)
	require.Equal(t, msgs[0].TS, msgs[1].ThreadTS, "a reply in the drain message's thread")
	require.Equal(t, msgs[0].Channel, msgs[1].Channel)
	for _, want := range []string{
		"Update on your pod team-g/" + train.Name + ": node " + node + " failed its GPU test, dcgm (template " + opValidate + "), after the repair and stays cordoned.",
		"Failed: dcgm failed on GPU " + localcluster.GPUUUID(node, 3),
		"Policy gpu-xid-validated takes its next step, reset-again, on GPUValidationFailed.",
		"To stop it, label the node kubemedic.io/remediation=disabled.",
	} {
		require.Contains(t, msgs[1].Text, want)
	}
	require.Contains(t, string(msgs[1].Blocks), "`"+localcluster.GPUUUID(node, 3)+"`", "the failing GPU named")

	// The ladder goes on: the next step, on GPUValidationFailed.
	next := waitOp(t, env, node, "reset-again", v1alpha1.PhaseValidating)
	require.Equal(t, v1alpha1.ConditionGPUValidationFailed, next.Spec.Trigger.Type)
	first := testPodOf(t, env, next.Name, 1)
	// No answer: dcgmi's output is cut short. Retried with a second pod,
	// created once the first is gone.
	require.Equal(t, validation.VerdictNoAnswer, playTest(t, env, first, `head -c 1500 `+dcgmPass).Verdict)
	noAnswer := time.Now()
	second := testPodOf(t, env, next.Name, 2)
	t.Logf("retry: first test pod ended → second Running (kwok) in %s", time.Since(noAnswer).Round(time.Millisecond))
	require.NotEqual(t, first.Name, second.Name)
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(first), &corev1.Pod{})
	require.True(t, ignoreNotFound(err) == nil && err != nil, "the first test pod is gone before the second: %v", err)
	cur = getOp(t, env, next.Name)
	require.Contains(t, cur.Status.Validation.NoAnswer, "dcgm gave no answer: dcgmi diag -r 2 -j (exit status 0): the JSON document ends early")
	require.True(t, getNode(t, env, node).Spec.Unschedulable, "still cordoned during the retry")

	require.Equal(t, validation.VerdictPass, playTest(t, env, second, `cat `+dcgmPass).Verdict)
	ended := time.Now()
	done := waitOp(t, env, node, "reset-again", v1alpha1.PhaseSucceeded)
	require.Contains(t, done.Status.Message, "verified and validated: dcgm passed on 8 GPU(s)")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := getNode(c, env, node)
		require.False(c, n.Spec.Unschedulable, "uncordoned after the pass")
		vc := localcluster.FindNodeCondition(n, v1alpha1.ConditionGPUValidationFailed)
		require.NotNil(c, vc)
		require.Equal(c, corev1.ConditionFalse, vc.Status, "GPUValidationFailed cleared by the pass")
		require.Equal(c, v1alpha1.ReasonValidated, vc.Reason)
	}, 10*time.Second, 20*time.Millisecond)
	// The gate's overhead after the test: from the pod's end (as the
	// kubelet reports it) to the node serving again.
	t.Logf("gate overhead: test pod ended → node uncordoned in %s", time.Since(ended).Round(time.Millisecond))
	require.Equal(t, 1.0, rem.metric("kubemedic_remediation_validations_total", map[string]string{"policy": "gpu-xid-validated", "test": "dcgm", "result": "Failed"}))
	require.Equal(t, 1.0, rem.metric("kubemedic_remediation_validations_total", map[string]string{"policy": "gpu-xid-validated", "test": "dcgm", "result": "Passed"}))
	require.Len(t, opsOnNode(t, env, node), 2, "no quarantine: %s", fmt.Sprint(describeOps(env)))
	require.Len(t, slack.Messages(), 2, "reset-again drained nobody: no one else to tell")
	require.Equal(t, []string{train.Name + "=Sent"}, resultReplies(getOp(t, env, op.Name)), "the result reply recorded")
}

func resultReplies(op *v1alpha1.NodeOperation) []string {
	var out []string
	for _, n := range op.Status.OwnerNotices {
		out = append(out, n.Name+"="+string(n.ResultReply))
	}
	return out
}
