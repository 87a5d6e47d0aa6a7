package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestEvaluateBreaker(t *testing.T) {
	open := func(reason string) policyOpt { return breakerStatus(metav1.ConditionTrue, reason, "") }
	closed := func(reason string) policyOpt { return breakerStatus(metav1.ConditionFalse, reason, "") }
	belowSince := func(at time.Time) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) { p.Status.BreakerBelowLimitSince = &metav1.Time{Time: at} }
	}
	reset := func(annotation, last string) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) {
			if annotation != "" {
				p.Annotations = map[string]string{v1alpha1.AnnotationResetBreaker: annotation}
			}
			p.Status.LastBreakerReset = last
		}
	}
	cooldown := func(d time.Duration) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) { p.Spec.Safety.BreakerCooldown = dur(d) }
	}
	at := func(t time.Time) *time.Time { return &t }

	for _, tc := range []struct {
		desc             string
		opts             []policyOpt
		unhealthy, limit int

		open, opened    bool
		reason          string
		belowLimitSince *time.Time
		next            time.Time
		resetValue      string
		message         string // substring
	}{
		{desc: "no status yet, within the limit: closed", unhealthy: 1, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit, message: "1 unhealthy nodes, limit 2"},
		{desc: "no status yet, over the limit: opens", unhealthy: 3, limit: 2,
			open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped, message: "3 unhealthy nodes, limit 2: starting nothing new"},
		{desc: "closed, exactly at the limit: stays closed", opts: []policyOpt{closed(v1alpha1.ReasonBreakerWithinLimit)}, unhealthy: 2, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit},
		{desc: "closed, over the limit: opens", opts: []policyOpt{closed(v1alpha1.ReasonBreakerWithinLimit)}, unhealthy: 3, limit: 2,
			open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped},
		{desc: "limit 0: the first unhealthy node opens it", opts: []policyOpt{closed(v1alpha1.ReasonBreakerWithinLimit)}, unhealthy: 1, limit: 0,
			open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped},
		{desc: "open, still over the limit: stays open, not newly opened", opts: []policyOpt{open(v1alpha1.ReasonBreakerTripped)}, unhealthy: 5, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerTripped},
		{desc: "open, back within the limit: cooling down from now", opts: []policyOpt{open(v1alpha1.ReasonBreakerTripped)}, unhealthy: 2, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(now), next: now.Add(15 * time.Minute),
			message: "closes at 2026-03-04T12:15:00Z"},
		{desc: "cooling down: keeps the stored time, Next is since+cooldown", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(5 * time.Minute))}, unhealthy: 0, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(ago(5 * time.Minute)), next: now.Add(10 * time.Minute)},
		{desc: "cooling down, a second before the cooldown ends: still open", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(15*time.Minute - time.Second))}, unhealthy: 0, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(ago(15*time.Minute - time.Second)), next: now.Add(time.Second)},
		{desc: "cooling down for exactly the cooldown: closes", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(15 * time.Minute))}, unhealthy: 1, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit, message: "for the cooldown of 15m0s"},
		{desc: "cooling down for longer than the cooldown: closes", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(time.Hour))}, unhealthy: 1, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit},
		{desc: "a custom cooldown", opts: []policyOpt{cooldown(time.Hour), open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(30 * time.Minute))}, unhealthy: 1, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(ago(30 * time.Minute)), next: now.Add(30 * time.Minute)},
		{desc: "cooldown 0: closes as soon as the count is within the limit", opts: []policyOpt{cooldown(0), open(v1alpha1.ReasonBreakerTripped)}, unhealthy: 1, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit},
		{desc: "rises again during the cooldown: open, the below-limit time cleared", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(10 * time.Minute))}, unhealthy: 3, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerTripped},
		{desc: "a stored below-limit time in the future (clock skew) counts from now", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(now.Add(time.Hour))}, unhealthy: 0, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(now), next: now.Add(15 * time.Minute)},

		// Manual reset.
		{desc: "a new reset annotation closes an open breaker even over the limit", opts: []policyOpt{open(v1alpha1.ReasonBreakerTripped), reset("2026-03-04T11:59", "")}, unhealthy: 5, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "2026-03-04T11:59", message: `reset by annotation kubemedic.io/reset-breaker="2026-03-04T11:59" with 5 unhealthy nodes, limit 2`},
		{desc: "a new reset annotation closes a cooling-down breaker", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(time.Minute)), reset("x", "")}, unhealthy: 1, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "x"},
		{desc: "a reset annotation different from the last one acted on resets again", opts: []policyOpt{open(v1alpha1.ReasonBreakerTripped), reset("2", "1")}, unhealthy: 5, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "2"},
		{desc: "after a reset, still over the limit: held closed", opts: []policyOpt{closed(v1alpha1.ReasonBreakerManualReset), reset("1", "1")}, unhealthy: 5, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "1", message: "held closed by a manual reset"},
		{desc: "after a reset, the count rising further: still held closed", opts: []policyOpt{closed(v1alpha1.ReasonBreakerManualReset), reset("1", "1")}, unhealthy: 50, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "1"},
		{desc: "after a reset, back within the limit: normal rules resume", opts: []policyOpt{closed(v1alpha1.ReasonBreakerManualReset), reset("1", "1")}, unhealthy: 2, limit: 2,
			reason: v1alpha1.ReasonBreakerWithinLimit, resetValue: "1"},
		{desc: "normal rules resumed after a reset: over the limit opens again", opts: []policyOpt{closed(v1alpha1.ReasonBreakerWithinLimit), reset("1", "1")}, unhealthy: 3, limit: 2,
			open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped, resetValue: "1"},
		{desc: "the annotation value already acted on does nothing to an open breaker", opts: []policyOpt{open(v1alpha1.ReasonBreakerTripped), reset("1", "1")}, unhealthy: 5, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerTripped, resetValue: "1"},
		{desc: "the annotation value already acted on does nothing to a cooling-down breaker", opts: []policyOpt{open(v1alpha1.ReasonBreakerCoolingDown), belowSince(ago(time.Minute)), reset("1", "1")}, unhealthy: 0, limit: 2,
			open: true, reason: v1alpha1.ReasonBreakerCoolingDown, belowLimitSince: at(ago(time.Minute)), next: now.Add(14 * time.Minute), resetValue: "1"},
		{desc: "the annotation removed after a reset: the last value is kept", opts: []policyOpt{closed(v1alpha1.ReasonBreakerManualReset), reset("", "1")}, unhealthy: 5, limit: 2,
			reason: v1alpha1.ReasonBreakerManualReset, resetValue: "1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := policy(t, "gpu", tc.opts...)
			before := p.Obj.DeepCopy()
			b := EvaluateBreaker(p.Obj, tc.unhealthy, tc.limit, now)
			require.Equal(t, tc.open, b.Open, "open")
			require.Equal(t, tc.opened, b.Opened, "opened")
			require.Equal(t, tc.reason, b.Reason, "reason")
			require.Equal(t, tc.belowLimitSince, b.BelowLimitSince, "belowLimitSince")
			require.Equal(t, tc.next, b.Next, "next")
			require.Equal(t, tc.resetValue, b.ResetValue, "resetValue")
			require.NotEmpty(t, b.Message)
			require.Contains(t, b.Message, tc.message)
			require.Equal(t, before, p.Obj, "EvaluateBreaker changed the policy")
		})
	}
}

