package ghclient_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

const repo = "acme/gpu-alerts"

// env is one client against one fake GitHub sharing one fake clock. Waits
// are recorded and step the clock instead of sleeping.
type env struct {
	fake   *ghfake.Fake
	clock  *testingclock.FakeClock
	client ghclient.Client
	reg    *prometheus.Registry
	logs   *testsupport.SyncBuffer

	mu    sync.Mutex
	waits []time.Duration
	// onWait, when set, runs inside each wait; a non-nil error ends it.
	onWait func(n int) error
}

func newEnv(t *testing.T, mutate ...func(*ghclient.Options)) *env {
	t.Helper()
	e := &env{fake: ghfake.New(), logs: &testsupport.SyncBuffer{}}
	t.Cleanup(e.fake.Close)
	e.clock = testingclock.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	e.fake.SetClock(e.clock)
	e.fake.AddRepo(repo)
	e.reg = prometheus.NewPedanticRegistry()
	opts := ghclient.Options{
		BaseURL: e.fake.URL(),
		Metrics: ghclient.NewMetrics(e.reg),
		Log:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:   e.clock,
		Sleep:   e.sleep,
	}
	for _, m := range mutate {
		m(&opts)
	}
	c, err := ghclient.New(opts)
	require.NoError(t, err)
	e.client = c
	return e
}

func (e *env) sleep(ctx context.Context, d time.Duration) error {
	e.mu.Lock()
	e.waits = append(e.waits, d)
	n := len(e.waits)
	hook := e.onWait
	e.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return err
		}
	}
	e.clock.Step(d)
	return ctx.Err()
}

func (e *env) recordedWaits() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.waits)
}

func TestListIssuesPaginatesAndSkipsPullRequests(t *testing.T) {
	e := newEnv(t)
	for i := range 250 {
		n := e.fake.AddIssue(repo, "alert "+strconv.Itoa(i), "", "kubemedic")
		if i%10 == 0 {
			e.fake.CloseIssue(repo, n, ghclient.ReasonCompleted)
		}
	}
	for range 5 {
		e.fake.AddPullRequest(repo, "a fix", "kubemedic")
	}
	e.fake.AddIssue(repo, "someone else's", "")

	got, err := e.client.ListIssues(context.Background(), repo, ghclient.StateAll, time.Time{}, "kubemedic")
	require.NoError(t, err)
	require.Len(t, got, 250)
	var numbers []int
	closed := 0
	for _, is := range got {
		numbers = append(numbers, is.Number)
		if is.State == ghclient.StateClosed {
			closed++
			require.False(t, is.ClosedAt.IsZero())
		}
		require.Equal(t, repo, is.Repo)
		require.Equal(t, []string{"kubemedic"}, is.Labels)
	}
	sort.Ints(numbers)
	require.Equal(t, 1, numbers[0])
	require.Equal(t, 250, numbers[249])
	require.Equal(t, 25, closed, "closed issues are listed too")

	calls := e.fake.Calls()
	require.Len(t, calls, 3, "255 issues and pull requests are three pages of 100")
	for i, c := range calls {
		q, err := url.ParseQuery(c.Query)
		require.NoError(t, err)
		require.Equal(t, "kubemedic", q.Get("labels"))
		require.Equal(t, "all", q.Get("state"))
		require.Equal(t, "100", q.Get("per_page"))
		if i > 0 {
			require.Equal(t, strconv.Itoa(i+1), q.Get("page"))
		}
	}
	require.Zero(t, e.fake.CallCount("", "/search/"), "the Search API is never used")
}

func TestCreateEditCommentRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	created, err := e.client.CreateIssue(ctx, repo, ghclient.NewIssue{
		Title: "GPULost on node-7", Body: "fingerprint abc", Labels: []string{"kubemedic", "sev/2"}, Assignees: []string{"oncall"},
	})
	require.NoError(t, err)
	require.Equal(t, ghclient.Issue{
		Repo: repo, Number: 1, NodeID: created.NodeID, Title: "GPULost on node-7", Body: "fingerprint abc",
		State: ghclient.StateOpen, Labels: []string{"kubemedic", "sev/2"}, Assignees: []string{"oncall"},
		HTMLURL: e.fake.URL() + repo + "/issues/1", CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(),
	}, created)
	require.Regexp(t, `^I_kwDO`, created.NodeID)

	// People take over the title, labels and assignees.
	e.fake.SetTitle(repo, 1, "node-7 GPU fell off the bus (RMA)")
	e.fake.AddLabel(repo, 1, "hardware")
	e.fake.SetAssignees(repo, 1, "alice")

	e.clock.Step(time.Minute)
	body, closed, reason := "resolved", ghclient.StateClosed, ghclient.ReasonNotPlanned
	edited, err := e.client.EditIssue(ctx, repo, 1, ghclient.Edit{Body: &body, State: &closed, StateReason: &reason})
	require.NoError(t, err)
	require.Equal(t, ghclient.StateClosed, edited.State)
	require.Equal(t, ghclient.ReasonNotPlanned, edited.StateReason)
	require.Equal(t, e.clock.Now(), edited.ClosedAt)
	require.Equal(t, e.clock.Now(), edited.UpdatedAt)
	require.Equal(t, "node-7 GPU fell off the bus (RMA)", edited.Title)
	require.Equal(t, []string{"kubemedic", "sev/2", "hardware"}, edited.Labels)
	require.Equal(t, []string{"alice"}, edited.Assignees)

	open := ghclient.StateOpen
	reopened, err := e.client.EditIssue(ctx, repo, 1, ghclient.Edit{State: &open})
	require.NoError(t, err)
	require.Equal(t, ghclient.ReasonReopened, reopened.StateReason)
	require.True(t, reopened.ClosedAt.IsZero())

	require.NoError(t, e.client.CreateComment(ctx, repo, 1, "firing again"))
	e.clock.Step(time.Hour)
	e.fake.AddComment(repo, 1, "alice", "/silence 2h")
	require.Equal(t, []string{"firing again", "/silence 2h"}, e.fake.Comments(repo, 1))

	all, err := e.client.ListComments(ctx, repo, 1, time.Time{})
	require.NoError(t, err)
	require.Len(t, all, 2)
	recent, err := e.client.ListComments(ctx, repo, 1, e.clock.Now().Add(-time.Minute))
	require.NoError(t, err)
	require.Len(t, recent, 1)
	require.Equal(t, "/silence 2h", recent[0].Body)
	require.Equal(t, e.clock.Now(), recent[0].CreatedAt)
	require.NotZero(t, recent[0].ID)
}

func TestListCommentsPaginates(t *testing.T) {
	e := newEnv(t)
	n := e.fake.AddIssue(repo, "t", "")
	for i := range 130 {
		e.fake.AddComment(repo, n, "bob", strconv.Itoa(i))
	}
	got, err := e.client.ListComments(context.Background(), repo, n, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 130)
	require.Equal(t, "129", got[129].Body)
	require.Equal(t, 2, e.fake.CallCount(http.MethodGet, "/repos/*/*/issues/*/comments"))
}

func TestEditSendsOnlyWhatItSets(t *testing.T) {
	body, closed, reason, title := "b", ghclient.StateClosed, ghclient.ReasonCompleted, "[critical] Node gpu-7: GPUXidError — quarantined"
	labels, none := []string{"incident:quarantined", "kubemedic"}, []string{}
	for _, tc := range []struct {
		desc       string
		edit       ghclient.Edit
		wantKeys   []string
		wantTitle  string
		wantLabels []string
	}{
		{desc: "body, state and reason", edit: ghclient.Edit{Body: &body, State: &closed, StateReason: &reason},
			wantKeys: []string{"body", "state", "state_reason"}, wantTitle: "title", wantLabels: []string{"kubemedic"}},
		{desc: "only the state", edit: ghclient.Edit{State: &closed}, wantKeys: []string{"state"}, wantTitle: "title", wantLabels: []string{"kubemedic"}},
		{desc: "only the body", edit: ghclient.Edit{Body: &body}, wantKeys: []string{"body"}, wantTitle: "title", wantLabels: []string{"kubemedic"}},
		{desc: "title and labels with the body", edit: ghclient.Edit{Body: &body, Title: &title, Labels: &labels},
			wantKeys: []string{"body", "labels", "title"}, wantTitle: title, wantLabels: labels},
		{desc: "an empty label list is sent, not omitted", edit: ghclient.Edit{Labels: &none},
			wantKeys: []string{"labels"}, wantTitle: "title"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t)
			n := e.fake.AddIssue(repo, "title", "", "kubemedic")
			got, err := e.client.EditIssue(context.Background(), repo, n, tc.edit)
			require.NoError(t, err)
			calls := e.fake.Calls()
			require.Len(t, calls, 1)
			require.Equal(t, http.MethodPatch, calls[0].Method)
			var sent map[string]any
			require.NoError(t, json.Unmarshal(calls[0].Body, &sent))
			var keys []string
			for k := range sent {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			require.Equal(t, tc.wantKeys, keys)
			require.Equal(t, tc.wantTitle, got.Title)
			require.Equal(t, tc.wantLabels, got.Labels)
		})
	}
}

