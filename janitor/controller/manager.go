package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// DefaultInterval is the time between cycles. The idle rule's windows are
// hours; a minute keeps deadlines within a minute of the notice's word.
const DefaultInterval = time.Minute

// Options configures the janitor.
type Options struct {
	// Namespace is the janitor's own (its pods are never reclaimed) and
	// holds the leader-election Lease.
	Namespace string
	// PrometheusURL is the Prometheus HTTP API holding dcgm-exporter's
	// metrics. Empty: the idle rule is Unknown for every pod.
	PrometheusURL string
	// Source overrides PrometheusURL (tests, benchmarks).
	Source gpuutil.Source
	// Notifier sends Slack messages; nil means Slack is not configured.
	Notifier notify.Notifier
	// DefaultChannel receives notices for pods with no owner found.
	DefaultChannel string
	// Interval between cycles; zero means DefaultInterval.
	Interval time.Duration
	// Staleness: a series whose last sample is older is stale.
	Staleness time.Duration
	// RawGPUSeries reads every idle window from dcgm-exporter's raw series,
	// never from the recorded buckets (gpuutil.Options.RawSeries).
	RawGPUSeries bool
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// Registry receives the metrics; nil means controller-runtime's.
	Registry prometheus.Registerer
	// Identity names this janitor in notice claims; default the hostname.
	Identity string
	// Interactivity turns on the Slack buttons and their endpoint; off
	// without an address, a signing secret or a Notifier.
	Interactivity InteractivityOptions
}

// ManagerOptions configures NewManager.
type ManagerOptions struct {
	Options
	LeaderElection   bool
	LeaderElectionID string
	// MetricsAddr serves /metrics; "0" turns it off.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "0" or "" turns them off.
	ProbeAddr string
	// PprofAddr serves net/http/pprof; "" or "0" (the default) turns it off.
	PprofAddr string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero keeps controller-runtime's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Scheme is the scheme of the janitor's clients.
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

// NewManager builds the janitor's manager: the stripped cache, leader
// election, metrics, probes and the cycle.
func NewManager(ctx context.Context, cfg *rest.Config, o ManagerOptions) (ctrl.Manager, *Janitor, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, nil, fmt.Errorf("build scheme: %w", err)
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "kubemedic-janitor"
	}
	mgr, err := ctrlmgr.New(cfg, ctrlmgr.Options{
		Namespace: o.Namespace, LeaderElection: o.LeaderElection, LeaderElectionID: o.LeaderElectionID,
		MetricsAddr: o.MetricsAddr, ProbeAddr: o.ProbeAddr, PprofAddr: o.PprofAddr,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
	}, scheme, CacheOptions())
	if err != nil {
		return nil, nil, err
	}
	j, err := New(mgr, o.Options)
	if err != nil {
		return nil, nil, err
	}
	ui, err := enableInteractions(j, o.Interactivity)
	if err != nil {
		return nil, nil, err
	}
	if ui != nil {
		if err := mgr.Add(ui); err != nil {
			return nil, nil, fmt.Errorf("add the Slack interactivity endpoint: %w", err)
		}
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, nil, fmt.Errorf("pod informer: %w", err)
	}
	reg, err := inf.AddEventHandler(j.pods.handler())
	if err != nil {
		return nil, nil, fmt.Errorf("pod informer handler: %w", err)
	}
	j.podsSynced = reg.HasSynced
	if err := mgr.Add(j); err != nil {
		return nil, nil, fmt.Errorf("add the janitor: %w", err)
	}
	return mgr, j, nil
}

// New wires a Janitor to a manager's clients.
func New(mgr ctrl.Manager, o Options) (*Janitor, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Identity == "" {
		o.Identity, _ = os.Hostname()
	}
	m := NewMetrics()
	reg := o.Registry
	if reg == nil {
		reg = metrics.Registry
	}
	if err := m.Register(reg); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	src := o.Source
	if src == nil {
		if o.PrometheusURL == "" {
			src = noSource{}
		} else {
			c, err := promapi.NewClient(promapi.Config{Address: o.PrometheusURL})
			if err != nil {
				return nil, fmt.Errorf("prometheus client for %s: %w", o.PrometheusURL, err)
			}
			src = gpuutil.NewPrometheus(promv1.NewAPI(c), gpuutil.Options{Staleness: o.Staleness, RawSeries: o.RawGPUSeries, Observe: m.ObserveQuery()})
		}
	}
	ready := o.Notifier != nil
	if !ready {
		o.Notifier = notify.Disabled{}
	}
	return &Janitor{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Source: src, Notifier: o.Notifier, NotifierReady: ready,
		Recorder: mgr.GetEventRecorder("kubemedic-janitor"), Clock: o.Clock, Metrics: m, Interval: o.Interval,
		Identity: o.Identity, DefaultChannel: o.DefaultChannel, SelfNamespace: o.Namespace,
		Log: mgr.GetLogger().WithName("janitor"), pods: newGPUPods(),
	}, nil
}

// noSource answers every query with an error: without Prometheus the idle
// rule is Unknown, never idle.
type noSource struct{}

func (noSource) Fetch(_ context.Context, qs []gpuutil.Query, _ time.Time) map[gpuutil.Query]gpuutil.Result {
	out := make(map[gpuutil.Query]gpuutil.Result, len(qs))
	for _, q := range qs {
		out[q] = gpuutil.Result{Err: fmt.Errorf("no Prometheus configured (--prometheus-url)")}
	}
	return out
}
