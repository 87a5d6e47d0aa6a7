package democli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/cmd/kubemedic-demo/demo"
	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

type demoOptions struct {
	nodes, npdNodes, migEvery, speed int
	draNodes                         int
	kubeconfig, binDir, repoRoot     string
	githubRepo, githubTokenFile      string
	githubURL                        string
	slackTokenFile, slackChannel     string
}

func newDemoCommand(stdout, stderr io.Writer) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "kubemedic-demo",
		Short: "Run the whole of kubemedic on this machine: simulated GPU nodes, real detectors, remediation, alerts, issues and Slack",
		Long: `Demo runs kubemedic end to end on one machine, with no cluster and no
accounts:

  - a real kube-apiserver and etcd, kube-scheduler and kube-controller-manager
    (Deployments make their pods, the scheduler places them), and kwok playing
    the kubelet of simulated GPU nodes (whole GPUs and MIG, two zones; and
    --dra-nodes more whose GPUs DRA allocates);
  - the real node-problem-detector with kubemedic-detect on the first
    --npd-nodes nodes, each on a fake host root (kernel log, /proc, mountinfo,
    a fake nvidia-smi); the other nodes get their conditions written as NPD
    would;
  - kubemedic-remediator, kubemedic-janitor and kubemedic-alertbridge as
    processes, with the example policies and templates;
  - Prometheus evaluating the shipped alert rules, Alertmanager routing them
    to the alertbridge, which files into a local GitHub stand-in (a web page
    lists the issues), and a local Slack that prints each message here.
    With --github-repo and --github-token-file the real GitHub is used, with
    --slack-token-file the real Slack.

Operation pods do not run on kwok nodes: a node simulator plays their effect
(a GPU reset records the reset, a reboot changes the boot ID) after the time
the operation takes on a real node. It, the conditions of the nodes without
NPD, and the node metrics kube-state-metrics and dcgm-exporter would export
are the pretend parts (docs/demo.md lists what is real).

The durations of the policies, the alert rules' for:, Alertmanager's routing
and NPD's --min-duration are divided by --speed (60: "for: 2m" holds 2 s),
and maintenance windows are removed, so a story takes seconds. In another
terminal:

  kubemedic-demo scenario xid|escalate|nfs-storm|idle|dstate|exclusion
  kubemedic-demo inject <fault> <node>
  kubemedic status

The kubeconfig goes to $TMPDIR/kubemedic-demo.kubeconfig (while another demo
runs with that path, kubemedic-demo-<pid>.kubeconfig beside it), and a state
file for the commands above next to it. Ctrl-C tears everything down.

Binaries: kubemedic-* from --bin-dir (make build puts them in bin/); the
control plane, NPD, Prometheus and Alertmanager from 'make testbin'
(KUBEMEDIC_TESTBIN or hack/testbin.sh --print).`,
		Example: `  make demo
  kubemedic-demo --nodes 32 --speed 30`,
		// A mistyped subcommand must not start a demo.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.nodes < 1 || o.npdNodes < 1 || o.speed < 1 {
				return fmt.Errorf("--nodes, --npd-nodes and --speed must be at least 1")
			}
			if o.draNodes < 0 {
				return fmt.Errorf("--dra-nodes must not be negative")
			}
			if (o.githubRepo == "") != (o.githubTokenFile == "") {
				return fmt.Errorf("--github-repo and --github-token-file go together")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := runDemo(ctx, o, stdout); err != nil {
				fmt.Fprintf(stderr, "demo: %v\n", err)
				return cli.ExitError{Code: cli.ExitInvalid}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.nodes, "nodes", 16, "number of simulated GPU nodes")
	cmd.Flags().IntVar(&o.npdNodes, "npd-nodes", 3, "how many of them run the real node-problem-detector and kubemedic-detect")
	cmd.Flags().IntVar(&o.migEvery, "mig-every", 4, "every k-th node exposes MIG devices instead of whole GPUs (0: none)")
	cmd.Flags().IntVar(&o.draNodes, "dra-nodes", 1, "how many more nodes publish their GPUs through DRA instead of the device plugin (the exclusion scenario's; 0: none)")
	cmd.Flags().IntVar(&o.speed, "speed", demo.DefaultSpeed, "divide the durations of the policies, the alert rules' for:, the routing and NPD's --min-duration by this")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the kubeconfig of the demo cluster (default $TMPDIR/kubemedic-demo.kubeconfig, or kubemedic-demo-<pid>.kubeconfig beside it while another demo holds that)")
	cmd.Flags().StringVar(&o.binDir, "bin-dir", "", "directory of kubemedic-detect, -remediator, -alertbridge and -janitor (default: this binary's directory)")
	cmd.Flags().StringVar(&o.repoRoot, "repo", ".", "the kubemedic checkout: deploy/ and policies/examples/ are read from it")
	cmd.Flags().StringVar(&o.githubRepo, "github-repo", "", "file issues into this real repository (owner/name) instead of the local stand-in; needs --github-token-file")
	cmd.Flags().StringVar(&o.githubTokenFile, "github-token-file", "", "file holding a GitHub token that may write issues of --github-repo")
	cmd.Flags().StringVar(&o.githubURL, "github-url", "", "GitHub API base URL with --github-repo (default https://api.github.com/; GitHub Enterprise: https://HOST/api/v3/)")
	cmd.Flags().StringVar(&o.slackTokenFile, "slack-token-file", "", "send Slack messages to the real workspace of this bot token (xoxb-...) instead of the local stand-in")
	cmd.Flags().StringVar(&o.slackChannel, "slack-channel", "gpu-ops", "channel for messages whose owner Slack does not know (the demo's owners are @example.com addresses)")
	cmd.AddCommand(newDemoInjectCommand(stdout, stderr), newDemoScenarioCommand(stdout, stderr))
	return cmd
}

