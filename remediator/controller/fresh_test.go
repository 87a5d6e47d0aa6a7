package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestRequeueAfter(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	now := start.Add(40 * time.Millisecond) // the pass took 40 ms
	for _, tc := range []struct {
		desc string
		next time.Time
		want time.Duration
	}{
		{"a for that runs out in 7 ms is looked at then, not a second later", now.Add(7 * time.Millisecond), 7 * time.Millisecond},
		{"counted from the pass's end, not its start", start.Add(100 * time.Millisecond), 60 * time.Millisecond},
		{"an hour ahead", now.Add(time.Hour), time.Hour},
		{"came while the pass ran: at once", start.Add(10 * time.Millisecond), time.Millisecond},
		{"came as the pass ended: at once", now, time.Millisecond},
		{"had come when the pass began: a second, never a loop", start, time.Second},
		{"long past", start.Add(-time.Minute), time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, requeueAfter(tc.next, start, now))
		})
	}
}

// laggingCache answers the versions of versions in turn, then the last.
type laggingCache struct {
	client.Reader
	versions []string
	gets     int
	err      error
}

func (c *laggingCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c.err != nil {
		return c.err
	}
	obj.SetResourceVersion(c.versions[min(c.gets, len(c.versions)-1)])
	c.gets++
	return nil
}

func TestAwaitOwnWrite(t *testing.T) {
	written := &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "12"}}
	for _, tc := range []struct {
		desc     string
		cache    *laggingCache
		was      string
		wantGets int
	}{
		{"the cache holds the write at once", &laggingCache{versions: []string{"12"}}, "10", 1},
		{"the cache holds the old version twice, then the write", &laggingCache{versions: []string{"10", "10", "12"}}, "10", 3},
		{"the cache jumps past the write: not waited for", &laggingCache{versions: []string{"10", "15"}}, "10", 2},
		{"nothing written", &laggingCache{versions: []string{"10"}}, "12", 0},
		{"an error ends the wait", &laggingCache{err: errors.New("cache stopped")}, "10", 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			start := time.Now()
			awaitOwnWrite(context.Background(), tc.cache, written, tc.was)
			require.Equal(t, tc.wantGets, tc.cache.gets)
			require.Less(t, time.Since(start), time.Second)
			require.Equal(t, "12", written.ResourceVersion, "the object is not changed")
		})
	}
	t.Run("a cache that never catches up is polled until the context ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		c := &laggingCache{versions: []string{"10"}}
		start := time.Now()
		awaitOwnWrite(ctx, c, written, "10")
		require.Less(t, time.Since(start), cacheCatchUp)
		require.Greater(t, c.gets, 1)
	})
}

// notYetCache answers NotFound for the first misses Gets.
type notYetCache struct {
	client.Reader
	misses, gets int
}

func (c *notYetCache) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	c.gets++
	if c.gets <= c.misses {
		return apierrors.NewNotFound(schema.GroupResource{Group: "kubemedic.io", Resource: "nodeoperations"}, key.Name)
	}
	return nil
}

func TestAwaitCached(t *testing.T) {
	op := func(name string) client.Object {
		return &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	c := &notYetCache{misses: 3}
	awaitCached(context.Background(), c, []client.Object{op("a"), nil, op("b")})
	require.Equal(t, 5, c.gets, "a: 3 misses then found; the nil entry skipped; b: found at once")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	never := &notYetCache{misses: 1 << 30}
	start := time.Now()
	awaitCached(ctx, never, []client.Object{op("a"), op("b")})
	require.Less(t, time.Since(start), time.Second, "ends with its context")
	require.Greater(t, never.gets, 1)
}
