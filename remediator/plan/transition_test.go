package plan

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestAdvanceEventTypes: only success is Normal; every other end is a
// Warning, so `kubectl get events --field-selector type=Warning` lists them.
func TestAdvanceEventTypes(t *testing.T) {
	failed := Advance(AdvanceInput{Op: op("op", "n1"), Now: now})
	require.Equal(t, corev1.EventTypeWarning, failed.Events[0].Type)
	ok := Advance(AdvanceInput{Op: op("op", "n1", phase(v1alpha1.PhaseVerifying)), Node: node("n1"), Now: now})
	require.Equal(t, v1alpha1.PhaseSucceeded, ok.Status.Phase)
	require.Equal(t, corev1.EventTypeNormal, ok.Events[0].Type)
}
