package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RemediationPolicy turns node conditions set by the detectors into
// NodeOperations on the matching nodes, one escalation step at a time, behind
// the safety limits in spec.safety.
//
// When several policies match the same node, the one with the highest
// spec.priority acts; ties go to the policy whose name sorts first. A node
// never has more than one active NodeOperation, whatever the policies.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rp,categories=kubemedic
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedNodes`
// +kubebuilder:printcolumn:name="Unhealthy",type=integer,JSONPath=`.status.unhealthyNodes`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeOperations`
// +kubebuilder:printcolumn:name="Breaker",type=string,JSONPath=`.status.conditions[?(@.type=="BreakerOpen")].status`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemediationPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RemediationPolicySpec `json:"spec"`
	// +optional
	Status RemediationPolicyStatus `json:"status,omitempty"`
}

// RemediationPolicySpec says which nodes, which faults, what to do about them
// and how carefully.
// +kubebuilder:validation:XValidation:rule="self.steps.all(s, !has(s.quarantine) || !s.quarantine || s == self.steps[size(self.steps)-1])",message="a quarantine step must be the last step"
type RemediationPolicySpec struct {
	// Description tells a human reader what the policy is for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// NodeSelector selects the nodes the policy covers. Empty selects every
	// node. The circuit breaker counts unhealthy nodes among these.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Conditions are the node conditions that make a node a target. A node is
	// a target when any one of them matches and has held for its `for`.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Conditions []ConditionMatch `json:"conditions"`

	// Steps is the escalation ladder. The first step runs when a node becomes
	// a target; when a step fails or the condition has not cleared within the
	// step's recoveryTimeout, the next step runs. When the last step fails the
	// node is quarantined (cordoned and tainted kubemedic.io/quarantined).
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	Steps []RemediationStep `json:"steps"`

	// Safety holds the limits that every new operation must pass.
	// +optional
	// +kubebuilder:default={}
	Safety Safety `json:"safety,omitempty"`

	// Priority decides between policies that match the same node: the highest
	// wins, then the name that sorts first.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// Paused stops the policy from starting new operations. Operations already
	// running finish.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DryRun makes the policy record what it would do (NodeOperations in
	// phase Skipped with reason DryRun, Events, metrics) without touching nodes.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Diagnostics is the capture for every step that runs an operation and
	// sets none of its own.
	// +optional
	Diagnostics *DiagnosticsSpec `json:"diagnostics,omitempty"`

	// Validate is the active GPU test for every step that runs an
	// operation and sets none of its own.
	// +optional
	Validate *ValidateSpec `json:"validate,omitempty"`
}

// ConditionMatch matches one node condition.
type ConditionMatch struct {
	// Type is the node condition type, e.g. GPUXidError.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Type string `json:"type"`

	// Status is the condition status that counts as unhealthy. For the
	// detectors' conditions that is True; for Ready it is False or Unknown.
	// +optional
	// +kubebuilder:default=True
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status corev1.ConditionStatus `json:"status,omitempty"`

	// Reason, when set, is an RE2 regular expression the condition's reason
	// must match in full (it is anchored), e.g. "XidRebootRequired|GPUFellOffBus".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`

	// For is how long the condition must have held, measured from its
	// lastTransitionTime, before the node becomes a target.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	For *metav1.Duration `json:"for,omitempty"`
}

