package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultGracePeriod is the grace period between notice and reclaim when no
// policy sets one.
const DefaultGracePeriod = time.Hour

// DefaultMaxSnooze caps kubemedic.io/reclaim-snooze-until when no policy sets
// maxSnooze: a researcher can keep a pod for a day past its notice, then is
// asked again.
const DefaultMaxSnooze = 24 * time.Hour

// ClusterReclaimPolicy is the janitor's cluster-wide policy: when a GPU pod
// is idle, too old or stuck pending, its owner is told on Slack and, after a
// grace period, the pod is reclaimed. Its values are ceilings: a namespaced
// ReclaimPolicy may only tighten them for its namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=crp,categories=kubemedic
// +kubebuilder:printcolumn:name="Idle",type=string,JSONPath=`.spec.idle.window`
// +kubebuilder:printcolumn:name="MaxLifetime",type=string,JSONPath=`.spec.maxLifetime`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun.enabled`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterReclaimPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterReclaimPolicySpec `json:"spec"`
}

// ClusterReclaimPolicySpec is the cluster-wide reclaim rule set.
type ClusterReclaimPolicySpec struct {
	ReclaimRules `json:",inline"`

	// NamespaceSelector picks the namespaces the policy governs; empty
	// selects all. When several cluster policies select a namespace, each
	// field takes the tightest value among them.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ExemptNamespaces are never reclaimed (system and serving namespaces).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=63
	ExemptNamespaces []string `json:"exemptNamespaces,omitempty"`

	// ExemptPodSelector: pods it selects are never reclaimed. Only cluster
	// admins set it, so researchers cannot exempt themselves.
	// +optional
	ExemptPodSelector *metav1.LabelSelector `json:"exemptPodSelector,omitempty"`
}

// ReclaimPolicy tightens the ClusterReclaimPolicy for one namespace. Every
// value it sets must be at least as strict as that of each cluster policy
// that selects the namespace: the janitor (and `kubemedic policy validate`,
// for the cluster policies in the same set of files) reject looser values,
// since CEL cannot see other objects. Stricter means a shorter idle window,
// lifetime, pending time or grace period and a higher idle threshold.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=rcp,categories=kubemedic
// +kubebuilder:printcolumn:name="Idle",type=string,JSONPath=`.spec.idle.window`
// +kubebuilder:printcolumn:name="MaxLifetime",type=string,JSONPath=`.spec.maxLifetime`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun.enabled`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReclaimPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ReclaimPolicySpec `json:"spec"`
}

// ReclaimPolicySpec is a namespace's reclaim rules.
type ReclaimPolicySpec struct {
	ReclaimRules `json:",inline"`

	// PodSelector narrows the pods in the namespace the policy applies to;
	// empty selects all GPU pods.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// ReclaimRules are the limits shared by cluster and namespaced policies.
// Unset fields impose no limit of their own.
// +kubebuilder:validation:XValidation:rule="has(self.idle) || has(self.maxLifetime) || has(self.maxPending)",message="set at least one of idle, maxLifetime or maxPending"
type ReclaimRules struct {
	// Description tells researchers what the rules are and why.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Idle reclaims pods whose GPUs stay below a utilisation threshold for a
	// window. Missing metrics never count as idle.
	// +optional
	Idle *IdleRule `json:"idle,omitempty"`

	// MaxLifetime reclaims GPU pods running longer than this.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`

	// MaxPending reclaims GPU pods pending (unscheduled) longer than this.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	MaxPending *metav1.Duration `json:"maxPending,omitempty"`

	// GracePeriod is the time between the Slack notice to the owner and
	// the reclaim. Unset: a namespaced policy inherits the cluster policy's,
	// and a cluster policy uses DefaultGracePeriod.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`

	// MaxSnooze caps how far ahead a pod's owner can keep it with the
	// kubemedic.io/reclaim-snooze-until annotation, counted from the
	// notice's deadline. Unset: a namespaced policy inherits the cluster
	// policy's, and a cluster policy uses DefaultMaxSnooze.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	MaxSnooze *metav1.Duration `json:"maxSnooze,omitempty"`

	// AllowOptOut lets a pod's owner exempt it with the annotation
	// kubemedic.io/reclaim=disabled. Unset on a cluster policy means no
	// opt-out; unset on a namespaced policy inherits. Opt-out holds only
	// when every policy that selects the pod allows it.
	// +optional
	AllowOptOut *bool `json:"allowOptOut,omitempty"`

	// RequireNotice (default true): no pod is reclaimed unless its owner
	// was told on Slack first. With false, a pod whose notice cannot be
	// sent (Slack not configured or failing) is reclaimed at the deadline
	// anyway. A notice stays required unless every policy that selects the
	// pod sets false.
	// +optional
	RequireNotice *bool `json:"requireNotice,omitempty"`

	// DeletePodsOfUnknownOwners deletes a candidate pod whose controller is
	// not one the janitor knows how to stop (bare Pod, Job, Deployment,
	// StatefulSet, Kubeflow Notebook). Unset or false: such a pod only gets
	// a Warning Event.
	// +optional
	DeletePodsOfUnknownOwners *bool `json:"deletePodsOfUnknownOwners,omitempty"`

	// DryRun decides, logs and records Events ("would reclaim"), but
	// changes nothing. A cluster policy in dry run keeps every namespace it
	// selects in dry run.
	// +optional
	DryRun *ReclaimDryRun `json:"dryRun,omitempty"`
}

// ReclaimDryRun turns the dry run on and says whether owners hear of it.
type ReclaimDryRun struct {
	// Enabled: nothing is reclaimed.
	// +required
	Enabled bool `json:"enabled"`
	// Notify sends the Slack notices (marked as a dry run) and records
	// them on the pod, so owners see what the policy would do. Without it
	// nothing is sent and nothing is written to the pod.
	// +optional
	Notify bool `json:"notify,omitempty"`
}

// IdleRule defines an idle GPU pod.
type IdleRule struct {
	// UtilizationBelowPercent: a pod is idle while the GPU utilisation of
	// every GPU it holds stays below this percentage.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	UtilizationBelowPercent int32 `json:"utilizationBelowPercent"`

	// Window is how long the pod must stay idle.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$')",message="must be a non-negative duration like 90s, 10m or 1h30m (units ns, us, ms, s, m, h; no days)"
	Window metav1.Duration `json:"window"`
}

// +kubebuilder:object:root=true

// ClusterReclaimPolicyList is a list of ClusterReclaimPolicy.
type ClusterReclaimPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterReclaimPolicy `json:"items"`
}

// +kubebuilder:object:root=true

// ReclaimPolicyList is a list of ReclaimPolicy.
type ReclaimPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReclaimPolicy `json:"items"`
}
