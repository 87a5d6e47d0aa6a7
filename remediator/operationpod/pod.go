package operationpod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Environment variables every operation pod gets.
const (
	EnvNode          = "KUBEMEDIC_NODE_NAME"
	EnvOperation     = "KUBEMEDIC_OPERATION"
	EnvPolicy        = "KUBEMEDIC_POLICY"
	EnvStep          = "KUBEMEDIC_STEP"
	EnvTriggerType   = "KUBEMEDIC_TRIGGER_TYPE"
	EnvTriggerReason = "KUBEMEDIC_TRIGGER_REASON"
	EnvTriggerMsg    = "KUBEMEDIC_TRIGGER_MESSAGE"
)

// Build is the operation pod, named plan.OperationPodName: the template's
// container on the node, owned
// by the operation, tolerating every taint (the node is cordoned, maybe
// quarantined or not ready, and may carry GPU taints), with the KUBEMEDIC_*
// environment and the parameters.
func Build(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string) *corev1.Pod {
	ts := tpl.Spec
	env := []corev1.EnvVar{
		{Name: EnvNode, Value: op.Spec.NodeName},
		{Name: EnvOperation, Value: op.Name},
		{Name: EnvPolicy, Value: op.Spec.Policy},
		{Name: EnvStep, Value: op.Spec.Step},
	}
	if t := op.Spec.Trigger; t != nil {
		env = append(env,
			corev1.EnvVar{Name: EnvTriggerType, Value: t.Type},
			corev1.EnvVar{Name: EnvTriggerReason, Value: t.Reason},
			corev1.EnvVar{Name: EnvTriggerMsg, Value: t.Message})
	}
	for _, e := range ts.Env {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for _, e := range op.Status.Parameters {
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	sc := &corev1.SecurityContext{}
	if ts.Privileged {
		sc.Privileged = ptr.To(true)
	} else if len(ts.Capabilities) > 0 {
		caps := make([]corev1.Capability, len(ts.Capabilities))
		for i, c := range ts.Capabilities {
			caps[i] = corev1.Capability(c)
		}
		sc.Capabilities = &corev1.Capabilities{Add: caps}
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, h := range ts.HostPaths {
		vols = append(vols, corev1.Volume{Name: h.Name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: h.Path}}})
		mounts = append(mounts, corev1.VolumeMount{Name: h.Name, MountPath: h.MountPath, ReadOnly: h.ReadOnly, MountPropagation: h.MountPropagation})
	}
	c := corev1.Container{
		Name: "operation", Image: ts.Image, Command: ts.Command, Args: ts.Args, Env: env,
		SecurityContext: sc, VolumeMounts: mounts, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if ts.Resources != nil {
		c.Resources = corev1.ResourceRequirements{Requests: ts.Resources.Requests, Limits: ts.Resources.Limits}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      plan.OperationPodName(op),
			Namespace: ns,
			Labels: map[string]string{
				v1alpha1.LabelOperation:     plan.LabelValue(op.Name),
				v1alpha1.LabelNode:          plan.LabelValue(op.Spec.NodeName),
				"app.kubernetes.io/part-of": "kubemedic",
				"app.kubernetes.io/name":    "kubemedic-operation",
				v1alpha1.LabelTemplate:      plan.LabelValue(tpl.Name),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeOperation",
				Name: op.Name, UID: op.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                     op.Spec.NodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			HostPID:                      ts.HostPID,
			HostNetwork:                  ts.HostNetwork,
			ServiceAccountName:           ts.ServiceAccountName,
			AutomountServiceAccountToken: ptr.To(ts.ServiceAccountName != ""),
			Containers:                   []corev1.Container{c},
			Volumes:                      vols,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: v1alpha1.TaintQuarantined, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Operator: corev1.TolerationOpExists},
			},
		},
	}
}