// RemediationStep is one rung of the escalation ladder.
// +kubebuilder:validation:XValidation:rule="has(self.operation) != (has(self.quarantine) && self.quarantine)",message="a step sets exactly one of operation or quarantine: true"
// +kubebuilder:validation:XValidation:rule="!(has(self.quarantine) && self.quarantine) || !has(self.drain)",message="a quarantine step takes no drain: it cordons and taints, and leaves the pods to a human"
// +kubebuilder:validation:XValidation:rule="!(has(self.quarantine) && self.quarantine) || !has(self.validate)",message="a quarantine step takes no validate: nothing was repaired, and a human decides when the node serves again"
// +kubebuilder:validation:XValidation:rule="!has(self.validate) || (has(self.cordon) && self.cordon) || has(self.drain)",message="a step with validate must cordon (cordon: true, or a drain): the test pod takes every GPU of the node"
type RemediationStep struct {
	// Name identifies the step in NodeOperations, Events and metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// StepAction is what the step does: the operation, cordon, drain,
	// timeout and urgency, copied as one into the NodeOperation it makes.
	StepAction `json:",inline"`

	// HealthyFor is how long the triggering condition must stay False after
	// the operation before the step counts as a success and the node is
	// uncordoned.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	HealthyFor *metav1.Duration `json:"healthyFor,omitempty"`

	// RecoveryTimeout is how long to wait, after the operation, for the
	// condition to clear before escalating to the next step.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`
}

// StepAction is what a ladder step does to a node. RemediationStep and
// NodeOperationSpec share it, so an operation made from a step is one copy
// and the two cannot drift. Exactly one of operation and quarantine is set.
type StepAction struct {
	// Operation names the NodeOperationTemplate to run.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Operation string `json:"operation,omitempty"`

	// Quarantine cordons the node and taints it kubemedic.io/quarantined
	// instead of running an operation, and stops: a human decides what
	// happens next.
	// +optional
	Quarantine bool `json:"quarantine,omitempty"`

	// Cordon marks the node unschedulable before the operation. kubemedic
	// uncordons after verification only if it did the cordoning.
	// +optional
	Cordon bool `json:"cordon,omitempty"`

	// Drain evicts pods before the operation. Setting it implies cordon.
	// +optional
	Drain *DrainSpec `json:"drain,omitempty"`

	// Timeout bounds the operation, from the start of its pod to its success
	// criterion; past it the step has failed. Unset: the template's timeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Urgent lets the operation run outside the maintenance windows. Every
	// other safety limit still applies.
	// +optional
	Urgent bool `json:"urgent,omitempty"`

	// Diagnostics captures the node's evidence (kernel log, driver state,
	// nvidia-bug-report) before the operation changes it. Unset on a step
	// that runs an operation: the policy's diagnostics, if any.
	// +optional
	Diagnostics *DiagnosticsSpec `json:"diagnostics,omitempty"`

	// Validate runs an active GPU test on the node after the operation
	// succeeded and the node passed verification, before the uncordon: the
	// node stays cordoned until the test passes. Unset on a step that runs
	// an operation: the policy's validate, if any.
	// +optional
	Validate *ValidateSpec `json:"validate,omitempty"`
}

