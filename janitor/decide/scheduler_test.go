package decide_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

// schedulerMessages are messages kube-scheduler v1.36.3 wrote on pods in
// test clusters (test/janitor, kwok nodes with the real scheduler and
// controller-manager), and the words the owner is told.
var schedulerMessages = []struct {
	desc, msg, words string
}{
	{
		desc:  "one node, its GPUs taken (TestReclaimFreesTheGPUForAWaitingPod)",
		msg:   "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		words: "None of the 1 node can run it now: 1 has too few free GPUs (nvidia.com/gpu), and preempting other pods would not make room",
	},
	{
		desc:  "two nodes with one GPU free each, two asked (TestStuckPendingQuotesTheScheduler)",
		msg:   "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		words: "None of the 2 nodes can run it now: 2 have too few free GPUs (nvidia.com/gpu), and preempting other pods would not make room",
	},
	{
		desc:  "too few GPUs, a tainted node, a cordoned node",
		msg:   "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		words: "None of the 3 nodes can run it now: 1 has too few free GPUs (nvidia.com/gpu), 1 has a taint the pod does not tolerate, 1 is cordoned, and preempting other pods would not make room",
	},
	{
		desc:  "MIG instances",
		msg:   "0/3 nodes are available: 1 Insufficient nvidia.com/mig-3g.40gb, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		words: "None of the 3 nodes can run it now: 1 has too few free GPUs (nvidia.com/mig-3g.40gb), 1 has a taint the pod does not tolerate, 1 is cordoned, and preempting other pods would not make room",
	},
	{
		desc:  "node selector",
		msg:   "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		words: "None of the 3 nodes can run it now: 1 does not match the pod's node selector or affinity, 1 has a taint the pod does not tolerate, 1 is cordoned, and preempting other pods would not make room",
	},
	{
		desc:  "DRA claims",
		msg:   "0/3 nodes are available: 1 cannot allocate all claims, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. still not schedulable, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		words: "None of the 3 nodes can run it now: 1 cannot give the pod the devices it claims, 1 has a taint the pod does not tolerate, 1 is cordoned, and preempting other pods would not make room",
	},
	{
		desc:  "without preemption, as older clusters or disabled PostFilter write it",
		msg:   "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
		words: "None of the 16 nodes can run it now: 16 have too few free GPUs (nvidia.com/gpu)",
	},
	{
		desc:  "a reason without words of its own keeps the scheduler's",
		msg:   "0/4 nodes are available: 2 Insufficient cpu, 2 node(s) had volume node affinity conflict. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
		words: "None of the 4 nodes can run it now: 2 have too little free CPU, 2: node(s) had volume node affinity conflict, and preempting other pods would not make room",
	},
}

// TestExplainUnschedulable: the scheduler's real messages are put in words
// an owner understands, one phrase per reason, counts kept; a message in
// another form is not explained (the caller quotes it alone).
func TestExplainUnschedulable(t *testing.T) {
	for _, tc := range schedulerMessages {
		t.Run(tc.desc, func(t *testing.T) {
			words, ok := decide.ExplainUnschedulable(tc.msg)
			require.True(t, ok, "the message is a FitError: %q", tc.msg)
			require.Equal(t, tc.words, words)
		})
	}
	for _, tc := range []struct{ desc, msg string }{
		// volumebinding's PreFilter message: no histogram to count.
		{"a PreFilter message", "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."},
		// The API server's own condition on a gated pod (pod strategy).
		{"scheduling gates", "Scheduling is blocked due to non-empty scheduling gates"},
		{"no nodes at all", "no nodes available to schedule pods"},
		{"zero nodes", "0/0 nodes are available."},
		{"no end", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu"},
		{"empty", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			words, ok := decide.ExplainUnschedulable(tc.msg)
			require.False(t, ok, "explained as %q", words)
		})
	}
}

// FuzzExplainUnschedulable: never panics; an explained message starts as
// a sentence about its nodes and has one phrase per histogram entry at
// least.
func FuzzExplainUnschedulable(f *testing.F) {
	for _, tc := range schedulerMessages {
		f.Add(tc.msg)
	}
	f.Add("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
	f.Add("0/1 nodes are available: 1 a, b, 2 c. ")
	f.Fuzz(func(t *testing.T, msg string) {
		words, ok := decide.ExplainUnschedulable(msg)
		if !ok {
			if words != "" {
				t.Fatalf("%q: words %q without ok", msg, words)
			}
			return
		}
		if !strings.HasPrefix(words, "None of the ") || !strings.Contains(words, " can run it now: ") {
			t.Fatalf("%q: explained as %q", msg, words)
		}
	})
}
