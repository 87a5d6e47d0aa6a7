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

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// statusOptions are the flags of `kubemedic status`.
type statusOptions struct {
	// Output is "" (the screen), "json" or "yaml".
	Output   string
	Watch    bool
	Interval time.Duration
	// Hardware shows the per-GPU history (the RMA list) instead of the
	// fleet; Window is the window its failure count covers.
	Hardware bool
	Window   time.Duration
}

func newStatusCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		opts       statusOptions
		kubeconfig string
		nowFlag    string
	)
	cmd := &cobra.Command{
		Use:   "status [--kubeconfig FILE] [--hardware [--window 24h]] [-o json|yaml] [--watch [--interval 2s]] [--now TIME]",
		Short: "Show the fleet on one screen: unhealthy nodes, operations, policies, GPU tests, quarantine, reclaim notices; --hardware: the GPU RMA list",
		Long: `Status reads the live cluster (nodes, NodeOperations, RemediationPolicies,
ValidationPolicies, NodeValidations and the metadata of pods) and shows on
one screen:

  1. the nodes whose kubemedic conditions (GPULost, GPUXidError,
     GPUMemoryUnhealthy, PodProcessesStuck, NFSMountUnhealthy,
     NetworkInterfaceDown) are True or Unknown, with the effective reason and
     how long they have been so;
  2. the NodeOperations not yet Succeeded, Failed or Skipped, by phase;
  3. each RemediationPolicy: operations in progress against maxConcurrent,
     the circuit breaker, the maintenance window (open until, or next open),
     paused and dry run;
  4. each ValidationPolicy (the GPU tests when a node joins and in the
     background): its test, how often, the nodes matched, being tested,
     passed, failed and due, and its Ready condition;
  5. per node a ValidationPolicy tests: when it was last validated, with
     what result (the test, the failing GPUs), the test running now, when
     the next is due (or overdue, or never tested), preemptions, and
     whether it still carries the taint kubemedic.io/unvalidated; the most
     pressing first, up to 50 rows, the rest counted (-o json lists all);
  6. the quarantined nodes with the NodeOperations kept on each, oldest first;
  7. the pods with the janitor's reclaim notice: owner, rule, deadline, snooze.

With --hardware it shows instead the RMA list: every GPU, by UUID, of every
node whose kubemedic.io/gpu-history annotation (the bounded per-node GPU
history the remediator writes) records something: node, UUID, last PCI bus
ID, whether the node is quarantined, the faults kept, the failures (faults
and Failed operations) in the last --window as the per-GPU attempt cap
counts them, the last fault (condition, reason, Xid or ECC kind) and the
last operation (operation, outcome, NodeOperation), worst first. Entries
that name no GPU are the row GPU "node". A GPU that keeps failing across
resets and nodes is the one to send back to the vendor. It lists only
nodes.

It only gets and lists; its client refuses any other request. As a kubectl
plugin (the binary installed as kubectl-medic on the PATH) it runs as
'kubectl medic status'.

Exit status: 0 when no breaker is open and no node is quarantined; 1 when a
breaker is open or a node is quarantined (listed under "attention"), or when
a request failed (the error names it: no status is no evidence of health;
ValidationPolicies or NodeValidations that cannot be read leave the rest
shown, that section Unknown, and are listed under "attention"); 2 for bad
usage. With --watch it runs until interrupted and exits 0.

With --hardware the exit status is 1 only when a node's history annotation
does not parse (the node is listed with GPU "?" and the error, and under
"attention": lost evidence must be loud) or a request failed; quarantined
nodes and open breakers do not change it.`,
		Example: `  # The fleet now, with the current kubeconfig context
  kubemedic status

  # As a kubectl plugin, every 2 seconds until Ctrl-C
  kubectl medic status --watch

  # The RMA list: GPUs with the most failures in the last 7 days first
  kubemedic status --hardware --window 168h

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
			if cmd.Flags().Changed("window") && !opts.Hardware {
				return fmt.Errorf("--window needs --hardware: it is the window of the per-GPU failure count")
			}
			if opts.Window <= 0 {
				return fmt.Errorf("--window: %s is not a positive duration such as 24h", opts.Window)
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
			if opts.Hardware {
				read = func(ctx context.Context) (statusInput, error) { return readHardware(ctx, c, host) }
			}
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
	cmd.Flags().BoolVar(&opts.Hardware, "hardware", false, "show the RMA list instead: each GPU's fault and operation history from the nodes' "+gpuwire.Annotation+" annotation, worst first")
	cmd.Flags().DurationVar(&opts.Window, "window", 24*time.Hour, "with --hardware, the window of the failure count that ranks the GPUs")
	cmd.Flags().StringVar(&nowFlag, "now", "", "describe the cluster as at this RFC 3339 time (ages, windows) instead of the current time")
	return cmd
}

// runStatus reads, builds and writes the status once, or with opts.Watch
// every opts.Interval of ticker until ctx ends. It returns the exit status.
func runStatus(ctx context.Context, read func(context.Context) (statusInput, error), clk clock.PassiveClock,
	ticker clock.WithTicker, opts statusOptions, stdout, stderr io.Writer) int {
	show := func(ctx context.Context) (int, error) {
		if opts.Hardware {
			return showHardware(ctx, read, clk, opts.Output, opts.Window, stdout)
		}
		return showStatus(ctx, read, clk, opts.Output, stdout)
	}
	if !opts.Watch {
		code, err := show(ctx)
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
		if _, err := show(ctx); err != nil {
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
	if err := writeOutput(w, output, st, func() { printStatus(w, st) }); err != nil {
		return ExitInvalid, err
	}
	if len(st.Attention) > 0 {
		return ExitInvalid, nil
	}
	return ExitOK, nil
}

// writeOutput writes v as -o json or yaml, or calls screen for the screen.
func writeOutput(w io.Writer, output string, v any, screen func()) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		fmt.Fprintf(w, "%s\n", b)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		fmt.Fprintf(w, "---\n%s", b)
	default:
		screen()
	}
	return nil
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
	// The GPU tests' records are one section's evidence: when they cannot
	// be read, that section is Unknown (and called for attention), and the
	// rest still shows.
	var vl v1alpha1.ValidationPolicyList
	var rl v1alpha1.NodeValidationList
	if err := c.List(ctx, &vl); err != nil {
		in.ValidationErr = fmt.Errorf("%s: %w", host, listError("validationpolicies.kubemedic.io", err))
	} else if err := c.List(ctx, &rl); err != nil {
		in.ValidationErr = fmt.Errorf("%s: %w", host, listError("nodevalidations.kubemedic.io", err))
	} else {
		in.ValidationPolicies, in.NodeValidations = vl.Items, rl.Items
	}
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
