package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// requestTimeout bounds each API request of simulate.
const requestTimeout = 30 * time.Second

func newSimulateCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		files      []string
		kubeconfig string
		nowFlag    string
	)
	cmd := &cobra.Command{
		Use:   "simulate -f FILE|DIR [--kubeconfig FILE] [--now TIME]",
		Short: "Show what policies would do on the live cluster, changing nothing",
		Long: `Simulate reads the RemediationPolicies in the given files, reads the live
cluster (nodes, NodeOperations, NodeOperationTemplates and the other
RemediationPolicies; a policy in the files replaces the cluster's policy of
the same name and keeps its breaker state), and runs the remediator's own
decisions on them: plan.Evaluate for each policy in the files, then
plan.Admit for every operation it would create, as if the operations were
created one at a time in node-name order, so that later ones count the ones
admitted before them.

For each policy it prints the counts and the circuit breaker, then one row
per selected node with a matching condition and its decision: the operation
it would create and whether that would start now, wait (and for which
limit), or be skipped; or why the node gets nothing (NotHeldYet,
OtherPolicy, InProgress, BreakerOpen, Paused, OptedOut, Quarantined,
PolicyNotReady, EpisodeEnded).

Simulate only gets and lists; its client refuses any other request. Other
kinds in the files (templates, ...) are ignored with a note: templates are
read from the cluster.

Exit status: 0 when the simulation ran, 1 for invalid policy files (printed
as FILE:LINE: FIELD: WHAT IS WRONG) or a failed API request, 2 for bad usage.`,
		Example: `  # What would gpu-xid.yaml do now, with the current kubeconfig context?
  kubemedic policy simulate -f gpu-xid.yaml

  # ... against another cluster, at the start of tonight's window
  kubemedic policy simulate -f gpu-xid.yaml --kubeconfig ~/.kube/prod --now 2026-11-21T22:00:00+01:00`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := append(append([]string{}, files...), args...)
			if len(paths) == 0 {
				return fmt.Errorf("no files given: use -f FILE or -f DIR")
			}
			var clk clock.PassiveClock = clock.RealClock{}
			if nowFlag != "" {
				t, err := time.Parse(time.RFC3339, nowFlag)
				if err != nil {
					return fmt.Errorf("--now: %q is not an RFC 3339 time such as 2026-11-21T22:00:00Z", nowFlag)
				}
				clk = fixedClock(t)
			}
			return exitCode(runSimulate(cmd.Context(), paths, kubeconfig, clk, stdout, stderr))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "policy file or directory (repeatable)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then ~/.kube/config")
	cmd.Flags().StringVar(&nowFlag, "now", "", "decide as at this RFC 3339 time instead of the current time")
	return cmd
}

// fixedClock is the --now clock.
type fixedClock time.Time

func (c fixedClock) Now() time.Time                  { return time.Time(c) }
func (c fixedClock) Since(t time.Time) time.Duration { return time.Time(c).Sub(t) }

// runSimulate loads the policies, reads the cluster and prints the
// simulation on stdout; problems and errors go to stderr.
func runSimulate(ctx context.Context, paths []string, kubeconfig string, clk clock.PassiveClock, stdout, stderr io.Writer) int {
	pols, notes, problems := loadSimulatePolicies(paths)
	for _, n := range notes {
		fmt.Fprintln(stderr, n)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p.String())
		}
		fmt.Fprintf(stderr, "%d problems; nothing simulated\n", len(problems))
		return ExitInvalid
	}
	c, host, err := newReadOnlyClient(kubeconfig, "kubemedic-policy-simulate")
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic: %v\n", err)
		return ExitInvalid
	}
	st, err := readCluster(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic: %s: %v\n", host, err)
		return ExitInvalid
	}
	now := clk.Now()
	results, err := simulate(pols, st, now)
	if err != nil {
		fmt.Fprintf(stderr, "kubemedic: %v\n", err)
		return ExitInvalid
	}
	fmt.Fprintf(stdout, "Simulated at %s against %s; read only, nothing was changed.\n",
		now.UTC().Format(time.RFC3339), host)
	printSimulation(stdout, results, now)
	return ExitOK
}

