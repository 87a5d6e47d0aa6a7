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

// TestEventOrder: the Events of a step keep their order when some are
// emitted as soon as the effect is made and the others after the status
// write, and a machine request waits for the Events of the steps before it.
func TestEventOrder(t *testing.T) {
	cordon := Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventCordoned, Action: "Cordon", Note: "node cordoned"}
	drained := Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.ReasonDrained, Action: "Drain", Note: "drained"}
	asked := Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventMachineRequested, Action: "Request", Note: "asked Machine capi/md-0", OnEffect: true}
	asked2 := Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.EventMachineRequested, Action: "Request", Note: "asked again", OnEffect: true}
	for _, tc := range []struct {
		desc           string
		effect         Effect
		events         []Event
		pending        int
		wantOnEffect   []Event
		wantAfterWrite []Event
		wantHold       bool
	}{
		{desc: "no events: nothing to emit, nothing held"},
		{desc: "only on-effect events are emitted when the effect is made",
			effect: EffectMachineRequest, events: []Event{asked}, wantOnEffect: []Event{asked}},
		{desc: "only after-write events wait for the status write",
			effect: EffectCordon, events: []Event{cordon, drained}, wantAfterWrite: []Event{cordon, drained}},
		{desc: "mixed events are split, each part in its order",
			effect: EffectMachineRequest, events: []Event{cordon, asked, drained, asked2},
			wantOnEffect: []Event{asked, asked2}, wantAfterWrite: []Event{cordon, drained}},
		{desc: "a machine request with no Events pending is made in this pass",
			effect: EffectMachineRequest, events: []Event{asked}, wantOnEffect: []Event{asked}},
		{desc: "a machine request waits for the Events of the steps before it",
			effect: EffectMachineRequest, events: []Event{asked}, pending: 2, wantOnEffect: []Event{asked}, wantHold: true},
		{desc: "another effect with Events pending is made in this pass",
			effect: EffectDrain, events: []Event{drained}, pending: 1, wantAfterWrite: []Event{drained}},
		{desc: "no effect with Events pending is not held",
			effect: EffectNone, pending: 3},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			onEffect, afterWrite := SplitEvents(tc.events)
			require.Equal(t, tc.wantOnEffect, onEffect, "on effect")
			require.Equal(t, tc.wantAfterWrite, afterWrite, "after the write")
			require.Equal(t, tc.wantHold, HoldForEvents(tc.effect, tc.pending), "hold")
		})
	}
}
