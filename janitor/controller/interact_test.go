package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// stubUsers answers every lookup with id and err, and counts them.
type stubUsers struct {
	id    string
	err   error
	calls int
}

func (s *stubUsers) UserIDByEmail(context.Context, string) (string, error) {
	s.calls++
	return s.id, s.err
}

// responses records what is posted to response_url.
type responses struct {
	mu    sync.Mutex
	texts []string
}

func (r *responses) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var m slack.WebhookMessage
	_ = json.NewDecoder(req.Body).Decode(&m)
	r.mu.Lock()
	r.texts = append(r.texts, m.Text)
	r.mu.Unlock()
}

// TestPressOwnerCheck: who may press, as the metric counts it and the
// presser is told. A lookup that fails for another reason than an unknown
// user is a check not made (failed, press again), not a refusal; no
// answer names the owner's email.
func TestPressOwnerCheck(t *testing.T) {
	const alice, bob = "U0ALICE001", "U0BOB00002"
	nsOwner := "namespace annotation " + notify.AnnotationOwner
	for _, tc := range []struct {
		desc     string
		podOwner string // the pod's kubemedic.io/owner; "" none
		nsOwner  string // the namespace's; "" none
		users    *stubUsers
		result   string
		answer   []string
		lookups  int
	}{
		{desc: "email owner found, someone else pressed: mentioned", nsOwner: "alice@example.com", users: &stubUsers{id: alice},
			result: decide.ResultNotOwner, answer: []string{"Only the pod's owner (<@" + alice + ">) can keep team/nb-0.", "Nothing was done", "Ask them"}, lookups: 1},
		{desc: "email owner not on Slack: where it is recorded", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: %w", slack.SlackErrorResponse{Err: "users_not_found"})},
			result: decide.ResultNotOwner, answer: []string{"Only the pod's owner, as recorded in " + nsOwner + ", can keep team/nb-0 (that owner is not found on Slack)", "kubectl"}, lookups: 1},
		{desc: "email owner deactivated", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: user U1 is deactivated: %w", slack.SlackErrorResponse{Err: "user_disabled"})},
			result: decide.ResultNotOwner, answer: []string{"as recorded in " + nsOwner}, lookups: 1},
		{desc: "rate limited: failed, press again", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: asked to wait 1m0s, longer than the 30s this client waits: %w", &slack.RateLimitedError{RetryAfter: time.Minute})},
			result: decide.ResultFailed, answer: []string{"could not check that you are the pod's owner", "Nothing was done", "Press again in a minute"}, lookups: 1},
		{desc: "Slack outage (503): failed", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: giving up after 3 attempts: %w", slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"})},
			result: decide.ResultFailed, answer: []string{"Press again in a minute"}, lookups: 1},
		{desc: "network error: failed", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: giving up after 3 attempts: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})},
			result: decide.ResultFailed, answer: []string{"Press again in a minute"}, lookups: 1},
		{desc: "Slack internal_error: failed", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: %w", slack.SlackErrorResponse{Err: "internal_error"})},
			result: decide.ResultFailed, answer: []string{"Press again in a minute"}, lookups: 1},
		{desc: "the app lacks a scope: failed, not not-owner", nsOwner: "alice@example.com",
			users:  &stubUsers{err: fmt.Errorf("slack users.lookupByEmail: %w", slack.SlackErrorResponse{Err: "missing_scope"})},
			result: decide.ResultFailed, answer: []string{"if it keeps failing, ask the owner, or use kubectl"}, lookups: 1},
		{desc: "user ID on the pod: mentioned, no lookup", podOwner: alice, nsOwner: "carol@example.com", users: &stubUsers{err: errors.New("not called")},
			result: decide.ResultNotOwner, answer: []string{"Only the pod's owner (<@" + alice + ">) can keep"}},
		{desc: "email on the pod, lookup ends in EOF: failed", podOwner: "alice@example.com", users: &stubUsers{err: errors.New("EOF")},
			result: decide.ResultFailed, answer: []string{"Press again in a minute"}, lookups: 1},
		{desc: "no owner recorded", users: &stubUsers{},
			result: decide.ResultNotOwner, answer: []string{"no owner is recorded (set " + notify.AnnotationOwner + " on the pod or its namespace)", "kubectl"}},
		{desc: "the owner, by email: past the owner check", nsOwner: "alice@example.com", users: &stubUsers{id: bob},
			result: decide.ResultNoNotice, lookups: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			scheme, err := Scheme()
			require.NoError(t, err)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nb-0", UID: "u1"}}
			if tc.podOwner != "" {
				pod.Annotations = map[string]string{notify.AnnotationOwner: tc.podOwner}
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
			if tc.nsOwner != "" {
				ns.Annotations = map[string]string{notify.AnnotationOwner: tc.nsOwner}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod, ns).Build()
			j := &Janitor{Client: c, Reader: c, Clock: clocktesting.NewFakeClock(time.Now()), Metrics: NewMetrics(), Log: logr.Discard()}
			rs := &responses{}
			srv := httptest.NewServer(rs)
			defer srv.Close()
			in := &Interactions{j: j, users: tc.users, http: srv.Client(), kick: make(chan struct{}, 1)}
			ic := &slack.InteractionCallback{User: slack.User{ID: bob}, ResponseURL: srv.URL}
			b := decide.Button{Action: decide.ActionKeep, Namespace: "team", Pod: "nb-0", UID: "u1", Keep: 4 * time.Hour}

			in.handle(context.Background(), ic, b)

			require.Equal(t, map[string]float64{"keep/" + tc.result: 1}, counts(t, j.Metrics), "one press, counted as its result")
			require.Equal(t, tc.lookups, tc.users.calls)
			require.Len(t, rs.texts, 1, "the presser is answered")
			for _, want := range tc.answer {
				require.Contains(t, rs.texts[0], want)
			}
			require.NotContains(t, rs.texts[0], "@example.com", "no answer names the owner's email")
			got := &corev1.Pod{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
			require.Equal(t, pod.Annotations, got.Annotations, "a refused press writes nothing")
		})
	}
}

