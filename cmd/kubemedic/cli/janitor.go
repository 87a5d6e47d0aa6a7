package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

func newJanitorCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "janitor", Short: "Inspect the janitor's reclaim decisions"}
	var (
		kubeconfig, promURL, nowFlag, defaultChannel, selfNS string
		noSlack, rawSeries                                   bool
		staleness                                            time.Duration
	)
	plan := &cobra.Command{
		Use:   "plan [--kubeconfig FILE] [--prometheus-url URL] [--now TIME]",
		Short: "Show every GPU pod the reclaim policies select, with the janitor's decision, changing nothing",
		Long: `Plan reads the GPU pods, the ClusterReclaimPolicies and ReclaimPolicies, the
namespaces and the pods' controllers from the live cluster, asks Prometheus
for dcgm-exporter's GPU utilisation (one query per distinct metric and idle
window), and runs the janitor's own decision functions on them
(controller.MakePlan: decide.Judge, then decide.Next).

It prints one row per GPU pod a policy selects: the rule that holds (or why
none can be judged: Unknown), the evidence, who would be told, the notice
state recorded on the pod, the deadline and the next step. It only gets and
lists; its client refuses any other request, and it sends nothing to Slack.

Exit status: 0 when the plan ran, 1 for a failed API request, 2 for bad usage.`,
		Example: `  kubemedic janitor plan --prometheus-url http://localhost:9090
  kubemedic janitor plan --kubeconfig ~/.kube/prod --now 2026-11-26T09:00:00Z`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			if nowFlag != "" {
				t, err := time.Parse(time.RFC3339, nowFlag)
				if err != nil {
					return fmt.Errorf("--now: %q is not an RFC 3339 time such as 2026-11-21T22:00:00Z", nowFlag)
				}
				now = t
			}
			var src gpuutil.Source
			if promURL != "" {
				c, err := promapi.NewClient(promapi.Config{Address: promURL})
				if err != nil {
					return fmt.Errorf("--prometheus-url: %w", err)
				}
				src = gpuutil.NewPrometheus(promv1.NewAPI(c), gpuutil.Options{Staleness: staleness, RawSeries: rawSeries})
			}
			return exitCode(runJanitorPlan(cmd.Context(), kubeconfig, src, now, !noSlack, defaultChannel, selfNS, stdout, stderr))
		},
	}
	plan.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	plan.Flags().StringVar(&promURL, "prometheus-url", "", "Prometheus HTTP API with dcgm-exporter's metrics; without it the idle rule is Unknown")
	plan.Flags().DurationVar(&staleness, "metrics-staleness", 5*time.Minute, "as the janitor's --metrics-staleness")
	plan.Flags().BoolVar(&rawSeries, "raw-gpu-series", false, "as the janitor's --raw-gpu-series: read windows of 30m or more from the raw series, not the recording rules")
	plan.Flags().StringVar(&nowFlag, "now", "", "decide as at this RFC 3339 time instead of the current time")
	plan.Flags().BoolVar(&noSlack, "no-slack", false, "decide as a janitor without a Slack token would")
	plan.Flags().StringVar(&defaultChannel, "slack-default-channel", "", "as the janitor's --slack-default-channel")
	plan.Flags().StringVar(&selfNS, "namespace", "kubemedic-system", "the janitor's namespace, whose pods are never reclaimed")
	cmd.AddCommand(plan)
	return cmd
}

func runJanitorPlan(ctx context.Context, kubeconfig string, src gpuutil.Source, now time.Time, slack bool, defaultChannel, selfNS string, stdout, stderr io.Writer) int {
	c, host, err := newReadOnlyClient(kubeconfig, "kubemedic-janitor-plan")
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic janitor plan: %v\n", err)
		return ExitInvalid
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		fmt.Fprintf(stderr, "kubemedic janitor plan: %v\n", listError("pods", err))
		return ExitInvalid
	}
	if src == nil {
		src = unknownSource{}
	}
	ptrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ptrs[i] = &pods.Items[i]
	}
	p, err := controller.MakePlan(ctx, controller.PlanInput{Reader: c, Pods: ptrs, Source: src, Now: now,
		NotifierReady: slack, DefaultChannel: defaultChannel, SelfNamespace: selfNS})
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic janitor plan: %v\n", err)
		return ExitInvalid
	}
	printJanitorPlan(stdout, host, p)
	return ExitOK
}

// unknownSource answers like a janitor without --prometheus-url.
type unknownSource struct{}

func (unknownSource) Fetch(_ context.Context, qs []gpuutil.Query, _ time.Time) map[gpuutil.Query]gpuutil.Result {
	out := map[gpuutil.Query]gpuutil.Result{}
	for _, q := range qs {
		out[q] = gpuutil.Result{Err: fmt.Errorf("no --prometheus-url given")}
	}
	return out
}

func printJanitorPlan(w io.Writer, host string, p *controller.Plan) {
	fmt.Fprintf(w, "Janitor plan for %s at %s\n", host, p.Now.UTC().Format(time.RFC3339))
	for _, q := range p.Queries {
		res := p.Results[q]
		state := fmt.Sprintf("%d pods with complete series", len(res.Pods))
		if res.Err != nil {
			state = "failed: " + res.Err.Error()
		}
		fmt.Fprintf(w, "  query:    %s over %s: %s\n", q.Metric, decide.Human(q.Window), state)
	}
	for _, ig := range p.Ignored {
		fmt.Fprintf(w, "  ignored:  ReclaimPolicy %s/%s: %s\n", ig.Policy.Namespace, ig.Policy.Name, ig.Why)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tGPUS\tRULE\tSTATE\tNEXT\tDEADLINE\tOWNER\tDETAIL")
	n := 0
	for i := range p.Pods {
		pp := &p.Pods[i]
		if pp.Err != nil {
			fmt.Fprintf(tw, "%s/%s\t%d\t-\t-\tError\t-\t-\t%v\n", pp.Pod.Namespace, pp.Pod.Name, pp.Facts.GPUs(), pp.Err)
			continue
		}
		d := pp.Decision
		if d.Step == decide.StepNone && d.State == decide.StateNone && pp.Notice == nil && len(pp.Problems) == 0 {
			continue
		}
		n++
		rule, state, deadline := string(d.Rule), string(d.State), "-"
		if rule == "" {
			rule = "-"
		}
		if state == "" {
			state = "-"
		}
		if !d.Deadline.IsZero() {
			deadline = d.Deadline.UTC().Format(time.RFC3339)
		}
		owner := pp.Recipient.String()
		if !pp.HasRecipient {
			owner = "nobody"
		}
		detail := d.Why
		if len(pp.Problems) > 0 {
			detail += " [problems: " + strings.Join(pp.Problems, "; ") + "]"
		}
		fmt.Fprintf(tw, "%s/%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", pp.Pod.Namespace, pp.Pod.Name, pp.Facts.GPUs(), rule, state, d.Step, deadline, owner, detail)
	}
	_ = tw.Flush()
	if n == 0 {
		fmt.Fprintln(w, "(no GPU pod is a candidate, noticed, snoozed or Unknown)")
	}
}