func TestRetries(t *testing.T) {
	secondary := `{"message":"You have exceeded a secondary rate limit.","documentation_url":"` + ghfake.SecondaryRateLimitDoc + `"}`
	for _, tc := range []struct {
		desc string
		// arrange injects the failures before CreateIssue runs.
		arrange    func(e *env)
		wantWaits  func(e *env, waits []time.Duration)
		wantCalls  int
		wantReason string
	}{
		{
			desc:    "502 is retried after a jittered backoff, then succeeds",
			arrange: func(e *env) { e.fake.FailWrites(1, http.StatusBadGateway, nil) },
			wantWaits: func(e *env, waits []time.Duration) {
				require.Len(t, waits, 1)
				require.GreaterOrEqual(t, waits[0], 500*time.Millisecond)
				require.LessOrEqual(t, waits[0], time.Second)
			},
			wantCalls: 2, wantReason: "server_error",
		},
		{
			desc: "429 with Retry-After: 1 waits exactly one second",
			arrange: func(e *env) {
				e.fake.FailWrites(1, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
			},
			wantWaits: func(e *env, waits []time.Duration) { require.Equal(t, []time.Duration{time.Second}, waits) },
			wantCalls: 2, wantReason: "too_many_requests",
		},
		{
			desc: "403 primary limit waits until the reset",
			arrange: func(e *env) {
				e.fake.SetRateLimit(5000, 0, e.clock.Now().Add(10*time.Minute))
			},
			wantWaits: func(e *env, waits []time.Duration) {
				require.Equal(t, []time.Duration{10*time.Minute + time.Second}, waits)
			},
			wantCalls: 2, wantReason: "rate_limited",
		},
		{
			desc: "secondary limit 403 with Retry-After waits what GitHub asks",
			arrange: func(e *env) {
				e.fake.SetFault(onceFault(&ghfake.Fault{Status: http.StatusForbidden, Header: http.Header{"Retry-After": {"42"}}, Body: secondary}))
			},
			wantWaits: func(e *env, waits []time.Duration) { require.Equal(t, []time.Duration{42 * time.Second}, waits) },
			wantCalls: 2, wantReason: "secondary_rate_limited",
		},
		{
			desc: "secondary limit 403 without Retry-After waits a minute",
			arrange: func(e *env) {
				e.fake.SetFault(onceFault(&ghfake.Fault{Status: http.StatusForbidden, Body: secondary}))
			},
			wantWaits: func(e *env, waits []time.Duration) { require.Equal(t, []time.Duration{time.Minute}, waits) },
			wantCalls: 2, wantReason: "secondary_rate_limited",
		},
		{
			desc:    "backoff is capped at MaxBackoff",
			arrange: func(e *env) { e.fake.FailWrites(12, http.StatusServiceUnavailable, nil) },
			wantWaits: func(e *env, waits []time.Duration) {
				require.Len(t, waits, 12)
				for _, w := range waits {
					require.LessOrEqual(t, w, 5*time.Minute)
				}
				require.GreaterOrEqual(t, waits[11], 150*time.Second)
			},
			wantCalls: 13, wantReason: "server_error",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t)
			tc.arrange(e)
			is, err := e.client.CreateIssue(context.Background(), repo, ghclient.NewIssue{Title: "t"})
			require.NoError(t, err)
			require.Equal(t, 1, is.Number, "exactly one issue was filed")
			require.Len(t, e.fake.Issues(repo), 1)
			tc.wantWaits(e, e.recordedWaits())
			require.Len(t, e.fake.Calls(), tc.wantCalls)
			require.Contains(t, e.logs.String(), "Retrying GitHub request")
			require.Contains(t, e.logs.String(), "reason="+tc.wantReason)
			require.Contains(t, e.logs.String(), "endpoint=issues.create")
		})
	}
}

