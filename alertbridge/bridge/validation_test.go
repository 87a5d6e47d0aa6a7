package bridge_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const (
	failingGPU = "GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10"
	// What DCGM says of a bad memory (dcgm_errors.h, DCGM_FR_FAULTY_MEMORY_MSG).
	faultyMemory = "Found 3 faulty memory elements on GPU 2"
)

// validating is a reset on node whose GPU test runs since at.
func validating(name, node string, at time.Time) v1alpha1.NodeOperation {
	op := nodeOp(name, node, at.Add(-10*time.Minute), v1alpha1.PhaseValidating, "testing the GPUs before the uncordon; the node stays cordoned")
	op.UID = types.UID("uid-" + name)
	start := metav1.NewTime(at)
	op.Status.Validation = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: "validate-dcgm-diag",
		Attempt: 1, PodName: name + "-validate-1", StartTime: &start}
	return op
}

// validationEnded is op with its test ended at as result says: a pass of
// 2 GPUs, or a failure of failingGPU's memory.
func validationEnded(op v1alpha1.NodeOperation, result v1alpha1.ValidationResult, at time.Time) v1alpha1.NodeOperation {
	op = *op.DeepCopy()
	v := op.Status.Validation
	end := metav1.NewTime(at)
	v.Result, v.CompletionTime, v.Test, v.Model = result, &end, "dcgm", "NVIDIA H100 80GB HBM3"
	v.GPUs = []v1alpha1.ValidationGPU{{UUID: "GPU-00000000-0000-4000-8000-000000000000", Verdict: "Pass"}, {UUID: failingGPU, Verdict: "Pass"}}
	if result == v1alpha1.ValidationPassed {
		op.Status.Phase, v.Message = v1alpha1.PhaseSucceeded, "dcgm passed on 2 GPU(s) (NVIDIA H100 80GB HBM3)"
		return op
	}
	v.GPUs[1] = v1alpha1.ValidationGPU{UUID: failingGPU, Verdict: "Fail", Failed: []string{"memory"}, Detail: faultyMemory}
	op.Status.Phase, v.Message = v1alpha1.PhaseFailed, "dcgm failed on GPU "+failingGPU+" (memory): "+faultyMemory
	return op
}

// commentsWith are the comments on issue number that contain s.
func commentsWith(e *env, number int, s string) []string {
	var out []string
	for _, c := range e.fake.Comments(repo, number) {
		if strings.Contains(c, s) {
			out = append(out, c)
		}
	}
	return out
}

const validationTitle = "**GPU validation "

