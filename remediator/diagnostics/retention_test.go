package diagnostics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExpired(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	objs := []Object{
		{Key: "gpu-1/old.tar.gz", LastModified: now.Add(-31 * 24 * time.Hour)},
		{Key: "gpu-1/old-cluster.tar.gz", LastModified: now.Add(-31 * 24 * time.Hour)},
		{Key: "gpu-1/new.tar.gz", LastModified: now.Add(-29 * 24 * time.Hour)},
		{Key: "gpu-2/old.tar.gz", LastModified: now.Add(-40 * 24 * time.Hour)},
		{Key: "gpu-3/edge.tar.gz", LastModified: now.Add(-DefaultRetention)},
		{Key: "gpu-4/excluded.tar.gz", LastModified: now.Add(-90 * 24 * time.Hour), GPU: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"},
	}
	quarantined := func(o Object) bool {
		return NodeOf(o.Key) == "gpu-2" || o.GPU == "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	}
	require.Equal(t, []string{"gpu-1/old-cluster.tar.gz", "gpu-1/old.tar.gz"}, Expired(objs, now, DefaultRetention, quarantined),
		"older than the retention, but a quarantined node's evidence is kept; exactly the retention is kept")
	require.Equal(t, []string{"gpu-1/old-cluster.tar.gz", "gpu-1/old.tar.gz", "gpu-2/old.tar.gz", "gpu-4/excluded.tar.gz"}, Expired(objs, now, DefaultRetention, nil))
	require.Equal(t, "gpu-1", NodeOf("gpu-1/x.tar.gz"))
}
