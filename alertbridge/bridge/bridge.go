package bridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
)

// Options wire a Bridge.
type Options struct {
	Config  *config.Config
	Journal *journal.Journal
	GitHub  ghclient.Client
	Auth    Auth
	// MaxBodyBytes bounds a webhook body; larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// Workers apply transitions of different keys in parallel. Default 8.
	Workers int
	// RefreshInterval is how often the cache re-reads the bridge's issues
	// that changed on GitHub (a human closed, labelled or reopened one).
	// Default 30s.
	RefreshInterval time.Duration
	// RollupDelay gathers roll-up changes into one GitHub edit. Default 2s.
	RollupDelay time.Duration
	// NodeOperations reads the nodes' operation history for the issues of
	// groups whose alerts name a node; required when the config enables
	// nodeHistory, unused otherwise. NodeHistoryTimeout bounds each read
	// (default 5s): the issue is filed without waiting longer.
	NodeOperations     NodeOperations
	NodeHistoryTimeout time.Duration
	// DiagnosticsInterval is how often the open issues of nodes are given
	// the comments about their NodeOperations' diagnostics bundles and
	// GPU validations (with nodeHistory on); default RefreshInterval.
	DiagnosticsInterval time.Duration
	// Registry receives the metrics; Gatherer serves them on /metrics.
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	Clock    clock.WithTicker
	Log      *slog.Logger
}

// Bridge receives webhooks and applies them to GitHub.
type Bridge struct {
	cfg     *config.Config
	journal *journal.Journal
	gh      ghclient.Client
	nodeOps NodeOperations // nil: no node history
	auth    *authenticator
	opts    Options
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics
	queue   *keyQueue

	// synced is set once the cache was rebuilt from GitHub and the journal's
	// entries queued; webhooks are queued directly from then on. startMu
	// orders the two: Run holds it to queue the journal, the webhook handler
	// holds it (shared) from its append to its push.
	synced  atomic.Bool
	startMu sync.RWMutex

	mu sync.Mutex
	// byKey: key hash → the key's latest issue, while retain keeps it (open,
	// closed within the window, or ignored), so it follows the open issues
	// and the window, not the repository's history.
	byKey   map[string]*tracked
	created map[string][]time.Time // repo → creation times of the bridge's issues, for the storm guard
	rollups map[string]*rollup     // repo → its open roll-up
	// refreshedAt is when the last refresh listed issues, per repo.
	refreshedAt map[string]time.Time

	rollupKick chan struct{}

	// diag is what the diagnostics loop knows of its comments.
	diag diagComments

	// testHookBeforeLock, when set, is called with the site's name just
	// before the roll-up code takes mu. Tests use it to hold goroutines at
	// the lock in a known order; it is nil outside tests.
	testHookBeforeLock func(site string)
}

// New checks the options and builds a Bridge. It does not talk to GitHub;
// Run does.
func New(o Options) (*Bridge, error) {
	if o.Config == nil || o.Journal == nil || o.GitHub == nil {
		return nil, errors.New("bridge: config, journal and GitHub client are required")
	}
	if err := o.Auth.Validate(); err != nil {
		return nil, err
	}
	if o.Config.NodeHistory.Enabled && o.NodeOperations == nil {
		return nil, errors.New("bridge: nodeHistory is enabled but the bridge has no Kubernetes access to read NodeOperations")
	}
	if o.NodeHistoryTimeout <= 0 {
		o.NodeHistoryTimeout = 5 * time.Second
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 30 * time.Second
	}
	if o.DiagnosticsInterval <= 0 {
		o.DiagnosticsInterval = o.RefreshInterval
	}
	if o.RollupDelay <= 0 {
		o.RollupDelay = 2 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Registry == nil {
		r := prometheus.NewRegistry()
		o.Registry, o.Gatherer = r, r
	}
	b := &Bridge{
		cfg: o.Config, journal: o.Journal, gh: o.GitHub, auth: newAuthenticator(o.Auth), opts: o,
		clock: o.Clock, log: o.Log, queue: newKeyQueue(),
		byKey: map[string]*tracked{}, created: map[string][]time.Time{}, rollups: map[string]*rollup{},
		refreshedAt: map[string]time.Time{}, rollupKick: make(chan struct{}, 1),
	}
	if o.Config.NodeHistory.Enabled {
		b.nodeOps = o.NodeOperations
	}
	b.metrics = newMetrics(o.Registry, func() float64 { return float64(b.journal.Len()) }, func() float64 {
		t, ok := b.journal.Oldest()
		if !ok {
			return 0
		}
		return b.clock.Since(t).Seconds()
	})
	b.gh = &refitting{Client: o.GitHub, log: o.Log, rejected: func(reason string) { b.metrics.rejected.WithLabelValues(reason).Inc() }}
	return b, nil
}

// Run rebuilds the key→issue cache from GitHub, queues what the journal
// holds, and applies transitions until ctx ends. Webhooks are accepted (and
// journaled) from the start; they are applied once the cache is rebuilt.
func (b *Bridge) Run(ctx context.Context) error {
	go b.queue.closeOnDone(ctx)
	if err := b.rebuild(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while rebuilding
		}
		return err
	}
	if err := b.loadRollups(); err != nil {
		return err
	}
	b.startMu.Lock()
	pending := b.journal.Pending()
	for _, e := range pending {
		b.queue.push(job{id: e.ID, key: e.Key, recovered: true})
	}
	b.synced.Store(true)
	b.startMu.Unlock()
	b.log.Info("Applying transitions", "pending", len(pending), "tracked", b.trackedCount(), "workers", b.opts.Workers)

	var wg sync.WaitGroup
	for range b.opts.Workers {
		wg.Go(func() { b.work(ctx) })
	}
	wg.Go(func() { b.refreshLoop(ctx) })
	if b.nodeOps != nil {
		wg.Go(func() { b.diagnosticsLoop(ctx) })
	}
	wg.Go(func() { b.rollupLoop(ctx) })
	wg.Wait()
	return nil
}

func (b *Bridge) trackedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byKey)
}
