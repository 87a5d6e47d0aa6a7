// Package ctrlmgr builds the controller-runtime managers of kubemedic's
// controllers (remediator, janitor) the same way: leader election with a
// Lease that is released on shutdown, /metrics, /healthz, and a /readyz that
// is ready only once the cache has synced; and the routine ends of a
// reconcile and of a shutdown stay out of the error log (QuietConflicts,
// and the manager's logger). It never registers controllers.
package ctrlmgr

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options are the manager settings both controllers share.
type Options struct {
	// Namespace holds the leader-election Lease.
	Namespace string
	// LeaderElection turns on leader election with the Lease LeaderElectionID.
	LeaderElection   bool
	LeaderElectionID string
	// MetricsAddr serves /metrics; "" or "0" turns it off.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "" or "0" turns them off.
	ProbeAddr string
	// PprofAddr serves net/http/pprof (heap and CPU profiles for a scale
	// problem); "" or "0" turns it off, the default.
	PprofAddr string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger is the manager's, its controllers' and its runnables'; the
	// zero Logger is controller-runtime's global one (ctrl.Log).
	Logger logr.Logger
}

// New builds a manager with the scheme and cache options.
func New(cfg *rest.Config, o Options, scheme *runtime.Scheme, cacheOpts cache.Options) (ctrl.Manager, error) {
	mo := ctrl.Options{
		Scheme:                        scheme,
		Logger:                        quietShutdown(o.Logger),
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
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
	if o.Logger.GetSink() == nil {
		mo.Logger = quietShutdown(ctrllog.Log)
	}
	if mo.Metrics.BindAddress == "" {
		mo.Metrics.BindAddress = "0"
	}
	if mo.PprofBindAddress == "" {
		mo.PprofBindAddress = "0"
	}
	if mo.HealthProbeBindAddress == "0" {
		mo.HealthProbeBindAddress = ""
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if mo.HealthProbeBindAddress != "" {
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
	return mgr, nil
}
