package evidence

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/operationpod"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// CapturePod is the operation's capture pod, made from the diagnostics
// template tpl, for the transition t that creates it: with the store's
// settings when the store can be used, and otherwise without them and a
// Warning Event on t (see captureStore).
func (k *Keeper) CapturePod(ctx context.Context, op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, t *plan.Transition) *corev1.Pod {
	return buildCapturePod(op, tpl, k.Namespace, k.captureStore(ctx, t))
}

// buildCapturePod is the capture pod: the diagnostics template's container
// on the node, like an operation pod, with the store's endpoint, bucket
// and credentials (by secretKeyRef, never in the pod spec's values).
func buildCapturePod(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string, o *Options) *corev1.Pod {
	pod := operationpod.Build(op, tpl, ns)
	pod.Name = plan.CapturePodName(op)
	pod.Labels["app.kubernetes.io/name"] = "kubemedic-diagnostics"
	c := &pod.Spec.Containers[0]
	// The report is the termination message; a container that dies before
	// writing it leaves its log's tail instead, which the remediator
	// records as a failed capture.
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	if o == nil || o.Store.Endpoint == "" {
		return pod
	}
	insecure := "false"
	if o.Store.Insecure {
		insecure = "true"
	}
	if g := op.Status.GPU; g != nil && g.UUID != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: diagnostics.EnvGPU, Value: g.UUID})
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: diagnostics.EnvEndpoint, Value: o.Store.Endpoint},
		corev1.EnvVar{Name: diagnostics.EnvBucket, Value: o.Store.Bucket},
		corev1.EnvVar{Name: diagnostics.EnvRegion, Value: o.Store.Region},
		corev1.EnvVar{Name: diagnostics.EnvInsecure, Value: insecure},
		secretEnv(diagnostics.EnvAccessKey, o.Secret, diagnostics.SecretAccessKey),
		secretEnv(diagnostics.EnvSecretKey, o.Secret, diagnostics.SecretSecretKey),
	)
	return pod
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// captureStore is the store settings a capture pod gets: none when no
// store is configured, or when its Secret cannot be read. A pod whose
// secretKeyRef names a missing Secret would never start, and would hold
// the repair for the whole capture timeout; without the store it keeps
// the bundle in the node's spool, and a Warning Event says why.
func (k *Keeper) captureStore(ctx context.Context, t *plan.Transition) *Options {
	if !k.storeConfigured() {
		return nil
	}
	if _, err := k.store(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopping: this pass's status write fails too
		}
		log.FromContext(ctx).Error(err, "The capture pod gets no store: its bundle stays in the node's spool")
		t.Events = append(t.Events, plan.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonDiagnosticsFailed, Action: "Capture",
			Note: plan.Truncate("the diagnostics store cannot be used ("+err.Error()+"); the bundle stays in the node's spool until kubemedic diag flush", 1024)})
		return nil
	}
	return k.Options
}
