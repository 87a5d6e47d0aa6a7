package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/cmd/kubemedic-demo/demo"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// TestProofOfHealth: the demo's stories of issue 31 on the real scheduler,
// controllers, remediator and alertbridge, with the GPU tests played by
// the real kubemedic-validate on DCGM's real output.
//
//   - silent-gpu: a reset clears the Xid and every passive check, but
//     DCGM's memory test fails GPU 0: the node is never uncordoned; both
//     repairs fail ValidationFailed, GPUValidationFailed=True (DCGMDiagFailed),
//     the node is quarantined, and the node's issue names the test and the
//     GPU's UUID.
//   - new-node: a node registered with the taint kubemedic.io/unvalidated
//     is tested by a pod bound to it, and released on the pass.
//   - background: a background test runs on a node whose GPUs came free,
//     and a training pod that needs them preempts it; the timeline shows
//     the test start, its preemption and the pod bound in its place.
func TestProofOfHealth(t *testing.T) {
	w := startWorld(t)
	ctx := context.Background()
	// Registered first, so it runs after the subtests: the remediator
	// logged no error in these stories (the failed tests are the story,
	// and are Events and conditions, not errors), nor did the background
	// tests' churn on the busy nodes.
	t.Cleanup(func() {
		require.NoError(t, w.Stop())
		requireNoErrorLines(t, processNamed(t, w, "kubemedic-remediator").LogPath())
	})
	var silent string

	t.Run("silent-gpu", func(t *testing.T) {
		s := runScenario(t, w, "silent-gpu")
		node := s.Node
		silent = node
		bad := localcluster.GPUUUID(node, 0)
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
		require.True(t, plan.Quarantined(&n) && n.Spec.Unschedulable, "node %s quarantined", node)
		c := localcluster.FindNodeCondition(&n, v1alpha1.ConditionGPUValidationFailed)
		require.NotNil(t, c, "GPUValidationFailed set")
		require.Equal(t, corev1.ConditionTrue, c.Status)
		require.Equal(t, v1alpha1.ReasonDCGMDiagFailed, c.Reason)
		require.Contains(t, c.Message, bad)
		xid := localcluster.FindNodeCondition(&n, v1alpha1.ConditionGPUXidError)
		require.NotNil(t, xid)
		require.Equal(t, corev1.ConditionFalse, xid.Status, "every passive check is clean: the reset cleared the Xid")

		var ops v1alpha1.NodeOperationList
		require.NoError(t, w.Cluster.Client.List(ctx, &ops))
		byStep := map[string]v1alpha1.NodeOperation{}
		for _, op := range ops.Items {
			if op.Spec.NodeName == node {
				require.Equal(t, "gpu-xid-reset-validated", op.Spec.Policy, "one ladder on the node: %s", op.Name)
				byStep[stepOf(op)] = op
			}
		}
		require.Len(t, byStep, 3, "reset, reboot, quarantine: %v", byStep)
		for _, step := range []string{"reset-gpu", "reboot"} {
			op, ok := byStep[step]
			require.True(t, ok, step)
			require.Equal(t, v1alpha1.PhaseFailed, op.Status.Phase, "%s: %s", step, op.Status.Message)
			require.Contains(t, op.Status.Message, v1alpha1.ReasonValidationFailed, step)
			vc := meta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationValidated)
			require.NotNil(t, vc, step)
			require.Equal(t, metav1.ConditionFalse, vc.Status, step)
			require.Equal(t, v1alpha1.ReasonValidationFailed, vc.Reason, step)
			require.Equal(t, []string{bad}, plan.FailingGPUs(op.Status.Validation), "%s: the silent GPU alone", step)
			verified := meta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationVerified)
			require.NotNil(t, verified, "%s was verified by the passive checks before its test", step)
		}

		// The issue shows the failing test and GPU: one comment per failed
		// test, by the alertbridge.
		is, ok := findIssueWithComment(t, w, s, node, "**GPU validation failed**")
		require.True(t, ok, "an issue about %s with a comment on the failed test", node)
		var failed []string
		for _, body := range w.GitHub.Comments(demo.Repo, is) {
			if strings.Contains(body, "**GPU validation failed**") {
				failed = append(failed, body)
				require.Contains(t, body, "`"+bad+"`", "the failing GPU by UUID")
				require.Contains(t, body, "GPU Memory", "the failing test")
				require.Contains(t, body, "validate-dcgm")
			}
		}
		require.Len(t, failed, 2, "one comment per failed test (the reset's, the reboot's)")
	})

	t.Run("new-node", func(t *testing.T) {
		s := runScenario(t, w, "new-node")
		node := s.Node
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
		require.False(t, plan.HasTaint(&n, v1alpha1.TaintUnvalidated), "released")
		require.False(t, n.Spec.Unschedulable)
		var nv v1alpha1.NodeValidation
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &nv))
		require.Equal(t, v1alpha1.ValidationJoin, nv.Status.Mode)
		require.NotNil(t, nv.Status.Last)
		require.Equal(t, v1alpha1.ValidationPassed, nv.Status.Last.Result, nv.Status.Message)
		require.Equal(t, string(n.UID), nv.Spec.NodeUID, "the record is about this Node object")
		// Nothing was placed on the node before the pass: its first
		// workload pod, if any, was bound after the taint was removed.
		var pods corev1.PodList
		require.NoError(t, w.Cluster.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}))
		for _, p := range pods.Items {
			if p.Labels[v1alpha1.LabelValidationPolicy] != "" {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					require.False(t, c.LastTransitionTime.Time.Before(nv.Status.Last.CompletionTime.Time.Truncate(time.Second)),
						"pod %s/%s was bound to %s before its test passed", p.Namespace, p.Name, node)
				}
			}
		}
	})

	t.Run("background", func(t *testing.T) {
		s := runScenario(t, w, "background")
		node := s.Node
		var pre []demo.Preemption
		for _, p := range s.Timeline.Preemptions() {
			if p.Node == node {
				pre = append(pre, p)
			}
		}
		require.Len(t, pre, 1, "the timeline saw one background test on %s start and be preempted: %+v", node, s.Timeline.Preemptions())
		p := pre[0]
		require.Contains(t, []string{"PreemptionByScheduler", ""}, p.Reason, "preempted by the scheduler, or seen gone")
		require.False(t, p.PreemptedAt.Before(p.StartedAt))
		require.True(t, strings.HasPrefix(p.Pod, "research/train-whole-"+node+"-"), "the training pod was bound in its place: %+v", p)
		t.Logf("background test %s on %s: ran %s, preempted; %s bound %s after the preemption (timeline polls every 500 ms)",
			p.Test, node, p.PreemptedAt.Sub(p.StartedAt).Round(100*time.Millisecond), p.Pod, p.BoundAt.Sub(p.PreemptedAt).Round(100*time.Millisecond))

		var nv v1alpha1.NodeValidation
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &nv))
		require.Equal(t, v1alpha1.ValidationBackground, nv.Status.Mode)
		require.EqualValues(t, 1, nv.Status.Preemptions)
		require.Nil(t, nv.Status.Last, "a preempted test is no result")
		require.Contains(t, nv.Status.Message, "preempted")
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
		require.False(t, n.Spec.Unschedulable, "a background test never cordons")
	})

	// The quarantined node still says why: nothing cleared its failed test.
	if silent != "" {
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: silent}, &n))
		c := localcluster.FindNodeCondition(&n, v1alpha1.ConditionGPUValidationFailed)
		require.NotNil(t, c)
		require.Equal(t, corev1.ConditionTrue, c.Status, "GPUValidationFailed on the quarantined %s at the end: %s %s", silent, c.Reason, c.Message)
	}
}

// findIssueWithComment is the number of an issue of the GitHub stand-in
// that names node and has a comment containing text.
func findIssueWithComment(t *testing.T, w *demo.World, s *demo.Session, node, text string) (int, bool) {
	t.Helper()
	issues, err := s.Issues(context.Background(), node)
	require.NoError(t, err)
	for _, is := range issues {
		for _, body := range w.GitHub.Comments(demo.Repo, is.GetNumber()) {
			if strings.Contains(body, text) {
				return is.GetNumber(), true
			}
		}
	}
	return 0, false
}
