package v1alpha1

// This file holds every condition type, condition reason and Event reason
// that the remediator writes on a NodeOperation (and, for its transitions,
// on the node). They are stable API: alerts, runbooks, dashboards and
// `kubectl get events --field-selector reason=...` key on them, so code
// never spells them as literals.

// Condition types of NodeOperation.
const (
	// OperationAdmitted is False while a safety limit holds the operation
	// in WaitingForBudget (its reason names the limit), True once it passed.
	OperationAdmitted = "Admitted"
	// OperationCordoned is True once the node is cordoned for the operation.
	OperationCordoned = "Cordoned"
	// OperationDrained is True once the drain finished.
	OperationDrained = "Drained"
	// OperationSucceeded is True when the success criterion was met.
	OperationSucceeded = "OperationSucceeded"
	// OperationVerified is True when the node passed verification.
	OperationVerified = "Verified"
	// OperationQuarantined is True when the operation quarantined the node
	// (cordon and the kubemedic.io/quarantined taint).
	OperationQuarantined = "Quarantined"
	// OperationDiagnosed is True once the step's diagnostics capture ended
	// with a bundle (reason Captured or Partial), False while it runs or
	// when it failed (reason DiagnosticsFailed).
	OperationDiagnosed = "Diagnosed"
	// OperationValidated is True once the active GPU test passed, False
	// while it runs (reason Validating) or when it failed (reason
	// ValidationFailed).
	OperationValidated = "Validated"
)

// Reasons of NodeOperation conditions and Events that policies, alerts and
// runbooks key on. The admission reasons (BreakerOpen ... NodeBusy) are
// also the reasons of the Admitted condition and of the operation's Wait
// Events, and the label of kubemedic_operations_blocked_total.
const (
	ReasonAttemptCapReached = "AttemptCapReached"
	ReasonLadderExhausted   = "LadderExhausted"
	ReasonDryRun            = "DryRun"
	ReasonBreakerOpen       = "BreakerOpen"
	ReasonMaxConcurrent     = "MaxConcurrent"
	ReasonFailureDomain     = "FailureDomainBudget"
	ReasonNodeCooldown      = "NodeCooldown"
	ReasonOutsideWindow     = "OutsideMaintenanceWindow"
	ReasonPaused            = "Paused"
	ReasonNodeBusy          = "NodeBusy"
	ReasonOptedOut          = "OptedOut"
	ReasonPolicyNotFound    = "PolicyNotFound"
	ReasonNodeNotFound      = "NodeNotFound"
	ReasonTemplateNotFound  = "TemplateNotFound"
	ReasonParameterMissing  = "ParameterMissing"
	ReasonDrainFailed       = "DrainFailed"
	ReasonOperationFailed   = "OperationFailed"
	ReasonOperationTimeout  = "OperationTimeout"
	ReasonRecoveryTimeout   = "RecoveryTimeout"
	ReasonVerified          = "Verified"
	ReasonQuarantined       = "Quarantined"
	// ReasonGPUAttemptCapReached: the operation's GPU (by UUID) failed
	// attemptCap.maxFailuresPerGPU times in the window; it is excluded (a
	// DeviceTaintRule, else the node is quarantined).
	ReasonGPUAttemptCapReached = "GPUAttemptCapReached"
	// ReasonMachineNotFound: a clusterAPI, metal3 or redfish operation found
	// no Machine, BareMetalHost or BMC for the node.
	ReasonMachineNotFound = "MachineNotFound"
	// ReasonMachineRequestFailed: the machine provider refused the request
	// (a BMC's 401, 403 or 400), which retrying does not mend.
	ReasonMachineRequestFailed = "MachineRequestFailed"
	// ReasonMachineReplaced: the node's Machine is gone, or the node came
	// back under its name with a new UID and Ready.
	ReasonMachineReplaced = "MachineReplaced"
	// ReasonGPUExcluded: only the faulty GPU was excluded by a
	// DeviceTaintRule; the node stays schedulable for its other GPUs.
	ReasonGPUExcluded = "GPUExcluded"

	// ReasonLimitsPassed: Admitted is True, every safety limit passed.
	ReasonLimitsPassed = "LimitsPassed"
	// ReasonCordonedByKubemedic: Cordoned is True and kubemedic cordoned
	// the node, so it uncordons it after verification.
	ReasonCordonedByKubemedic = "CordonedByKubemedic"
	// ReasonCordonedByHuman: Cordoned is True but someone else cordoned the
	// node; kubemedic leaves it cordoned.
	ReasonCordonedByHuman = "CordonedByHuman"
	// ReasonDraining: Drained is False while pods are being evicted.
	ReasonDraining = "Draining"
	// ReasonDrainTimeout: Drained is False, the drain ran out of time.
	ReasonDrainTimeout = "DrainTimeout"
	// ReasonDrained: Drained is True (also the Event of a finished drain).
	ReasonDrained = "Drained"
	// ReasonRunning: OperationSucceeded is False while the operation runs.
	ReasonRunning = "Running"
	// ReasonNothingToRun: OperationSucceeded is True for a template whose
	// success criterion is None.
	ReasonNothingToRun = "NothingToRun"
	// ReasonPodSucceeded: OperationSucceeded is True, the pod succeeded.
	ReasonPodSucceeded = "PodSucceeded"
	// ReasonPodFailed: OperationSucceeded is False, the pod failed.
	ReasonPodFailed = "PodFailed"
	// ReasonNodeRebooted: OperationSucceeded is True, the node has a new
	// boot ID and is Ready.
	ReasonNodeRebooted = "NodeRebooted"
	// ReasonWaiting: Verified is False while the node is not yet verified.
	ReasonWaiting = "Waiting"
	// ReasonCapturing: Diagnosed is False while the capture pod runs.
	ReasonCapturing = "Capturing"
	// ReasonCaptured: Diagnosed is True, every part was collected (also
	// the Event).
	ReasonCaptured = "Captured"
	// ReasonCapturePartial: Diagnosed is True, a bundle was made and some
	// parts failed or timed out (also the Event).
	ReasonCapturePartial = "CapturePartial"
	// ReasonDiagnosticsFailed: Diagnosed is False, no bundle was made (also
	// the Event, and the operation's reason when the capture was required).
	ReasonDiagnosticsFailed = "DiagnosticsFailed"
	// ReasonValidating: Validated is False while the test pod runs.
	ReasonValidating = "Validating"
	// ReasonValidationPassed: Validated is True, the report passed every
	// GPU (also the Event).
	ReasonValidationPassed = "ValidationPassed"
	// ReasonValidationFailed: Validated is False, the report failed a GPU
	// or there was no answer twice (also the Event, and the operation's
	// reason: the ladder moves on).
	ReasonValidationFailed = "ValidationFailed"
	// ReasonValidationNoAnswer: the Event of a first attempt that gave no
	// answer (the pod could not run, timed out, or left no usable report),
	// which is retried once.
	ReasonValidationNoAnswer = "ValidationNoAnswer"
)

