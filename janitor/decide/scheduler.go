package decide

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// fitErrorPrefix is the start of kube-scheduler's message on a pod that
// fits on no node (framework.FitError): "0/<nodes> nodes are available:".
var fitErrorPrefix = regexp.MustCompile(`^0/([0-9]+) nodes are available: `)

// fitReason is one entry of the message's histogram, "<count> <reason>".
var fitReason = regexp.MustCompile(`^([0-9]+) (.+)$`)

// ExplainUnschedulable puts kube-scheduler's message on an unschedulable
// pod into words for the pod's owner, who is a researcher and not a
// cluster admin. The message is a framework.FitError:
//
//	0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.
//
// a histogram of the filter plugins' reasons ("<count> <reason>, ...",
// sorted as strings, ended by "."), then what preemption found. The
// words for the message above:
//
//	None of the 2 nodes can run it now: 2 have too few free GPUs (nvidia.com/gpu), and preempting other pods would not make room
//
// A reason without words of its own is kept as the scheduler wrote it,
// after its count. ok is false for a message in another form (a PreFilter
// plugin's message, another scheduler's, none): the caller quotes the
// message alone, which it does in every case.
func ExplainUnschedulable(msg string) (words string, ok bool) {
	m := fitErrorPrefix.FindStringSubmatch(msg)
	if m == nil {
		return "", false
	}
	nodes, err := strconv.Atoi(m[1])
	if err != nil || nodes == 0 {
		return "", false
	}
	rest := msg[len(m[0]):]
	// The histogram ends at the first ". " (a reason has none: resource
	// names have dots, but no dot followed by a space) or at a final ".".
	hist, post, found := strings.Cut(rest, ". ")
	if !found {
		if !strings.HasSuffix(rest, ".") {
			return "", false
		}
		hist = strings.TrimSuffix(rest, ".")
	}
	// Entries are joined by ", "; a piece that does not start with a count
	// belongs to the entry before it.
	var entries []string
	for piece := range strings.SplitSeq(hist, ", ") {
		if fitReason.MatchString(piece) || len(entries) == 0 {
			entries = append(entries, piece)
			continue
		}
		entries[len(entries)-1] += ", " + piece
	}
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		em := fitReason.FindStringSubmatch(e)
		if em == nil {
			return "", false // a PreFilter message, not a histogram
		}
		n, err := strconv.Atoi(em[1])
		if err != nil {
			return "", false
		}
		parts = append(parts, reasonWords(n, em[2]))
	}
	words = fmt.Sprintf("None of the %s can run it now: %s", plural(nodes, "node"), strings.Join(parts, ", "))
	if strings.Contains(post, "No preemption victims found") || strings.Contains(post, "Preemption is not helpful") {
		words += ", and preempting other pods would not make room"
	}
	return words, true
}

// reasonWords says one histogram entry: n nodes and the scheduler's reason.
func reasonWords(n int, reason string) string {
	// The verbs agree with n.
	has, is, do := "has", "is", "does"
	if n != 1 {
		has, is, do = "have", "are", "do"
	}
	switch {
	case strings.HasPrefix(reason, "Insufficient "):
		res := strings.TrimPrefix(reason, "Insufficient ")
		switch {
		case res == "nvidia.com/gpu" || strings.HasPrefix(res, "nvidia.com/mig-"):
			return fmt.Sprintf("%d %s too few free GPUs (%s)", n, has, res)
		case res == "cpu":
			return fmt.Sprintf("%d %s too little free CPU", n, has)
		case res == "memory":
			return fmt.Sprintf("%d %s too little free memory", n, has)
		}
		return fmt.Sprintf("%d %s too little free %s", n, has, res)
	case reason == "Too many pods":
		return fmt.Sprintf("%d %s no room for another pod", n, has)
	case reason == "node(s) were unschedulable":
		return fmt.Sprintf("%d %s cordoned", n, is)
	case strings.HasPrefix(reason, "node(s) had untolerated taint"):
		return fmt.Sprintf("%d %s a taint the pod does not tolerate", n, has)
	case reason == "node(s) didn't match Pod's node affinity/selector":
		return fmt.Sprintf("%d %s not match the pod's node selector or affinity", n, do)
	case reason == "cannot allocate all claims":
		return fmt.Sprintf("%d cannot give the pod the devices it claims", n)
	}
	return fmt.Sprintf("%d: %s", n, reason)
}
