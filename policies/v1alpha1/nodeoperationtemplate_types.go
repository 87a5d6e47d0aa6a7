package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOperationTemplate is a reusable operation (reset-gpu, reboot,
// restart-kubelet, remount-nfs, drain-only) that RemediationPolicy steps and
// hand-written NodeOperations refer to by name.
//
// The pod surface is deliberately narrow — one container, host paths, host
// PID/network and a security context — so that a reviewer can see at a glance
// what an operation may do on a node. The remediator adds nodeName, the
// tolerations for unschedulable and quarantined nodes, the owner reference
// and the KUBEMEDIC_* environment.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=notpl,categories=kubemedic
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Success",type=string,JSONPath=`.spec.successCriterion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeOperationTemplate struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeOperationTemplateSpec `json:"spec"`
}

// SuccessCriterion says how the remediator knows an operation worked.
// +kubebuilder:validation:Enum=PodSucceeded;NodeRebooted;MachineReplaced;None
type SuccessCriterion string

const (
	// SuccessPodSucceeded: the operation pod exited 0.
	SuccessPodSucceeded SuccessCriterion = "PodSucceeded"
	// SuccessNodeRebooted: the node's boot ID changed and the node is Ready
	// again. For reboots, whose pod dies with the node.
	SuccessNodeRebooted SuccessCriterion = "NodeRebooted"
	// SuccessMachineReplaced: the node's Machine is gone, or the node was
	// replaced (a new UID) and is Ready. For clusterAPI templates.
	SuccessMachineReplaced SuccessCriterion = "MachineReplaced"
	// SuccessNone: nothing runs (drain-only); the operation succeeds once the
	// cordon and drain are done.
	SuccessNone SuccessCriterion = "None"
)

// NodeOperationTemplateSpec is the operation pod and how to judge it, or,
// for the ladder's last rung, the request to the node's machine provider
// (clusterAPI, metal3 or redfish) that replaces the pod.
// +kubebuilder:validation:XValidation:rule="(self.successCriterion == 'None' || has(self.clusterAPI) || has(self.metal3) || has(self.redfish)) ? !has(self.image) : has(self.image)",message="image is required for an operation pod, and must be empty when successCriterion is None or the template sets clusterAPI, metal3 or redfish"
// +kubebuilder:validation:XValidation:rule="[has(self.clusterAPI), has(self.metal3), has(self.redfish)].filter(x, x).size() <= 1",message="set at most one of clusterAPI, metal3 and redfish"
// +kubebuilder:validation:XValidation:rule="has(self.clusterAPI) == (self.successCriterion == 'MachineReplaced')",message="a clusterAPI template has successCriterion MachineReplaced, and only a clusterAPI template has it"
// +kubebuilder:validation:XValidation:rule="!(has(self.metal3) || has(self.redfish)) || self.successCriterion == 'NodeRebooted'",message="a metal3 or redfish template power-cycles the machine: successCriterion must be NodeRebooted"
type NodeOperationTemplateSpec struct {
	// Description tells a reviewer what the operation does and what it needs.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Description string `json:"description,omitempty"`

	// SuccessCriterion says how success is recognised.
	// +optional
	// +kubebuilder:default=PodSucceeded
	SuccessCriterion SuccessCriterion `json:"successCriterion,omitempty"`

	// Image of the operation container.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Command of the operation container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// Args of the operation container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// Env of the operation container, on top of the KUBEMEDIC_* variables and
	// the parameters.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Env []TemplateEnvVar `json:"env,omitempty"`

	// Parameters are taken from the triggering condition's message and
	// passed as environment variables, e.g. the PCI bus ID of a GPU to reset.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Parameters []Parameter `json:"parameters,omitempty"`

	// HostPID runs the pod in the host PID namespace (needed for nsenter).
	// +optional
	HostPID bool `json:"hostPID,omitempty"`

	// HostNetwork runs the pod in the host network namespace.
	// +optional
	HostNetwork bool `json:"hostNetwork,omitempty"`

	// Privileged runs the container privileged.
	// +optional
	Privileged bool `json:"privileged,omitempty"`

	// Capabilities added to the container, when not privileged.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[A-Z_]+$`
	// +kubebuilder:validation:items:MaxLength=64
	Capabilities []string `json:"capabilities,omitempty"`

	// HostPaths mounted into the container.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	HostPaths []HostPathMount `json:"hostPaths,omitempty"`

	// ServiceAccountName the pod runs as; empty runs without a token.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Resources of the container.
	// +optional
	Resources *TemplateResources `json:"resources,omitempty"`

	// Timeout is the default time limit for the operation; a step's timeout
	// overrides it.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// ClusterAPI replaces the node's machine through Cluster API instead of
	// running a pod: the remediator sets the manual-remediation annotation
	// cluster.x-k8s.io/remediate-machine on the node's Machine, and the
	// owning MachineHealthCheck has it replaced. The Machine is found
	// through the node's cluster.x-k8s.io/machine annotation, else by its
	// status.nodeRef. successCriterion must be MachineReplaced.
	// +optional
	ClusterAPI *ClusterAPIAction `json:"clusterAPI,omitempty"`

	// Metal3 power-cycles the node's Metal3 BareMetalHost through the
	// reboot.metal3.io annotation instead of running a pod.
	// successCriterion must be NodeRebooted.
	// +optional
	Metal3 *Metal3Action `json:"metal3,omitempty"`

	// Redfish power-cycles the node through its BMC's Redfish API
	// (ComputerSystem.Reset) instead of running a pod. successCriterion
	// must be NodeRebooted.
	// +optional
	Redfish *RedfishAction `json:"redfish,omitempty"`
}

