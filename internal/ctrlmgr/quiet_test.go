package ctrlmgr

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubemedic/kubemedic/test/metricstest"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// conflict is the API server's 409 for an update with a stale
// resourceVersion.
var conflict = apierrors.NewConflict(schema.GroupResource{Group: "kubemedic.io", Resource: "nodeoperations"}, "op",
	errors.New("the object has been modified; please apply your changes to the latest version and try again"))

func TestOnlyConflicts(t *testing.T) {
	other := errors.New("the API server is away")
	for _, tc := range []struct {
		desc string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"a conflict", conflict, true},
		{"a conflict wrapped twice", fmt.Errorf("patch status of op: %w", fmt.Errorf("write: %w", conflict)), true},
		{"another API error", apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "gpu-0"), false},
		{"another error", other, false},
		{"conflicts joined", errors.Join(conflict, fmt.Errorf("node gpu-1: %w", conflict)), true},
		{"a conflict joined with another error", errors.Join(conflict, other), false},
		{"a conflict wrapped with another error (two %w)", fmt.Errorf("%w; then %w", conflict, other), false},
		{"a wrapped join of a conflict and another error", fmt.Errorf("pass: %w", errors.Join(conflict, other)), false},
		{"an aggregate of conflicts", utilerrors.NewAggregate([]error{conflict, conflict}), true},
		{"an aggregate of a conflict and another error", utilerrors.NewAggregate([]error{conflict, other}), false},
		{"the message of a conflict without its type", errors.New(conflict.Error()), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, OnlyConflicts(tc.err))
		})
	}
}

// scripted returns its results in order, one per Reconcile.
type scripted struct {
	results []reconcile.Result
	errs    []error
	calls   int
}

func (s *scripted) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	i := s.calls
	s.calls++
	return s.results[i], s.errs[i]
}

