package demo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDeletionBegan: an evicted pod's deletionTimestamp is the end of its
// grace period; its replacement, created at the eviction, must not look
// older than the eviction (the timeline then missed the reschedule).
func TestDeletionBegan(t *testing.T) {
	evicted := time.Date(2026, 11, 29, 4, 19, 1, 0, time.UTC)
	for _, tc := range []struct {
		desc  string
		grace *int64
		want  time.Time
	}{
		{"30 s of grace", ptr.To[int64](30), evicted},
		{"no grace", ptr.To[int64](0), evicted},
		{"grace unknown", nil, evicted},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			end := evicted
			if tc.grace != nil {
				end = evicted.Add(time.Duration(*tc.grace) * time.Second)
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.NewTime(end)), DeletionGracePeriodSeconds: tc.grace}}
			require.Equal(t, tc.want, deletionBegan(p))
		})
	}
}
