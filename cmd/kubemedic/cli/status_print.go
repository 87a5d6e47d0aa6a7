package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// statusMessageWidth is where the screen cuts messages; -o json|yaml keep
// them whole.
const statusMessageWidth = 60

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