func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	start := time.Now()
	if o.binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.binDir = filepath.Dir(exe)
	}
	root, err := filepath.Abs(o.repoRoot)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "policies/examples")); err != nil {
		return fmt.Errorf("%s is not a kubemedic checkout (run from the repository root, or pass --repo): %w", root, err)
	}

	explicit := o.kubeconfig != ""
	if !explicit {
		o.kubeconfig = defaultDemoKubeconfig()
	}
	kc, err := claimDemoKubeconfig(o.kubeconfig, explicit)
	if err != nil {
		return err
	}
	defer kc.Release()
	if kc.Other != 0 {
		fmt.Fprintf(out, "Another demo (pid %d) is running with %s; this one writes its own kubeconfig, %s\n", kc.Other, o.kubeconfig, kc.Path)
	}
	o.kubeconfig = kc.Path

	dir, err := os.MkdirTemp("", "kubemedic-demo-")
	if err != nil {
		return err
	}
	migEvery := o.migEvery
	if migEvery == 0 {
		migEvery = -1
	}
	draNodes := o.draNodes
	if draNodes == 0 {
		draNodes = -1
	}
	fmt.Fprintf(out, "Logs, configs and the fake node roots go to %s\n", dir)
	w, err := demo.Start(ctx, demo.Options{RepoRoot: root, BinDir: o.binDir, Dir: dir, Nodes: o.nodes,
		NPDNodes: min(o.npdNodes, o.nodes), MIGEvery: migEvery, DRANodes: draNodes, Speed: o.speed, Out: out,
		GitHubRepo: o.githubRepo, GitHubTokenFile: o.githubTokenFile, GitHubURL: o.githubURL,
		SlackTokenFile: o.slackTokenFile, SlackChannel: o.slackChannel})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	defer func() {
		fmt.Fprintln(out, "Stopping everything")
		if err := w.Stop(); err != nil {
			fmt.Fprintf(out, "demo: stop: %v\n", err)
		}
		os.Remove(demoStatePath(o.kubeconfig))
		fmt.Fprintf(out, "Stopped. Logs and fake node roots are kept in %s\n", dir)
	}()

	data, err := os.ReadFile(w.Cluster.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	if err := os.WriteFile(o.kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := demo.WriteInfo(demoStatePath(o.kubeconfig), w.Info(o.kubeconfig)); err != nil {
		return fmt.Errorf("write the demo's state file: %w", err)
	}
	kcFlag := ""
	if o.kubeconfig != defaultDemoKubeconfig() {
		kcFlag = " --kubeconfig " + o.kubeconfig
	}
	fmt.Fprintf(out, "[%5.1fs] Ready in %s. In another shell:\n", time.Since(start).Seconds(), time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintf(out, `
    export KUBECONFIG=%[1]s
    kubemedic-demo scenario escalate%[6]s    # a broken GPU, from the kernel log to a GitHub issue
    kubemedic status                       # the fleet on one screen
    kubectl get nodeoperations -w          # kubectl of the API server's version: %[2]s

    GitHub issues the alertbridge files: %[3]s
    Prometheus: %[4]s   Alertmanager: %[5]s
    Scenarios: %[7]s
    Faults:    kubemedic-demo inject <fault> <node>%[6]s, faults: %[8]s
    Nodes with NPD and kubemedic-detect on a fake root: %[9]s

Slack messages appear below, prefixed with slack>. Press Ctrl-C to stop and tear everything down.
`, o.kubeconfig, filepath.Join(w.Cluster.BinDir, "kubectl"), w.PageURL, w.PrometheusURL, w.AlertmanagerURL, kcFlag,
		strings.Join(scenarioNames(), ", "), strings.Join(faultNames(), ", "), strings.Join(w.NPDNodes(), ", "))
	return waitDemo(ctx, w)
}

// waitDemo waits for Ctrl-C, or for a process of the demo to die, which
// ends the demo: a demo without its remediator or NPD tells no story.
func waitDemo(ctx context.Context, w *demo.World) error {
	died := make(chan error, 1)
	for _, p := range w.Processes() {
		go func() {
			select {
			case <-p.Done():
				select {
				case died <- p.Exited():
				default:
				}
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-died:
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
}

// demoStatePath is the state file of the demo whose kubeconfig is path.
func demoStatePath(kubeconfig string) string {
	return strings.TrimSuffix(kubeconfig, ".kubeconfig") + ".json"
}

func scenarioNames() []string {
	var out []string
	for _, s := range demo.Scenarios {
		out = append(out, s.Name)
	}
	return out
}

func faultNames() []string {
	var out []string
	for _, f := range demo.Faults {
		out = append(out, f.Name)
	}
	return out
}

// connectDemo finds the running demo of kubeconfig: the flag, else
// $KUBECONFIG when a demo's state file is next to it, else the default
// demo. It returns a client of the demo's API server.
func connectDemo(kubeconfig string) (demo.Client, client.Client, error) {
	if env := os.Getenv("KUBECONFIG"); kubeconfig == "" && env != "" && !strings.Contains(env, string(os.PathListSeparator)) {
		if _, err := os.Stat(demoStatePath(env)); err == nil {
			kubeconfig = env
		}
	}
	if kubeconfig == "" {
		kubeconfig = defaultDemoKubeconfig()
	}
	info, err := demo.ReadInfo(demoStatePath(kubeconfig))
	if err != nil {
		return demo.Client{}, nil, err
	}
	// Read-write: the idle scenario snoozes a notebook as its owner would.
	kube, _, err := cli.NewClient(info.Kubeconfig, "kubemedic-demo", false)
	if err != nil {
		return demo.Client{}, nil, err
	}
	return demo.Client{Info: info}, kube, nil
}

func newDemoInjectCommand(stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig string
	var help strings.Builder
	for _, f := range demo.Faults {
		fmt.Fprintf(&help, "  %-11s %s\n", f.Name, f.Help)
	}
	cmd := &cobra.Command{
		Use:   "inject FAULT NODE",
		Short: "Inject a fault into a node of the running demo",
		Long: "Inject puts a fault into a node of the running demo: on a node with NPD as the kernel,\n" +
			"the driver or the mount table would show it (the real detectors find it), on the\n" +
			"others as the condition NPD would set. Faults:\n\n" + help.String(),
		Example: "  kubemedic-demo inject xid gpu-node-000",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := connectDemo(kubeconfig)
			if err != nil {
				fmt.Fprintf(stderr, "demo inject: %v\n", err)
				return cli.ExitError{Code: cli.ExitInvalid}
			}
			what, err := c.Inject(cmd.Context(), args[0], args[1])
			if err != nil {
				fmt.Fprintf(stderr, "demo inject: %v\n", err)
				return cli.ExitError{Code: cli.ExitInvalid}
			}
			fmt.Fprintf(stdout, "Injected %s into node %s: %s\nWatch: kubemedic status --watch, or kubectl get nodeoperations -w\n", args[0], args[1], what)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the demo's kubeconfig (default $KUBECONFIG when it is a demo's, else $TMPDIR/kubemedic-demo.kubeconfig)")
	return cmd
}

func newDemoScenarioCommand(stdout, stderr io.Writer) *cobra.Command {
	var kubeconfig string
	var help strings.Builder
	for _, s := range demo.Scenarios {
		fmt.Fprintf(&help, "  %-10s %s\n", s.Name, s.Help)
	}
	cmd := &cobra.Command{
		Use:   "scenario NAME",
		Short: "Play a story on the running demo and print its timeline",
		Long: "Scenario injects faults into the running demo and prints what happens as a\n" +
			"timeline, one line per step with the time and the object to kubectl get:\n" +
			"conditions, cordons, NodeOperations and their phases, GitHub issues and\n" +
			"comments, Slack messages. It ends when the story has ended. Scenarios:\n\n" + help.String(),
		Example: "  kubemedic-demo scenario escalate",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := demo.FindScenario(args[0])
			if err != nil {
				fmt.Fprintf(stderr, "demo scenario: %v\n", err)
				return cli.ExitError{Code: cli.ExitUsage}
			}
			c, kube, err := connectDemo(kubeconfig)
			if err == nil {
				err = playScenario(cmd.Context(), sc, c, kube, stdout)
			}
			if err != nil {
				fmt.Fprintf(stderr, "demo scenario %s: %v\n", sc.Name, err)
				return cli.ExitError{Code: cli.ExitInvalid}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the demo's kubeconfig (default $KUBECONFIG when it is a demo's, else $TMPDIR/kubemedic-demo.kubeconfig)")
	return cmd
}

func playScenario(ctx context.Context, sc demo.Scenario, c demo.Client, kube client.Client, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	timeout := sc.Timeout * time.Duration(demo.DefaultSpeed) / time.Duration(max(c.Info.Speed, 1))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tl, err := demo.NewTimeline(kube, c.Info, c, out)
	if err != nil {
		return err
	}
	s := &demo.Session{Info: c.Info, Kube: kube, Inject: c, Timeline: tl, Out: out}
	begin := time.Now()
	if err := sc.Run(ctx, s); err != nil {
		return fmt.Errorf("%w (after %s; the demo's logs are in %s/logs)", err, time.Since(begin).Round(time.Second), c.Info.Dir)
	}
	fmt.Fprintf(out, "\nScenario %s took %s. Issues: %s\n", sc.Name, time.Since(begin).Round(100*time.Millisecond), c.Info.PageURL)
	return nil
}
