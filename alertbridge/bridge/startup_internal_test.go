package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

func TestRetain(t *testing.T) {
	const window = time.Hour
	now := at(24 * 60)
	tests := []struct {
		desc string
		t    tracked
		want retention
	}{
		{"open, filed long ago", tracked{open: true, createdAt: at(-100 * 24 * 60)}, retainAll},
		{"closed within the window", tracked{closedAt: now.Add(-window)}, retainAll},
		{"closed just beyond the window", tracked{closedAt: now.Add(-window - time.Second)}, retainNone},
		{"closed beyond the window with the ignore label", tracked{closedAt: now.Add(-100 * window), labels: []string{"kubemedic-alert", "kubemedic-ignore"}}, retainDecisions},
		{"another label is not the ignore label", tracked{closedAt: now.Add(-100 * window), labels: []string{"kubemedic-ignore-not"}}, retainNone},
		{"closed at an unknown time", tracked{}, retainAll},
		{"a roll-up member", tracked{inRollup: true}, retainAll},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, retain(&tc.t, now, window, "kubemedic-ignore"))
		})
	}
	assert.Equal(t, retainNone, retain(&tracked{closedAt: now.Add(-time.Second)}, now, 0, "kubemedic-ignore"), "reopenWindow 0 keeps no closed issue")
	assert.Equal(t, retainNone, retain(&tracked{closedAt: now.Add(-100 * window), labels: []string{""}}, now, window, ""), "no ignore label configured")
}

func TestOrphanOf(t *testing.T) {
	latest := decide.CachedIssue{Repo: cacheRepo, Number: 20, Open: true, CreatedAt: at(120)}
	tests := []struct {
		desc string
		open decide.CachedIssue
		want bool
	}{
		{"older open issue filed 10 minutes before", decide.CachedIssue{Repo: cacheRepo, Number: 19, Open: true, CreatedAt: at(110)}, true},
		{"filed exactly an hour before", decide.CachedIssue{Repo: cacheRepo, Number: 19, Open: true, CreatedAt: at(60)}, true},
		{"filed more than an hour before: a person may have reopened it", decide.CachedIssue{Repo: cacheRepo, Number: 3, Open: true, CreatedAt: at(59)}, false},
		{"the latest itself", latest, false},
		{"closed", decide.CachedIssue{Repo: cacheRepo, Number: 19, CreatedAt: at(110)}, false},
		{"in another repository", decide.CachedIssue{Repo: "acme/other", Number: 19, Open: true, CreatedAt: at(110)}, false},
		{"filed in the same second with a lower number: the latest is not newer", decide.CachedIssue{Repo: cacheRepo, Number: 19, Open: true, CreatedAt: at(120)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, orphanOf(tc.open, latest))
		})
	}
	assert.False(t, orphanOf(decide.CachedIssue{Repo: cacheRepo, Number: 19, Open: true, CreatedAt: at(110)}, decide.CachedIssue{InRollup: true}), "a roll-up member has no issue")
}

