package controller

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// ManagerOptions configures NewManager.
type ManagerOptions struct {
	Options
	// LeaderElection turns on leader election with a Lease in Namespace.
	LeaderElection bool
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// MetricsAddr serves /metrics; "0" turns it off.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" or "" turns them off.
	ProbeAddr string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Scheme is the scheme of the remediator's clients.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewManager builds the remediator's manager: a cache holding only what the
// decisions need, leader election, metrics and probes, and both controllers.
func NewManager(ctx context.Context, cfg *rest.Config, o ManagerOptions) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "kubemedic-remediator"
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	mo := ctrl.Options{
		Scheme:                        scheme,
		Cache:                         CacheOptions(o.Namespace),
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		// Controller names are checked for uniqueness process-wide; a
		// process that builds a second manager after stopping the first
		// (tests, a restart after losing the lease) must not fail on it.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if o.LeaseDuration > 0 {
		mo.LeaseDuration, mo.RenewDeadline, mo.RetryPeriod = &o.LeaseDuration, &o.RenewDeadline, &o.RetryPeriod
	}
	if mo.Metrics.BindAddress == "" {
		mo.Metrics.BindAddress = "0"
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if o.ProbeAddr != "" && o.ProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, fmt.Errorf("add healthz: %w", err)
		}
		// Ready once the cache has synced: before that, decisions would be
		// made on an empty view of the cluster.
		if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
			ctx, cancel := context.WithTimeout(req.Context(), 200*time.Millisecond)
			defer cancel()
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return fmt.Errorf("cache not synced")
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("add readyz: %w", err)
		}
	}
	if err := Setup(ctx, mgr, o.Options); err != nil {
		return nil, err
	}
	return mgr, nil
}
