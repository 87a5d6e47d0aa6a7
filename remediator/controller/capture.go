package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// DiagnosticsOptions say where capture pods put their bundles.
type DiagnosticsOptions struct {
	// Store is the S3-compatible store and bucket.
	Store diagnostics.StoreConfig
	// Secret names the Secret in the remediator's namespace with the
	// store's accessKey and secretKey. Capture pods get them by
	// secretKeyRef; the remediator reads them to presign links.
	Secret string
	// LinkExpiry is how long a presigned link works (at most
	// diagnostics.MaxLinkExpiry).
	LinkExpiry time.Duration
}

// DefaultLinkExpiry is how long a bundle's link works by default: S3's
// longest, so the link in an issue outlives a weekend.
const DefaultLinkExpiry = diagnostics.MaxLinkExpiry

// capturePod reads the operation's capture pod; nil when it was not
// created yet or is gone.
func (r *OperationReconciler) capturePod(ctx context.Context, op *v1alpha1.NodeOperation) (*corev1.Pod, error) {
	created := op.Status.Diagnostics != nil && op.Status.Diagnostics.PodName != ""
	return r.podNamed(ctx, plan.CapturePodName(op), created)
}

// buildCapturePod is the capture pod: the diagnostics template's container
// on the node, like an operation pod, with the store's endpoint, bucket
// and credentials (by secretKeyRef, never in the pod spec's values).
func buildCapturePod(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate, ns string, o *DiagnosticsOptions) *corev1.Pod {
	pod := buildPod(op, tpl, ns)
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

// link adds a presigned link to a stored bundle. It fails soft: a store
// that is not configured, or a Secret that cannot be read, leaves the link
// empty and says why in the capture's message, and the repair goes on.
func (r *OperationReconciler) link(ctx context.Context, st *v1alpha1.DiagnosticsStatus, now time.Time) {
	b := st.Bundle
	if b == nil || !b.Stored {
		return
	}
	u, err := r.presign(ctx, b.Key)
	if err != nil {
		log.FromContext(ctx).Error(err, "Presigning the diagnostics bundle's link failed", "key", b.Key)
		st.Message = plan.Truncate(st.Message+"; no link: "+err.Error(), 1024)
		return
	}
	exp := metav1.NewTime(now.Add(r.linkExpiry()))
	b.URL, b.URLExpires = u, &exp
}

func (r *OperationReconciler) linkExpiry() time.Duration {
	if r.Diagnostics == nil || r.Diagnostics.LinkExpiry <= 0 {
		return DefaultLinkExpiry
	}
	return r.Diagnostics.LinkExpiry
}

// presign makes a link to key with the credentials of the store's Secret,
// read from the API server (the cache holds no Secrets).
func (r *OperationReconciler) presign(ctx context.Context, key string) (string, error) {
	o := r.Diagnostics
	if o == nil || o.Store.Endpoint == "" {
		return "", fmt.Errorf("no diagnostics store configured")
	}
	var sec corev1.Secret
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: o.Secret}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("secret %s/%s does not exist", r.Namespace, o.Secret)
		}
		return "", fmt.Errorf("read secret %s/%s: %w", r.Namespace, o.Secret, err)
	}
	store, err := diagnostics.NewStore(o.Store, diagnostics.Credentials{
		AccessKey: string(sec.Data[diagnostics.SecretAccessKey]), SecretKey: string(sec.Data[diagnostics.SecretSecretKey])})
	if err != nil {
		return "", fmt.Errorf("secret %s/%s: %w", r.Namespace, o.Secret, err)
	}
	u, err := store.Link(ctx, key, r.linkExpiry())
	if err != nil {
		return "", err
	}
	return u.String(), nil
}