// TestCacheForgetsClosedIssues: the cache keeps open issues, those closed
// within the window and the ignored ones (without their history section);
// a refresh's prune forgets what fell out of the window, and a listed issue
// closed long ago is not taken.
func TestCacheForgetsClosedIssues(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil) // reopenWindow 1h, storm window 10m
	history := "<!-- kubemedic-alertbridge history -->\nOperation history on node gpu-7\n<!-- /kubemedic-alertbridge history -->\n"
	withHistory := func(g ghIssue) ghclient.Issue {
		is := g.issue(t)
		body, err := marker.Append("Alert group body\n"+history, g.key, g.st)
		require.NoError(t, err)
		is.Body = body
		return is
	}
	closedAt := func(is ghclient.Issue, when time.Time) ghclient.Issue { is.ClosedAt = when; return is }
	issues := []ghclient.Issue{
		withHistory(ghIssue{number: 1, key: "open", open: true, created: at(0), updated: at(0)}),
		closedAt(withHistory(ghIssue{number: 2, key: "recent", created: at(0), updated: at(100)}), at(100)),
		closedAt(withHistory(ghIssue{number: 3, key: "ignored", created: at(0), updated: at(10), labels: []string{"kubemedic-alert", "kubemedic-ignore"}}), at(10)),
		// Closed long ago, listed because a person commented on it lately.
		closedAt(withHistory(ghIssue{number: 4, key: "old", created: at(0), updated: at(110)}), at(10)),
	}
	n, orphans := b.absorb(cacheRepo, issues, true, at(120))
	require.Equal(t, 3, n)
	require.Empty(t, orphans)
	require.NotContains(t, b.byKey, "old")
	require.Equal(t, history, b.byKey["open"].history)
	require.Equal(t, history, b.byKey["recent"].history, "closed within the window: it may be reopened or rewritten")
	require.Empty(t, b.byKey["ignored"].history, "beyond the window, ignored: what decisions need only")

	// 30 minutes on, the recent one is still in the window; two hours on,
	// only the open and the ignored issues are left.
	require.Zero(t, b.prune(at(150)))
	require.Len(t, b.byKey, 3)
	require.Equal(t, 1, b.prune(at(240)))
	require.Contains(t, b.byKey, "open")
	require.Contains(t, b.byKey, "ignored")
	require.NotContains(t, b.byKey, "recent")

	// A person takes the ignore label off: the refresh lists it and the
	// cache forgets it.
	unignored := closedAt(ghIssue{number: 3, key: "ignored", created: at(0), updated: at(250), labels: []string{"kubemedic-alert"}}.issue(t), at(10))
	b.absorb(cacheRepo, []ghclient.Issue{unignored}, false, at(251))
	require.NotContains(t, b.byKey, "ignored")
	require.Len(t, b.byKey, 1)
}

// TestAbsorbFindsOrphans: an older issue of a key still open beside the
// key's latest is returned to be closed when it was filed at most an hour
// before; the cache keeps the latest either way.
func TestAbsorbFindsOrphans(t *testing.T) {
	b, _ := newTestBridge(t, internalConfig, nil)
	issues := []ghclient.Issue{
		ghIssue{number: 5, key: "k1", open: true, created: at(100), updated: at(100)}.issue(t),
		ghIssue{number: 6, key: "k1", open: true, created: at(110), updated: at(110)}.issue(t),
		ghIssue{number: 2, key: "k2", open: true, created: at(0), updated: at(0)}.issue(t),
		ghIssue{number: 7, key: "k2", open: true, created: at(115), updated: at(115)}.issue(t),
	}
	_, orphans := b.absorb(cacheRepo, issues, true, at(120))
	require.Equal(t, []orphan{{repo: cacheRepo, number: 5, follows: 6, createdAt: at(100)}}, orphans)
	require.Equal(t, 6, b.byKey["k1"].number)
	require.Equal(t, 7, b.byKey["k2"].number)

	_, orphans = b.absorb(cacheRepo, issues, false, at(121))
	require.Empty(t, orphans, "only the start closes orphans")
}

// TestDiagnosticsMapsFollowOpenIssues: what the diagnostics loop knows of
// an issue is dropped once it is no longer an open issue of a node.
func TestDiagnosticsMapsFollowOpenIssues(t *testing.T) {
	var d diagComments
	d.add("acme/gpu-oncall#1", "uid-a")
	d.setScanned("acme/gpu-oncall#1")
	d.add("acme/gpu-oncall#2", "uid-b")
	d.setScanned("acme/gpu-oncall#2")
	d.keepOnly(map[string]bool{"acme/gpu-oncall#2": true})
	assert.False(t, d.has("acme/gpu-oncall#1", "uid-a"))
	assert.False(t, d.isScanned("acme/gpu-oncall#1"), "reopened, its comments are read again")
	assert.True(t, d.has("acme/gpu-oncall#2", "uid-b"))
	assert.True(t, d.isScanned("acme/gpu-oncall#2"))
	assert.Len(t, d.posted, 1)
	assert.Len(t, d.scanned, 1)
}