func onceFault(ft *ghfake.Fault) func(*http.Request) *ghfake.Fault {
	var once sync.Once
	return func(*http.Request) *ghfake.Fault {
		var out *ghfake.Fault
		once.Do(func() { out = ft })
		return out
	}
}

func TestRateLimitHoldsOtherCalls(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	n := e.fake.AddIssue(repo, "t", "")
	e.fake.FailNext(1, http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}})
	var otherErr error
	e.onWait = func(wait int) error {
		if wait == 1 {
			// While the list call waits out the limit, a comment must not
			// be sent before the limit is over.
			otherErr = e.client.CreateComment(ctx, repo, n, "x")
		}
		return nil
	}
	_, err := e.client.ListIssues(ctx, repo, ghclient.StateAll, time.Time{}, "kubemedic")
	require.NoError(t, err)
	require.NoError(t, otherErr)
	require.Equal(t, []time.Duration{30 * time.Second, 30 * time.Second}, e.recordedWaits())
	var statuses []int
	for _, c := range e.fake.Calls() {
		statuses = append(statuses, c.Status)
	}
	require.Equal(t, []int{429, 201, 200}, statuses)
	require.Contains(t, e.logs.String(), "Waiting for GitHub rate limit")
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		repo       string
		title      string
		wantStatus int
		wantReason string
	}{
		{desc: "unknown repository is 404", repo: "acme/unknown", title: "t", wantStatus: 404, wantReason: "not_found"},
		{desc: "empty title is 422", repo: repo, title: "", wantStatus: 422, wantReason: "validation_failed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.client.CreateIssue(context.Background(), tc.repo, ghclient.NewIssue{Title: tc.title})
			require.Error(t, err)
			require.True(t, ghclient.IsPermanent(err))
			var pe *ghclient.PermanentError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.wantStatus, pe.Status)
			require.Equal(t, tc.wantReason, pe.Reason)
			require.Len(t, e.fake.Calls(), 1, "exactly one request")
			require.Empty(t, e.recordedWaits())
		})
	}

	t.Run("malformed repository is refused before sending", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.client.ListIssues(context.Background(), "not-a-repo", ghclient.StateAll, time.Time{}, "kubemedic")
		require.True(t, ghclient.IsPermanent(err))
		require.Empty(t, e.fake.Calls())
	})
}

func TestContextCancelDuringBackoffReturnsPromptly(t *testing.T) {
	// No Sleep: the loop waits on the fake clock's timer, which never fires
	// unless stepped, so only cancellation can end the wait.
	e := newEnv(t, func(o *ghclient.Options) { o.Sleep = nil })
	e.fake.FailNext(1000, http.StatusBadGateway, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.client.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "t"})
		done <- err
	}()
	require.Eventually(t, e.clock.HasWaiters, 5*time.Second, time.Millisecond, "the client is waiting to retry")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, ghclient.IsPermanent(err), "the caller keeps the work queued")
	case <-time.After(5 * time.Second):
		t.Fatal("CreateIssue did not return after its context was cancelled")
	}
	require.Len(t, e.fake.Calls(), 1)
}

func TestMetricsCountEveryAttempt(t *testing.T) {
	e := newEnv(t)
	e.fake.FailWrites(2, http.StatusBadGateway, nil)
	_, err := e.client.CreateIssue(context.Background(), repo, ghclient.NewIssue{Title: "t"})
	require.NoError(t, err)
	_, err = e.client.ListIssues(context.Background(), repo, ghclient.StateAll, time.Time{}, "kubemedic")
	require.NoError(t, err)

	require.Len(t, e.fake.Calls(), 4)
	// The fake counts down from 5000; faults carry its headers without
	// spending, so two real requests leave 4998.
	require.Equal(t, map[string]float64{
		"kubemedic_alertbridge_github_rate_limit_remaining":                                  4998,
		`kubemedic_alertbridge_github_requests_total{endpoint="issues.create",status="201"}`: 1,
		`kubemedic_alertbridge_github_requests_total{endpoint="issues.create",status="502"}`: 2,
		`kubemedic_alertbridge_github_requests_total{endpoint="issues.list",status="200"}`:   1,
	}, gather(t, e.reg))
}

// gather flattens a registry into name{labels} -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
