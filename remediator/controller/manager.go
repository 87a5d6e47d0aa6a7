package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
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
	// PprofAddr serves net/http/pprof; "" or "0" (the default) turns it off.
	PprofAddr string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Logger is the manager's, its controllers' and its runnables'; the
	// zero Logger is controller-runtime's global one (ctrl.Log).
	Logger logr.Logger
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
	mgr, err := ctrlmgr.New(cfg, ctrlmgr.Options{
		Namespace: o.Namespace, LeaderElection: o.LeaderElection, LeaderElectionID: o.LeaderElectionID,
		MetricsAddr: o.MetricsAddr, ProbeAddr: o.ProbeAddr, PprofAddr: o.PprofAddr,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		Logger: o.Logger,
	}, scheme, CacheOptions(o.Namespace))
	if err != nil {
		return nil, err
	}
	if err := Setup(ctx, mgr, o.Options); err != nil {
		return nil, err
	}
	return mgr, nil
}
