package evict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
)

// The errors below are built the way the API server's eviction handler
// (pkg/registry/core/pod/storage/eviction.go, Kubernetes 1.36) builds them.

func budgetZeroErr() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget trainer needs 2 healthy pods and has 2 currently",
	})
	return err
}

func budgetStaleErr() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget trainer is still being processed by the server.",
	})
	return err
}

func severalBudgetsErr() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
	}}
}

var podsResource = schema.GroupResource{Resource: "pods"}

// fakeServer answers evictions and deletions of the pods it has an error
// for with that error, and records the calls.
type fakeServer struct {
	mu      sync.Mutex
	errs    map[string]error // by pod name
	evicted []string         // "name uid-precondition"
	deleted []string
}

func (f *fakeServer) client(t *testing.T, pods ...string) client.Client {
	objs := make([]client.Object, len(pods))
	for i, name := range pods {
		objs[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-ns-" + name)}}
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
				require.Equal(t, "eviction", sub)
				ev, ok := subObj.(*policyv1.Eviction)
				require.True(t, ok, "eviction body is %T", subObj)
				require.Equal(t, obj.GetName(), ev.Name)
				require.Equal(t, obj.GetNamespace(), ev.Namespace)
				uid := ""
				if ev.DeleteOptions != nil && ev.DeleteOptions.Preconditions != nil && ev.DeleteOptions.Preconditions.UID != nil {
					uid = string(*ev.DeleteOptions.Preconditions.UID)
				}
				f.mu.Lock()
				f.evicted = append(f.evicted, obj.GetName()+" "+uid)
				err := f.errs[obj.GetName()]
				f.mu.Unlock()
				if err != nil {
					return err
				}
				return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				do := (&client.DeleteOptions{}).ApplyOptions(opts)
				uid := ""
				if do.Preconditions != nil && do.Preconditions.UID != nil {
					uid = string(*do.Preconditions.UID)
				}
				f.mu.Lock()
				f.deleted = append(f.deleted, obj.GetName()+" "+uid)
				err := f.errs[obj.GetName()]
				f.mu.Unlock()
				if err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}).Build()
}

func TestEvictorEvict(t *testing.T) {
	tests := []struct {
		desc    string
		err     error // what the API server answers; nil: the eviction goes through
		missing bool  // the pod does not exist
		want    Outcome
		wantErr string
	}{
		{desc: "accepted", want: Outcome{Result: ResultEvicted}},
		{desc: "pod already gone", missing: true, want: Outcome{Result: ResultGone}},
		{
			desc: "budget allows no disruption: blocked with the server's reason",
			err:  budgetZeroErr(),
			want: Outcome{Result: ResultBlocked, Message: "Cannot evict pod as it would violate the pod's disruption budget: The disruption budget trainer needs 2 healthy pods and has 2 currently"},
		},
		{
			desc: "budget not processed yet: blocked",
			err:  budgetStaleErr(),
			want: Outcome{Result: ResultBlocked, Message: "Cannot evict pod as it would violate the pod's disruption budget: The disruption budget trainer is still being processed by the server."},
		},
		{
			desc: "pod covered by several budgets (500): blocked",
			err:  severalBudgetsErr(),
			want: Outcome{Result: ResultBlocked, Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
		},
		{
			desc:    "429 without a budget cause is the API server throttling: an error",
			err:     apierrors.NewTooManyRequests("Too many requests, please try again later.", 1),
			wantErr: "evict pod ns/a: Too many requests, please try again later.",
		},
		{
			desc:    "another 500: an error",
			err:     apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
			wantErr: "evict pod ns/a: Internal error occurred: etcdserver: request timed out",
		},
		{
			desc:    "negative disruptionsAllowed is forbidden: an error",
			err:     apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}, "trainer", errors.New("pdb disruptions allowed is negative")),
			wantErr: "evict pod ns/a: poddisruptionbudget.policy \"trainer\" is forbidden: pdb disruptions allowed is negative",
		},
		{
			desc:    "a conflict without a UID precondition is an error",
			err:     apierrors.NewConflict(podsResource, "a", errors.New("the object has been modified")),
			wantErr: "evict pod ns/a: Operation cannot be fulfilled on pods \"a\"",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			srv := &fakeServer{errs: map[string]error{"a": tc.err}}
			pods := []string{"a"}
			if tc.missing {
				pods = nil
			}
			ev := &Evictor{Client: srv.client(t, pods...)}
			got, err := ev.Evict(t.Context(), types.NamespacedName{Namespace: "ns", Name: "a"})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Equal(t, Outcome{}, got)
				require.Equal(t, tc.err, errors.Unwrap(err), "the API error is wrapped, not flattened")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want.Result == ResultBlocked, got.Blocked())
			require.Equal(t, []string{"a "}, srv.evicted, "Evict sends no UID precondition")
		})
	}
}