// Event reasons of NodeOperation transitions that are not condition reasons.
const (
	// EventStarted: the operation passed admission and starts.
	EventStarted = "Started"
	// EventCordoned: kubemedic cordoned the node.
	EventCordoned = "Cordoned"
	// EventPodCreated: the operation pod was created.
	EventPodCreated = "PodCreated"
	// EventCaptureStarted: the diagnostics capture pod was created.
	EventCaptureStarted = "CaptureStarted"
	// EventDiagnosticsFlushed, on a Node: its spool was uploaded
	// (kubemedic diag flush); EventDiagnosticsFlushFailed: the flush pod
	// failed or timed out, and the bundles stay in the spool.
	EventDiagnosticsFlushed     = "DiagnosticsFlushed"
	EventDiagnosticsFlushFailed = "DiagnosticsFlushFailed"
	// EventMachineRequested: a clusterAPI, metal3 or redfish request was
	// made (what, of whom, in the note).
	EventMachineRequested = "MachineRequested"
	// EventMachineRequestFound: a BMC reset whose answer was lost (or not
	// recorded) was found applied by its evidence (a new boot ID, the
	// BMC's power state or last reset time), and is recorded, not asked
	// again.
	EventMachineRequestFound = "MachineRequestFound"
	// EventMachineRequestHeld (Warning): a BMC reset whose answer was lost
	// is neither recorded nor asked again, because the evidence does not
	// say whether it was applied; the note names the node and what is
	// missing. The step fails at its timeout unless evidence comes.
	EventMachineRequestHeld = "MachineRequestHeld"
	// EventValidationStarted: the active GPU test's pod was created.
	EventValidationStarted = "ValidationStarted"
	// EventOperationSucceeded: the success criterion was met.
	EventOperationSucceeded = "OperationSucceeded"
	// EventOperationCreated: a RemediationPolicy created the operation.
	EventOperationCreated = "OperationCreated"
	// EventCreateFailed: a RemediationPolicy failed to create an operation.
	EventCreateFailed = "CreateFailed"
	// EventGPUExclusionMoved, on a Node: the DeviceTaintRule excluding one
	// of its GPUs was made to select that GPU's new device name (the
	// driver numbered the devices again, after a reboot).
	EventGPUExclusionMoved = "GPUExclusionMoved"
	// EventGPUExclusionReleased, on a Node: a DeviceTaintRule was deleted
	// because its device is another GPU now, or its node is gone.
	EventGPUExclusionReleased = "GPUExclusionReleased"
)
