// Command kubemedic-remediator runs the remediator: a leader-elected
// controller manager that turns node conditions into NodeOperations under
// the RemediationPolicies' safety limits. See remediator/controller.
package main

import (
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubemedic/kubemedic/internal/logflag"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/remediator/controller"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/evidence"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

func main() {
	var o controller.ManagerOptions
	var logLevel, tokenFile, slackURL string
	var stackHealth, detectors bool
	var sh stackhealth.Options
	var dg evidence.Options
	fs := flag.CommandLine
	fs.StringVar(&o.Namespace, "namespace", "kubemedic-system", "namespace of the operation pods, the admission ledger and the leader-election Lease")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect a leader so that only one replica acts")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics; 0 turns it off")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 turns them off")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of net/http/pprof (profiles for a scale problem); 0 turns it off")
	fs.DurationVar(&o.Retention, "retention", 168*time.Hour, "how long finished NodeOperations are kept (at least the longest attemptCap window and nodeCooldown of any policy)")
	fs.StringVar(&tokenFile, "slack-token-file", "", "file holding the Slack bot token (xoxb-...); else the "+notify.EnvSlackToken+" environment variable; neither, or a file that is missing or unusable: the owners of pods a drain stops are not told, and remediation goes on")
	fs.StringVar(&slackURL, "slack-api-url", "", "Slack Web API base URL (default https://slack.com/api/)")
	fs.StringVar(&o.DefaultChannel, "slack-default-channel", "", "channel for messages about drained pods whose owner cannot be found")
	fs.StringVar(&logLevel, "log-level", "info", logflag.Usage)
	fs.BoolVar(&stackHealth, "stack-health", true, "set the GPU stack health conditions (GPUAllocatableMismatch, GPUStackPodNotReady, PodsStuckTerminating, MIGConfigFailed) on GPU nodes")
	fs.StringVar(&sh.DevicePluginSelector, "stack-device-plugin-selector", stackhealth.DefaultDevicePluginSelector, "label selector of the device plugin's DaemonSet pods")
	fs.StringVar(&sh.DCGMExporterSelector, "stack-dcgm-exporter-selector", stackhealth.DefaultDCGMExporterSelector, "label selector of dcgm-exporter's DaemonSet pods")
	fs.DurationVar(&sh.Settings.PodNotReadyAfter, "stack-pod-not-ready-after", stackhealth.DefaultPodNotReadyAfter, "how long a device plugin or dcgm-exporter pod may be missing, not Ready or crash-looping before GPUStackPodNotReady is True")
	fs.DurationVar(&sh.Settings.TerminatingAfter, "stack-terminating-after", stackhealth.DefaultTerminatingAfter, "how long past the end of its grace period a pod may still be terminating before PodsStuckTerminating is True")
	fs.DurationVar(&sh.Settings.MIGPendingAfter, "stack-mig-pending-after", stackhealth.DefaultMIGPendingAfter, "how long the MIG manager may stay pending or rebooting on one configuration before MIGConfigFailed is True")
	fs.IntVar(&sh.Settings.ExpectedGPUs, "stack-expected-gpus", 0, "GPUs per node when neither the GPU detector nor GPU feature discovery gives a count; 0: none")
	fs.DurationVar(&sh.Period, "stack-period", stackhealth.DefaultPeriod, "how often each GPU node's stack health is checked again")
	fs.BoolVar(&detectors, "stack-detectors", true, "with --stack-health: report GPU nodes whose kubemedic detectors do not report (kubemedic_remediation_node_detectors_missing): no Ready detector pod, none of their conditions, or stale heartbeats")
	fs.StringVar(&sh.DetectorSelector, "stack-detector-selector", stackhealth.DefaultDetectorSelector, "label selector of node-problem-detector's DaemonSet pods, which run kubemedic's detectors")
	fs.DurationVar(&sh.Settings.DetectorStaleAfter, "stack-detector-stale-after", stackhealth.DefaultDetectorStaleAfter, "how old a detector condition's lastHeartbeatTime may be before the node's detectors count as not reporting; at least node-problem-detector's --k8s-exporter-heartbeat-period")
	fs.StringVar(&dg.Store.Endpoint, "diagnostics-endpoint", "", "S3-compatible store (host:port) for the diagnostics bundles that capture pods take before a repair; empty: bundles stay in each node's spool ("+diagnostics.SpoolDir+")")
	fs.StringVar(&dg.Store.Bucket, "diagnostics-bucket", "kubemedic-diagnostics", "bucket of the diagnostics bundles; it stays private, links are presigned")
	fs.StringVar(&dg.Store.Region, "diagnostics-region", "", "region of the bucket; empty: asked of the store")
	fs.BoolVar(&dg.Store.Insecure, "diagnostics-insecure", false, "plain HTTP to the store (one inside the cluster without TLS)")
	fs.StringVar(&dg.Secret, "diagnostics-secret", "kubemedic-diagnostics", "Secret in --namespace with the store's "+diagnostics.SecretAccessKey+" and "+diagnostics.SecretSecretKey)
	fs.DurationVar(&dg.LinkExpiry, "diagnostics-link-expiry", evidence.DefaultLinkExpiry, "how long a bundle's presigned link works (at most 168h)")
	fs.DurationVar(&dg.Retention, "diagnostics-retention", diagnostics.DefaultRetention, "bundles older than this are deleted from the store, but for those of nodes still quarantined")
	// controller-runtime registers --kubeconfig on flag.CommandLine.
	flag.Parse()
	if dg.LinkExpiry <= 0 || dg.LinkExpiry > diagnostics.MaxLinkExpiry {
		fmt.Fprintf(os.Stderr, "kubemedic-remediator: --diagnostics-link-expiry %s: must be more than 0 and at most %s\n", dg.LinkExpiry, diagnostics.MaxLinkExpiry)
		os.Exit(2)
	}
	o.Diagnostics = &dg

	level, err := logflag.ParseZapLevel(logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubemedic-remediator: --log-level: %v\n", err)
		os.Exit(2)
	}
	logger := zap.New(zap.Level(level))
	ctrl.SetLogger(logger)
	// client-go's own lines (leader election, watches) in the same
	// structured log, at their own levels, instead of klog's text.
	klog.SetLogger(logger)
	if stackHealth {
		sh.SkipDetectors = !detectors
		o.StackHealth = &sh
	}
	log := ctrl.Log.WithName("kubemedic-remediator")

	// Slack only tells people: a remediator without it still remediates.
	token, err := notify.TokenFromFileOrEnv(tokenFile, notify.EnvSlackToken)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		log.Info("No Slack token file: the owners of pods a drain stops are not told", "file", tokenFile)
	case err != nil:
		log.Error(err, "Reading the Slack token failed: the owners of pods a drain stops are not told", "file", tokenFile)
	case token != "":
		o.Notifier = notify.NewSlack(token, notify.SlackOptions{APIURL: slackURL, Logger: log.WithName("slack")})
	}

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Loading the cluster configuration failed")
		os.Exit(1)
	}
	mgr, err := controller.NewManager(ctx, cfg, o)
	if err != nil {
		log.Error(err, "Setting up the manager failed")
		os.Exit(1)
	}
	log.Info("Starting manager", "namespace", o.Namespace, "leaderElection", o.LeaderElection)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