func TestEvictorDelete(t *testing.T) {
	srv := &fakeServer{errs: map[string]error{
		"broken": apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
	}}
	c := srv.client(t, "a", "broken")
	ev := &Evictor{Client: c}
	ctx := t.Context()

	require.NoError(t, ev.Delete(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}))
	err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}, &corev1.Pod{})
	require.True(t, apierrors.IsNotFound(err), "pod deleted: %v", err)

	require.NoError(t, ev.Delete(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}), "NotFound is success")

	err = ev.Delete(ctx, types.NamespacedName{Namespace: "ns", Name: "broken"})
	require.ErrorContains(t, err, "delete pod ns/broken: ")
	require.True(t, apierrors.IsServiceUnavailable(err), "wrapped: %v", err)
}

func TestRun(t *testing.T) {
	srv := &fakeServer{errs: map[string]error{
		"blocked":   budgetZeroErr(),
		"throttled": apierrors.NewTooManyRequests("Too many requests, please try again later.", 1),
		// A pod replaced under the same name fails the UID precondition.
		"replaced":     apierrors.NewConflict(podsResource, "replaced", errors.New("Precondition failed: UID in precondition: uid-ns-replaced, UID in object meta: other")),
		"undeletable":  apierrors.NewInternalError(errors.New("etcdserver: leader changed")),
		"del-replaced": apierrors.NewConflict(podsResource, "del-replaced", errors.New("Precondition failed")),
	}}
	c := srv.client(t, "a", "blocked", "throttled", "replaced", "c", "old", "undeletable", "del-replaced")
	ev := &Evictor{Client: c}

	pods := []corev1.Pod{pod("ns/a"), pod("ns/blocked"), pod("ns/throttled"), pod("ns/replaced"), pod("ns/c"), pod("ns/gone")}
	d, err := drain.Plan(pods, v1alpha1.DrainSpec{}, t0, t0)
	require.NoError(t, err)

	stopped, blocked, err := Run(testCtx(t), ev, d)
	require.Equal(t, []drain.Stopped{{Pod: nn("ns/a"), UID: "uid-ns-a"}, {Pod: nn("ns/c"), UID: "uid-ns-c"}}, stopped,
		"only the evictions the API server accepted: not the blocked, throttled, replaced or vanished pods")
	require.Equal(t, []string{"ns/blocked: Cannot evict pod as it would violate the pod's disruption budget: The disruption budget trainer needs 2 healthy pods and has 2 currently"}, blocked)
	require.EqualError(t, err, "evict pod ns/throttled: Too many requests, please try again later.", "one failure does not stop the others")
	require.ErrorIs(t, err, srv.errs["throttled"], "the aggregate keeps the API error")
	require.Equal(t, []string{"a uid-ns-a", "blocked uid-ns-blocked", "c uid-ns-c", "gone uid-ns-gone", "replaced uid-ns-replaced", "throttled uid-ns-throttled"},
		srv.evicted, "every pod is tried, with its UID as precondition")
	for _, name := range []string{"a", "c"} {
		err := c.Get(testCtx(t), types.NamespacedName{Namespace: "ns", Name: name}, &corev1.Pod{})
		require.True(t, apierrors.IsNotFound(err), "%s evicted: %v", name, err)
	}

	t.Run("deletions after the timeout", func(t *testing.T) {
		pods := []corev1.Pod{pod("ns/old"), pod("ns/undeletable"), pod("ns/del-replaced"), pod("ns/vanished")}
		spec := v1alpha1.DrainSpec{Mode: v1alpha1.DrainDeleteAfterTimeout}
		d, err := drain.Plan(pods, spec, t0, t0.Add(policies.DefaultDrainTimeout))
		require.NoError(t, err)
		require.Len(t, d.Delete, 4)

		stopped, blocked, err := Run(testCtx(t), ev, d)
		require.Empty(t, blocked)
		require.Equal(t, []drain.Stopped{{Pod: nn("ns/old"), UID: "uid-ns-old", Deleted: true}}, stopped,
			"only the deletion the API server accepted: not the replaced, failed or vanished pods")
		require.EqualError(t, err, "delete pod ns/undeletable: Internal error occurred: etcdserver: leader changed")
		require.Equal(t, []string{"del-replaced uid-ns-del-replaced", "old uid-ns-old", "undeletable uid-ns-undeletable", "vanished uid-ns-vanished"}, srv.deleted)
		err = c.Get(testCtx(t), types.NamespacedName{Namespace: "ns", Name: "old"}, &corev1.Pod{})
		require.True(t, apierrors.IsNotFound(err), "old deleted: %v", err)
	})

	t.Run("pods stopped before the context ended are returned", func(t *testing.T) {
		srv := &fakeServer{}
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		c := srv.client(t, "x", "y")
		ev := &Evictor{Client: interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
				err := c.SubResource(sub).Create(ctx, obj, subObj, opts...)
				cancel() // the manager stops after the first eviction
				return err
			},
		})}
		d := drain.Decision{Evict: nns("ns/x", "ns/y"), Delete: nns("ns/z"), UIDs: map[types.NamespacedName]types.UID{nn("ns/x"): "uid-ns-x"}}
		stopped, _, err := Run(ctx, ev, d)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []drain.Stopped{{Pod: nn("ns/x"), UID: "uid-ns-x"}}, stopped)
		require.Equal(t, []string{"x uid-ns-x"}, srv.evicted)
	})

	t.Run("a deletion the server accepted is a stopped pod, an eviction after it is not run", func(t *testing.T) {
		srv := &fakeServer{}
		ev := &Evictor{Client: srv.client(t, "x", "y")}
		stopped, blocked, err := Run(testCtx(t), ev, drain.Decision{Evict: nns("ns/x"), Delete: nns("ns/y")})
		require.NoError(t, err)
		require.Empty(t, blocked)
		require.Equal(t, []drain.Stopped{{Pod: nn("ns/x")}, {Pod: nn("ns/y"), Deleted: true}}, stopped, "evictions first, then deletions; no UIDs in the decision, none in the answer")
	})

	t.Run("several failures are all reported", func(t *testing.T) {
		srv := &fakeServer{errs: map[string]error{
			"x": apierrors.NewInternalError(errors.New("boom x")),
			"y": apierrors.NewInternalError(errors.New("boom y")),
		}}
		ev := &Evictor{Client: srv.client(t, "x", "y")}
		stopped, _, err := Run(testCtx(t), ev, drain.Decision{Evict: nns("ns/x", "ns/y")})
		require.Empty(t, stopped)
		require.ErrorContains(t, err, "evict pod ns/x: Internal error occurred: boom x")
		require.ErrorContains(t, err, "evict pod ns/y: Internal error occurred: boom y")
	})

	t.Run("a cancelled context stops the run", func(t *testing.T) {
		srv := &fakeServer{}
		ev := &Evictor{Client: srv.client(t, "x", "y")}
		ctx, cancel := context.WithCancel(testCtx(t))
		cancel()
		stopped, _, err := Run(ctx, ev, drain.Decision{Evict: nns("ns/x", "ns/y"), Delete: nns("ns/z")})
		require.Empty(t, stopped)
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "evict pods: context canceled")
		require.Empty(t, srv.evicted)
		require.Empty(t, srv.deleted)
	})

	t.Run("a failed or done decision does nothing", func(t *testing.T) {
		srv := &fakeServer{}
		ev := &Evictor{Client: srv.client(t, "x")}
		for _, d := range []drain.Decision{{Done: true}, {Failed: true, Remaining: 1, Message: "drain timed out"}} {
			stopped, blocked, err := Run(testCtx(t), ev, d)
			require.NoError(t, err)
			require.Empty(t, blocked)
			require.Empty(t, stopped)
		}
		require.Empty(t, srv.evicted)
		require.Empty(t, srv.deleted)
	})
}