// counts are kubemedic_janitor_slack_interactions_total by "action/result".
func counts(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	ch := make(chan prometheus.Metric, 100)
	m.interactions.Collect(ch)
	close(ch)
	for pm := range ch {
		var d dto.Metric
		require.NoError(t, pm.Write(&d))
		l := map[string]string{}
		for _, p := range d.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		out[l["action"]+"/"+l["result"]] = d.GetCounter().GetValue()
	}
	return out
}

// TestKickWhenCached: a press's "Reclaim now" kicks the cycle once the
// cache has it, waiting on the janitor's clock; a standby replica, which
// runs no cycle, neither reads nor kicks.
func TestKickWhenCached(t *testing.T) {
	scheme, err := Scheme()
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	n := decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-time.Hour), Deadline: t0.Add(time.Hour), ReclaimRequestedAt: t0}
	requested := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "requested",
		Annotations: map[string]string{v1alpha1.AnnotationReclaimNotice: n.Encode()}}}
	older := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "older"}}
	var gets atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(requested, older).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	j := &Janitor{Client: c, Clock: clk}
	in := &Interactions{j: j, kick: make(chan struct{}, 1)}
	kicked := func() bool {
		select {
		case <-in.kick:
			return true
		default:
			return false
		}
	}

	// A wait on the fake clock that is never stepped ends here, not in
	// the test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in.kickWhenCached(ctx, requested)
	require.False(t, kicked(), "a standby replica does not kick")
	require.Zero(t, gets.Load(), "a standby replica does not poll")

	j.leading.Store(true)
	in.kickWhenCached(ctx, requested)
	require.True(t, kicked(), "cached already: kicked at once")
	require.Equal(t, int32(1), gets.Load())

	done := make(chan struct{})
	go func() { in.kickWhenCached(ctx, older); close(done) }()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "it waits on the janitor's clock")
	require.False(t, kicked(), "not cached yet: waiting")
	clk.Step(6 * time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("kickWhenCached did not give up after 5 s on its clock")
	}
	require.True(t, kicked(), "it kicks anyway after 5 s")
}