// TestBreakerOverTime runs the breaker through a day of a cluster, storing
// each result in the status as the policy reconciler does, so that each step
// decides from what the step before recorded.
func TestBreakerOverTime(t *testing.T) {
	p := policy(t, "gpu").Obj // breakerCooldown 15m by default
	type step struct {
		at         time.Duration // after now
		unhealthy  int
		annotation string
		open       bool
		reason     string
		opened     bool
		next       time.Duration // after now; 0: none
	}
	const limit = 2
	for i, s := range []step{
		{at: 0, unhealthy: 0, reason: v1alpha1.ReasonBreakerWithinLimit},
		{at: time.Minute, unhealthy: 2, reason: v1alpha1.ReasonBreakerWithinLimit},
		{at: 2 * time.Minute, unhealthy: 3, open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped},
		{at: 3 * time.Minute, unhealthy: 4, open: true, reason: v1alpha1.ReasonBreakerTripped},
		{at: 4 * time.Minute, unhealthy: 2, open: true, reason: v1alpha1.ReasonBreakerCoolingDown, next: 19 * time.Minute},
		{at: 10 * time.Minute, unhealthy: 1, open: true, reason: v1alpha1.ReasonBreakerCoolingDown, next: 19 * time.Minute},
		{at: 11 * time.Minute, unhealthy: 3, open: true, reason: v1alpha1.ReasonBreakerTripped},
		{at: 12 * time.Minute, unhealthy: 2, open: true, reason: v1alpha1.ReasonBreakerCoolingDown, next: 27 * time.Minute},
		{at: 27 * time.Minute, unhealthy: 2, reason: v1alpha1.ReasonBreakerWithinLimit},
		{at: 28 * time.Minute, unhealthy: 6, open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped},
		{at: 30 * time.Minute, unhealthy: 6, annotation: "first", reason: v1alpha1.ReasonBreakerManualReset},
		{at: 31 * time.Minute, unhealthy: 7, annotation: "first", reason: v1alpha1.ReasonBreakerManualReset},
		{at: 40 * time.Minute, unhealthy: 1, annotation: "first", reason: v1alpha1.ReasonBreakerWithinLimit},
		{at: 41 * time.Minute, unhealthy: 3, annotation: "first", open: true, opened: true, reason: v1alpha1.ReasonBreakerTripped},
		{at: 42 * time.Minute, unhealthy: 3, annotation: "second", reason: v1alpha1.ReasonBreakerManualReset},
	} {
		at := now.Add(s.at)
		if s.annotation != "" {
			p.Annotations = map[string]string{v1alpha1.AnnotationResetBreaker: s.annotation}
		}
		b := EvaluateBreaker(p, s.unhealthy, limit, at)
		require.Equal(t, s.open, b.Open, "step %d at +%s: open", i, s.at)
		require.Equal(t, s.reason, b.Reason, "step %d at +%s: reason", i, s.at)
		require.Equal(t, s.opened, b.Opened, "step %d at +%s: opened", i, s.at)
		wantNext := time.Time{}
		if s.next != 0 {
			wantNext = now.Add(s.next)
		}
		require.Equal(t, wantNext, b.Next, "step %d at +%s: next", i, s.at)
		record(p, b, at)
		open, _ := BreakerOpen(p)
		require.Equal(t, s.open, open, "step %d: BreakerOpen reads back what was recorded", i)
	}
}