// ValidateSpec names the active GPU test (DCGM diagnostics, NCCL
// all-reduce, nvbandwidth) that proves a repaired node healthy before it
// serves again. Its pod gets every GPU of the node and writes a
// kubemedic-validate report as its termination message. A pass uncordons
// the node; a failure fails the step (reason ValidationFailed) and sets the
// node condition GPUValidationFailed; no answer (the pod could not run,
// timed out, or its report is missing or unparseable) is retried once and
// then counts as a failure.
type ValidateSpec struct {
	// Operation names the NodeOperationTemplate that tests, e.g.
	// validate-dcgm-diag.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Operation string `json:"operation"`

	// Timeout bounds each attempt of the test, from its pod's creation to
	// its report. Unset: the template's timeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// DiagnosticsWhen says when a capture runs, relative to the step's drain.
// +kubebuilder:validation:Enum=BeforeDrain;AfterDrain
type DiagnosticsWhen string

const (
	// DiagnosticsBeforeDrain captures after the cordon and before the
	// drain: the node is as the fault left it, its pods still running.
	DiagnosticsBeforeDrain DiagnosticsWhen = "BeforeDrain"
	// DiagnosticsAfterDrain captures once the drain is done, just before
	// the operation.
	DiagnosticsAfterDrain DiagnosticsWhen = "AfterDrain"
)

// DiagnosticsSpec names the capture that runs on the node before a step
// changes it: the evidence a GPU reset or a reboot destroys. A capture
// runs at most once per NodeOperation.
type DiagnosticsSpec struct {
	// Operation names the NodeOperationTemplate that captures, e.g.
	// collect-gpu-diagnostics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Operation string `json:"operation"`

	// Timeout bounds the capture. Past it the step goes on without the
	// evidence, or fails when required. Unset: the template's timeout. It
	// must not be longer than the step's timeout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Required fails the step when the capture fails or times out, instead
	// of repairing without the evidence.
	// +optional
	Required bool `json:"required,omitempty"`

	// When is BeforeDrain (the default) or AfterDrain.
	// +optional
	When DiagnosticsWhen `json:"when,omitempty"`
}

// DrainMode says what happens to a pod during a drain.
// +kubebuilder:validation:Enum=Evict;DeleteAfterTimeout;Skip
type DrainMode string

const (
	// DrainEvict uses the Eviction API and honours PodDisruptionBudgets. A pod
	// that cannot be evicted before the drain timeout fails the drain.
	DrainEvict DrainMode = "Evict"
	// DrainDeleteAfterTimeout evicts, and deletes the pods still there when
	// the drain timeout passes.
	DrainDeleteAfterTimeout DrainMode = "DeleteAfterTimeout"
	// DrainSkip leaves the pods running.
	DrainSkip DrainMode = "Skip"
)

// DrainSpec says how to drain a node. DaemonSet and mirror pods are never
// touched.
type DrainSpec struct {
	// Timeout bounds the whole drain.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Mode applies to pods that no rule matches.
	// +optional
	// +kubebuilder:default=Evict
	Mode DrainMode `json:"mode,omitempty"`

	// Rules pick a mode for some pods, by namespace or labels. The first rule
	// that matches a pod decides.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Rules []DrainRule `json:"rules,omitempty"`
}

// DrainRule picks a drain mode for the pods it matches. A pod matches when it
// is in one of the namespaces (if any are listed) and matches the pod selector
// (if one is set).
// +kubebuilder:validation:XValidation:rule="has(self.namespaces) || has(self.podSelector)",message="a drain rule needs namespaces or a podSelector"
type DrainRule struct {
	// Namespaces the rule applies to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// PodSelector selects pods by label.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// Mode for the matched pods.
	// +required
	Mode DrainMode `json:"mode"`
}

// Safety holds the limits every new operation must pass. They are computed
// from the objects in the API server at each decision, never from counters
// kept in memory.
type Safety struct {
	// MaxUnhealthy is the circuit breaker: when more of the selected nodes
	// than this are unhealthy (any policy condition matching, whether or not
	// it has held for `for`), the policy starts nothing new, sets the
	// BreakerOpen condition and emits a Warning Event. A count ("3") or a
	// percentage of the selected nodes ("20%"), rounded down but at least 1
	// unless it is "0%".
	// +optional
	// +kubebuilder:default="30%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a count >= 0 or a percentage from 0% to 100%"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`

	// BreakerCooldown is how long the unhealthy count must stay at or below
	// maxUnhealthy before the breaker closes again by itself.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	BreakerCooldown *metav1.Duration `json:"breakerCooldown,omitempty"`

	// MaxConcurrent caps the policy's active operations: a count >= 1 or a
	// percentage of the selected nodes (rounded down, but at least 1).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="must be a count >= 1 or a percentage from 1% to 100%"
	MaxConcurrent *intstr.IntOrString `json:"maxConcurrent,omitempty"`

	// FailureDomain caps active operations per topology domain, e.g. per rack
	// or zone, on top of maxConcurrent.
	// +optional
	FailureDomain *FailureDomain `json:"failureDomain,omitempty"`

	// NodeCooldown is the minimum time between the end of one operation on a
	// node and the start of the next one on the same node.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	NodeCooldown *metav1.Duration `json:"nodeCooldown,omitempty"`

	// AttemptCap bounds the operations per node in a sliding window. Beyond
	// it the node is quarantined.
	// +optional
	AttemptCap *AttemptCap `json:"attemptCap,omitempty"`

	// MaintenanceWindows, when set, allow new operations only inside one of
	// them, except for urgent steps. Empty means any time.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`
}

// FailureDomain caps concurrency within each value of a topology label.
type FailureDomain struct {
	// TopologyKey is the node label whose value is the domain, e.g.
	// topology.kubernetes.io/zone or a rack label. Nodes without the label
	// form one domain of their own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey"`

	// MaxConcurrent is the cap per domain: a count >= 1 or a percentage of
	// the domain's selected nodes (rounded down, but at least 1).
	// +required
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="must be a count >= 1 or a percentage from 1% to 100%"
	MaxConcurrent intstr.IntOrString `json:"maxConcurrent"`
}

// AttemptCap bounds how often a node is operated on.
type AttemptCap struct {
	// MaxAttempts is the number of operations allowed per node in the window.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxAttempts int32 `json:"maxAttempts"`

	// Window is the sliding window the attempts are counted in.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Window *metav1.Duration `json:"window,omitempty"`

	// MaxFailuresPerGPU caps, per GPU, the faults recorded in the node's GPU
	// history (kubemedic.io/gpu-history) within the window. A GPU is known
	// by its UUID, which moves with the card through reboots and reseats.
	// At the cap the GPU is excluded instead of operated on again: a
	// DeviceTaintRule for it where the API server serves them (the node
	// keeps serving its other GPUs), else the node is quarantined.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxFailuresPerGPU *int32 `json:"maxFailuresPerGPU,omitempty"`
}

// Weekday is a day of the week, in English, three letters.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// MaintenanceWindow is a daily time range on some days of the week, in a
// time zone. A window that crosses midnight says so with crossesMidnight and
// belongs to the day it starts on.
// +kubebuilder:validation:XValidation:rule="has(self.crossesMidnight) && self.crossesMidnight ? self.end < self.start : self.end > self.start",message="end must be after start; a window that ends the next day sets crossesMidnight: true and then its end must be before its start"
type MaintenanceWindow struct {
	// Days the window opens on. Empty means every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// Start is the opening time, "HH:MM" on a 24-hour clock.
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// End is the closing time, "HH:MM" on a 24-hour clock ("24:00" is the end
	// of the day).
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	End string `json:"end"`

	// CrossesMidnight marks a window whose end is on the next day, e.g.
	// 22:00 to 04:00.
	// +optional
	CrossesMidnight bool `json:"crossesMidnight,omitempty"`

	// TimeZone is an IANA time zone name such as Europe/Berlin.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// RemediationPolicyStatus is what the remediator saw at its last pass.
type RemediationPolicyStatus struct {
	// ObservedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// MatchedNodes is the number of nodes the node selector selects.
	// +optional
	MatchedNodes int32 `json:"matchedNodes,omitempty"`
	// UnhealthyNodes is the number of selected nodes with a matching condition.
	// +optional
	UnhealthyNodes int32 `json:"unhealthyNodes,omitempty"`
	// ActiveOperations is the number of the policy's operations not yet finished.
	// +optional
	ActiveOperations int32 `json:"activeOperations,omitempty"`
	// QuarantinedNodes is the number of selected nodes with the quarantine taint.
	// +optional
	QuarantinedNodes int32 `json:"quarantinedNodes,omitempty"`
	// LastBreakerReset is the last value of the reset-breaker annotation acted on.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastBreakerReset string `json:"lastBreakerReset,omitempty"`
	// BreakerBelowLimitSince is when the unhealthy count of an open breaker
	// last fell to or below maxUnhealthy; the breaker closes once it has
	// stayed there for breakerCooldown.
	// +optional
	BreakerBelowLimitSince *metav1.Time `json:"breakerBelowLimitSince,omitempty"`
	// Conditions: Ready, BreakerOpen, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// RemediationPolicyList is a list of RemediationPolicy.
type RemediationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationPolicy `json:"items"`
}
