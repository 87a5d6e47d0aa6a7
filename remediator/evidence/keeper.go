package evidence

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Options say where capture pods put their bundles.
type Options struct {
	// Store is the S3-compatible store and bucket.
	Store diagstore.Config
	// Secret names the Secret in the remediator's namespace with the
	// store's accessKey and secretKey. Capture pods get them by
	// secretKeyRef; the remediator reads them to presign links.
	Secret string
	// LinkExpiry is how long a presigned link works (at most
	// diagnostics.MaxLinkExpiry).
	LinkExpiry time.Duration
	// SpooledRecheck is how often a bundle left in a node's spool is looked
	// for in the store; default SpooledRecheck.
	SpooledRecheck time.Duration
	// Retention is how long bundles are kept, but for those of nodes still
	// quarantined; default diagnostics.DefaultRetention.
	Retention time.Duration
	// SweepEvery is how often the store is swept of bundles past their
	// retention, the first time after it too; default RetentionSweep (the
	// first sweep a minute after the start).
	SweepEvery time.Duration
}

// DefaultLinkExpiry is how long a bundle's link works by default: S3's
// longest, so the link in an issue outlives a weekend.
const DefaultLinkExpiry = diagnostics.MaxLinkExpiry

// Keeper is the remediator's diagnostics work (see the package comment).
// Its exported fields are set before first use and not changed after; a
// Keeper whose Options are nil or name no endpoint has no store, and its
// bundles stay in the nodes' spools.
type Keeper struct {
	Client client.Client
	// Reader reads the API server without the cache: the store's Secret
	// (the cache holds no Secrets), the DeviceTaintRules, flush pods and
	// the must-gather's Node, Events and pods.
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Namespace is the remediator's: capture and flush pods run there, and
	// the store's Secret is there.
	Namespace string
	// Options says where capture pods put their bundles; nil: no store.
	Options *Options
	// Logs reads the GPU Operator's pods' logs for the must-gather; nil:
	// none.
	Logs PodLogs
	// DRA: the API server serves DeviceTaintRule; retention keeps the
	// bundles of GPUs a permanent rule excludes.
	DRA bool
	// Conflicts counts the flush reconciles that conflicted and were
	// requeued quietly (ctrlmgr.QuietConflicts), by controller; nil: not
	// counted.
	Conflicts *prometheus.CounterVec

	// mu guards cached, which the operation reconciler's workers and the
	// retention sweep share.
	mu sync.Mutex
	// cached is the store's client and the Secret it was built from.
	cached *cachedStore
	// newStore makes a store client; nil is diagstore.New (a test counts
	// the clients it makes).
	newStore func(diagstore.Config, diagstore.Credentials) (*diagstore.Store, error)
}

// cachedStore is a store client and the version of the Secret its
// credentials came from.
type cachedStore struct {
	uid             types.UID
	resourceVersion string
	store           *diagstore.Store
}

// store is a client of the diagnostics store with the credentials of its
// Secret. The Secret is read from the API server at every call (the cache
// holds no Secrets), so that a Secret deleted or broken is seen at once;
// the client is built again only when the Secret is another one or has
// changed (its UID or resourceVersion).
func (k *Keeper) store(ctx context.Context) (*diagstore.Store, error) {
	o := k.Options
	if o == nil || o.Store.Endpoint == "" {
		return nil, fmt.Errorf("no diagnostics store configured")
	}
	var sec corev1.Secret
	if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: o.Secret}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret %s/%s does not exist", k.Namespace, o.Secret)
		}
		return nil, fmt.Errorf("read secret %s/%s: %w", k.Namespace, o.Secret, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c := k.cached; c != nil && sec.ResourceVersion != "" && c.uid == sec.UID && c.resourceVersion == sec.ResourceVersion {
		return c.store, nil
	}
	k.cached = nil
	newStore := k.newStore
	if newStore == nil {
		newStore = diagstore.New
	}
	st, err := newStore(o.Store, diagstore.Credentials{
		AccessKey: string(sec.Data[diagnostics.SecretAccessKey]), SecretKey: string(sec.Data[diagnostics.SecretSecretKey])})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", k.Namespace, o.Secret, err)
	}
	k.cached = &cachedStore{uid: sec.UID, resourceVersion: sec.ResourceVersion, store: st}
	return st, nil
}