// filePolicy is a RemediationPolicy read from a file, defaulted.
type filePolicy struct {
	Obj    *v1alpha1.RemediationPolicy
	Source string // FILE:LINE
}

// loadSimulatePolicies loads the RemediationPolicies of the files and checks
// each on its own (the operations they name are looked up in the cluster,
// not in the files). Other kinds yield a note each.
func loadSimulatePolicies(paths []string) ([]filePolicy, []string, []policies.Problem) {
	docs, problems := policies.LoadFiles(paths...)
	var out []filePolicy
	var notes []string
	seen := map[string]*policies.Document{}
	for _, d := range docs {
		pol, ok := d.Object.(*v1alpha1.RemediationPolicy)
		if !ok {
			name := ""
			if m, ok := d.Object.(metav1.Object); ok {
				name = " " + m.GetName()
			}
			notes = append(notes, fmt.Sprintf("%s:%d: note: %s%s ignored: simulate reads only RemediationPolicies from files, and everything else from the cluster", d.File, d.Line, d.Kind, name))
			continue
		}
		errs := policies.Validate(pol)
		if first, dup := seen[pol.Name]; dup && pol.Name != "" {
			e := field.Duplicate(field.NewPath("metadata", "name"), pol.Name)
			e.Detail = fmt.Sprintf("RemediationPolicy %q is also defined at %s:%d", pol.Name, first.File, first.Line)
			errs = append(errs, e)
		}
		seen[pol.Name] = d
		problems = append(problems, d.Problems(errs)...)
		if len(errs) > 0 {
			continue
		}
		if _, err := plan.Compile(pol); err != nil {
			problems = append(problems, policies.Problem{File: d.File, Line: d.Line, Detail: err.Error()})
			continue
		}
		out = append(out, filePolicy{Obj: pol, Source: fmt.Sprintf("%s:%d", d.File, d.Line)})
	}
	if len(out) == 0 && len(problems) == 0 {
		problems = append(problems, policies.Problem{File: strings.Join(paths, ", "), Detail: "no RemediationPolicy to simulate"})
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return out, notes, problems
}

// newReadOnlyClient builds a client from the kubeconfig (default loading
// rules when empty) whose transport refuses every request but GET, so that
// no code path of a reading command (simulate, status, janitor plan) can
// change the cluster. userAgent names the command in the API server's audit
// log. It returns the API server's address for messages.
func newReadOnlyClient(kubeconfig, userAgent string) (client.Reader, string, error) {
	return NewClient(kubeconfig, userAgent, true)
}

// NewClient is a client of kubeconfig's cluster (or the default one) that
// knows kubemedic's types; readOnly refuses anything but GET.
func NewClient(kubeconfig, userAgent string, readOnly bool) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	cfg.Timeout = requestTimeout
	if readOnly {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return readOnlyTransport{rt} })
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", fmt.Errorf("build scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", fmt.Errorf("build scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return c, cfg.Host, nil
}

// readOnlyTransport refuses every request that is not a GET.
type readOnlyTransport struct{ next http.RoundTripper }

func (r readOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return nil, fmt.Errorf("this command is read only: refusing %s %s", req.Method, req.URL.Path)
	}
	return r.next.RoundTrip(req)
}

// clusterState is what simulate reads from the API server.
type clusterState struct {
	// Nodes sorted by name.
	Nodes     []*corev1.Node
	Ops       []*v1alpha1.NodeOperation
	Templates map[string]bool
	Policies  []*v1alpha1.RemediationPolicy
}

