package policies

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// Defaults the API server applies from the CRD schema. SetDefaults applies the
// same values so that the CLI sees what the cluster will store; a test checks
// the two agree.
const (
	DefaultConditionFor     = 5 * time.Minute
	DefaultHealthyFor       = 2 * time.Minute
	DefaultRecoveryTimeout  = 10 * time.Minute
	DefaultDrainTimeout     = 10 * time.Minute
	DefaultBreakerCooldown  = 15 * time.Minute
	DefaultNodeCooldown     = 30 * time.Minute
	DefaultAttemptWindow    = 24 * time.Hour
	DefaultTemplateTimeout  = 10 * time.Minute
	DefaultMaxUnhealthy     = "30%"
	DefaultMaxConcurrent    = 1
	DefaultTimeZone         = "UTC"
	DefaultConditionStatus  = corev1.ConditionTrue
	DefaultSuccessCriterion = v1alpha1.SuccessPodSucceeded
	DefaultMetal3Mode       = "hard"
	DefaultRedfishReset     = "PowerCycle"
)

// The claim → send → record protocol of a Slack notice, shared by the
// janitor's notices and the remediator's drain notices (each kept in the
// API server): NoticeSendTimeout bounds one send, Slack's retries and
// Retry-After waits included; a claimed notice whose send was not recorded
// within NoticeClaimTimeout (longer than a send) is anyone's to send again,
// so a crash or lost answer repeats a message at worst, never loses it.
const (
	NoticeSendTimeout  = 90 * time.Second
	NoticeClaimTimeout = 3 * time.Minute
)

// DefaultDiagnosticsWhen is when a capture runs when its spec says nothing.
const DefaultDiagnosticsWhen = v1alpha1.DiagnosticsBeforeDrain

// StepDiagnostics is the capture for a step: its own, else the policy's for
// a step that runs an operation; nil for none (and for a quarantine, which
// changes nothing on the node).
func StepDiagnostics(p *v1alpha1.RemediationPolicySpec, st *v1alpha1.RemediationStep) *v1alpha1.DiagnosticsSpec {
	switch {
	case st.Quarantine:
		return nil
	case st.Diagnostics != nil:
		return st.Diagnostics
	case st.Operation != "":
		return p.Diagnostics
	}
	return nil
}

// StepValidate is the active GPU test for a step: its own, else the
// policy's for a step that runs an operation; nil for none (and for a
// quarantine, which repairs nothing).
func StepValidate(p *v1alpha1.RemediationPolicySpec, st *v1alpha1.RemediationStep) *v1alpha1.ValidateSpec {
	switch {
	case st.Quarantine:
		return nil
	case st.Validate != nil:
		return st.Validate
	case st.Operation != "":
		return p.Validate
	}
	return nil
}

// ValidateTimeout is how long one attempt of an active GPU test may take:
// its own timeout, else its template's, else DefaultTemplateTimeout.
func ValidateTimeout(v *v1alpha1.ValidateSpec, tpl *v1alpha1.NodeOperationTemplate) time.Duration {
	switch {
	case v.Timeout != nil:
		return v.Timeout.Duration
	case tpl != nil && tpl.Spec.Timeout != nil:
		return tpl.Spec.Timeout.Duration
	}
	return DefaultTemplateTimeout
}

// DiagnosticsTimeout is how long a capture may take: its own timeout, else
// its template's, else DefaultTemplateTimeout; ok is false when neither is
// set and the template is unknown.
func DiagnosticsTimeout(d *v1alpha1.DiagnosticsSpec, tpl *v1alpha1.NodeOperationTemplate) (time.Duration, bool) {
	switch {
	case d.Timeout != nil:
		return d.Timeout.Duration, true
	case tpl != nil && tpl.Spec.Timeout != nil:
		return tpl.Spec.Timeout.Duration, true
	case tpl != nil:
		return DefaultTemplateTimeout, true
	}
	return 0, false
}

// SetDefaults fills unset fields of a kubemedic object with the defaults the
// API server would apply. Objects of other types are left alone.
func SetDefaults(obj runtime.Object) {
	switch o := obj.(type) {
	case *v1alpha1.RemediationPolicy:
		defaultRemediationPolicy(&o.Spec)
	case *v1alpha1.NodeOperationTemplate:
		if o.Spec.SuccessCriterion == "" {
			o.Spec.SuccessCriterion = DefaultSuccessCriterion
		}
		defaultDuration(&o.Spec.Timeout, DefaultTemplateTimeout)
		if m := o.Spec.Metal3; m != nil && m.Mode == "" {
			m.Mode = DefaultMetal3Mode
		}
		if r := o.Spec.Redfish; r != nil && r.ResetType == "" {
			r.ResetType = DefaultRedfishReset
		}
	case *v1alpha1.NodeOperation:
		if o.Spec.Drain != nil {
			defaultDrain(o.Spec.Drain)
		}
	case *v1alpha1.ValidationPolicy:
		if b := o.Spec.Background; b != nil {
			if b.PriorityClassName == "" {
				b.PriorityClassName = v1alpha1.DefaultBackgroundPriorityClass
			}
		}
	}
}

// BackgroundWaitFor is how long a background test pod may wait for the
// node's GPUs: the policy's waitFor, else the default.
func BackgroundWaitFor(b *v1alpha1.BackgroundSpec) time.Duration {
	if b.WaitFor != nil {
		return b.WaitFor.Duration
	}
	return v1alpha1.DefaultBackgroundWaitFor
}

// BackgroundRetryAfter is how long a preempted or put-off background test
// waits: the policy's retryAfter, else the default.
func BackgroundRetryAfter(b *v1alpha1.BackgroundSpec) time.Duration {
	if b.RetryAfter != nil {
		return b.RetryAfter.Duration
	}
	return v1alpha1.DefaultBackgroundRetryAfter
}

func defaultRemediationPolicy(s *v1alpha1.RemediationPolicySpec) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Status == "" {
			c.Status = DefaultConditionStatus
		}
		defaultDuration(&c.For, DefaultConditionFor)
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		defaultDuration(&st.HealthyFor, DefaultHealthyFor)
		defaultDuration(&st.RecoveryTimeout, DefaultRecoveryTimeout)
		if st.Drain != nil {
			defaultDrain(st.Drain)
		}
	}
	sf := &s.Safety
	if sf.MaxUnhealthy == nil {
		v := intstr.FromString(DefaultMaxUnhealthy)
		sf.MaxUnhealthy = &v
	}
	defaultDuration(&sf.BreakerCooldown, DefaultBreakerCooldown)
	if sf.MaxConcurrent == nil {
		v := intstr.FromInt32(DefaultMaxConcurrent)
		sf.MaxConcurrent = &v
	}
	defaultDuration(&sf.NodeCooldown, DefaultNodeCooldown)
	if sf.AttemptCap != nil {
		defaultDuration(&sf.AttemptCap.Window, DefaultAttemptWindow)
	}
	for i := range sf.MaintenanceWindows {
		if sf.MaintenanceWindows[i].TimeZone == "" {
			sf.MaintenanceWindows[i].TimeZone = DefaultTimeZone
		}
	}
}

func defaultDrain(d *v1alpha1.DrainSpec) {
	defaultDuration(&d.Timeout, DefaultDrainTimeout)
	if d.Mode == "" {
		d.Mode = v1alpha1.DrainEvict
	}
}

// defaultDuration sets *d when it is unset. An explicit "0s" is kept, as the
// API server keeps it.
func defaultDuration(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}
