package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a ValidationPolicy's background section.
const (
	// DefaultBackgroundPriorityClass is the PriorityClass kubemedic ships
	// for background tests (deploy/remediator/validation.yaml): negative,
	// and preemptionPolicy Never, so a test starts only on GPUs no pod
	// wants, never displaces one, and any real pod preempts it.
	DefaultBackgroundPriorityClass = "kubemedic-background-validation"
	// DefaultBackgroundWaitFor is how long a background test pod may wait
	// for the node's GPUs to be free before the test is put off.
	DefaultBackgroundWaitFor = 30 * time.Minute
	// DefaultBackgroundRetryAfter is how long a test that was preempted, or
	// found the node busy, is put off.
	DefaultBackgroundRetryAfter = time.Hour
	// BackgroundGracePeriod is a background test pod's termination grace:
	// short, so that a pod that preempts it waits little for the GPUs.
	BackgroundGracePeriod int64 = 5
)

// ValidationPolicy says which nodes get an active GPU test outside of a
// repair: when they join (a node registered with the taint
// kubemedic.io/unvalidated:NoSchedule keeps it until a test passes) and in
// the background, on idle nodes, every so often. A test that fails sets the
// node condition GPUValidationFailed, which RemediationPolicies act on.
// Each node's record is a NodeValidation of the same name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vpol,categories=kubemedic
// +kubebuilder:printcolumn:name="Test",type=string,JSONPath=`.spec.validate.operation`
// +kubebuilder:printcolumn:name="Every",type=string,JSONPath=`.spec.background.every`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Validating",type=integer,JSONPath=`.status.validating`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ValidationPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ValidationPolicySpec `json:"spec"`
	// +optional
	Status ValidationPolicyStatus `json:"status,omitempty"`
}