// record stores a breaker in the policy status as the policy reconciler does.
func record(p *v1alpha1.RemediationPolicy, b Breaker, at time.Time) {
	status := metav1.ConditionFalse
	if b.Open {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: v1alpha1.PolicyBreakerOpen, Status: status, Reason: b.Reason, Message: b.Message, LastTransitionTime: metav1.NewTime(at),
	})
	p.Status.BreakerBelowLimitSince = nil
	if b.BelowLimitSince != nil {
		p.Status.BreakerBelowLimitSince = &metav1.Time{Time: *b.BelowLimitSince}
	}
	p.Status.LastBreakerReset = b.ResetValue
}

func TestBreakerOpen(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		opts    []policyOpt
		open    bool
		message string
	}{
		{desc: "no condition: closed"},
		{desc: "condition False: closed", opts: []policyOpt{breakerStatus(metav1.ConditionFalse, v1alpha1.ReasonBreakerWithinLimit, "1 unhealthy nodes, limit 2")}},
		{desc: "condition Unknown: closed", opts: []policyOpt{breakerStatus(metav1.ConditionUnknown, "Unknown", "")}},
		{desc: "condition True: open, with its message", opts: []policyOpt{breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerTripped, "5 unhealthy nodes, limit 2")},
			open: true, message: "5 unhealthy nodes, limit 2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			open, msg := BreakerOpen(policy(t, "gpu", tc.opts...).Obj)
			require.Equal(t, tc.open, open)
			require.Equal(t, tc.message, msg)
		})
	}
}
