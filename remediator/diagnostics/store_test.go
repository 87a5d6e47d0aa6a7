package diagnostics

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

func storeFor(t *testing.T, s3 *localcluster.S3) *Store {
	t.Helper()
	st, err := NewStore(StoreConfig{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true}, Credentials{AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	require.NoError(t, err)
	return st
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// The store holds exactly what was put, says so only for the same bytes,
// and hands it out through a presigned link only: the bucket is private.
func TestStoreAgainstARealS3Server(t *testing.T) {
	s3 := harness.S3(t)
	st := storeFor(t, s3)
	ctx := context.Background()
	body := []byte("a bundle's bytes")
	key := "gpu-node-001/op-1.tar.gz"

	ok, err := st.Exists(ctx, key, int64(len(body)), sum(body))
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, st.Put(ctx, key, bytes.NewReader(body), int64(len(body)), sum(body), "GPU-6ee485d3-0000-4000-8000-000000000000"))
	ok, err = st.Exists(ctx, key, int64(len(body)), sum(body))
	require.NoError(t, err)
	require.True(t, ok)
	_, err = st.Exists(ctx, key, int64(len(body)), sum([]byte("other bytes!!!!!")))
	require.ErrorContains(t, err, "the store records sha256", "other bytes under the key are an error, never overwritten")

	u, err := st.Link(ctx, key, time.Hour)
	require.NoError(t, err)
	resp, err := http.Get(u.String())
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, body, got)

	plain, err := http.Get("http://" + s3.Endpoint + "/" + s3.Bucket + "/" + key)
	require.NoError(t, err)
	plain.Body.Close()
	require.Equal(t, http.StatusForbidden, plain.StatusCode, "the bucket is not public")

	_, err = st.Link(ctx, key, 8*24*time.Hour)
	require.ErrorContains(t, err, "at most 168h0m0s")

	objs, err := st.List(ctx, "gpu-node-001/")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Equal(t, key, objs[0].Key)
	require.EqualValues(t, len(body), objs[0].Size)
	st1, err := st.Stat(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "GPU-6ee485d3-0000-4000-8000-000000000000", st1.GPU, "the GPU's UUID is kept with the object, for retention")
	require.Equal(t, sum(body), st1.SHA256)
	_, err = st.Stat(ctx, "gpu-node-001/none.tar.gz")
	require.ErrorIs(t, err, ErrNotFound)

	var buf bytes.Buffer
	n, err := st.Get(ctx, key, &buf)
	require.NoError(t, err)
	require.EqualValues(t, len(body), n)
	require.Equal(t, body, buf.Bytes())

	bad, err := NewStore(StoreConfig{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true}, Credentials{AccessKey: s3.AccessKey, SecretKey: "wrong-secret-0123456789"})
	require.NoError(t, err)
	err = bad.Put(ctx, "x/y.tar.gz", bytes.NewReader(body), int64(len(body)), sum(body), "")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-secret", "an error never carries the secret")
	require.Equal(t, "access key kubemedic-test, secret key (hidden)", Credentials{AccessKey: "kubemedic-test", SecretKey: "s"}.String())
}

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
	spool := filepath.Join(string(root), SpoolDir)
	// An older capture's bundle, left behind while the store was down.
	old := &Capture{Root: root, Node: "gpu-node-001", Operation: "op-old", Parts: DefaultParts(5*time.Second, DefaultKmsg)[:1], Spool: spool, Now: time.Now}
	_, oldSp, err := old.Run(context.Background())
	require.NoError(t, err)

	env := map[string]string{
		EnvEndpoint: s3.Endpoint, EnvBucket: s3.Bucket, EnvInsecure: "true",
		EnvAccessKey: s3.AccessKey, EnvSecretKey: s3.SecretKey,
		EnvNode: "gpu-node-001", EnvOperation: "op-new",
		EnvTriggerType: "GPUXidError", EnvTriggerReason: "KubemedicDetect", EnvTriggerMsg: "XidResetRequired: Xid 46 on 0000:18:00.0",
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	var out, errOut bytes.Buffer
	code := Main([]string{"capture", "--root=" + string(root), "--termination-log=" + termLog, "--bug-report-timeout=5s"}, &out, &errOut, func(k string) string { return env[k] })
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	b, err := os.ReadFile(termLog)
	require.NoError(t, err)
	r, err := ParseReport(b)
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