// testCtx returns the test's context with a logger that writes to t.
func testCtx(t *testing.T) context.Context {
	return log.IntoContext(t.Context(), testr.New(t))
}

func TestBudgetRefusalNeedsAnAPIStatus(t *testing.T) {
	for _, err := range []error{
		errors.New("Cannot evict pod as it would violate the pod's disruption budget."),
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded),
	} {
		_, ok := budgetRefusal(err)
		require.False(t, ok, "%v", err)
	}
	msg, ok := budgetRefusal(fmt.Errorf("evict: %w", budgetZeroErr()))
	require.True(t, ok, "a wrapped refusal is still one")
	require.Contains(t, msg, "needs 2 healthy pods")
}

// t0 is when the drains of these tests start.
var t0 = time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)

// pod returns a running pod "ns/name" with the UID "uid-ns-name", which is
// what the fake server gives the pods it holds.
func pod(key string) corev1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       corev1.PodSpec{NodeName: "gpu-node-000"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// nns returns the keys "ns/name" as NamespacedNames.
func nns(keys ...string) []types.NamespacedName {
	out := make([]types.NamespacedName, len(keys))
	for i, k := range keys {
		out[i] = nn(k)
	}
	return out
}

// nn is the key "ns/name" as a NamespacedName.
func nn(key string) types.NamespacedName {
	ns, name, _ := strings.Cut(key, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}
