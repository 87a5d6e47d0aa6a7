package v1alpha1

// This file holds every condition type, condition reason and Event reason
// that the remediator writes on a RemediationPolicy. They are stable API:
// alerts (KubemedicBreakerOpen), runbooks and dashboards key on them, so
// code never spells them as literals.

// Condition types of RemediationPolicy.
const (
	// PolicyReady is True when the policy is valid and its templates exist.
	PolicyReady = "Ready"
	// PolicyBreakerOpen is True while the circuit breaker stops new operations.
	PolicyBreakerOpen = "BreakerOpen"
	// PolicyPaused is True while spec.paused is set.
	PolicyPaused = "Paused"
)

// Reasons of the Ready condition (also TemplateNotFound, when a template
// the policy names does not exist).
const (
	// ReasonInvalid: the policy does not compile; it acts on nothing.
	ReasonInvalid = "Invalid"
	// ReasonEvaluated: the policy was evaluated and its templates exist.
	ReasonEvaluated = "Evaluated"
)

// Reasons of the Paused condition (True: ReasonPaused).
const (
	// ReasonActive: spec.paused is not set; the policy starts operations.
	ReasonActive = "Active"
)

// Reasons of the BreakerOpen condition.
const (
	// ReasonBreakerTripped: more selected nodes are unhealthy than
	// maxUnhealthy.
	ReasonBreakerTripped = "TooManyUnhealthy"
	// ReasonBreakerCoolingDown: the count is back within the limit, and the
	// breaker stays open for breakerCooldown.
	ReasonBreakerCoolingDown = "CoolingDown"
	// ReasonBreakerWithinLimit: the count is within the limit.
	ReasonBreakerWithinLimit = "WithinLimit"
	// ReasonBreakerManualReset: a human reset the breaker with the
	// kubemedic.io/reset-breaker annotation.
	ReasonBreakerManualReset = "ManualReset"
)

// Event reasons on a RemediationPolicy (also ReasonBreakerOpen, when the
// breaker opens, and EventCreateFailed).
const (
	// EventPolicyInvalid: the policy does not compile.
	EventPolicyInvalid = "PolicyInvalid"
	// EventBreakerClosed: the breaker closed again.
	EventBreakerClosed = "BreakerClosed"
)
