package v1alpha1

// Labels, annotations and taints that kubemedic reads or writes on Nodes and
// its own objects. They are API: ops write them in runbooks and selectors.
const (
	// LabelRemediation on a Node set to RemediationDisabled opts the node out
	// of every RemediationPolicy. Nodes with it still count for the breaker.
	LabelRemediation = "kubemedic.io/remediation"
	// RemediationDisabled is the value of LabelRemediation that opts a node out.
	RemediationDisabled = "disabled"

	// LabelPolicy on a NodeOperation names the RemediationPolicy that created it.
	LabelPolicy = "kubemedic.io/policy"
	// LabelNode on a NodeOperation and its Pod names the target Node (when
	// the name fits in a label value).
	LabelNode = "kubemedic.io/node"
	// LabelEpisode on a NodeOperation identifies the fault episode it belongs
	// to: a hash of the trigger condition's type and lastTransitionTime. The
	// steps of one ladder share it.
	LabelEpisode = "kubemedic.io/episode"
	// LabelStepIndex on a NodeOperation is the index of its step in the
	// policy's ladder; the index one past the last step is the implicit
	// quarantine at the end of the ladder.
	LabelStepIndex = "kubemedic.io/step-index"
	// LabelOperation on an operation Pod names its NodeOperation. The drain
	// leaves such pods alone.
	LabelOperation = "kubemedic.io/operation"
	// LabelTemplate on an operation Pod names its NodeOperationTemplate.
	LabelTemplate = "kubemedic.io/template-name"

	// AnnotationCordonedBy on a Node records that kubemedic cordoned it (the
	// value is the NodeOperation name), so that kubemedic uncordons only what
	// it cordoned itself and never undoes a human's cordon.
	AnnotationCordonedBy = "kubemedic.io/cordoned-by"
	// AnnotationDiagnosticsFlush on a Node asks the remediator to upload
	// the bundles waiting in the node's diagnostics spool (`kubemedic diag
	// flush`); the value is when it was asked (RFC 3339). The remediator
	// runs one flush pod and removes the annotation when it ended.
	AnnotationDiagnosticsFlush = "kubemedic.io/diagnostics-flush"
	// AnnotationMachineRequestedBy on a Cluster API Machine, a Metal3
	// BareMetalHost or a Node names the NodeOperation that asked to replace
	// or power-cycle it, as name/UID (see MachineRequestMarker), so that no
	// pass asks twice.
	AnnotationMachineRequestedBy = "kubemedic.io/machine-requested-by"
	// AnnotationMachineResetIntent on a Node records, before kubemedic
	// asks the node's BMC to reset it, which NodeOperation is about to ask
	// (MachineRequestMarker), when, and the evidence to judge a lost
	// answer by: the node's boot ID and the BMC's PowerState and
	// LastResetTime then (JSON). A pass that finds it without
	// AnnotationMachineRequestedBy does not ask again unless the evidence
	// shows the first ask never reached the machine (plan.JudgeReset).
	AnnotationMachineResetIntent = "kubemedic.io/machine-reset-intent"
	// AnnotationBareMetalHost on a Node names its Metal3 BareMetalHost as
	// namespace/name, for clusters whose nodes' providerID does not (CAPM3
	// writes metal3://namespace/name/... there).
	AnnotationBareMetalHost = "kubemedic.io/baremetalhost"
	// AnnotationBareMetalHostNode on a Metal3 BareMetalHost names the Node
	// it runs. A node's AnnotationBareMetalHost counts only when the host
	// names the node back: a node's kubelet can write its own annotations,
	// and must not choose another machine to power-cycle.
	AnnotationBareMetalHostNode = "kubemedic.io/node"
	// AnnotationResetBreaker on a RemediationPolicy, set by a human to any new
	// value, closes an open circuit breaker at once.
	AnnotationResetBreaker = "kubemedic.io/reset-breaker"
	// AnnotationGitHubIssue on a NodeOperation or a Node is the URL (http or
	// https) of the GitHub issue where people follow the node's fault. An
	// integration that files issues, or a human, sets it; kubemedic only
	// reads it, to link the issue in what it tells pod owners about a
	// drain. The operation's annotation wins over the node's.
	AnnotationGitHubIssue = "kubemedic.io/github-issue"

	// TaintUnvalidated on a Node (effect NoSchedule) keeps pods off a node
	// whose GPUs have not passed an active test yet: a node registers
	// with it (kubelet --register-with-taints, or the node pool's
	// template), or a ValidationPolicy with join.taintNewNodes puts it on.
	// The remediator removes it after a pass.
	TaintUnvalidated = "kubemedic.io/unvalidated"
	// LabelValidationPolicy on a test pod names its ValidationPolicy.
	LabelValidationPolicy = "kubemedic.io/validation-policy"

	// TaintQuarantined is put on a Node (effect NoSchedule) when its
	// remediation ladder is exhausted or its attempt cap is reached. Only a
	// human removes it.
	TaintQuarantined = "kubemedic.io/quarantined"

	// AnnotationReclaim on a pod set to ReclaimDisabled opts it out of the
	// janitor, when every policy selecting it sets allowOptOut.
	AnnotationReclaim = "kubemedic.io/reclaim"
	// ReclaimDisabled is the value of AnnotationReclaim that opts a pod out.
	ReclaimDisabled = "disabled"
	// AnnotationReclaimNotice on a pod is the janitor's record of a notice
	// (JSON: rule, deadline, the Slack thread). It is the janitor's state:
	// a restart or a second janitor reads it and neither notifies twice nor
	// moves the deadline.
	AnnotationReclaimNotice = "kubemedic.io/reclaim-notice"
	// AnnotationReclaimTold on a pod or a ReclaimPolicy records the
	// Warnings the janitor tells once (an invalid annotation, an owner it
	// cannot stop, a policy it ignores), as "<reason>:<hash of what was
	// told>,...": a restarted janitor or a new leader reads it and does
	// not tell them again. Written by the janitor only, when something new
	// is told.
	AnnotationReclaimTold = "kubemedic.io/reclaim-told"
	// AnnotationReclaimSnoozeUntil on a pod, set by its owner to an RFC 3339
	// time (or a date), keeps the pod until then, capped by the policy's
	// maxSnooze after the notice's deadline.
	AnnotationReclaimSnoozeUntil = "kubemedic.io/reclaim-snooze-until"
	// AnnotationReclaimedReplicas on a Deployment or StatefulSet the janitor
	// scaled to 0 holds the replica count before, so the owner can restore
	// it: kubectl scale --replicas=<value>.
	AnnotationReclaimedReplicas = "kubemedic.io/reclaimed-replicas"
	// AnnotationReclaimedBy on a workload the janitor stopped names the pod
	// and rule that caused it.
	AnnotationReclaimedBy = "kubemedic.io/reclaimed-by"

	// AnnotationJanitorTTL and AnnotationJanitorExpires are kube-janitor's
	// expiry annotations, honoured on a GPU pod, its owners and its
	// namespace: a TTL after the object's creation ("24h", "7d", "2w") or an
	// absolute time (RFC 3339, "2006-01-02T15:04", or a date).
	AnnotationJanitorTTL     = "janitor/ttl"
	AnnotationJanitorExpires = "janitor/expires"
)

// MachineRequestMarker is the value of AnnotationMachineRequestedBy that
// op leaves: its name, for people, and its UID, so that an operation made
// again under the same deterministic name (after the first was deleted at
// the end of its retention) never reads the old one's request as its own.
func MachineRequestMarker(op *NodeOperation) string {
	return op.Name + "/" + string(op.UID)
}