// ClusterAPIAction asks Cluster API to replace the node's Machine. It has
// no settings: the MachineHealthCheck that owns the Machine decides how.
type ClusterAPIAction struct{}

// Metal3Action power-cycles the node's BareMetalHost.
type Metal3Action struct {
	// Mode of the reboot, as Metal3's reboot.metal3.io annotation takes it:
	// hard (power off then on) or soft (an ACPI shutdown first).
	// +optional
	// +kubebuilder:default=hard
	// +kubebuilder:validation:Enum=hard;soft
	Mode string `json:"mode,omitempty"`
}

// RedfishAction power-cycles the node through its BMC.
type RedfishAction struct {
	// Address is the BMC's base URL as a Go template over the Node, e.g.
	// https://{{ index .Labels "node-restriction.kubernetes.io/kubemedic-bmc" }}
	// or https://{{ .Name }}-bmc.mgmt.example.com. The template sees .Name
	// and .Labels, which holds only the labels under
	// node-restriction.kubernetes.io/: a node's own kubelet cannot set
	// those, and could otherwise point kubemedic, with its BMC credentials,
	// at any address. Annotations are not offered for the same reason.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Address string `json:"address"`

	// CredentialsSecret names a Secret in the remediator's namespace with
	// the keys username and password. They are sent only to the BMC and
	// never appear in logs, Events, statuses or issues.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialsSecret string `json:"credentialsSecret"`

	// System is the Redfish ComputerSystem Id; empty: the BMC's only system.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	System string `json:"system,omitempty"`

	// ResetType of the ComputerSystem.Reset action.
	// +optional
	// +kubebuilder:default=PowerCycle
	// +kubebuilder:validation:Enum=PowerCycle;ForceRestart;GracefulRestart
	ResetType string `json:"resetType,omitempty"`

	// InsecureSkipVerify accepts a BMC's self-signed certificate.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// MachineKind names a last-rung provider.
type MachineKind string

const (
	MachineClusterAPI MachineKind = "ClusterAPI"
	MachineMetal3     MachineKind = "Metal3"
	MachineRedfish    MachineKind = "Redfish"
)

// MachineKind says which provider the template asks; "" for an operation
// pod.
func (s *NodeOperationTemplateSpec) MachineKind() MachineKind {
	switch {
	case s.ClusterAPI != nil:
		return MachineClusterAPI
	case s.Metal3 != nil:
		return MachineMetal3
	case s.Redfish != nil:
		return MachineRedfish
	}
	return ""
}

// TemplateEnvVar is a literal environment variable.
type TemplateEnvVar struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// Parameter extracts a value from the triggering condition's message.
type Parameter struct {
	// Name of the environment variable, e.g. GPU_BUS_ID.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`

	// MessageRegex is an RE2 regular expression with exactly one capture
	// group, applied to the condition message; the group is the value.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	MessageRegex string `json:"messageRegex"`

	// Required fails the operation (instead of running it without the
	// variable) when the message does not match.
	// +optional
	Required bool `json:"required,omitempty"`
}

// HostPathMount mounts a host path into the operation container.
type HostPathMount struct {
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Path on the host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
	// MountPath in the container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	MountPath string `json:"mountPath"`
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
	// MountPropagation, e.g. Bidirectional for remounting.
	// +optional
	// +kubebuilder:validation:Enum=None;HostToContainer;Bidirectional
	MountPropagation *corev1.MountPropagationMode `json:"mountPropagation,omitempty"`
}

// TemplateResources are the container's requests and limits.
type TemplateResources struct {
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// +kubebuilder:object:root=true

// NodeOperationTemplateList is a list of NodeOperationTemplate.
type NodeOperationTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOperationTemplate `json:"items"`
}
