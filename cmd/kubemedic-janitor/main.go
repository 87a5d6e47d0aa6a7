// Command kubemedic-janitor runs the janitor: a leader-elected manager
// that reclaims idle, expired and stuck-pending GPU pods under the reclaim
// policies, after telling each pod's owner on Slack. See janitor/controller.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubemedic/kubemedic/internal/logflag"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/controller"
)

func main() {
	var o controller.ManagerOptions
	var logLevel, tokenFile, slackURL, secretFile string
	fs := flag.CommandLine
	fs.StringVar(&o.Namespace, "namespace", "kubemedic-system", "the janitor's namespace: holds the leader-election Lease; its pods are never reclaimed")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect a leader so that only one replica acts")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics; 0 turns it off")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns them off")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of net/http/pprof (profiles for a scale problem); 0 turns it off")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", "", "Prometheus HTTP API with dcgm-exporter's metrics, e.g. http://prometheus-k8s.monitoring:9090; without it no pod is ever idle (Unknown)")
	fs.DurationVar(&o.Staleness, "metrics-staleness", 5*time.Minute, "a GPU series whose last sample is older than this is stale, and its pod Unknown")
	fs.BoolVar(&o.RawGPUSeries, "raw-gpu-series", false, "read idle windows of 30m or more from dcgm-exporter's raw series instead of kubemedic's recording rules (deploy/prometheus, group kubemedic-janitor-gpu-buckets): only for a Prometheus without those rules and a cluster small enough; at fleet size the raw query of a long window times out")
	fs.DurationVar(&o.Interval, "interval", controller.DefaultInterval, "time between reclaim cycles")
	fs.StringVar(&tokenFile, "slack-token-file", "", "file holding the Slack bot token (xoxb-...); else the "+notify.EnvSlackToken+" environment variable; neither: no notices, and nothing is reclaimed where the policy requires a notice")
	fs.StringVar(&slackURL, "slack-api-url", "", "Slack Web API base URL (default https://slack.com/api/)")
	fs.StringVar(&o.DefaultChannel, "slack-default-channel", "", "channel for notices of pods whose owner cannot be found")
	fs.StringVar(&o.Interactivity.Addr, "slack-interactivity-bind-address", "0", "address of Slack's interactivity endpoint (path /slack/interactivity), e.g. :8082; with a signing secret, notices carry Keep, Reclaim now and Restore buttons; 0 turns it off")
	fs.StringVar(&secretFile, "slack-signing-secret-file", "", "file holding the Slack app's signing secret; else the "+notify.EnvSlackSigningSecret+" environment variable; neither: no buttons, the messages say how to act with kubectl")
	fs.StringVar(&logLevel, "log-level", "info", logflag.Usage)
	// controller-runtime registers --kubeconfig on flag.CommandLine.
	flag.Parse()

	level, err := logflag.ParseZapLevel(logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubemedic-janitor: --log-level: %v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.Level(level)))
	log := ctrl.Log.WithName("kubemedic-janitor")

	token, err := notify.TokenFromFileOrEnv(tokenFile, notify.EnvSlackToken)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubemedic-janitor: --slack-token-file: %v\n", err)
		os.Exit(2)
	}
	if token != "" {
		o.Notifier = notify.NewSlack(token, notify.SlackOptions{APIURL: slackURL, Logger: log.WithName("slack")})
	} else {
		log.Info("No Slack token: notices cannot be sent; pods are reclaimed only where the policy sets requireNotice: false")
	}
	secret, err := notify.SigningSecretFromFileOrEnv(secretFile, notify.EnvSlackSigningSecret)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubemedic-janitor: --slack-signing-secret-file: %v\n", err)
		os.Exit(2)
	}
	o.Interactivity.SigningSecret = secret
	switch {
	case o.Interactivity.Addr == "0" || o.Interactivity.Addr == "":
		log.Info("No --slack-interactivity-bind-address: messages carry no buttons; owners act with kubectl")
	case secret == "":
		log.Info("No Slack signing secret: messages carry no buttons; owners act with kubectl")
	case token == "":
		log.Info("No Slack token: the interactivity endpoint is off")
	}
	if o.PrometheusURL == "" {
		log.Info("No --prometheus-url: the idle rule is Unknown for every pod")
	}

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Loading the cluster configuration failed")
		os.Exit(1)
	}
	mgr, _, err := controller.NewManager(ctx, cfg, o)
	if err != nil {
		log.Error(err, "Setting up the manager failed")
		os.Exit(1)
	}
	log.Info("Starting manager", "namespace", o.Namespace, "leaderElection", o.LeaderElection, "interval", o.Interval)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
