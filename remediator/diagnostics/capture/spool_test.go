package capture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/test/harness"
)

func storeFor(t *testing.T, s3 *localcluster.S3) *store.Store {
	t.Helper()
	st, err := store.New(store.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true}, store.Credentials{AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	require.NoError(t, err)
	return st
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// The store is down during the capture: the bundle stays in the spool and
// the capture reports it unstored. Once the store is back a flush uploads
// it, once; a bundle the store already holds (a crash after the upload,
// before the spool was cleaned) is not uploaded again.
func TestSpoolKeepsWhatTheStoreHasNotConfirmed(t *testing.T) {
	s3 := harness.S3(t)
	st := storeFor(t, s3)
	root, _ := fakeNode(t)
	spool := t.TempDir()
	ctx := context.Background()

	require.NoError(t, s3.Stop())
	require.True(t, s3.Down())
	c := &Capture{Root: root, Node: "gpu-node-001", Operation: "op-a", Parts: DefaultParts(5*time.Second, DefaultKmsg), Spool: spool, Now: time.Now}
	m, sp, err := c.Run(ctx)
	require.NoError(t, err)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	stored, errs := Flush(fctx, spool, st)
	cancel()
	require.Empty(t, stored)
	require.Len(t, errs, 1)
	r := NewReport(m, sp, false, errs[0], 0)
	require.False(t, r.Stored)
	require.Contains(t, r.Message, "waits in the node's spool")
	_, err = os.Stat(sp.Path)
	require.NoError(t, err, "the bundle stays in the spool")

	require.NoError(t, s3.Start(ctx))
	stored, errs = Flush(ctx, spool, st)
	require.Empty(t, errs)
	require.Equal(t, []string{sp.Key}, stored)
	onDisk, err := os.ReadFile(s3.ObjectPath(sp.Key))
	require.NoError(t, err)
	require.Equal(t, sp.SHA256, sum(onDisk), "the store holds the bundle's bytes")
	left, err := os.ReadDir(spool)
	require.NoError(t, err)
	require.Empty(t, left, "the spool is empty once the store confirmed")

	// A crash after the upload, before the spool was cleaned: the bundle
	// and its sidecar are back in the spool. The flush finds the store has
	// it and removes it without uploading again.
	bundle, err := os.ReadFile(s3.ObjectPath(sp.Key))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(sp.Path, bundle, 0o600))
	side, err := json.Marshal(sp)
	require.NoError(t, err)
	require.NoError(t, writeFileSync(strings.TrimSuffix(sp.Path, bundleExt)+sidecarExt, side))
	// The stored object dates from an hour ago: an upload would renew it.
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(s3.ObjectPath(sp.Key), past, past))
	before, err := os.Stat(s3.ObjectPath(sp.Key))
	require.NoError(t, err)
	stored, errs = Flush(ctx, spool, st)
	require.Empty(t, errs)
	require.Equal(t, []string{sp.Key}, stored)
	after, err := os.Stat(s3.ObjectPath(sp.Key))
	require.NoError(t, err)
	require.Equal(t, before.ModTime(), after.ModTime(), "not uploaded twice")
	objs, err := st.List(ctx, "gpu-node-001/")
	require.NoError(t, err)
	require.Len(t, objs, 1)
}

// kubemedic-diag capture, as the capture pod runs it: the report in the
// termination log says the store holds the bundle, and an older bundle
// left in the spool is flushed on the way.
func TestMainCaptureUploadsAndReports(t *testing.T) {
	s3 := harness.S3(t)
	root, _ := fakeNode(t)
	spool := filepath.Join(string(root), diagnostics.SpoolDir)
	// An older capture's bundle, left behind while the store was down.
	old := &Capture{Root: root, Node: "gpu-node-001", Operation: "op-old", Parts: DefaultParts(5*time.Second, DefaultKmsg)[:1], Spool: spool, Now: time.Now}
	_, oldSp, err := old.Run(context.Background())
	require.NoError(t, err)

	env := map[string]string{
		diagnostics.EnvEndpoint: s3.Endpoint, diagnostics.EnvBucket: s3.Bucket, diagnostics.EnvInsecure: "true",
		diagnostics.EnvAccessKey: s3.AccessKey, diagnostics.EnvSecretKey: s3.SecretKey,
		diagnostics.EnvNode: "gpu-node-001", diagnostics.EnvOperation: "op-new",
		diagnostics.EnvTriggerType: "GPUXidError", diagnostics.EnvTriggerReason: "KubemedicDetect", diagnostics.EnvTriggerMsg: "XidResetRequired: Xid 46 on 0000:18:00.0",
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	var out, errOut bytes.Buffer
	code := Main([]string{"capture", "--root=" + string(root), "--termination-log=" + termLog, "--bug-report-timeout=5s"}, &out, &errOut, func(k string) string { return env[k] })
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	b, err := os.ReadFile(termLog)
	require.NoError(t, err)
	r, err := diagnostics.ParseReport(b)
	require.NoError(t, err)
	require.Equal(t, v1alpha1.DiagnosticsCaptured, r.Result)
	require.True(t, r.Stored)
	require.Equal(t, "gpu-node-001/op-new.tar.gz", r.Key)
	require.Equal(t, 1, r.Flushed, "the older bundle went up too")
	require.NotContains(t, out.String()+errOut.String(), s3.SecretKey, "the secret is never printed")
	for _, k := range []string{r.Key, oldSp.Key} {
		_, err := os.Stat(s3.ObjectPath(k))
		require.NoError(t, err, k)
	}

	// flush with nothing left: exit 0, nothing printed as stored.
	out.Reset()
	code = Main([]string{"flush", "--root=" + string(root), "--termination-log=" + filepath.Join(t.TempDir(), "flush-log")}, &out, &errOut, func(k string) string { return env[k] })
	require.Equal(t, 0, code)
	require.Empty(t, out.String())
}
