package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/kube"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// kubelet serves /pods like the kubelet's read-only view, checking the token.
func kubelet(t *testing.T, token, body string) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/pods" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func tokenFile(t *testing.T, token string) string {
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte(token), 0o600))
	return p
}

func TestNodePodsFromKubelet(t *testing.T) {
	srv := kubelet(t, "s3cret", `{"kind":"PodList","items":[
	  {"metadata":{"uid":"74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77","namespace":"ml","name":"train-0"}},
	  {"metadata":{"uid":"0b6e5d7c-1111-2222-3333-444455556666","namespace":"ml","name":"old","deletionTimestamp":"2026-11-21T10:00:00Z"}},
	  {"metadata":{"uid":"5a6b7c8d-0000-1111-2222-333344445555","namespace":"kube-system","name":"etcd-gpu-1",
	    "annotations":{"kubernetes.io/config.mirror":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}}}]}`)
	// Token files end in a newline more often than not.
	c := kube.New(kube.Options{KubeletURL: srv.URL, TokenFile: tokenFile(t, "s3cret\n"), KubeletInsecure: true, Timeout: time.Second})
	pods, source, err := c.NodePods(context.Background(), "gpu-1")
	require.NoError(t, err)
	require.Equal(t, "kubelet", source)
	require.Len(t, pods, 3)
	require.Equal(t, "9f8e7d6c5b4a39281706f5e4d3c2b1a0", pods[2].UID, "a mirror pod stands for its static pod, whose cgroup has the hash")
	require.Equal(t, "74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77", pods[0].UID)
	require.Nil(t, pods[0].DeletionTimestamp)
	require.Equal(t, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), pods[1].DeletionTimestamp.UTC())
}

func TestNodePodsErrorsWhenNothingAnswers(t *testing.T) {
	srv := kubelet(t, "right", `{"items":[]}`)
	c := kube.New(kube.Options{KubeletURL: srv.URL, TokenFile: tokenFile(t, "wrong"), KubeletInsecure: true, Timeout: time.Second,
		Kubeconfig: filepath.Join(t.TempDir(), "missing-kubeconfig")})
	pods, _, err := c.NodePods(context.Background(), "gpu-1")
	require.Error(t, err)
	require.Nil(t, pods, "an unknown pod set must never look empty")
	require.ErrorContains(t, err, "HTTP 401")
	require.ErrorContains(t, err, "missing-kubeconfig")
	require.NotContains(t, err.Error(), "wrong", "the token must not leak into errors")
}

// TestAgainstAPIServer uses a real kube-apiserver: the node's labels, and
// the pods of one node through the field-selector fallback when the kubelet
// does not answer.
func TestAgainstAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	nodes, err := env.CreateGPUNodes(ctx, 2, localcluster.NodeSpec{GPUs: 8})
	require.NoError(t, err)
	mine, other := nodes[0].Name, nodes[1].Name
	for i, n := range []string{mine, mine, other} {
		_, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "ml", Name: "p" + string(rune('a'+i)), NodeName: n, GPUs: 1})
		require.NoError(t, err)
	}

	c := kube.New(kube.Options{Kubeconfig: env.Kubeconfig, KubeletURL: "https://127.0.0.1:1", TokenFile: "/nonexistent", Timeout: 5 * time.Second})
	labels, err := c.NodeLabels(ctx, mine)
	require.NoError(t, err)
	require.Equal(t, "8", labels[localcluster.LabelGPUCount])

	pods, source, err := c.NodePods(ctx, mine)
	require.NoError(t, err)
	require.Equal(t, "apiserver", source)
	require.Len(t, pods, 2, "only the pods bound to this node")
	for _, p := range pods {
		require.Equal(t, "ml", p.Namespace)
	}

	_, err = c.NodeLabels(ctx, "no-such-node")
	require.ErrorContains(t, err, "HTTP 404")
}
