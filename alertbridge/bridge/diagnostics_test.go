package bridge_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// captured is a finished operation on node whose capture left a stored,
// linked bundle at the time given.
func captured(name, node string, at time.Time) v1alpha1.NodeOperation {
	op := nodeOp(name, node, at, v1alpha1.PhaseSucceeded, "Verified")
	op.UID = types.UID("uid-" + name)
	done, exp := metav1.NewTime(at), metav1.NewTime(at.Add(7*24*time.Hour))
	op.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsPartial, Template: "collect-gpu-diagnostics",
		CompletionTime: &done, FailedParts: []string{"nvidia-bug-report (timed out after 3m0s)"},
		Bundle: &v1alpha1.DiagnosticsBundle{Key: node + "/" + name + ".tar.gz", Size: 48213, SHA256: strings.Repeat("5e", 32),
			Files: []string{"manifest.json", "xid.log", "nvidia-smi-q.txt"}, Stored: true,
			URL: "https://s3.example.com/kubemedic-diagnostics/" + node + "/" + name + ".tar.gz?X-Amz-Signature=abc", URLExpires: &exp}}
	return op
}

// TestDiagnosticsCommentedOnce: the open issue of a node gets one comment
// per stored bundle of the node's operations, with the link, the sha256,
// the files and what failed; not again at the next interval, nor after a
// restart; not for a bundle still in a node's spool, an older episode's,
// or another node's.
func TestDiagnosticsCommentedOnce(t *testing.T) {
	now := time.Now().UTC()
	reset := captured("gpu-lost.gpu-7.a", "gpu-7", now.Add(-time.Minute))
	reset.Status.Diagnostics.Cluster = &v1alpha1.DiagnosticsBundle{Key: "gpu-7/gpu-lost.gpu-7.a-cluster.tar.gz", Size: 2048, SHA256: strings.Repeat("c1", 32),
		Stored: true, URL: "https://s3.example.com/kubemedic-diagnostics/gpu-7/gpu-lost.gpu-7.a-cluster.tar.gz?X-Amz-Signature=def"}
	spooled := captured("gpu-lost.gpu-7.b", "gpu-7", now.Add(-30*time.Second))
	spooled.Status.Diagnostics.Bundle.Stored, spooled.Status.Diagnostics.Bundle.URL = false, ""
	old := captured("gpu-lost.gpu-7.old", "gpu-7", now.Add(-48*time.Hour))
	other := captured("gpu-lost.gpu-9.a", "gpu-9", now)
	ops := &fakeOps{ops: []v1alpha1.NodeOperation{spooled, old, other, reset}}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, nil))

	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	diagComments := func() []string {
		var out []string
		for _, c := range e.fake.Comments(repo, is.Number) {
			if strings.Contains(c, "**Diagnostics kept**") {
				out = append(out, c)
			}
		}
		return out
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, diagComments(), 1) }, 5*time.Second, 50*time.Millisecond)
	got := diagComments()[0]
	for _, want := range []string{
		"on node `gpu-7` before kubemedic's `reset-gpu` (NodeOperation `gpu-lost.gpu-7.a`",
		"[`gpu-7/gpu-lost.gpu-7.a.tar.gz`](https://s3.example.com/kubemedic-diagnostics/gpu-7/gpu-lost.gpu-7.a.tar.gz?X-Amz-Signature=abc) (47.1 KiB, valid until ",
		"- sha256: `" + strings.Repeat("5e", 32) + "`",
		"**Partial**; not captured: nvidia-bug-report (timed out after 3m0s)",
		"- Files: `manifest.json`, `xid.log`, `nvidia-smi-q.txt`",
		"- What the API server knew (the Node, its Events, its NodeOperations, the GPU Operator's logs): [`gpu-7/gpu-lost.gpu-7.a-cluster.tar.gz`](https://s3.example.com/kubemedic-diagnostics/gpu-7/gpu-lost.gpu-7.a-cluster.tar.gz?X-Amz-Signature=def) (2.0 KiB), sha256 `" + strings.Repeat("c1", 32) + "`",
		"<!-- kubemedic-alertbridge diagnostics=uid-gpu-lost.gpu-7.a -->",
	} {
		require.Contains(t, got, want)
	}
	require.Never(t, func() bool { return len(diagComments()) != 1 }, 400*time.Millisecond, 50*time.Millisecond, "commented once, over several intervals")

	// The spooled bundle reaches the store: its comment follows. A restart
	// reads the marks back from GitHub and comments nothing twice.
	e.restart()
	stored := captured("gpu-lost.gpu-7.b", "gpu-7", now.Add(-30*time.Second))
	ops.set([]v1alpha1.NodeOperation{stored, old, other, reset}, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, diagComments(), 2) }, 5*time.Second, 50*time.Millisecond)
	require.Never(t, func() bool { return len(diagComments()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "nothing commented twice after the restart")
	require.Contains(t, diagComments()[1], "gpu-lost.gpu-7.b")
	require.Equal(t, float64(1), e.metric("kubemedic_alertbridge_diagnostics_comments_total", map[string]string{"result": "posted"}), "since the restart")
	for _, c := range diagComments() {
		require.NotContains(t, c, "gpu-9")
		require.NotContains(t, c, "gpu-7.old")
	}

	// A resolved, closed issue gets no more comments.
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", true)))
	e.settle()
	ops.set(append(ops.ops, captured("gpu-lost.gpu-7.c", "gpu-7", now)), nil)
	require.Never(t, func() bool { return len(diagComments()) != 2 }, 400*time.Millisecond, 50*time.Millisecond, "a closed issue is left alone")
}