// ValidationPolicySpec is which nodes are tested, with what, when.
// +kubebuilder:validation:XValidation:rule="!has(self.join) || !has(self.join.taintNewNodes) || !self.join.taintNewNodes || has(self.nodeSelector)",message="join.taintNewNodes needs a nodeSelector: without one, every new node (CPU and system nodes too) would be tainted until a GPU test passes"
// +kubebuilder:validation:XValidation:rule="has(self.join) || has(self.background)",message="say join: {} to test only nodes that register with the taint kubemedic.io/unvalidated, or add a background section"
type ValidationPolicySpec struct {
	// NodeSelector picks the nodes the policy tests; empty selects every
	// node. Nodes without an nvidia.com/* resource allocatable are not
	// tested in the background. When several policies select a node, the
	// first by name tests it.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Validate is the test: a NodeOperationTemplate that runs
	// kubemedic-validate, and its timeout.
	// +required
	Validate ValidateSpec `json:"validate"`

	// Join tests nodes that carry the taint kubemedic.io/unvalidated
	// (set by the kubelet's --register-with-taints or the node pool's
	// template), and removes it after a pass. The gate acts on every
	// selected node with the taint; this section adds options.
	// +optional
	Join *JoinSpec `json:"join,omitempty"`

	// Background tests idle nodes every so often, at a low priority, so
	// that any real pod preempts the test.
	// +optional
	Background *BackgroundSpec `json:"background,omitempty"`

	// Suspend stops starting tests; running ones finish and are recorded.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// JoinSpec is the options of the join gate.
type JoinSpec struct {
	// TaintNewNodes puts the taint kubemedic.io/unvalidated:NoSchedule on
	// a selected node that was created after the policy, has no
	// NodeValidation of its own and registered without the taint, so that
	// it, too, serves only after a pass. Pods already bound to it stay.
	// +optional
	TaintNewNodes bool `json:"taintNewNodes,omitempty"`
}

// BackgroundSpec is how often, and how many nodes at once, idle nodes
// are tested. The test pod goes through the scheduler, asking for all of
// the node's GPUs, at a negative PriorityClass: it starts only when they
// are free, any real pod preempts it, and it never cordons the node. A
// preempted test is no result and is tried again later.
type BackgroundSpec struct {
	// Every is how long a pass lasts: a node is due when its last result
	// is older.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="must be a positive duration like 168h (units ns, us, ms, s, m, h; no days)"
	Every metav1.Duration `json:"every"`

	// MaxConcurrent is how many nodes are tested at once: the budget of
	// nodes whose GPUs a background test may hold.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxConcurrent int32 `json:"maxConcurrent"`

	// PriorityClassName is the test pod's priority class. It must be
	// lower than every real workload's and preemptionPolicy Never.
	// +optional
	// +kubebuilder:default=kubemedic-background-validation
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// WaitFor is how long a test pod may wait for the node's GPUs to be
	// free before the test is put off for RetryAfter.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="must be a positive duration like 30m (units ns, us, ms, s, m, h; no days)"
	WaitFor *metav1.Duration `json:"waitFor,omitempty"`

	// RetryAfter is how long a test that was preempted, or found the
	// node busy, is put off.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be more than 0"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="must be a positive duration like 1h (units ns, us, ms, s, m, h; no days)"
	RetryAfter *metav1.Duration `json:"retryAfter,omitempty"`
}

// ValidationPolicyStatus counts the selected nodes by their last result.
type ValidationPolicyStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Matched is how many nodes the policy tests.
	// +optional
	Matched int32 `json:"matched"`
	// Validating is how many are being tested now.
	// +optional
	Validating int32 `json:"validating"`
	// Passed and Failed count the nodes by their last result.
	// +optional
	Passed int32 `json:"passed"`
	// +optional
	Failed int32 `json:"failed"`
	// Due is how many wait for a background test (their last result is
	// older than every, or there is none).
	// +optional
	Due int32 `json:"due"`
	// Unvalidated is how many carry the join taint.
	// +optional
	Unvalidated int32 `json:"unvalidated"`
	// Conditions: Ready says whether the policy can test (its template
	// exists).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ValidationMode is why a node is tested.
// +kubebuilder:validation:Enum=Join;Background
type ValidationMode string

const (
	// ValidationJoin: the node carries the taint kubemedic.io/unvalidated.
	ValidationJoin ValidationMode = "Join"
	// ValidationBackground: the node is due for its periodic test.
	ValidationBackground ValidationMode = "Background"
)

// NodeValidation is one node's record of active GPU tests outside of a
// repair: the test running now, the last result and when the next is
// due. Its name is the node's. Only kubemedic writes it (a node cannot
// vouch for itself); deleting it forgets the record, so that a node with
// the join taint is tested again.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nval,categories=kubemedic
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=`.status.last.result`
// +kubebuilder:printcolumn:name="Validated",type=date,JSONPath=`.status.last.completionTime`
// +kubebuilder:printcolumn:name="Now",type=string,JSONPath=`.status.current.result`
// +kubebuilder:printcolumn:name="Due",type=string,JSONPath=`.status.nextTime`
type NodeValidation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeValidationSpec `json:"spec"`
	// +optional
	Status NodeValidationStatus `json:"status,omitempty"`
}

// NodeValidationSpec names the node the record is about.
type NodeValidationSpec struct {
	// NodeName is the node.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// NodeUID is the Node object the record is about: a node replaced
	// under the same name is a new node, its record starts over.
	// +required
	// +kubebuilder:validation:MaxLength=64
	NodeUID string `json:"nodeUID"`
	// Policy is the ValidationPolicy that tests the node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`
}

// NodeValidationStatus is the node's tests.
type NodeValidationStatus struct {
	// Mode is why the current (or last) test runs: Join or Background.
	// +optional
	Mode ValidationMode `json:"mode,omitempty"`
	// Current is the test running now (Result Validating).
	// +optional
	Current *ValidationStatus `json:"current,omitempty"`
	// Last is the last test that ended with a result: Passed or Failed.
	// A preempted test is no result and is not recorded here.
	// +optional
	Last *ValidationStatus `json:"last,omitempty"`
	// NextTime is when the next background test is due, or when a test
	// put off is tried again.
	// +optional
	NextTime *metav1.Time `json:"nextTime,omitempty"`
	// Message says what happened last: a test started, preempted, put
	// off because the node was busy, or its result.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Preemptions counts the background tests preempted by real pods.
	// +optional
	Preemptions int32 `json:"preemptions,omitempty"`
}

// +kubebuilder:object:root=true

// ValidationPolicyList is a list of ValidationPolicy.
type ValidationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValidationPolicy `json:"items"`
}

// +kubebuilder:object:root=true

// NodeValidationList is a list of NodeValidation.
type NodeValidationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeValidation `json:"items"`
}