// TestValidationCommentedOnce: the open issue of a node gets one comment
// per ended GPU test of the node's operations (Passed or Failed), with
// what was tested, the result, the failing GPU and what comes next; none
// while the test runs or retries; not again at the next interval, nor
// after a restart; none for another node's or an older episode's.
func TestValidationCommentedOnce(t *testing.T) {
	now := time.Now().UTC()
	reset := validating("gpu-lost.gpu-7.a", "gpu-7", now.Add(-5*time.Minute))
	failed := validationEnded(validating("gpu-lost.gpu-7.b", "gpu-7", now.Add(-20*time.Minute)), v1alpha1.ValidationFailed, now.Add(-2*time.Minute))
	old := validationEnded(validating("gpu-lost.gpu-7.old", "gpu-7", now.Add(-49*time.Hour)), v1alpha1.ValidationFailed, now.Add(-48*time.Hour))
	other := validationEnded(validating("gpu-lost.gpu-9.a", "gpu-9", now.Add(-5*time.Minute)), v1alpha1.ValidationPassed, now)
	ops := &fakeOps{ops: []v1alpha1.NodeOperation{reset, failed, old, other}}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, nil))

	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	validations := func() []string { return commentsWith(e, is.Number, validationTitle) }
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, validations(), 1) }, 5*time.Second, 50*time.Millisecond)
	got := validations()[0]
	for _, want := range []string{
		"**GPU validation failed** on node `gpu-7` after kubemedic's `reset-gpu` (NodeOperation `gpu-lost.gpu-7.b`, policy `gpu-lost`, step `reset-gpu`), ended ",
		"- Tested with: template `validate-dcgm-diag`, test `dcgm`, GPU model `NVIDIA H100 80GB HBM3`",
		"- Result: **Failed**: dcgm failed on GPU " + failingGPU + " (memory)",
		"| `" + failingGPU + "` | Fail | memory | " + faultyMemory + " |",
		"The node stays cordoned.",
		"`kubectl label node gpu-7 kubemedic.io/remediation=disabled`",
		"<!-- kubemedic-alertbridge diagnostics=uid-gpu-lost.gpu-7.b/validation -->",
	} {
		require.Contains(t, got, want)
	}
	require.Never(t, func() bool { return len(validations()) != 1 }, 400*time.Millisecond, 50*time.Millisecond,
		"commented once over several intervals, and not while gpu-lost.gpu-7.a's test runs")

	// The first attempt gives no answer and is retried: still no verdict,
	// no comment.
	retrying := *reset.DeepCopy()
	retrying.Status.Validation.Attempt, retrying.Status.Validation.PodName = 2, ""
	retrying.Status.Validation.NoAnswer = "no report after 20m0s; pod kubemedic-system/gpu-lost.gpu-7.a-validate-1 does not exist"
	ops.set([]v1alpha1.NodeOperation{retrying, failed, old, other}, nil)
	require.Never(t, func() bool { return len(validations()) != 1 }, 400*time.Millisecond, 50*time.Millisecond, "no comment while the test retries")

	// A restart reads the marks back from GitHub; the retried test then
	// passes and gets its comment, and nothing is commented twice.
	e.restart()
	ops.set([]v1alpha1.NodeOperation{validationEnded(retrying, v1alpha1.ValidationPassed, time.Now().UTC()), failed, old, other}, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, validations(), 2) }, 5*time.Second, 50*time.Millisecond)
	require.Never(t, func() bool { return len(validations()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "nothing commented twice after the restart")
	passed := validations()[1]
	for _, want := range []string{
		"**GPU validation passed** on node `gpu-7` after kubemedic's `reset-gpu` (NodeOperation `gpu-lost.gpu-7.a`",
		"- Attempt 2 of 2",
		"- The first attempt gave no answer, which is no pass, and was retried: no report after 20m0s",
		"- GPUs: 2 tested, 2 passed",
		"kubemedic lifted its own cordon",
		"<!-- kubemedic-alertbridge diagnostics=uid-gpu-lost.gpu-7.a/validation -->",
	} {
		require.Contains(t, passed, want)
	}
	require.Equal(t, float64(1), e.metric("kubemedic_alertbridge_validation_comments_total", map[string]string{"result": "posted"}), "since the restart")
	require.Equal(t, float64(1), e.metric("kubemedic_alertbridge_validation_comments_total", map[string]string{"result": "found"}), "gpu-lost.gpu-7.b's, read back")
	require.Equal(t, float64(0), e.metric("kubemedic_alertbridge_diagnostics_comments_total", map[string]string{"result": "posted"}))
	for _, c := range validations() {
		require.NotContains(t, c, "gpu-9")
		require.NotContains(t, c, "gpu-7.old")
	}

	// A resolved, closed issue gets no more comments.
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", true)))
	e.settle()
	later := validationEnded(validating("gpu-lost.gpu-7.c", "gpu-7", now), v1alpha1.ValidationFailed, time.Now().UTC())
	ops.set(append(ops.ops, later), nil)
	require.Never(t, func() bool { return len(validations()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "a closed issue is left alone")
}

// TestDiagnosticsAndValidationOfOneOperation: an operation whose capture
// left a bundle and whose test ended gets both comments, each once, the
// capture's first, and neither again after a restart.
func TestDiagnosticsAndValidationOfOneOperation(t *testing.T) {
	now := time.Now().UTC()
	op := captured("gpu-lost.gpu-7.a", "gpu-7", now.Add(-20*time.Minute))
	op.Status.Validation = validating("gpu-lost.gpu-7.a", "gpu-7", now.Add(-15*time.Minute)).Status.Validation
	op = validationEnded(op, v1alpha1.ValidationFailed, now.Add(-time.Minute))
	ops := &fakeOps{ops: []v1alpha1.NodeOperation{op}}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, nil))

	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	about := func() []string {
		var out []string
		for _, c := range e.fake.Comments(repo, is.Number) {
			switch {
			case strings.Contains(c, "**Diagnostics kept**"):
				out = append(out, "diagnostics")
			case strings.Contains(c, validationTitle):
				out = append(out, "validation")
			}
		}
		return out
	}
	both := []string{"diagnostics", "validation"}
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, both, about()) }, 5*time.Second, 50*time.Millisecond)
	require.Len(t, commentsWith(e, is.Number, "<!-- kubemedic-alertbridge diagnostics=uid-gpu-lost.gpu-7.a -->"), 1)
	require.Len(t, commentsWith(e, is.Number, "<!-- kubemedic-alertbridge diagnostics=uid-gpu-lost.gpu-7.a/validation -->"), 1)
	require.Never(t, func() bool { return len(about()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "each once, over several intervals")

	// After a restart the first comment due (the capture's) has the
	// issue's comments read, which finds both marks.
	e.restart()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, float64(1), e.metric("kubemedic_alertbridge_diagnostics_comments_total", map[string]string{"result": "found"}))
	}, 5*time.Second, 50*time.Millisecond, "the marks read back after the restart")
	require.Never(t, func() bool { return len(about()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "neither commented twice after the restart")
	require.Equal(t, both, about())
	for _, m := range []string{"kubemedic_alertbridge_diagnostics_comments_total", "kubemedic_alertbridge_validation_comments_total"} {
		require.Equal(t, float64(0), e.metric(m, map[string]string{"result": "posted"}), m)
	}
}

// TestValidationCommentLostAnswer: GitHub makes the comment and its answer
// is lost, and the client's own check for it fails too; the next try reads
// the issue's comments again, finds the mark, and does not comment twice.
func TestValidationCommentLostAnswer(t *testing.T) {
	now := time.Now().UTC()
	ops := &fakeOps{}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, nil))
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)

	// The first comment POST is made and answered 502; the client's check
	// (a GET of the comments) is then answered 404, which it gives up on.
	var mu sync.Mutex
	posted, checked := false, false
	e.fake.SetFault(func(r *http.Request) *ghfake.Fault {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !posted && ghfake.EndpointOf(r) == ghfake.EndpointCreateComment:
			posted = true
			return &ghfake.Fault{Status: http.StatusBadGateway, Apply: true, Body: "bad gateway"}
		case posted && !checked && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/comments"):
			checked = true
			return &ghfake.Fault{Status: http.StatusNotFound, Body: `{"message":"Not Found"}`}
		}
		return nil
	})
	ops.set([]v1alpha1.NodeOperation{validationEnded(validating("gpu-lost.gpu-7.a", "gpu-7", now.Add(-15*time.Minute)), v1alpha1.ValidationFailed, now)}, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, float64(1), e.metric("kubemedic_alertbridge_validation_comments_total", map[string]string{"result": "error"}))
		require.Equal(c, float64(1), e.metric("kubemedic_alertbridge_validation_comments_total", map[string]string{"result": "found"}))
	}, 10*time.Second, 50*time.Millisecond, "the failed comment, then its mark found")
	require.Never(t, func() bool { return len(commentsWith(e, is.Number, validationTitle)) != 1 }, 400*time.Millisecond, 50*time.Millisecond, "commented once")
	require.Equal(t, float64(0), e.metric("kubemedic_alertbridge_validation_comments_total", map[string]string{"result": "posted"}))
}
