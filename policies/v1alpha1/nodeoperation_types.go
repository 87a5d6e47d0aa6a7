package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOperation is one operation on one node and its audit record. The
// remediator creates them for policy steps; a human may create one with
// kubectl for planned maintenance, and it then passes the same budgets and
// lifecycle. The spec is immutable: what was asked for stays on record.
// Finished operations are kept for a retention period before the remediator
// deletes them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nop,categories=kubemedic
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.spec.step`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Diagnostics",type=string,JSONPath=`.status.diagnostics.result`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
type NodeOperation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeOperationSpec `json:"spec"`
	// +optional
	Status NodeOperationStatus `json:"status,omitempty"`
}

// NodeOperationSpec is what to do to which node, and why.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new NodeOperation instead"
// +kubebuilder:validation:XValidation:rule="has(self.operation) != (has(self.quarantine) && self.quarantine)",message="set exactly one of operation or quarantine: true"
// +kubebuilder:validation:XValidation:rule="!has(self.step) || has(self.policy)",message="step is set only together with policy"
type NodeOperationSpec struct {
	// NodeName is the target node.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`

	// StepAction is what the operation does: a template or a quarantine,
	// with cordon, drain, timeout and urgency.
	StepAction `json:",inline"`

	// Policy is the RemediationPolicy that created the operation; empty for
	// manual operations, whose safety limits are then those of every policy
	// that selects the node.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy,omitempty"`

	// Step is the policy's ladder step.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Step string `json:"step,omitempty"`

	// HealthyFor is how long the trigger condition must stay False before the
	// operation succeeds. Zero skips the condition check.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	HealthyFor *metav1.Duration `json:"healthyFor,omitempty"`

	// RecoveryTimeout bounds verification: when the node has not passed it
	// this long after the operation's success criterion, the operation fails
	// and the policy escalates. Unset: 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`

	// DryRun records the decision without touching the node.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Reason says in words why the operation exists.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// Trigger is the node condition that caused the operation, as it was.
	// +optional
	Trigger *TriggerCondition `json:"trigger,omitempty"`
}

// TriggerCondition is a copy of the node condition that caused an operation.
type TriggerCondition struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status corev1.ConditionStatus `json:"status"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NodeOperationPhase is where an operation is in its lifecycle.
// +kubebuilder:validation:Enum=Pending;WaitingForBudget;Cordoning;Capturing;Draining;Running;Verifying;Validating;Succeeded;Failed;Skipped
type NodeOperationPhase string

// The lifecycle: Pending → WaitingForBudget → Cordoning → Draining → Running
// → Verifying → Validating → Succeeded | Failed | Skipped, with Capturing
// (the diagnostics) before or after Draining, and Validating (the active
// GPU test) only when the step asks for them.
const (
	PhasePending          NodeOperationPhase = "Pending"
	PhaseWaitingForBudget NodeOperationPhase = "WaitingForBudget"
	PhaseCordoning        NodeOperationPhase = "Cordoning"
	PhaseCapturing        NodeOperationPhase = "Capturing"
	PhaseDraining         NodeOperationPhase = "Draining"
	PhaseRunning          NodeOperationPhase = "Running"
	PhaseVerifying        NodeOperationPhase = "Verifying"
	PhaseValidating       NodeOperationPhase = "Validating"
	PhaseSucceeded        NodeOperationPhase = "Succeeded"
	PhaseFailed           NodeOperationPhase = "Failed"
	PhaseSkipped          NodeOperationPhase = "Skipped"
)

// Finished reports whether the phase is final.
func (p NodeOperationPhase) Finished() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseSkipped
}

// NodeOperationStatus is the observed progress of an operation.
type NodeOperationStatus struct {
	// Phase is where the operation is.
	// +optional
	Phase NodeOperationPhase `json:"phase,omitempty"`
	// Message says in words what is happening or what blocks it, e.g. the
	// limit that holds it in WaitingForBudget.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// PodName is the operation pod in the kubemedic namespace. Its name
	// comes from the operation's and is a DNS label (dots made dashes,
	// with a hash when needed), so the pod is created once.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`
	// BootID is the node's boot ID when the operation started, to recognise
	// a reboot.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	BootID string `json:"bootID,omitempty"`
	// Parameters are the values taken from the trigger, as passed to the pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Parameters []TemplateEnvVar `json:"parameters,omitempty"`
	// StartTime is when the operation left WaitingForBudget.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when it reached a final phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// NodeUID is the node's UID when the operation started, to recognise a
	// node replaced under the same name (successCriterion MachineReplaced).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	NodeUID string `json:"nodeUID,omitempty"`
	// GPU is the GPU the trigger condition names, when it names one: the
	// operation's target in the node's GPU history.
	// +optional
	GPU *GPUTarget `json:"gpu,omitempty"`
	// Exclusion says how new pods were kept away while the operation ran:
	// the node cordoned, or only the faulty GPU excluded by a
	// DeviceTaintRule where the API server serves them.
	// +optional
	Exclusion *Exclusion `json:"exclusion,omitempty"`
	// MachineRequest is what a clusterAPI, metal3 or redfish operation
	// asked of whom.
	// +optional
	MachineRequest *MachineRequest `json:"machineRequest,omitempty"`
	// Diagnostics is the capture of the node's evidence before the
	// operation changed it, and where the bundle is kept.
	// +optional
	Diagnostics *DiagnosticsStatus `json:"diagnostics,omitempty"`
	// Validation is the active GPU test that ran after verification,
	// before the uncordon, and its report.
	// +optional
	Validation *ValidationStatus `json:"validation,omitempty"`
	// OwnerNotices are the Slack messages to the owners of the pods the
	// drain stops, one per pod, each written before its pod is stopped and
	// then claimed, sent and recorded: a crash, a restart or a second
	// remediator repeats a message at worst, and never loses one.
	// +optional
	// +listType=map
	// +listMapKey=uid
	// +kubebuilder:validation:MaxItems=256
	OwnerNotices []OwnerNotice `json:"ownerNotices,omitempty"`
	// OwnerNoticesUnrecorded counts the stopped pods whose owner was not
	// told because OwnerNotices was full of messages not yet sent.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OwnerNoticesUnrecorded int32 `json:"ownerNoticesUnrecorded,omitempty"`
	// Conditions: Cordoned, Drained, OperationSucceeded, Verified,
	// Validated.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DiagnosticsResult is how a capture went.
