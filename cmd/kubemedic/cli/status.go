package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// statusOptions are the flags of `kubemedic status`.
type statusOptions struct {
	// Output is "" (the screen), "json" or "yaml".
	Output   string
	Watch    bool
	Interval time.Duration
}

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		opts       statusOptions
		kubeconfig string
		nowFlag    string
	)
	cmd := &cobra.Command{
		Use:   "status [--kubeconfig FILE] [-o json|yaml] [--watch [--interval 2s]] [--now TIME]",
		Short: "Show the fleet on one screen: unhealthy nodes, operations, policies, quarantine, reclaim notices",
		Long: `Status reads the live cluster (nodes, NodeOperations, RemediationPolicies and
the metadata of pods) and shows on one screen:

  1. the nodes whose kubemedic conditions (GPULost, GPUXidError,
     GPUMemoryUnhealthy, PodProcessesStuck, NFSMountUnhealthy,
     NetworkInterfaceDown) are True or Unknown, with the effective reason and
     how long they have been so;
  2. the NodeOperations not yet Succeeded, Failed or Skipped, by phase;
  3. each RemediationPolicy: operations in progress against maxConcurrent,
     the circuit breaker, the maintenance window (open until, or next open),
     paused and dry run;
  4. the quarantined nodes with the NodeOperations kept on each, oldest first;
  5. the pods with the janitor's reclaim notice: owner, rule, deadline, snooze.

It only gets and lists; its client refuses any other request. As a kubectl
plugin (the binary installed as kubectl-medic on the PATH) it runs as
'kubectl medic status'.

Exit status: 0 when no breaker is open and no node is quarantined; 1 when a
breaker is open or a node is quarantined (listed under "attention"), or when
a request failed (the error names it: no status is no evidence of health);
2 for bad usage. With --watch it runs until interrupted and exits 0.`,
		Example: `  # The fleet now, with the current kubeconfig context
  kubemedic status

  # As a kubectl plugin, every 2 seconds until Ctrl-C
  kubectl medic status --watch

  # Gate a script: stop when a breaker is open or a node is quarantined
  kubemedic status -o json > status.json || exit 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.Output {
			case "", "json", "yaml":
			default:
				return fmt.Errorf("-o: %q is not json or yaml (leave it out for the screen)", opts.Output)
			}
			if opts.Interval <= 0 {
				return fmt.Errorf("--interval: %s is not a positive duration such as 2s", opts.Interval)
			}
			var clk clock.PassiveClock = clock.RealClock{}
			if nowFlag != "" {
				if opts.Watch {
					return fmt.Errorf("--now and --watch exclude each other: a watch shows the cluster as it changes")
				}
				t, err := time.Parse(time.RFC3339, nowFlag)
				if err != nil {
					return fmt.Errorf("--now: %q is not an RFC 3339 time such as 2026-11-21T22:00:00Z", nowFlag)
				}
				clk = fixedClock(t)
			}
			c, host, err := newReadOnlyClient(kubeconfig, "kubemedic-status")
			if err != nil {
				fmt.Fprintf(stderr, "kubemedic status: %v\n", err)
				return exitCode(ExitInvalid)
			}
			read := func(ctx context.Context) (statusInput, error) { return readStatus(ctx, c, host) }
			ctx := cmd.Context()
			if opts.Watch {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			return exitCode(runStatus(ctx, read, clk, clock.RealClock{}, opts, stdout, stderr))
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "json or yaml instead of the screen")
	cmd.Flags().BoolVarP(&opts.Watch, "watch", "w", false, "show the status again every --interval until interrupted")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 2*time.Second, "how often --watch reads the cluster")
	cmd.Flags().StringVar(&nowFlag, "now", "", "describe the cluster as at this RFC 3339 time (ages, windows) instead of the current time")
	return cmd
}

// runStatus reads, builds and writes the status once, or with opts.Watch
// every opts.Interval of ticker until ctx ends. It returns the exit status.
func runStatus(ctx context.Context, read func(context.Context) (statusInput, error), clk clock.PassiveClock,
	ticker clock.WithTicker, opts statusOptions, stdout, stderr io.Writer) int {
	if !opts.Watch {
		code, err := showStatus(ctx, read, clk, opts.Output, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "kubemedic status: %v\n", err)
			return ExitInvalid
		}
		return code
	}
	clear := opts.Output == "" && isTerminal(stdout)
	t := ticker.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		if clear {
			// Home the cursor and clear the screen, as watch(1) does.
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		if _, err := showStatus(ctx, read, clk, opts.Output, stdout); err != nil {
			if ctx.Err() != nil {
				return ExitOK
			}
			// A failed read is shown and retried: the watch outlives a blip.
			fmt.Fprintf(stderr, "kubemedic status: %v (retrying every %s)\n", err, opts.Interval)
		}
		select {
		case <-ctx.Done():
			return ExitOK
		case <-t.C():
		}
	}
}

// showStatus reads the cluster once and writes the status; code is the
// exit status it calls for.
func showStatus(ctx context.Context, read func(context.Context) (statusInput, error), clk clock.PassiveClock, output string, w io.Writer) (code int, err error) {
	in, err := read(ctx)
	if err != nil {
		return ExitInvalid, err
	}
	st := buildStatus(in, clk.Now())
	switch output {
	case "json":
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return ExitInvalid, fmt.Errorf("encode json: %w", err)
		}
		fmt.Fprintf(w, "%s\n", b)
	case "yaml":
		b, err := yaml.Marshal(st)
		if err != nil {
			return ExitInvalid, fmt.Errorf("encode yaml: %w", err)
		}
		fmt.Fprintf(w, "---\n%s", b)
	default:
		printStatus(w, st)
	}
	if len(st.Attention) > 0 {
		return ExitInvalid, nil
	}
	return ExitOK, nil
}

// readStatus lists what status shows. Pods are listed as metadata only:
// their notice is an annotation, and a cluster's pods are many. Errors name
// the request that failed and the server.
func readStatus(ctx context.Context, c client.Reader, host string) (statusInput, error) {
	in := statusInput{Server: host}
	var nl corev1.NodeList
	if err := c.List(ctx, &nl); err != nil {
		return in, fmt.Errorf("%s: %w", host, listError("nodes", err))
	}
	var ol v1alpha1.NodeOperationList
	if err := c.List(ctx, &ol); err != nil {
		return in, fmt.Errorf("%s: %w", host, listError("nodeoperations.kubemedic.io", err))
	}
	var pl v1alpha1.RemediationPolicyList
	if err := c.List(ctx, &pl); err != nil {
		return in, fmt.Errorf("%s: %w", host, listError("remediationpolicies.kubemedic.io", err))
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, pods); err != nil {
		return in, fmt.Errorf("%s: %w", host, listError("pods", err))
	}
	in.Nodes, in.Ops, in.Policies, in.Pods = nl.Items, ol.Items, pl.Items, pods.Items
	return in, nil
}

// isTerminal reports whether w is a terminal (a character device), where
// --watch clears the screen; a pipe or a file gets every screen appended.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
