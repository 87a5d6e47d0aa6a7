package bridge_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// seeder files the bridge's issues on the GitHub stand-in at times in the
// past, as an earlier run of the bridge would have.
type seeder struct {
	t    *testing.T
	fake *ghfake.Fake
	clk  *testingclock.FakePassiveClock
}

func newSeeder(t *testing.T, fake *ghfake.Fake) *seeder {
	s := &seeder{t: t, fake: fake, clk: testingclock.NewFakePassiveClock(time.Now())}
	fake.SetClock(s.clk)
	t.Cleanup(func() { fake.SetClock(clock.RealClock{}) })
	return s
}

// file files an issue of key at created, closed at closed unless that is
// zero, with the identity label and labels.
func (s *seeder) file(key string, created, closed time.Time, labels ...string) int {
	s.t.Helper()
	body, err := marker.Append("GPU lost on a node, filed by an earlier run.", key, marker.State{})
	require.NoError(s.t, err)
	s.clk.SetTime(created)
	n := s.fake.AddIssue(repo, "[critical] KubemedicGPULost", body, append([]string{"kubemedic-alert"}, labels...)...)
	if !closed.IsZero() {
		s.clk.SetTime(closed)
		s.fake.CloseIssue(repo, n, ghclient.ReasonCompleted)
	}
	return n
}

// issuesOf are the issues whose marker has key, in number order.
func issuesOf(t *testing.T, f *ghfake.Fake, key string) []ghfake.Issue {
	t.Helper()
	var out []ghfake.Issue
	for _, is := range f.Issues(repo) {
		k, _, ok, err := marker.Parse(is.Body)
		require.NoError(t, err)
		if ok && k == key {
			out = append(out, is)
		}
	}
	return out
}