// readCluster lists what the remediator's policy reconciler lists. Errors
// name the request that failed.
func readCluster(ctx context.Context, c client.Reader) (clusterState, error) {
	var st clusterState
	var nl corev1.NodeList
	if err := c.List(ctx, &nl); err != nil {
		return st, listError("nodes", err)
	}
	var ol v1alpha1.NodeOperationList
	if err := c.List(ctx, &ol); err != nil {
		return st, listError("nodeoperations.kubemedic.io", err)
	}
	var tl v1alpha1.NodeOperationTemplateList
	if err := c.List(ctx, &tl); err != nil {
		return st, listError("nodeoperationtemplates.kubemedic.io", err)
	}
	var pl v1alpha1.RemediationPolicyList
	if err := c.List(ctx, &pl); err != nil {
		return st, listError("remediationpolicies.kubemedic.io", err)
	}
	for i := range nl.Items {
		st.Nodes = append(st.Nodes, &nl.Items[i])
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Name < st.Nodes[j].Name })
	for i := range ol.Items {
		st.Ops = append(st.Ops, &ol.Items[i])
	}
	st.Templates = make(map[string]bool, len(tl.Items))
	for _, t := range tl.Items {
		st.Templates[t.Name] = true
	}
	for i := range pl.Items {
		st.Policies = append(st.Policies, &pl.Items[i])
	}
	return st, nil
}

func listError(resource string, err error) error {
	if apimeta.IsNoMatchError(err) {
		return fmt.Errorf("list %s: %w (are the kubemedic CRDs installed? kubectl apply -f deploy/crds)", resource, err)
	}
	return fmt.Errorf("list %s: %w", resource, err)
}

// policyResult is the simulation of one policy of the files.
type policyResult struct {
	Policy *plan.Policy
	Source string
	// Replaces: the cluster has a policy of that name, which the file's replaces.
	Replaces bool
	Plan     plan.PolicyPlan
	Rows     []nodeRow
}

// nodeRow is one selected node with a matching condition and its decision.
type nodeRow struct {
	Node      string
	Condition string // Type=Status
	Reason    string
	Since     time.Time
	Decision  string
	Detail    string
	// Create: the policy would create an operation, admitted as Verdict.
	Create  bool
	Verdict plan.Verdict
}

// simulate decides, as the remediator would at now, what each policy of the
// files does: plan.Pass, the policy reconciler's own pass, with the file's
// policies in place of the cluster's of the same name. It is pure: st is
// not changed.
func simulate(pols []filePolicy, st clusterState, now time.Time) ([]policyResult, error) {
	inCluster := map[string]*v1alpha1.RemediationPolicy{}
	var all []*plan.Policy
	for _, p := range st.Policies {
		inCluster[p.Name] = p
		// Invalid ones are left out, as the remediator leaves them out.
		if c, err := plan.Compile(p); err == nil {
			all = append(all, c)
		}
	}
	results := make([]policyResult, len(pols))
	evaluate := make([]*v1alpha1.RemediationPolicy, len(pols))
	for i, fp := range pols {
		obj := fp.Obj.DeepCopy()
		if old, ok := inCluster[obj.Name]; ok {
			// Applying the file keeps the status subresource: the breaker
			// state carries over.
			obj.Status = *old.Status.DeepCopy()
			results[i].Replaces = true
		}
		evaluate[i], results[i].Source = obj, fp.Source
	}
	pass := plan.Pass(plan.PassInput{Evaluate: evaluate, Policies: all, Nodes: st.Nodes, Ops: st.Ops,
		Templates: st.Templates, Now: now, Admit: true})

	nodeByName := make(map[string]*corev1.Node, len(st.Nodes))
	for _, n := range st.Nodes {
		nodeByName[n.Name] = n
	}
	for i, pp := range pass.Policies {
		if pp.Invalid != nil {
			return nil, fmt.Errorf("%s: %w", results[i].Source, pp.Invalid)
		}
		r := &results[i]
		r.Policy, r.Plan = pp.Policy, pp.Plan
		for _, c := range pp.Creates {
			r.Rows = append(r.Rows, createRow(r.Policy, nodeByName[c.Op.Spec.NodeName], c.Op, c.Admission, now))
		}
		for _, h := range pp.Plan.Holds {
			row := matchRow(r.Policy, nodeByName[h.Node], now)
			row.Decision, row.Detail = h.Reason, h.Message
			r.Rows = append(r.Rows, row)
		}
		sort.SliceStable(r.Rows, func(a, b int) bool { return r.Rows[a].Node < r.Rows[b].Node })
	}
	return results, nil
}

