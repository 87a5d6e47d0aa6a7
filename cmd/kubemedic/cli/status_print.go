package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// statusMessageWidth is where the screen cuts messages; -o json|yaml keep
// them whole.
const statusMessageWidth = 60

// statusValidationRows is how many nodes the screen's GPU test table
// shows, most pressing first; the rest are counted by state (-o json
// lists every node), so that a fleet of thousands stays one screen.
const statusValidationRows = 50

// printStatus writes the status as one screen of sections.
func printStatus(w io.Writer, st Status) {
	now := st.Time.Time
	fmt.Fprintf(w, "kubemedic status of %s at %s\n", st.Server, now.Format(time.RFC3339))
	if len(st.Attention) == 0 {
		fmt.Fprintln(w, "OK: no breaker open, no node quarantined")
	} else {
		fmt.Fprintf(w, "ATTENTION (%d):\n", len(st.Attention))
		for _, a := range st.Attention {
			fmt.Fprintf(w, "  %s\n", cut(a, 2*statusMessageWidth))
		}
	}

	fmt.Fprintf(w, "\nNode conditions not OK (%d)\n", len(st.NodeConditions))
	if len(st.NodeConditions) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "  NODE\tCONDITION\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range st.NodeConditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.Node, c.Condition, c.Status, dash(c.Reason), age(now, &c.Since), dash(cut(c.Message, statusMessageWidth)))
		}
		_ = tw.Flush()
	}

	active := 0
	for _, g := range st.ActiveOperations {
		active += len(g.Operations)
	}
	fmt.Fprintf(w, "\nActive operations (%d)\n", active)
	if active == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, g := range st.ActiveOperations {
		fmt.Fprintf(w, "  %s (%d)\n", g.Phase, len(g.Operations))
		tw := newTable(w)
		fmt.Fprintln(tw, "    NAME\tNODE\tPOLICY/STEP\tAGE\tMESSAGE")
		for _, o := range g.Operations {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", o.Name, o.Node, policyStep(o), age(now, &o.Created), dash(cut(withDiagnostics(o), statusMessageWidth)))
		}
		_ = tw.Flush()
	}

	fmt.Fprintf(w, "\nRemediation policies (%d)\n", len(st.Policies))
	if len(st.Policies) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "  NAME\tIN PROGRESS\tBREAKER\tWINDOW\tPAUSED\tDRY RUN\tDETAIL")
		for _, p := range st.Policies {
			budget := fmt.Sprintf("%d/%d (maxConcurrent %s)", p.Budget.Active, p.Budget.Limit, p.Budget.MaxConcurrent)
			breaker := p.Breaker.State
			if p.Breaker.State == BreakerOpen {
				breaker = fmt.Sprintf("OPEN %s", age(now, p.Breaker.Since))
			}
			var detail []string
			if p.NotReady != "" {
				detail = append(detail, "not ready: "+p.NotReady)
			}
			if p.Breaker.State == BreakerOpen {
				detail = append(detail, p.Breaker.Reason+": "+p.Breaker.Message)
			}
			if p.Window.Error != "" {
				detail = append(detail, "maintenance windows: "+p.Window.Error)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, budget, breaker, window(now, p.Window),
				yesNo(p.Paused), yesNo(p.DryRun), dash(cut(strings.Join(detail, "; "), statusMessageWidth)))
		}
		_ = tw.Flush()
	}

	printValidation(w, now, st.Validation)

	fmt.Fprintf(w, "\nQuarantined nodes (%d)\n", len(st.QuarantinedNodes))
	if len(st.QuarantinedNodes) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, q := range st.QuarantinedNodes {
		since := ""
		if q.Since != nil {
			since = " since " + q.Since.UTC().Format(time.RFC3339) + " (" + age(now, q.Since) + ")"
		}
		cordoned := "schedulable"
		if q.Unschedulable {
			cordoned = "cordoned"
		}
		fmt.Fprintf(w, "  %s%s, %s, %d operations kept\n", q.Node, since, cordoned, len(q.Attempts))
		if len(q.Attempts) == 0 {
			continue
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "    NAME\tPOLICY/STEP\tPHASE\tFINISHED\tMESSAGE")
		for _, o := range q.Attempts {
			finished := "-"
			if o.Finished != nil {
				finished = o.Finished.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", o.Name, policyStep(o), o.Phase, finished, dash(cut(withDiagnostics(o), statusMessageWidth)))
		}
		_ = tw.Flush()
	}

	fmt.Fprintf(w, "\nReclaim notices (%d)\n", len(st.ReclaimNotices))
	if len(st.ReclaimNotices) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  POD\tOWNER\tSTATE\tRULE\tDEADLINE\tSNOOZED UNTIL\tDETAIL")
	for _, n := range st.ReclaimNotices {
		detail := n.Evidence
		if n.DryRun {
			detail = "dry run: " + detail
		}
		if n.Problem != "" {
			detail = joinProblem(detail, n.Problem)
		}
		fmt.Fprintf(tw, "  %s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Namespace, n.Pod, dash(n.Owner), n.State, dash(string(n.Rule)),
			when(now, n.Deadline), when(now, n.SnoozeUntil), dash(cut(detail, statusMessageWidth)))
	}
	_ = tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// age is how long ago t was, as kubectl shows it; "-" for no time.
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// when is a time with how far it is from now: "2026-11-21T22:00:00Z (in 3h)".
func when(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	s := t.UTC().Format(time.RFC3339)
	if d := t.Sub(now); d >= 0 {
		return s + " (in " + duration.HumanDuration(d) + ")"
	}
	return s + " (" + duration.HumanDuration(now.Sub(t.Time)) + " ago)"
}

func window(now time.Time, ws WindowStatus) string {
	switch {
	case ws.Error != "":
		return "unreadable: none opens"
	case ws.Windows == 0:
		return "any time"
	case ws.Open && ws.Until != nil:
		return "open until " + when(now, ws.Until)
	case ws.Open:
		return "open"
	case ws.NextOpen != nil:
		return "closed, opens " + when(now, ws.NextOpen)
	default:
		return "closed"
	}
}

func policyStep(o OperationStatus) string {
	if o.Policy == "" {
		return "manual/" + dash(o.Step)
	}
	return o.Policy + "/" + dash(o.Step)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to n runes on one line, marking the cut with "...".
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// withDiagnostics is the operation's message, led by the GPU it excluded
// instead of cordoning the node and by its capture, when it has them:
// "excluded GPU-… by DeviceTaintRule …; diagnostics Captured
// gpu-a/op.tar.gz; waiting for ...".
func withDiagnostics(o OperationStatus) string {
	var parts []string
	if o.ExcludedGPU != "" {
		parts = append(parts, "excluded "+o.ExcludedGPU)
	}
	if o.Diagnostics != "" {
		parts = append(parts, "diagnostics "+o.Diagnostics)
	}
	if o.Message != "" {
		parts = append(parts, o.Message)
	}
	return strings.Join(parts, "; ")
}

// printValidation writes the ValidationPolicies and the nodes' GPU tests.
func printValidation(w io.Writer, now time.Time, v Validation) {
	if v.Unknown != "" {
		fmt.Fprintf(w, "\nValidation policies: Unknown\n  %s\n", cut(v.Unknown, 2*statusMessageWidth))
		fmt.Fprintln(w, "\nGPU tests of nodes: Unknown (no record could be read: no node counts as validated)")
		return
	}
	fmt.Fprintf(w, "\nValidation policies (%d)\n", len(v.Policies))
	if len(v.Policies) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "  NAME\tTEST\tBACKGROUND\tMATCHED\tTESTING\tPASSED\tFAILED\tDUE\tUNVALIDATED\tREADY\tDETAIL")
		for _, p := range v.Policies {
			bg := "join only"
			if p.Every != nil {
				bg = fmt.Sprintf("every %s, %d at once", duration.HumanDuration(p.Every.Duration), p.MaxConcurrent)
			}
			var detail []string
			if p.Suspended {
				detail = append(detail, "suspended")
			}
			if p.NotReady != "" {
				detail = append(detail, "not ready: "+p.NotReady)
			}
			if p.Problem != "" {
				detail = append(detail, p.Problem)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Name, p.Test, bg, p.Matched, p.Validating, p.Passed, p.Failed,
				p.Due, p.Unvalidated, p.Ready, dash(cut(strings.Join(detail, "; "), statusMessageWidth)))
		}
		_ = tw.Flush()
	}

	counts := validationCounts(v.Nodes, v.Counts.NotSelected)
	fmt.Fprintf(w, "\nGPU tests of nodes (%d", len(v.Nodes))
	if counts != "" {
		fmt.Fprintf(w, ": %s", counts)
	}
	fmt.Fprintln(w, ")")
	if len(v.Nodes) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	rows := v.Nodes
	if len(rows) > statusValidationRows {
		rows = rows[:statusValidationRows]
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  NODE\tPOLICY\tVALIDATED\tRESULT\tTESTING NOW\tDUE\tTAINT\tDETAIL")
	for _, n := range rows {
		validated, result := "never", "-"
		if l := n.Last; l != nil {
			validated = age(now, l.Time) + " ago"
			result = testResultText(l)
		}
		testing := "-"
		if c := n.Current; c != nil {
			testing = fmt.Sprintf("%s %s", c.Mode, age(now, c.Since))
			if c.Attempt > 1 {
				testing += fmt.Sprintf(", attempt %d", c.Attempt)
			}
		}
		taint := "-"
		if n.Unvalidated {
			taint = "unvalidated"
		}
		// A failure leads with what failed.
		detail := n.Detail
		if n.State == ValidationStateFailed && n.Last != nil && n.Last.Message != "" {
			detail = strings.Join(slices.DeleteFunc([]string{n.Last.Message, detail}, func(s string) bool { return s == "" }), "; ")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, dash(n.Policy), validated, result, testing, dueText(now, n),
			taint, dash(cut(detail, statusMessageWidth)))
	}
	_ = tw.Flush()
	if more := v.Nodes[len(rows):]; len(more) > 0 {
		fmt.Fprintf(w, "  ... %d more: %s (-o json lists every node)\n", len(more), validationCounts(more, 0))
	}
}

// validationCounts is "1 failed, 2 testing, 1990 passed; 3 other nodes
// selected by no ValidationPolicy" in the order of ValidationStates,
// leaving out zeros.
func validationCounts(nodes []ValidatedNode, notSelected int) string {
	words := map[string]string{ValidationStateFailed: "failed", ValidationStateWaitingForJoin: "waiting for their join test",
		ValidationStateUnknown: "unknown", ValidationStateTesting: "testing", ValidationStateDue: "due",
		ValidationStatePassed: "passed", ValidationStateNotTested: "not tested"}
	by := map[string]int{}
	for _, n := range nodes {
		by[n.State]++
	}
	var parts []string
	for _, s := range ValidationStates {
		if by[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[s], words[s]))
		}
	}
	s := strings.Join(parts, ", ")
	if notSelected > 0 {
		s = joinProblem(s, fmt.Sprintf("%d other nodes selected by no ValidationPolicy", notSelected))
	}
	return s
}

