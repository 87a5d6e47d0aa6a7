package render

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// The node history section: what the remediator tried on a node, for the
// person the node is handed to. It is delimited by two hidden lines so that
// the bridge can carry the section it wrote when it filed the issue over to
// every later rewrite of the body (HistoryOf, AttachHistory).
const (
	historyStart = "<!-- kubemedic-alertbridge history -->"
	historyEnd   = "<!-- /kubemedic-alertbridge history -->"
)

// Bounds of the section, so that it always fits in an issue beside the
// alert table: at most MaxHistoryNodes nodes, each message cut to
// MaxHistoryMessage characters, and rows dropped (and counted as left out)
// beyond MaxHistoryBytes. AttachHistory cuts the rest of the body, never the
// history, to keep the whole within MaxBodyLength.
const (
	MaxHistoryNodes   = 5
	MaxHistoryMessage = 200
	MaxHistoryBytes   = 24000
)

// historyTime is how the section writes times.
const historyTime = "2006-01-02 15:04:05 UTC"

// NodeHistory is what the bridge read of one node's NodeOperations.
type NodeHistory struct {
	Node string
	// Operations are the node's NodeOperations, in any order; operations
	// of other nodes are ignored.
	Operations []v1alpha1.NodeOperation
	// Err is why they could not be read. The section then says the history
	// is unknown, never that there were no operations.
	Err error
}

