// Command kubemedic-alertbridge receives Alertmanager webhooks and files,
// comments on, closes and reopens GitHub issues. See alertbridge/bridge.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
)

func main() {
	var sc bridge.ServeConfig
	var logLevel string
	fs := flag.CommandLine
	fs.StringVar(&sc.ConfigFile, "config", "/etc/kubemedic/alertbridge/config.yaml", "the bridge's YAML config (routes, templates, reopen window, storm guard)")
	fs.StringVar(&sc.Listen, "listen", ":8080", "address of POST /webhook, /metrics, /healthz and /readyz")
	fs.StringVar(&sc.StateDir, "state-dir", "/var/lib/kubemedic-alertbridge", "directory of the durable journal (a volume; one writer)")
	fs.StringVar(&sc.Auth.BearerTokenFile, "auth-bearer-token-file", "", "file holding the bearer token webhooks must send")
	fs.StringVar(&sc.Auth.BasicUsernameFile, "auth-basic-username-file", "", "file holding the basic-auth user name webhooks must send")
	fs.StringVar(&sc.Auth.BasicPasswordFile, "auth-basic-password-file", "", "file holding the basic-auth password webhooks must send")
	fs.BoolVar(&sc.Auth.Insecure, "insecure-no-auth", false, "accept webhooks without credentials (only for local tests)")
	fs.StringVar(&sc.GitHubURL, "github-url", "https://api.github.com/", "GitHub API base URL; for GitHub Enterprise https://HOST/api/v3/")
	fs.StringVar(&sc.GitHubAuth.TokenFile, "github-token-file", "", "file holding a GitHub token (re-read when it changes)")
	fs.Int64Var(&sc.GitHubAuth.AppID, "github-app-id", 0, "GitHub App ID (instead of a token)")
	fs.Int64Var(&sc.GitHubAuth.InstallationID, "github-installation-id", 0, "GitHub App installation ID")
	fs.StringVar(&sc.GitHubAuth.AppPrivateKeyFile, "github-app-private-key-file", "", "GitHub App private key (PEM) file")
	fs.Int64Var(&sc.MaxBodyBytes, "max-body-bytes", 1<<20, "largest webhook body accepted; larger ones get 413")
	fs.DurationVar(&sc.RefreshInterval, "refresh-interval", 30*time.Second, "how often issues people changed on GitHub (closed, labelled, reopened) are re-read: one list call per repository")
	fs.StringVar(&sc.Kubeconfig, "kubeconfig", "", "kubeconfig for reading NodeOperations when the config enables nodeHistory; empty: the pod's service account")
	fs.BoolVar(&sc.DryRun, "dry-run", false, "log the GitHub calls the bridge would make instead of making them")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "kubemedic-alertbridge: --log-level: %v\n", err)
		os.Exit(2)
	}
	sc.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bridge.Serve(ctx, sc); err != nil {
		sc.Log.Error("kubemedic-alertbridge stopped", "err", err)
		os.Exit(1)
	}
}