// storeConfigured: a store is configured (its Secret may still be
// missing).
func (k *Keeper) storeConfigured() bool {
	return k.Options != nil && k.Options.Store.Endpoint != ""
}

// Link adds a presigned link to a stored bundle. It fails soft: a store
// that is not configured, or a Secret that cannot be read, leaves the link
// empty and says why in the capture's message, and the repair goes on.
func (k *Keeper) Link(ctx context.Context, st *v1alpha1.DiagnosticsStatus, now time.Time) {
	b := st.Bundle
	if b == nil || !b.Stored {
		return
	}
	u, err := k.presign(ctx, b.Key)
	if err != nil {
		log.FromContext(ctx).Error(err, "Presigning the diagnostics bundle's link failed", "key", b.Key)
		st.Message = plan.Truncate(st.Message+"; no link: "+err.Error(), 1024)
		return
	}
	exp := metav1.NewTime(now.Add(k.linkExpiry()))
	b.URL, b.URLExpires = u, &exp
}

func (k *Keeper) linkExpiry() time.Duration {
	if k.Options == nil || k.Options.LinkExpiry <= 0 {
		return DefaultLinkExpiry
	}
	return k.Options.LinkExpiry
}

// presign makes a link to key with the credentials of the store's Secret.
func (k *Keeper) presign(ctx context.Context, key string) (string, error) {
	store, err := k.store(ctx)
	if err != nil {
		return "", err
	}
	u, err := store.Link(ctx, key, k.linkExpiry())
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// SpooledRecheck is how often a bundle that waits in a node's spool is
// looked for in the store: the next capture on that node, or a flush,
// uploads it.
const SpooledRecheck = time.Minute

// CheckSpooled records a bundle the capture left in the node's spool as
// stored, with its link, once the store holds it with the same size and
// sha256 (a later capture on the node, or kubemedic-diag flush, uploaded
// it). It returns when to look again; 0 when there is nothing to wait for.
func (k *Keeper) CheckSpooled(ctx context.Context, op *v1alpha1.NodeOperation) time.Duration {
	d := op.Status.Diagnostics
	if d == nil || d.Bundle == nil || d.Bundle.Stored || d.Result == v1alpha1.DiagnosticsCapturing {
		return 0
	}
	if !k.storeConfigured() {
		return 0
	}
	store, err := k.store(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Cannot look for a spooled diagnostics bundle in the store", "key", d.Bundle.Key)
		}
		return k.spooledRecheck()
	}
	ok, err := store.Exists(ctx, d.Bundle.Key, d.Bundle.Size, d.Bundle.SHA256)
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Cannot look for a spooled diagnostics bundle in the store", "key", d.Bundle.Key)
		}
		return k.spooledRecheck()
	}
	d.Bundle.Stored = true
	if u, err := store.Link(ctx, d.Bundle.Key, k.linkExpiry()); err == nil {
		exp := metav1.NewTime(k.Clock.Now().Add(k.linkExpiry()))
		d.Bundle.URL, d.Bundle.URLExpires = u.String(), &exp
	}
	log.FromContext(ctx).Info("A spooled diagnostics bundle reached the store", "key", d.Bundle.Key)
	return 0
}

func (k *Keeper) spooledRecheck() time.Duration {
	if k.Options == nil || k.Options.SpooledRecheck <= 0 {
		return SpooledRecheck
	}
	return k.Options.SpooledRecheck
}

// SetupWithManager adds the keeper's Runnables to mgr: the retention sweep
// of the store (on the leader, when a store is configured) and the
// FlushReconciler.
func (k *Keeper) SetupWithManager(mgr ctrl.Manager) error {
	if k.storeConfigured() {
		if err := mgr.Add(manager.RunnableFunc(k.sweepLoop)); err != nil {
			return fmt.Errorf("set up the diagnostics retention: %w", err)
		}
	}
	return setupFlush(mgr, &FlushReconciler{Client: k.Client, Reader: k.Reader, Recorder: k.Recorder, Clock: k.Clock,
		Namespace: k.Namespace, Options: k.Options}, k.Conflicts)
}
