package notify

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTTLCache(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := newTTLCache(3, time.Minute)

	c.put("a", "1", now)
	v, ok := c.get("a", now.Add(59*time.Second))
	require.True(t, ok)
	require.Equal(t, "1", v)
	_, ok = c.get("a", now.Add(time.Minute))
	require.False(t, ok, "expired at ttl")
	require.Empty(t, c.entries, "an expired entry is dropped when read")

	t.Run("bounded", func(t *testing.T) {
		c := newTTLCache(3, time.Minute)
		for i := range 10 {
			c.put(fmt.Sprint(i), "v", now.Add(time.Duration(i)*time.Second))
		}
		require.Len(t, c.entries, 3)
		for _, k := range []string{"7", "8", "9"} {
			_, ok := c.get(k, now.Add(10*time.Second))
			require.True(t, ok, "the newest entries stay: %s", k)
		}
	})
	t.Run("expired entries go first", func(t *testing.T) {
		c := newTTLCache(2, time.Minute)
		c.put("old", "v", now)
		c.put("new", "v", now.Add(50*time.Second))
		c.put("newer", "v", now.Add(61*time.Second))
		_, ok := c.get("new", now.Add(61*time.Second))
		require.True(t, ok)
		require.Len(t, c.entries, 2)
	})
	t.Run("overwrite does not evict", func(t *testing.T) {
		c := newTTLCache(2, time.Minute)
		c.put("a", "1", now)
		c.put("b", "1", now)
		c.put("a", "2", now)
		require.Len(t, c.entries, 2)
		v, _ := c.get("a", now)
		require.Equal(t, "2", v)
	})
}
