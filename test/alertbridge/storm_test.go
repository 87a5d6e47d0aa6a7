package alertbridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/test/harness"
)

// stormConfig gives the groups titles of about 200 characters, as real NFS
// alerts have, so that the roll-up's body would pass GitHub's limit if it
// were not bounded.
const stormConfig = `
defaultRepo: acme/gpu-oncall
reopenWindow: 1h
stormGuard: {maxNewIssues: 20, window: 10m}
templates:
  title: '[{{ .CommonLabels.severity }}] {{ .CommonLabels.alertname }} on {{ .CommonLabels.node }}: {{ .CommonAnnotations.summary }}'
`

// stormGroups is the issue-28 storm: an NFS server fails under a whole fleet.
// STORM_GROUPS overrides it (e.g. 5000) for a measurement run.
func stormGroups(t *testing.T) int {
	if s := os.Getenv("STORM_GROUPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "STORM_GROUPS")
		return n
	}
	return 1500
}

func nfsDown(node string) harness.PostableAlert {
	return harness.PostableAlert{
		Labels: map[string]string{"alertname": "KubemedicNFSMountUnhealthy", "node": node, "condition": "NFSMountUnhealthy",
			"severity": "warning", "mount": "/mnt/datasets/imagenet-21k/shards"},
		Annotations: map[string]string{
			"summary": "NFS mount /mnt/datasets/imagenet-21k/shards on " + node + " does not answer: stat timed out after 10s " +
				"(server nfs-prod-03.storage.example.internal:/export/datasets | tcp, vers=4.2, hard)",
			"runbook_url": "https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicnfsmountunhealthy",
		},
		StartsAt: time.Now().Add(-time.Minute),
	}
}

// A storm of 1,500 groups with ~200-character titles fires, resolves and
// fires again through a real Alertmanager. At every phase each group is on
// GitHub in its state: 20 in issues of their own, the rest counted in the
// roll-up, whose body fits GitHub's limit (ghfake refuses larger ones with
// GitHub's 422) and whose counts match the groups. No write is rejected.
func TestStormOf1500Groups(t *testing.T) {
	n := stormGroups(t)
	w := newWorld(t, stormConfig, 1)
	w.startInProcess()
	alerts := make([]harness.PostableAlert, n)
	for i := range alerts {
		alerts[i] = nfsDown(fmt.Sprintf("gpu-node-%05d", i))
	}
	held := n - 20
	phase := func(name string, firing bool, wantRollups int) time.Duration {
		t.Helper()
		start := time.Now()
		want := fmt.Sprintf("**Firing: %d · Resolved: 0**", held)
		ownState := ghclient.StateOpen
		if !firing {
			want, ownState = fmt.Sprintf("**Firing: 0 · Resolved: %d**", held), ghclient.StateClosed
		}
		w.eventually(func() bool {
			own, rollups, good := 0, 0, 0
			for _, is := range w.fake.Issues(repo) {
				k, _, _, _ := marker.Parse(is.Body)
				if k != marker.RollupKey {
					own++
					if is.State != ownState {
						return false
					}
					continue
				}
				rollups++
				// The latest roll-up holds the storm now; an earlier one
				// stays closed with the earlier phase's counts.
				if rollups == wantRollups && strings.Contains(is.Body, want) && (is.State == ghclient.StateClosed) == !firing {
					good++
				}
			}
			return own == 20 && rollups == wantRollups && good == 1
		}, 3*time.Minute, name+": 20 issues of their own and the roll-up counting the other groups")
		return time.Since(start)
	}

	w.fire(alerts...)
	d1 := phase("fire", true, 1)
	w.resolve(alerts...)
	d2 := phase("resolve", false, 1)
	w.fire(alerts...)
	d3 := phase("fire again", true, 2)

	for _, is := range w.fake.Issues(repo) {
		assert.LessOrEqual(t, len([]rune(is.Body)), 65536, "#%d", is.Number)
		if k, st, _, _ := marker.Parse(is.Body); k == marker.RollupKey {
			assert.Equal(t, held, st.MembersTotal, "#%d: the marker counts every member", is.Number)
		}
	}
	// Every member is in the bridge's local roll-up file.
	files, err := filepath.Glob(filepath.Join(w.stateDir, "rollups", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, held, strings.Count(string(data), `"k":`))

	for _, reason := range []string{ghclient.RejectBodyTooLong, ghclient.ReasonValidationFailed} {
		assert.Equal(t, 0.0, w.metric("kubemedic_alertbridge_github_rejected_total", `reason="`+reason+`"`), reason)
	}
	assert.Zero(t, w.metric("kubemedic_alertbridge_dropped_total", `reason="github_422"`))
	calls := len(w.fake.Calls())
	t.Logf("storm of %d groups (%d in the roll-up): fire %s, resolve %s, fire again %s; %d GitHub calls for %d transitions = %.3f per transition; %s",
		n, held, d1.Round(time.Millisecond), d2.Round(time.Millisecond), d3.Round(time.Millisecond), calls, 3*n, float64(calls)/float64(3*n), callSummary(w.fake))
}

// callSummary counts the fake's calls by method and path pattern.
func callSummary(f *ghfake.Fake) string {
	by := map[string]int{}
	for _, c := range f.Calls() {
		path := c.Path
		if i := strings.Index(path, "/issues/"); i >= 0 {
			path = path[:i] + "/issues/N"
		}
		by[c.Method+" "+path]++
	}
	var parts []string
	for k, v := range by {
		parts = append(parts, fmt.Sprintf("%s: %d", k, v))
	}
	return strings.Join(parts, ", ")
}
