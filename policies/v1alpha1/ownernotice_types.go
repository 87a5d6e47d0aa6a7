package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxOwnerNotices bounds NodeOperationStatus.OwnerNotices: more than a
// node's pods (110 by default, 250 at most on the largest nodes).
const MaxOwnerNotices = 256

// OwnerNoticeState is where the Slack message about one stopped pod is, in
// the claim → send → record model: Pending (the drain is stopping the pod)
// → Owed (it was stopped) → Claimed (a remediator is sending it) → Sent,
// or Failed when Slack refused it for good. A claim older than the claim
// timeout is taken over by anyone, so a message is repeated at worst,
// never lost.
// +kubebuilder:validation:Enum=Pending;Owed;Claimed;Sent;Failed
type OwnerNoticeState string

const (
	// OwnerNoticePending: the drain evicts (or deletes) the pod; nothing is
	// owed until the API server accepts that, or the pod is seen
	// terminating or gone at a later pass.
	OwnerNoticePending OwnerNoticeState = "Pending"
	// OwnerNoticeOwed: the drain stopped the pod; the message is owed.
	OwnerNoticeOwed OwnerNoticeState = "Owed"
	// OwnerNoticeClaimed: Claimer is sending it since ClaimedAt.
	OwnerNoticeClaimed OwnerNoticeState = "Claimed"
	// OwnerNoticeSent: Slack accepted it (Channel, TS).
	OwnerNoticeSent OwnerNoticeState = "Sent"
	// OwnerNoticeFailed: Slack refused it for a reason a retry does not
	// fix (Message); it is not sent again.
	OwnerNoticeFailed OwnerNoticeState = "Failed"
)

// OwnerNotice is the Slack message owed to the owner of one pod the drain
// stops. It is written before the pod is stopped, so that a crash between
// the eviction and the message cannot lose it, and holds what the message
// needs once the pod is gone.
type OwnerNotice struct {
	// UID is the pod's UID: a pod recreated under the same name is another
	// pod.
	// +required
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid"`
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// ControllerKind and ControllerName are the pod's controller, which
	// recreates it elsewhere; empty for a bare pod.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ControllerKind string `json:"controllerKind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ControllerName string `json:"controllerName,omitempty"`
	// Recipient is who is told, as found when the drain decided to stop
	// the pod.
	// +required
	Recipient OwnerNoticeRecipient `json:"recipient"`
	// +required
	State OwnerNoticeState `json:"state"`
	// Deleted: the drain deletes the pod after its timeout (bypassing its
	// disruption budgets) rather than evicting it.
	// +optional
	Deleted bool `json:"deleted,omitempty"`
	// StoppedAt is when the drain stopped the pod (or saw it stopped).
	// +optional
	StoppedAt *metav1.Time `json:"stoppedAt,omitempty"`
	// ClaimedAt and Claimer: who is sending it, since when.
	// +optional
	ClaimedAt *metav1.Time `json:"claimedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Claimer string `json:"claimer,omitempty"`
	// SentAt is when Slack accepted it.
	// +optional
	SentAt *metav1.Time `json:"sentAt,omitempty"`
	// Channel and TS are where Slack put it: the thread to follow.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Channel string `json:"channel,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TS string `json:"ts,omitempty"`
	// Message says why Slack refused it (Failed), or its result reply
	// (ResultReply Failed).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// ResultReply is the reply in this message's thread that tells the
	// owner the result of the operation's GPU test (spec.validate), in the
	// same claim → send → record model: owed while empty once the message
	// is Sent and the operation has ended on the test's verdict, then
	// Claimed (ClaimedAt and Claimer are then the reply's claim), Sent, or
	// Failed (Message says why). It is never Pending or Owed.
	// +optional
	ResultReply OwnerNoticeState `json:"resultReply,omitempty"`
}

// OwnerNoticeRecipient is a notify.Recipient: a Slack user ID, else an
// email, else a channel.
type OwnerNoticeRecipient struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UserID string `json:"userID,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=254
	Email string `json:"email,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Channel string `json:"channel,omitempty"`
	// Source says where it was found, e.g. "namespace annotation
	// kubemedic.io/owner".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Source string `json:"source,omitempty"`
}