// matchRow fills the node and condition columns of a row.
func matchRow(p *plan.Policy, n *corev1.Node, now time.Time) nodeRow {
	if n == nil {
		return nodeRow{}
	}
	row := nodeRow{Node: n.Name}
	if m, ok := p.Unhealthy(n, now); ok {
		row.Condition = fmt.Sprintf("%s=%s", m.Condition.Type, m.Condition.Status)
		row.Reason = m.Reason
		row.Since = m.Condition.LastTransitionTime.Time
	}
	return row
}

// createRow is the row of an operation the policy would create, with its
// admission.
func createRow(p *plan.Policy, n *corev1.Node, op *v1alpha1.NodeOperation, a plan.Admission, now time.Time) nodeRow {
	row := matchRow(p, n, now)
	row.Node = op.Spec.NodeName
	step := op.Spec.Step
	if step == "" && op.Spec.Quarantine {
		step = "quarantine"
	}
	var verdict string
	switch a.Verdict {
	case plan.Start:
		verdict = "start now"
	case plan.Wait:
		verdict = "wait: " + a.Reason
	default:
		verdict = "skip: " + a.Reason
	}
	row.Create, row.Verdict = true, a.Verdict
	row.Decision = fmt.Sprintf("create %s (%s), %s", op.Name, step, verdict)
	row.Detail = a.Message
	if a.Quarantine {
		row.Detail += " (the node would be quarantined)"
	}
	if op.Spec.DryRun {
		row.Detail = "dry run, recorded as Skipped: " + row.Detail
	}
	return row
}

// printSimulation writes one block per policy: its summary and its table.
func printSimulation(w io.Writer, results []policyResult, now time.Time) {
	for _, r := range results {
		p := r.Policy.Obj
		fmt.Fprintln(w)
		replaces := "new to the cluster"
		if r.Replaces {
			replaces = "replaces the cluster's policy of that name"
		}
		fmt.Fprintf(w, "Policy %s (%s, %s)\n", p.Name, r.Source, replaces)
		pl := r.Plan
		fmt.Fprintf(w, "  nodes:    %d selected, %d unhealthy, %d active operations, %d quarantined\n",
			pl.Selected, pl.Unhealthy, pl.Active, pl.Quarantined)
		state := "closed"
		if pl.Breaker.Open {
			state = "OPEN"
		}
		fmt.Fprintf(w, "  breaker:  %s, limit %d unhealthy (maxUnhealthy %s): %s: %s\n",
			state, pl.Limit, p.Spec.Safety.MaxUnhealthy.String(), pl.Breaker.Reason, pl.Breaker.Message)
		if len(pl.MissingTemplates) > 0 {
			fmt.Fprintf(w, "  not ready: NodeOperationTemplates %v do not exist in the cluster; the policy creates nothing\n", pl.MissingTemplates)
		}
		if p.Spec.Paused {
			fmt.Fprintln(w, "  paused:   the policy creates nothing")
		}
		if p.Spec.DryRun {
			fmt.Fprintln(w, "  dry run:  its operations record their decision and end Skipped, changing nothing")
		}
		verdicts := map[plan.Verdict]int{}
		for _, row := range r.Rows {
			if row.Create {
				verdicts[row.Verdict]++
			}
		}
		fmt.Fprintf(w, "  creates:  %d operations (%d start now, %d wait, %d skipped); maxConcurrent %s\n",
			len(pl.Create), verdicts[plan.Start], verdicts[plan.Wait], verdicts[plan.Skip], p.Spec.Safety.MaxConcurrent.String())
		if !pl.Next.IsZero() {
			fmt.Fprintf(w, "  next:     %s (in %s), when the plan changes with nothing else changing\n",
				pl.Next.UTC().Format(time.RFC3339), duration.HumanDuration(pl.Next.Sub(now)))
		}
		if len(r.Rows) == 0 {
			fmt.Fprintln(w, "  no selected node has a matching condition")
			continue
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tCONDITION\tREASON\tSINCE\tDECISION\tDETAIL")
		for _, row := range r.Rows {
			since := "-"
			if !row.Since.IsZero() {
				since = fmt.Sprintf("%s (%s)", row.Since.UTC().Format(time.RFC3339), duration.HumanDuration(now.Sub(row.Since)))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", row.Node, row.Condition, row.Reason, since, row.Decision, row.Detail)
		}
		tw.Flush()
	}
}
