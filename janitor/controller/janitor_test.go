package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

func TestNoticeBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	j := &Janitor{Clock: clk}
	_, ok := j.backingOff("pod/a")
	require.False(t, ok, "no failure, no wait")
	for i, want := range []time.Duration{3 * time.Minute, 6 * time.Minute, 12 * time.Minute, 24 * time.Minute, 48 * time.Minute, time.Hour, time.Hour} {
		j.backOff("pod/a")
		until, ok := j.backingOff("pod/a")
		require.True(t, ok, "failure %d", i+1)
		require.Equal(t, clk.Now().Add(want), until, "failure %d", i+1)
	}
	clk.Step(time.Hour)
	_, ok = j.backingOff("pod/a")
	require.False(t, ok, "the wait ends")
	j.clearBackOff("pod/a")
	j.backOff("pod/a")
	until, _ := j.backingOff("pod/a")
	require.Equal(t, clk.Now().Add(3*time.Minute), until, "a success starts over")
	j.forget(map[string]bool{})
	_, ok = j.backingOff("pod/a")
	require.False(t, ok, "a pod no longer seen is forgotten")
}

// TestNoReclaimOnOldEvidence: a cycle slowed down past its interval does
// not act on what it read at its start. The Janitor has no clients: any
// API call would panic.
func TestNoReclaimOnOldEvidence(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	j := &Janitor{Clock: clk, Interval: time.Minute, Metrics: NewMetrics()}
	pp := &PodPlan{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}},
		Decision: decide.Decision{Step: decide.StepReclaim, Target: decide.Target{Kind: decide.TargetPod, Name: "p"}}}
	require.NotPanics(t, func() { j.act(context.Background(), pp, "pod/p", clk.Now().Add(-61*time.Second)) })
	require.Panics(t, func() { j.act(context.Background(), pp, "pod/p", clk.Now().Add(-59*time.Second)) },
		"fresh evidence goes on to the API server (nil here)")
}