func TestQuietConflicts(t *testing.T) {
	other := errors.New("the API server is away")
	req := reconcile.Request{}
	req.Name = "xid.gpu-0.1a2b3c4d-0"
	type pass struct {
		res    reconcile.Result
		err    error
		cancel bool // the context ended during the pass (shutdown)

		want    reconcile.Result
		wantErr error
		// counted: the conflicts total after the pass; debug: the
		// lines logged at V(1) by then.
		counted float64
		debug   int
	}
	for _, tc := range []struct {
		desc   string
		passes []pass
	}{
		{desc: "success passes through", passes: []pass{
			{res: reconcile.Result{RequeueAfter: time.Minute}, want: reconcile.Result{RequeueAfter: time.Minute}},
		}},
		{desc: "a conflict is requeued after the base delay, counted and logged at debug", passes: []pass{
			{err: conflict, want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 1, debug: 1},
		}},
		{desc: "a wrapped conflict too; the result of the failed pass is not kept", passes: []pass{
			{res: reconcile.Result{RequeueAfter: time.Hour}, err: fmt.Errorf("patch status of op: %w", conflict),
				want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 1, debug: 1},
		}},
		{desc: "conflicts in a row back off; a success starts over", passes: []pass{
			{err: conflict, want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 1, debug: 1},
			{err: conflict, want: reconcile.Result{RequeueAfter: 2 * ConflictBaseDelay}, counted: 2, debug: 2},
			{err: conflict, want: reconcile.Result{RequeueAfter: 4 * ConflictBaseDelay}, counted: 3, debug: 3},
			{want: reconcile.Result{}, counted: 3, debug: 3},
			{err: conflict, want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 4, debug: 4},
		}},
		{desc: "another error starts the backoff over too, and is returned", passes: []pass{
			{err: conflict, want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 1, debug: 1},
			{err: other, wantErr: other, counted: 1, debug: 1},
			{err: conflict, want: reconcile.Result{RequeueAfter: ConflictBaseDelay}, counted: 2, debug: 2},
		}},
		{desc: "a conflict beside another error is an error", passes: []pass{
			{err: errors.Join(conflict, other), wantErr: other},
		}},
		{desc: "a terminal error is returned as it is, even a conflict", passes: []pass{
			{err: reconcile.TerminalError(conflict), wantErr: conflict},
		}},
		{desc: "an error once the context ended is dropped, logged at debug, not counted", passes: []pass{
			{err: fmt.Errorf("get node gpu-0: %w", context.Canceled), cancel: true, debug: 1},
		}},
		{desc: "a conflict once the context ended is a shutdown, not a conflict", passes: []pass{
			{err: conflict, cancel: true, debug: 1},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			inner := &scripted{}
			for _, p := range tc.passes {
				inner.results = append(inner.results, p.res)
				inner.errs = append(inner.errs, p.err)
			}
			total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conflicts_total"}, []string{"controller"})
			reg := prometheus.NewRegistry()
			reg.MustRegister(total)
			q := QuietConflicts("nodeoperation", inner, total)
			require.Equal(t, []string{"nodeoperation"}, metricstest.Series(t, reg, "conflicts_total", "controller"), "the controller's series exists before any conflict")
			logs := &testsupport.LogCapture{}
			for i, p := range tc.passes {
				ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logs.Logger()))
				if p.cancel {
					cancel()
				}
				res, err := q.Reconcile(ctx, req)
				cancel()
				if p.wantErr != nil {
					require.ErrorIs(t, err, p.wantErr, "pass %d", i)
				} else {
					require.NoError(t, err, "pass %d", i)
					require.Equal(t, p.want, res, "pass %d", i)
				}
				require.Equal(t, p.counted, metricstest.Value(t, reg, "conflicts_total", map[string]string{"controller": "nodeoperation"}), "pass %d", i)
				require.Empty(t, logs.Errors(), "pass %d", i)
				require.Len(t, logs.Entries(), p.debug, "pass %d", i)
				for _, e := range logs.Entries() {
					require.Equal(t, 1, e.Level, e.String())
				}
			}
			require.Equal(t, len(tc.passes), inner.calls)
		})
	}

	t.Run("without a metric: requeued, not counted", func(t *testing.T) {
		q := QuietConflicts("stackhealth", &scripted{results: []reconcile.Result{{}}, errs: []error{conflict}}, nil)
		res, err := q.Reconcile(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, reconcile.Result{RequeueAfter: ConflictBaseDelay}, res)
	})

	t.Run("the backoff is per request", func(t *testing.T) {
		inner := &scripted{results: make([]reconcile.Result, 3), errs: []error{conflict, conflict, conflict}}
		q := QuietConflicts("nodeoperation", inner, nil)
		a, b := reconcile.Request{}, reconcile.Request{}
		a.Name, b.Name = "a", "b"
		res, _ := q.Reconcile(context.Background(), a)
		require.Equal(t, ConflictBaseDelay, res.RequeueAfter)
		res, _ = q.Reconcile(context.Background(), b)
		require.Equal(t, ConflictBaseDelay, res.RequeueAfter, "b's first conflict")
		res, _ = q.Reconcile(context.Background(), a)
		require.Equal(t, 2*ConflictBaseDelay, res.RequeueAfter, "a's second")
	})
}

func TestQuietShutdownLogsLeaderElectionLostAtDebug(t *testing.T) {
	logs := &testsupport.LogCapture{}
	l := quietShutdown(logs.Logger()).WithName("manager").WithValues("k", "v")
	l.Error(errors.New(leaderElectionLost), stopSequenceEngaged)
	l.Error(errors.New("a runnable failed"), stopSequenceEngaged)
	l.Error(errors.New(leaderElectionLost), "Manager stopped with an error")
	l.V(1).Info("Debug")

	require.Equal(t, []string{
		`ERROR manager: error received after stop sequence was engaged err="a runnable failed" k=v`,
		`ERROR manager: Manager stopped with an error err="leader election lost" k=v`,
	}, logs.Errors(), "only the lease released on shutdown leaves the error log")
	var debug []string
	for _, e := range logs.Entries() {
		if !e.Error {
			require.Equal(t, 1, e.Level)
			debug = append(debug, e.String())
		}
	}
	require.Equal(t, []string{"V(1) manager: Leader election ended by the shutdown (the lease is released) k=v", "V(1) manager: Debug k=v"}, debug)
}