// +kubebuilder:validation:Enum=Capturing;Captured;Partial;Failed
type DiagnosticsResult string

const (
	// DiagnosticsCapturing: the capture pod runs.
	DiagnosticsCapturing DiagnosticsResult = "Capturing"
	// DiagnosticsCaptured: every part was collected.
	DiagnosticsCaptured DiagnosticsResult = "Captured"
	// DiagnosticsPartial: a bundle was made, and the parts in FailedParts
	// failed or timed out.
	DiagnosticsPartial DiagnosticsResult = "Partial"
	// DiagnosticsFailed: no bundle (the pod failed, timed out or could
	// not start); Message says why.
	DiagnosticsFailed DiagnosticsResult = "Failed"
)

// DiagnosticsStatus is one capture of a node's evidence.
type DiagnosticsStatus struct {
	// Result is how the capture went.
	Result DiagnosticsResult `json:"result"`
	// Template is the NodeOperationTemplate that captured.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Template string `json:"template,omitempty"`
	// PodName is the capture pod in the kubemedic namespace. Its name
	// comes from the operation's, "-diag" at its end, and is a DNS label
	// (dots made dashes, with a hash when needed), so a capture is made
	// once.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`
	// StartTime is when the capture pod was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the capture ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Message says what was captured, or why not.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// FailedParts are the parts that failed or timed out (Partial).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=128
	FailedParts []string `json:"failedParts,omitempty"`
	// Bundle is the captured bundle, when there is one.
	// +optional
	Bundle *DiagnosticsBundle `json:"bundle,omitempty"`
	// Cluster is the remediator's must-gather of what the API server knew
	// when the capture started: the Node, its Events, its NodeOperations
	// and the logs of the GPU Operator's pods on it.
	// +optional
	Cluster *DiagnosticsBundle `json:"cluster,omitempty"`
}

// ValidationResult is how the active GPU test went.
// +kubebuilder:validation:Enum=Validating;Passed;Failed
type ValidationResult string

const (
	// ValidationValidating: the test pod runs (or is about to, for the
	// retry).
	ValidationValidating ValidationResult = "Validating"
	// ValidationPassed: the report said Pass for every GPU.
	ValidationPassed ValidationResult = "Passed"
	// ValidationFailed: the report said Fail, or there was no answer
	// twice; Message says which.
	ValidationFailed ValidationResult = "Failed"
)

