package localcluster_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/localcluster"
)

// TestAlertmanagerTakesAndResolvesAlerts starts the real Alertmanager,
// posts an alert, reads it back through the v2 API, then resolves it.
func TestAlertmanagerTakesAndResolvesAlerts(t *testing.T) {
	skipShort(t, localcluster.AlertmanagerBinary)
	dir := t.TempDir()
	am, err := localcluster.NewAlertmanager(t.Context(), dir, `
route:
  receiver: nowhere
receivers:
  - name: nowhere
`)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, am.Stop())
		if t.Failed() {
			t.Logf("alertmanager log:%s", am.LogTail())
		}
	})
	require.True(t, strings.HasPrefix(am.URL, "http://127.0.0.1:"), am.URL)
	require.Equal(t, dir, am.Dir)

	alert := localcluster.PostableAlert{
		Labels:      map[string]string{"alertname": "KubemedicLocalclusterTest", "node": "gpu-node-1"},
		Annotations: map[string]string{"summary": "a test alert"},
		StartsAt:    time.Now().Add(-time.Minute),
	}
	require.NoError(t, am.Post(t.Context(), alert))
	active := func() []map[string]any {
		resp, err := http.Get(am.URL + "/api/v2/alerts?active=true&silenced=false&inhibited=false")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var alerts []map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&alerts))
		return alerts
	}
	got := active()
	require.Len(t, got, 1)
	require.Equal(t, "gpu-node-1", got[0]["labels"].(map[string]any)["node"])

	alert.EndsAt = time.Now().Add(-time.Second)
	require.NoError(t, am.Post(t.Context(), alert))
	require.Empty(t, active(), "an alert with EndsAt in the past is resolved")

	// A refused post is an error naming the status.
	err = am.Post(t.Context(), localcluster.PostableAlert{})
	require.ErrorContains(t, err, "422 Unprocessable Entity")
	require.ErrorContains(t, err, "labels in body is required")
}