// testResultText is "Passed", or "Failed dcgm (1 of 8 GPUs)".
func testResultText(l *ValidationTestResult) string {
	s := string(l.Result)
	if l.Result == v1alpha1.ValidationFailed && l.Test != "" {
		s += " " + l.Test
		if l.FailedGPUs > 0 {
			s += fmt.Sprintf(" (%d of %d GPUs)", l.FailedGPUs, l.GPUs)
		}
	}
	return s
}

// dueText is when the node's next background test is due: "in 6d",
// "overdue 3h", "now (never tested)", with the next try when one was put
// off; "-" when no background test is due or applies.
func dueText(now time.Time, n ValidatedNode) string {
	var s string
	switch {
	case n.State != ValidationStateDue && n.State != ValidationStatePassed:
		return "-"
	case n.DueTime == nil && n.Due && n.Last == nil:
		s = "now (never tested)"
	case n.DueTime == nil && n.Due:
		// A result without its time: as old as can be.
		s = "now"
	case n.DueTime == nil:
		return "-"
	case n.Due:
		s = "overdue " + duration.HumanDuration(now.Sub(n.DueTime.Time))
	default:
		return "in " + duration.HumanDuration(n.DueTime.Sub(now))
	}
	if n.NextTime != nil && n.NextTime.After(now) {
		s += ", next try in " + duration.HumanDuration(n.NextTime.Sub(now))
	}
	return s
}
