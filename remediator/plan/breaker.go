package plan

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Breaker is the circuit breaker's state after one evaluation.
type Breaker struct {
	// Open stops the policy from starting anything new.
	Open bool
	// Reason and Message for the BreakerOpen condition.
	Reason, Message string
	// Opened is true when this evaluation opened it.
	Opened bool
	// BelowLimitSince is when an open breaker's count fell within the limit.
	BelowLimitSince *time.Time
	// ResetValue is the reset annotation value acted on.
	ResetValue string
	// Next is when the breaker closes by itself if nothing changes.
	Next time.Time
}

// EvaluateBreaker computes the breaker of a policy from its status (the
// BreakerOpen condition, breakerBelowLimitSince and lastBreakerReset, as
// stored in the API server), its reset annotation, the unhealthy count and
// the limit.
func EvaluateBreaker(p *v1alpha1.RemediationPolicy, unhealthy, limit int, now time.Time) Breaker {
	cooldown := time.Duration(0)
	if c := p.Spec.Safety.BreakerCooldown; c != nil {
		cooldown = c.Duration
	}
	prev := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen)
	wasOpen := prev != nil && prev.Status == metav1.ConditionTrue
	counts := fmt.Sprintf("%d unhealthy nodes, limit %d", unhealthy, limit)
	b := Breaker{ResetValue: p.Status.LastBreakerReset}

	if v := p.Annotations[v1alpha1.AnnotationResetBreaker]; v != "" && v != p.Status.LastBreakerReset {
		b.ResetValue = v
		b.Reason = v1alpha1.ReasonBreakerManualReset
		b.Message = fmt.Sprintf("reset by annotation %s=%q with %s", v1alpha1.AnnotationResetBreaker, v, counts)
		return b
	}
	over := unhealthy > limit
	switch {
	case !wasOpen && prev != nil && prev.Reason == v1alpha1.ReasonBreakerManualReset && over:
		b.Reason = v1alpha1.ReasonBreakerManualReset
		b.Message = fmt.Sprintf("held closed by a manual reset (%s=%q) with %s", v1alpha1.AnnotationResetBreaker, p.Status.LastBreakerReset, counts)
	case !wasOpen && over:
		b.Open, b.Opened = true, true
		b.Reason = v1alpha1.ReasonBreakerTripped
		b.Message = fmt.Sprintf("%s: starting nothing new", counts)
	case !wasOpen:
		b.Reason = v1alpha1.ReasonBreakerWithinLimit
		b.Message = counts
	case over:
		b.Open = true
		b.Reason = v1alpha1.ReasonBreakerTripped
		b.Message = fmt.Sprintf("%s: starting nothing new", counts)
	default:
		since := now
		if s := p.Status.BreakerBelowLimitSince; s != nil && !s.Time.After(now) {
			since = s.Time
		}
		if closeAt := since.Add(cooldown); now.Before(closeAt) {
			b.Open = true
			b.Reason = v1alpha1.ReasonBreakerCoolingDown
			b.BelowLimitSince = &since
			b.Next = closeAt
			b.Message = fmt.Sprintf("%s since %s: closes at %s unless it rises again", counts, since.UTC().Format(time.RFC3339), closeAt.UTC().Format(time.RFC3339))
		} else {
			b.Reason = v1alpha1.ReasonBreakerWithinLimit
			b.Message = fmt.Sprintf("%s for the cooldown of %s", counts, cooldown)
		}
	}
	return b
}

// BreakerOpen reports whether the policy's stored status says its breaker is
// open. Admission reads this, not a fresh count, so that every decision sees
// the state the policy reconciler recorded (and announced).
func BreakerOpen(p *v1alpha1.RemediationPolicy) (bool, string) {
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false, ""
	}
	return true, c.Message
}
