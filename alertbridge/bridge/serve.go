package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/kube"
)

// ServeConfig is everything the kubemedic-alertbridge command line sets.
type ServeConfig struct {
	ConfigFile   string
	Listen       string
	StateDir     string
	Auth         Auth
	GitHubURL    string
	GitHubAuth   ghclient.Auth
	MaxBodyBytes int64
	DryRun       bool
	// RefreshInterval is how often issues changed on GitHub are re-read.
	RefreshInterval time.Duration
	// Kubeconfig is the kubeconfig file for reading NodeOperations when the
	// config enables nodeHistory; "" uses the pod's service account.
	Kubeconfig string
	Log        *slog.Logger
	// Ready, when set, receives the listener's address once it accepts.
	Ready chan<- string
}

// Serve runs the bridge until ctx ends: it loads the config, opens the
// journal, builds the GitHub client, listens, and applies transitions.
func Serve(ctx context.Context, sc ServeConfig) error {
	log := sc.Log
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(sc.ConfigFile)
	if err != nil {
		return err
	}
	if sc.StateDir == "" {
		return errors.New("--state-dir is required: the journal must live on a volume")
	}
	if err := sc.Auth.Validate(); err != nil {
		return err
	}
	j, err := journal.Open(sc.StateDir, log)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	defer j.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	dryRun := sc.DryRun || cfg.DryRun
	var gh ghclient.Client
	if !dryRun || sc.GitHubAuth != (ghclient.Auth{}) {
		hc, err := ghclient.NewHTTPClient(sc.GitHubAuth, sc.GitHubURL)
		if err != nil {
			return err
		}
		gh, err = ghclient.New(ghclient.Options{BaseURL: sc.GitHubURL, HTTPClient: hc, Metrics: ghclient.NewMetrics(reg), Log: log})
		if err != nil {
			return err
		}
	}
	if dryRun {
		log.Warn("Dry run: GitHub writes are logged, not sent")
		gh = ghclient.NewDryRun(log, gh)
	}
	var nodeOps NodeOperations
	if cfg.NodeHistory.Enabled {
		rc, err := kube.RESTConfig(sc.Kubeconfig)
		if err != nil {
			return fmt.Errorf("nodeHistory is enabled in %s: %w", cfg.Source, err)
		}
		if nodeOps, err = kube.New(rc); err != nil {
			return fmt.Errorf("nodeHistory is enabled in %s: %w", cfg.Source, err)
		}
		log.Info("Listing the NodeOperations of the nodes alerts name in their issues", "host", rc.Host,
			"maxOperations", cfg.NodeHistory.MaxOperations)
	} else if sc.Kubeconfig != "" {
		log.Warn("--kubeconfig is not used: nodeHistory is not enabled in the config", "config", cfg.Source)
	}
	b, err := New(Options{Config: cfg, Journal: j, GitHub: gh, Auth: sc.Auth, MaxBodyBytes: sc.MaxBodyBytes,
		RefreshInterval: sc.RefreshInterval, NodeOperations: nodeOps, Registry: reg, Gatherer: reg, Log: log})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", sc.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sc.Listen, err)
	}
	srv := &http.Server{
		Handler:           b.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("Serving webhooks", "addr", ln.Addr().String(), "config", cfg.Source, "stateDir", sc.StateDir,
		"repos", len(cfg.Repos()), "pending", j.Len(), "dryRun", dryRun)
	if sc.Ready != nil {
		sc.Ready <- ln.Addr().String()
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- b.Run(runCtx) }()

	var result error
	runDone := false
	select {
	case err := <-serveErr:
		result = fmt.Errorf("serve: %w", err)
	case err := <-runErr:
		runDone = true
		if err != nil && ctx.Err() == nil {
			result = err
		}
	case <-ctx.Done():
	}
	// Stop taking webhooks first, then stop the workers: what they did not
	// apply stays in the journal for the next start.
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("Shutting down the HTTP server", "err", err)
	}
	stop()
	if !runDone {
		select {
		case <-runErr:
		case <-time.After(10 * time.Second):
			log.Warn("Workers did not stop within 10s")
		}
	}
	log.Info("Stopped", "pending", j.Len())
	return result
}