// HistoryNodes returns the nodes whose history the group's issue lists: the
// distinct values of the node label of its alerts, sorted, at most
// MaxHistoryNodes, and how many more there were.
func HistoryNodes(msg *payload.Message) (nodes []string, more int) {
	if msg == nil {
		return nil, 0
	}
	seen := map[string]bool{}
	for _, a := range msg.Alerts {
		if n := strings.TrimSpace(a.Labels["node"]); n != "" && !seen[n] {
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	sort.Strings(nodes)
	if len(nodes) > MaxHistoryNodes {
		return nodes[:MaxHistoryNodes], len(nodes) - MaxHistoryNodes
	}
	return nodes, 0
}

// HistorySection renders the operation history of each node as read at
// readAt: per node the newest maxOps of its operations (maxOps < 1 means
// one), listed oldest first, and how many older ones were left out; moreNodes
// counts nodes the group has beyond those listed. The result starts and ends
// with the hidden delimiters and is at most about MaxHistoryBytes long; ""
// when hs is empty.
func HistorySection(hs []NodeHistory, moreNodes, maxOps int, readAt time.Time) string {
	if len(hs) == 0 {
		return ""
	}
	maxOps = max(maxOps, 1)
	var sb strings.Builder
	sb.WriteString(historyStart + "\n")
	budget := MaxHistoryBytes / len(hs)
	for _, h := range hs {
		sb.WriteString(nodeHistory(h, maxOps, readAt, budget))
	}
	if moreNodes > 0 {
		fmt.Fprintf(&sb, "\nThe alerts name %d more nodes; their history is not listed here.\n", moreNodes)
	}
	sb.WriteString(historyEnd + "\n")
	return sb.String()
}

func nodeHistory(h NodeHistory, maxOps int, readAt time.Time, budget int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n### Operation history on node `%s`\n\n", codeSpan(h.Node))
	at := readAt.UTC().Format(historyTime)
	switch ops := ofNode(h); {
	case h.Err != nil:
		fmt.Fprintf(&sb, "**Unknown:** the NodeOperations could not be read at %s: %s\n\n"+
			"This does not mean that kubemedic did nothing on the node; look with the commands below.\n",
			at, mdCellText(truncateRunes(2*MaxHistoryMessage, h.Err.Error())))
	case len(ops) == 0:
		fmt.Fprintf(&sb, "No NodeOperations on this node at %s: kubemedic kept none (finished operations are deleted after the remediator's retention period).\n", at)
	default:
		// The newest maxOps rows that fit in the budget, then oldest first.
		var rows []string
		size := 0
		for i := len(ops) - 1; i >= 0 && len(rows) < maxOps; i-- {
			r := historyRow(&ops[i])
			if size+len(r) > budget {
				break
			}
			rows = append(rows, r)
			size += len(r)
		}
		slices.Reverse(rows)
		left := len(ops) - len(rows)
		fmt.Fprintf(&sb, "What kubemedic did on this node, oldest first, as read at %s: ", at)
		if left > 0 {
			fmt.Fprintf(&sb, "the newest %d of %d NodeOperations (%d older left out).\n\n", len(rows), len(ops), left)
		} else {
			fmt.Fprintf(&sb, "%d NodeOperations.\n\n", len(rows))
		}
		sb.WriteString("| Operation | Policy | Step | Does | GPU, exclusion, machine request | Phase | Created | Started | Finished | Message |\n")
		sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		sb.WriteString(strings.Join(rows, ""))
	}
	node := h.Node
	if !nodeNameRE.MatchString(node) {
		node = "NODE" // not a node name: never paste it into a shell line
	}
	fmt.Fprintf(&sb, "\nTo look further:\n\n```sh\n"+
		"kubectl get nodeoperations --sort-by=.metadata.creationTimestamp | awk 'NR==1 || $2==\"%s\"'\n"+
		"kubectl describe nodeoperation OPERATION\n"+
		"kubectl describe node %s\n```\n", node, node)
	return sb.String()
}

// ofNode returns h's operations on h.Node, oldest first (creation time,
// then name).
func ofNode(h NodeHistory) []v1alpha1.NodeOperation {
	var ops []v1alpha1.NodeOperation
	for _, op := range h.Operations {
		if op.Spec.NodeName == h.Node {
			ops = append(ops, op)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool {
		ti, tj := ops[i].CreationTimestamp.Time, ops[j].CreationTimestamp.Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return ops[i].Name < ops[j].Name
	})
	return ops
}

func historyRow(op *v1alpha1.NodeOperation) string {
	policy := op.Spec.Policy
	if policy == "" {
		policy = "manual"
	}
	does := op.Spec.Operation
	if op.Spec.Quarantine {
		does = "quarantine"
	}
	if op.Spec.DryRun {
		does += " (dry run)"
	}
	phase := string(op.Status.Phase)
	if phase == "" {
		phase = string(v1alpha1.PhasePending)
	}
	return fmt.Sprintf("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		codeSpan(op.Name), orDash(mdCellText(policy)), orDash(mdCellText(op.Spec.Step)), orDash(mdCellText(does)),
		orDash(ladderCell(&op.Status)), phase,
		orDash(historyTimestamp(op.CreationTimestamp.Time)), orDash(historyTimestamp(metaTime(op.Status.StartTime))),
		orDash(historyTimestamp(metaTime(op.Status.CompletionTime))),
		orDash(mdCellText(truncateRunes(MaxHistoryMessage, op.Status.Message))))
}

// Bounds, in characters, of the status fields that ladderCell writes: the
// API's own limits for the names, enough for any "Kind namespace/name" or
// BMC URL for the target, and MaxHistoryMessage for text.
const (
	maxHistoryUUID   = 128
	maxHistoryBusID  = 64
	maxHistoryName   = 253
	maxHistoryTarget = 400
)

// ladderCell is where on the node the operation acted and what it asked of
// whom, one line each (joined by <br>, which GitHub renders inside a table
// cell): the GPU the trigger named, how new pods were kept away (a cordon,
// or a DeviceTaintRule on the GPU alone), and the request to a machine
// provider. "" when the status records none of them. Names and targets go
// into code spans, text through mdCellText; a URL's user information is
// dropped.
func ladderCell(st *v1alpha1.NodeOperationStatus) string {
	var lines []string
	if g := st.GPU; g != nil && (g.UUID != "" || g.BusID != "") {
		line := "GPU"
		if g.UUID != "" {
			line += " `" + codeSpan(truncateRunes(maxHistoryUUID, g.UUID)) + "`"
		}
		if g.BusID != "" {
			line += " at bus `" + codeSpan(truncateRunes(maxHistoryBusID, g.BusID)) + "`"
		}
		lines = append(lines, line)
	}
	if x := st.Exclusion; x != nil && x.Method != "" {
		line := "Exclusion: " + mdCellText(string(x.Method))
		if x.DeviceTaintRule != "" {
			line += " `" + codeSpan(truncateRunes(maxHistoryName, x.DeviceTaintRule)) + "`"
		}
		if x.Device != "" {
			line += " on device `" + codeSpan(truncateRunes(MaxHistoryMessage, x.Device)) + "`"
		}
		if m := mdCellText(truncateRunes(MaxHistoryMessage, withoutUserinfo(x.Message))); m != "" {
			line += " — " + m
		}
		lines = append(lines, line)
	}
	if r := st.MachineRequest; r != nil && (r.Kind != "" || r.Target != "" || r.Action != "") {
		line := "Machine request: " + orDash(mdCellText(string(r.Kind)))
		if r.Target != "" {
			line += " to `" + codeSpan(truncateRunes(maxHistoryTarget, withoutUserinfo(r.Target))) + "`"
		}
		if a := mdCellText(truncateRunes(MaxHistoryMessage, withoutUserinfo(r.Action))); a != "" {
			line += ": " + a
		}
		if t := historyTimestamp(r.Time.Time); t != "" {
			line += ", at " + t
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "<br>")
}

// userinfoRE matches the user information of a URL ("https://user:pass@").
var userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@`)

// withoutUserinfo drops the user information of every URL in s: the
// remediator never records BMC credentials, and the issue must never show
// them if something did.
func withoutUserinfo(s string) string {
	return userinfoRE.ReplaceAllString(s, "$1")
}

func metaTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// nodeNameRE is a DNS subdomain, what a Node's name is.
var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

func historyTimestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(historyTime)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

var mdCellTextReplacer = strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;")

// mdCellText keeps text inside one markdown table cell on one line, and
// keeps it from opening HTML (or a fake delimiter of this section).
func mdCellText(s string) string {
	return mdCellTextReplacer.Replace(strings.TrimSpace(s))
}

// codeSpan makes s safe inside single backticks: object and node names
// cannot hold a backtick, but a label value or a status field can. Angle
// brackets become ‹ and › (GitHub shows a code span's text as it is, so
// &lt; would show as such): no text in it can then pose as a hidden
// delimiter of this section or as the bridge's marker.
func codeSpan(s string) string {
	return codeSpanReplacer.Replace(s)
}

var codeSpanReplacer = strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ", "<", "‹", ">", "›")

func truncateRunes(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// HistoryOf returns the history section of a body the bridge wrote, with
// its delimiters, or "" when it has none.
func HistoryOf(body string) string {
	start := strings.LastIndex(body, historyStart)
	if start < 0 {
		return ""
	}
	end := strings.Index(body[start:], historyEnd)
	if end < 0 {
		return ""
	}
	return body[start:start+end+len(historyEnd)] + "\n"
}

// AttachHistory appends the history section to a rendered body. The two
// together stay within MaxBodyLength: when they would not, the body (not
// the history) is cut, with the visible note. A section longer than
// MaxHistoryBytes (not one HistorySection wrote) is left off. Without a
// section the body is still cut to MaxBodyLength (a link to the previous
// issue may have lengthened it).
func AttachHistory(body, section string) string {
	if section == "" || len(section) > MaxHistoryBytes+4096 {
		return fitBody(body)
	}
	body = strings.TrimRight(body, "\n") + "\n"
	if len(body)+len(section) <= MaxBodyLength {
		return body + section
	}
	return fitBodyTo(body, MaxBodyLength-len(section)) + section
}
