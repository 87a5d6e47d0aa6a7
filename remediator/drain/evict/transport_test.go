package evict

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// statusServer answers every request with err's Status and its
// Retry-After header, as the API server's error writer does, and counts the
// requests.
func statusServer(t *testing.T, err *apierrors.StatusError, retryAfter int) (*rest.Config, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		status := err.ErrStatus
		status.Kind, status.APIVersion = "Status", "v1"
		body, jerr := json.Marshal(status)
		if jerr != nil {
			t.Errorf("marshal status: %v", jerr)
		}
		w.Header().Set("Content-Type", "application/json")
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.WriteHeader(int(status.Code))
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, &calls
}

func evictWith(ctx context.Context, t *testing.T, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs.PolicyV1().Evictions("train").Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: "trainer-0"},
	})
}

func TestEvictionConfigReturnsBudgetRefusalsAtOnce(t *testing.T) {
	cfg, calls := statusServer(t, budgetStaleErr().(*apierrors.StatusError), 10)

	start := time.Now()
	err := evictWith(t.Context(), t, EvictionConfig(cfg))
	require.Less(t, time.Since(start), 5*time.Second, "no 10 s Retry-After sleep")
	require.Equal(t, int32(1), calls.Load(), "not retried")
	msg, ok := budgetRefusal(err)
	require.True(t, ok, "the refusal arrives whole: %v", err)
	require.Equal(t, "Cannot evict pod as it would violate the pod's disruption budget: The disruption budget trainer is still being processed by the server.", msg)

	t.Run("the config passed in is not changed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		calls.Store(0)
		err := evictWith(ctx, t, cfg)
		// client-go sleeps on the Retry-After until the context ends, and
		// the 429 is lost on the way.
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, ok := budgetRefusal(err)
		require.False(t, ok)
		require.Equal(t, int32(1), calls.Load())
	})
}

func TestEvictionConfigLeavesOtherRetriesAlone(t *testing.T) {
	throttled := apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
	tests := []struct {
		desc string
		err  *apierrors.StatusError
		do   func(ctx context.Context, cs kubernetes.Interface) error
	}{
		{
			desc: "the API server throttling an eviction (429 without a budget cause)",
			err:  throttled,
			do: func(ctx context.Context, cs kubernetes.Interface) error {
				return cs.PolicyV1().Evictions("train").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: "trainer-0"}})
			},
		},
		{
			desc: "a budget-looking 429 to another request",
			err:  budgetStaleErr().(*apierrors.StatusError),
			do: func(ctx context.Context, cs kubernetes.Interface) error {
				_, err := cs.CoreV1().Pods("train").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
				return err
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, calls := statusServer(t, tc.err, 1)
			cs, err := kubernetes.NewForConfig(EvictionConfig(cfg))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			_ = tc.do(ctx, cs)
			require.GreaterOrEqual(t, calls.Load(), int32(2), "client-go still honours Retry-After")
		})
	}
}
