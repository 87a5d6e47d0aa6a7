package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

func storeFor(t *testing.T, s3 *localcluster.S3) *Store {
	t.Helper()
	st, err := New(Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true}, Credentials{AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
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

	bad, err := New(Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true}, Credentials{AccessKey: s3.AccessKey, SecretKey: "wrong-secret-0123456789"})
	require.NoError(t, err)
	err = bad.Put(ctx, "x/y.tar.gz", bytes.NewReader(body), int64(len(body)), sum(body), "")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-secret", "an error never carries the secret")
	require.Equal(t, "access key kubemedic-test, secret key (hidden)", Credentials{AccessKey: "kubemedic-test", SecretKey: "s"}.String())
}
