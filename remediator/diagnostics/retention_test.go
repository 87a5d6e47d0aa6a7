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
	}
	quarantined := func(node string) bool { return node == "gpu-2" }
	require.Equal(t, []string{"gpu-1/old-cluster.tar.gz", "gpu-1/old.tar.gz"}, Expired(objs, now, DefaultRetention, quarantined),
		"older than the retention, but a quarantined node's evidence is kept; exactly the retention is kept")
	require.Equal(t, []string{"gpu-1/old-cluster.tar.gz", "gpu-1/old.tar.gz", "gpu-2/old.tar.gz"}, Expired(objs, now, DefaultRetention, nil))
	require.Equal(t, "gpu-1", NodeOf("gpu-1/x.tar.gz"))
}
