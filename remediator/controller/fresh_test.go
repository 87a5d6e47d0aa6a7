package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
