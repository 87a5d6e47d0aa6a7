package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestDiagListAndGet: against a real API server and a real S3 store, diag
// list shows a node's captures and diag get downloads a bundle through its
// link, writing it only when its sha256 is the one the status records.
func TestDiagListAndGet(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	s3 := harness.S3(t)
	ctx := context.Background()
	store, err := diagstore.New(diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		diagstore.Credentials{AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	require.NoError(t, err)
	bundle := []byte("a bundle's bytes, gzipped in real life")
	sum := sha256.Sum256(bundle)
	hexSum := hex.EncodeToString(sum[:])
	key := "gpu-node-001/reset.tar.gz"
	require.NoError(t, store.Put(ctx, key, bytes.NewReader(bundle), int64(len(bundle)), hexSum, ""))
	link, err := store.Link(ctx, key, time.Hour)
	require.NoError(t, err)

	mk := func(name string, b *v1alpha1.DiagnosticsBundle) {
		op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelNode: plan.LabelValue("gpu-node-001")}},
			Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-node-001", Policy: "gpu-xid-reset", Step: "reset-gpu", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}}}
		require.NoError(t, env.Client.Create(ctx, op))
		done := metav1.Now()
		op.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured, CompletionTime: &done, Bundle: b}
		require.NoError(t, env.Client.Status().Update(ctx, op))
	}
	exp := metav1.NewTime(time.Now().Add(time.Hour))
	mk("reset", &v1alpha1.DiagnosticsBundle{Key: key, Size: int64(len(bundle)), SHA256: hexSum, Stored: true, URL: link.String(), URLExpires: &exp})
	mk("tampered", &v1alpha1.DiagnosticsBundle{Key: key, Size: int64(len(bundle)), SHA256: strings.Repeat("0", 64), Stored: true, URL: link.String(), URLExpires: &exp})
	mk("spooled", &v1alpha1.DiagnosticsBundle{Key: "gpu-node-001/spooled.tar.gz", Size: 10, SHA256: hexSum})

	code, out, errOut := simRun("diag", "list", "gpu-node-001", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "NODEOPERATION")
	require.Regexp(t, `reset\s+reset-gpu\s+Captured\s+\S+\s+38\s+store: gpu-node-001/reset.tar.gz\s+`+hexSum, out)
	require.Contains(t, out, "node's spool")
	code, out, _ = simRun("diag", "list", "gpu-node-009", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code)
	require.Contains(t, out, "No captures on node gpu-node-009")

	dir := t.TempDir()
	path := filepath.Join(dir, "reset.tar.gz")
	code, out, errOut = simRun("diag", "get", "reset", "-o", path, "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(checked)")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, bundle, got)

	bad := filepath.Join(dir, "tampered.tar.gz")
	code, _, errOut = simRun("diag", "get", "tampered", "-o", bad, "--kubeconfig", env.Kubeconfig)
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "the status records "+strings.Repeat("0", 64)+"; nothing written")
	_, err = os.Stat(bad)
	require.True(t, os.IsNotExist(err), "a bundle whose sha256 does not match is not written")
	left, err := filepath.Glob(filepath.Join(dir, ".kubemedic-diag-*"))
	require.NoError(t, err)
	require.Empty(t, left)

	code, _, errOut = simRun("diag", "get", "spooled", "-o", filepath.Join(dir, "s.tar.gz"), "--kubeconfig", env.Kubeconfig)
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "waits in node gpu-node-001's spool")

	// flush asks the remediator, through the Node's annotation.
	require.NoError(t, env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-001"}}))
	code, out, errOut = simRun("diag", "flush", "gpu-node-001", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Asked the remediator to flush node gpu-node-001's diagnostics spool")
	var n corev1.Node
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "gpu-node-001"}, &n))
	asked, err := time.Parse(time.RFC3339, n.Annotations[v1alpha1.AnnotationDiagnosticsFlush])
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), asked, time.Minute)
	code, _, errOut = simRun("diag", "flush", "gpu-node-404", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "node gpu-node-404")

	var op v1alpha1.NodeOperation
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "reset"}, &op))
	_, err = getBundle(ctx, http.DefaultClient, &op, time.Now().Add(2*time.Hour), filepath.Join(dir, "late.tar.gz"))
	require.ErrorContains(t, err, "the link to gpu-node-001/reset.tar.gz expired at")
}
