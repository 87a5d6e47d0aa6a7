package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// parameters extracts the template's parameters from the trigger message.
func parameters(tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation) ([]v1alpha1.TemplateEnvVar, error) {
	var out []v1alpha1.TemplateEnvVar
	for _, prm := range tpl.Spec.Parameters {
		re, err := regexp.Compile(prm.MessageRegex)
		if err != nil {
			return nil, fmt.Errorf("template %s: parameters[%s].messageRegex: %w", tpl.Name, prm.Name, err)
		}
		var m []string
		if op.Spec.Trigger != nil {
			m = re.FindStringSubmatch(op.Spec.Trigger.Message)
		}
		if len(m) < 2 || m[1] == "" {
			if prm.Required {
				src := "the operation has no trigger condition"
				if op.Spec.Trigger != nil {
					src = fmt.Sprintf("trigger message %q", op.Spec.Trigger.Message)
				}
				return nil, fmt.Errorf("template %s: required parameter %s: %s does not match %s", tpl.Name, prm.Name, src, prm.MessageRegex)
			}
			continue
		}
		out = append(out, v1alpha1.TemplateEnvVar{Name: prm.Name, Value: m[1]})
	}
	return out, nil
}

// operationPod returns the operation's pod, creating it the first time. The
// pod's name is the operation's, so a second creation fails AlreadyExists.
func (r *OperationReconciler) operationPod(ctx context.Context, p *opPass, tpl *v1alpha1.NodeOperationTemplate) (*corev1.Pod, error) {
	op := p.op
	name := op.Name
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, pod)
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get operation pod %s/%s: %w", r.Namespace, name, err)
	}
	if op.Status.PodName != "" {
		// Created before: too new for the cache, or gone with a reboot.
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, pod); err == nil {
			return pod, nil
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get operation pod %s/%s: %w", r.Namespace, name, err)
		}
		return nil, nil
	}
	pod = buildPod(op, tpl, r.Namespace)
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create operation pod %s/%s: %w", r.Namespace, name, err)
	}
	op.Status.PodName = name
	p.emit(corev1.EventTypeNormal, "PodCreated", "Run", "created operation pod %s/%s (%s)", r.Namespace, name, tpl.Spec.Image)
	return nil, nil
}

// buildPod is the operation pod: the template's container on the node, owned
// by the operation, tolerating every taint (the node is cordoned, maybe
// quarantined or not ready, and may carry GPU taints), with the KUBEMEDIC_*
// environment and the parameters.
func buildPod(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string) *corev1.Pod {
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
			Name:      op.Name,
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

// podFailure says why a pod failed, from its container states.
func podFailure(pod *corev1.Pod) string {
	var parts []string
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			s := fmt.Sprintf("container %s exited %d", cs.Name, t.ExitCode)
			if t.Reason != "" {
				s += " (" + t.Reason + ")"
			}
			if m := strings.TrimSpace(t.Message); m != "" {
				s += ": " + truncate(m, 300)
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		if pod.Status.Message != "" {
			return pod.Status.Reason + " " + pod.Status.Message
		}
		return "no container status"
	}
	return strings.Join(parts, "; ")
}

// podFinishedAt is when the pod's containers finished; zero if unknown.
func podFinishedAt(pod *corev1.Pod) time.Time {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	return t
}
