package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// CachedNodes on a real API server: every node the cache holds, stripped
// as the cache strips them, the cache's own objects (the same pointers on
// a second call: nothing is copied), and a node created later once the
// cache has it.
func TestCachedNodes(t *testing.T) {
	env := apiServer(t, localcluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, err := env.CreateGPUNodes(ctx, 3, localcluster.NodeSpec{})
	require.NoError(t, err)

	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, ByObject: CacheOptions("kubemedic-system").ByObject})
	require.NoError(t, err)
	go func() { _ = c.Start(ctx) }()
	require.True(t, c.WaitForCacheSync(ctx))
	list := CachedNodes(c)

	names := func(ns []*corev1.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		slices.Sort(out)
		return out
	}
	var first []*corev1.Node
	require.Eventually(t, func() bool {
		first, err = list(ctx)
		require.NoError(t, err)
		return len(first) == 3
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"gpu-node-000", "gpu-node-001", "gpu-node-002"}, names(first))
	for _, n := range first {
		require.Nil(t, n.ManagedFields, "%s: stripped as the cache strips nodes", n.Name)
	}
	again, err := list(ctx)
	require.NoError(t, err)
	byName := map[string]*corev1.Node{}
	for _, n := range again {
		byName[n.Name] = n
	}
	for _, n := range first {
		require.Same(t, n, byName[n.Name], "%s: the cache's object, not a copy", n.Name)
	}

	require.NoError(t, env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-node-000"}}))
	require.Eventually(t, func() bool {
		ns, err := list(ctx)
		require.NoError(t, err)
		return slices.Contains(names(ns), "cpu-node-000")
	}, 10*time.Second, 20*time.Millisecond)
}