// ValidationStatus is the active GPU test of an operation.
type ValidationStatus struct {
	// Result is how the test went.
	Result ValidationResult `json:"result"`
	// Template is the NodeOperationTemplate that tests.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Template string `json:"template,omitempty"`
	// Attempt is 1, or 2 after a first attempt that gave no answer.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	Attempt int32 `json:"attempt,omitempty"`
	// PodName is the attempt's test pod in the kubemedic namespace; empty
	// while the retry waits for the first attempt's pod to go.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`
	// StartTime is when the attempt's pod was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the test ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// NoAnswer is why the first attempt gave no answer, when it was
	// retried.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	NoAnswer string `json:"noAnswer,omitempty"`
	// Message says what passed or failed, or why there was no answer.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Test is the test the report is about (dcgm, nccl, nvbandwidth), and
	// Model the GPU model it judged by.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Test string `json:"test,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model,omitempty"`
	// GPUs are the report's verdicts per GPU, by UUID.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	GPUs []ValidationGPU `json:"gpus,omitempty"`
}

// ValidationGPU is one GPU's verdict in a validation report.
type ValidationGPU struct {
	// +kubebuilder:validation:MaxLength=128
	UUID string `json:"uuid"`
	// Verdict is Pass, Fail or NoAnswer.
	// +kubebuilder:validation:MaxLength=16
	Verdict string `json:"verdict"`
	// Failed are the tool's tests that failed on this GPU, e.g. memory.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	Failed []string `json:"failed,omitempty"`
	// Detail is what the tool said, cut short.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Detail string `json:"detail,omitempty"`
}

// DiagnosticsBundle is one capture's .tar.gz in the diagnostics store.
type DiagnosticsBundle struct {
	// Key is the object's key in the store's bucket,
	// <node>/<operation>.tar.gz.
	// +kubebuilder:validation:MaxLength=512
	Key string `json:"key"`
	// Size is the bundle's size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the bundle's SHA-256, in hex.
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`
	// Files are the bundle's files, manifest.json first.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	Files []string `json:"files,omitempty"`
	// Stored: the store holds the object with this SHA-256. False: the
	// bundle waits in the node's spool (/var/lib/kubemedic/diagnostics)
	// for the next capture on the node or `kubemedic diag flush`.
	// +optional
	Stored bool `json:"stored,omitempty"`
	// URL is a presigned link to download the bundle, valid until
	// URLExpires; empty until the store holds it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	URL string `json:"url,omitempty"`
	// URLExpires is when URL stops working.
	// +optional
	URLExpires *metav1.Time `json:"urlExpires,omitempty"`
}

// GPUTarget names one GPU: by UUID (moves with the card) and PCI bus ID
// (names the slot), in gpuhistory's normalised forms.
type GPUTarget struct {
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UUID string `json:"uuid,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	BusID string `json:"busID,omitempty"`
}

// ExclusionMethod is how an operation kept new pods away.
// +kubebuilder:validation:Enum=Cordon;DeviceTaintRule
type ExclusionMethod string

const (
	// ExclusionCordon: the whole node was cordoned.
	ExclusionCordon ExclusionMethod = "Cordon"
	// ExclusionDeviceTaintRule: only the faulty GPU was tainted NoSchedule
	// through a DeviceTaintRule; the node keeps serving its other GPUs.
	ExclusionDeviceTaintRule ExclusionMethod = "DeviceTaintRule"
)

// Exclusion records the path an operation took to keep new pods away.
type Exclusion struct {
	// +required
	Method ExclusionMethod `json:"method"`
	// DeviceTaintRule is the rule's name (method DeviceTaintRule).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DeviceTaintRule string `json:"deviceTaintRule,omitempty"`
	// Device is driver/pool/device of the excluded GPU.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Device string `json:"device,omitempty"`
	// Message says why this path was taken, e.g. why not a DeviceTaintRule.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// MachineRequest is one request to a machine provider.
type MachineRequest struct {
	// +required
	// +kubebuilder:validation:Enum=ClusterAPI;Metal3;Redfish
	Kind MachineKind `json:"kind"`
	// Target is the object or endpoint asked, e.g. "Machine
	// capi-system/gpu-md-7c9f", "BareMetalHost metal3/node-12",
	// "https://10.0.0.5/redfish/v1/Systems/1".
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Target string `json:"target"`
	// Action is what was asked, e.g. "annotated
	// cluster.x-k8s.io/remediate-machine".
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Action string `json:"action"`
	// Time is when it was asked.
	// +required
	Time metav1.Time `json:"time"`
}

// +kubebuilder:object:root=true

// NodeOperationList is a list of NodeOperation.
type NodeOperationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOperation `json:"items"`
}