// TestStartReadsOnlyWhatDecisionsNeed: at start the bridge lists the open
// issues, the closed ones within the window (reopenWindow 1h here, longer
// than the storm guard's 10m) and the closed ones with the ignore label,
// never the whole history (state=all without since). What follows:
//   - a group whose issue closed days ago files a new issue that does not
//     link the old one: the bridge no longer knows it;
//   - a group whose issue closed 30 minutes ago reopens it;
//   - a group whose issue a person closed with the ignore label months ago
//     stays closed, with no new issue, also after refreshes;
//   - an older open issue of a key filed 10 minutes before the key's
//     latest (an orphan of a lost answer) is commented on and closed as not
//     planned; one filed 3 hours before is left alone.
func TestStartReadsOnlyWhatDecisionsNeed(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	e.stop()

	now := time.Now()
	keyOld := keyHashOf(t, e, gpuLost("gpu-old", false))
	keyRecent := keyHashOf(t, e, gpuLost("gpu-recent", false))
	keyIgnored := keyHashOf(t, e, gpuLost("gpu-ignored", false))
	keyOrphan := keyHashOf(t, e, gpuLost("gpu-orphan", false))
	keyReopened := keyHashOf(t, e, gpuLost("gpu-reopened", false))

	s := newSeeder(t, e.fake)
	old := s.file(keyOld, now.Add(-73*time.Hour), now.Add(-72*time.Hour))
	recent := s.file(keyRecent, now.Add(-2*time.Hour), now.Add(-30*time.Minute))
	ignored := s.file(keyIgnored, now.Add(-200*24*time.Hour), now.Add(-199*24*time.Hour), "kubemedic-ignore")
	orphan := s.file(keyOrphan, now.Add(-2*time.Hour), time.Time{})
	latest := s.file(keyOrphan, now.Add(-110*time.Minute), time.Time{})
	reopened := s.file(keyReopened, now.Add(-5*time.Hour), time.Time{})
	s.file(keyReopened, now.Add(-2*time.Hour), time.Time{})
	for range 30 { // history nobody needs
		s.file(keyOld, now.Add(-300*24*time.Hour), now.Add(-299*24*time.Hour))
	}
	e.fake.SetClock(clock.RealClock{})
	e.fake.ResetCalls()

	started := time.Now()
	e.start()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		is, _ := e.fake.Issue(repo, orphan)
		require.Equal(c, ghclient.StateClosed, is.State)
	}, 10*time.Second, 10*time.Millisecond, "the orphan is closed at start")

	// The lists of the start, per repository: three, and no full history.
	type list struct{ state, labels, since string }
	starts := map[string][]list{}
	for _, c := range e.fake.Calls() {
		if c.Method != http.MethodGet || !strings.HasSuffix(c.Path, "/issues") {
			continue
		}
		q, err := url.ParseQuery(c.Query)
		require.NoError(t, err)
		if q.Get("state") == "all" {
			require.NotEmpty(t, q.Get("since"), "a list of every state is a refresh, since its previous pass: %s", c.Query)
			continue
		}
		starts[c.Path] = append(starts[c.Path], list{q.Get("state"), q.Get("labels"), q.Get("since")})
	}
	for _, r := range []string{repo, storageRepo} {
		got := starts["/repos/"+r+"/issues"]
		require.Len(t, got, 3, "lists of %s at start: %v", r, got)
		assert.Equal(t, list{"open", "kubemedic-alert", ""}, got[0])
		assert.Equal(t, list{"closed", "kubemedic-alert,kubemedic-ignore", ""}, got[2])
		assert.Equal(t, "closed", got[1].state)
		assert.Equal(t, "kubemedic-alert", got[1].labels)
		since, err := time.Parse(time.RFC3339, got[1].since)
		require.NoError(t, err)
		assert.WithinRange(t, since, started.Add(-time.Hour-2*time.Second), time.Now().Add(-time.Hour),
			"closed since the start less the reopen window")
	}

	// The orphan: one comment, closed as not planned; the older issue a
	// person may have reopened is left alone.
	is, _ := e.fake.Issue(repo, orphan)
	assert.Equal(t, ghclient.ReasonNotPlanned, is.StateReason)
	assert.Equal(t, []string{"Duplicate of #" + strconv.Itoa(latest) + ": filed twice after GitHub's answer to the create was lost; kubemedic-alertbridge follows #" + strconv.Itoa(latest) + "."},
		e.fake.Comments(repo, orphan))
	is, _ = e.fake.Issue(repo, latest)
	assert.Equal(t, ghclient.StateOpen, is.State)
	is, _ = e.fake.Issue(repo, reopened)
	assert.Equal(t, ghclient.StateOpen, is.State, "filed 3h before the key's latest: not taken for an orphan")
	assert.Empty(t, e.fake.Comments(repo, reopened))
	assert.Contains(t, e.logs.String(), "Closing an issue filed twice")

	// Refreshes pass (and prune) before the groups fire.
	refreshes := func() int { return e.fake.CallCount(http.MethodGet, "/repos/"+repo+"/issues") }
	before := refreshes()
	require.Eventually(t, func() bool { return refreshes() >= before+3 }, 5*time.Second, 10*time.Millisecond)

	for _, node := range []string{"gpu-old", "gpu-recent", "gpu-ignored"} {
		require.Equal(t, http.StatusOK, e.post(gpuLost(node, false)))
	}
	e.settle()

	olds := issuesOf(t, e.fake, keyOld)
	require.Len(t, olds, 32, "a new issue for the group whose issue closed 3 days ago")
	assert.Equal(t, ghclient.StateOpen, olds[31].State)
	assert.NotContains(t, olds[31].Body, "previous occurrence", "the issue closed beyond the window is not known after a start")
	is, _ = e.fake.Issue(repo, old)
	assert.Equal(t, ghclient.StateClosed, is.State)

	is, _ = e.fake.Issue(repo, recent)
	assert.Equal(t, ghclient.StateOpen, is.State, "closed 30 minutes ago: reopened")
	require.Len(t, issuesOf(t, e.fake, keyRecent), 1)

	ign := issuesOf(t, e.fake, keyIgnored)
	require.Len(t, ign, 1, "an ignored issue, closed 199 days ago, still blocks a new issue")
	assert.Equal(t, ignored, ign[0].Number)
	assert.Equal(t, ghclient.StateClosed, ign[0].State)
	assert.True(t, slices.ContainsFunc(e.fake.Comments(repo, ignored), func(c string) bool {
		return strings.Contains(c, `Not reopened: the issue has the label "kubemedic-ignore"`)
	}), "comments: %q", e.fake.Comments(repo, ignored))
}
