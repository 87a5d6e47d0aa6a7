package plan

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

// fleet is ten GPU nodes n0..n9 (racks: n0-n3 in a, n4-n6 in b, n7-n9
// without the label) and one CPU node, cpu-0.
func fleet() []*corev1.Node {
	var out []*corev1.Node
	for i := range 10 {
		n := node("n"+strconv.Itoa(i), labeled("pool", "gpu"))
		switch {
		case i < 4:
			n.Labels["rack"] = "a"
		case i < 7:
			n.Labels["rack"] = "b"
		}
		out = append(out, n)
	}
	return append(out, node("cpu-0", labeled("pool", "cpu")))
}

func TestAdmit(t *testing.T) {
	// gpu is the policy of the operation under test: it selects the ten
	// GPU nodes, one operation at a time, with the default node cooldown.
	gpu := func(opts ...policyOpt) *Policy {
		return policy(t, "gpu", append([]policyOpt{selecting("pool", "gpu"), maxConcurrent("1")}, opts...)...)
	}
	// waiting is the operation under test: step 0 of episode e1 of policy
	// gpu on n0, in WaitingForBudget.
	waiting := func(opts ...opOpt) *v1alpha1.NodeOperation {
		return op("waiting", "n0", append([]opOpt{of("gpu", "e1", 0), phase(v1alpha1.PhaseWaitingForBudget)}, opts...)...)
	}
	manual := func(nodeName string, opts ...opOpt) *v1alpha1.NodeOperation {
		return op("manual", nodeName, append([]opOpt{phase(v1alpha1.PhaseWaitingForBudget)}, opts...)...)
	}
	runningOn := func(name, nodeName string, opts ...opOpt) *v1alpha1.NodeOperation {
		return op(name, nodeName, append([]opOpt{running(v1alpha1.PhaseRunning, ago(5*time.Minute))}, opts...)...)
	}
	done := func(name, nodeName string, startedAgo, endedAgo time.Duration, opts ...opOpt) *v1alpha1.NodeOperation {
		return op(name, nodeName, append([]opOpt{ran(v1alpha1.PhaseSucceeded, ago(startedAgo), ago(endedAgo))}, opts...)...)
	}
	nights := windows(v1alpha1.MaintenanceWindow{Days: []v1alpha1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "22:00", End: "04:00", CrossesMidnight: true, TimeZone: "Europe/Berlin"})
	opensAt := time.Date(2026, time.March, 4, 21, 0, 0, 0, time.UTC) // 22:00 in Berlin
	breakerOpen := breakerStatus(metav1.ConditionTrue, v1alpha1.ReasonBreakerTripped, "4 unhealthy nodes, limit 3: starting nothing new")

	for _, tc := range []struct {
		desc     string
		op       *v1alpha1.NodeOperation // nil: waiting()
		policies []*Policy               // nil: gpu()
		ops      []*v1alpha1.NodeOperation
		reserved []string
		target   []nodeOpt // applied to the target node
		noNode   bool      // the target node does not exist

		verdict    Verdict
		reason     string
		quarantine bool
		next       time.Time
		message    string // substring
	}{
		{desc: "every limit passes: Start", verdict: Start, message: "every safety limit passed"},

		// Never.
		{desc: "the node does not exist: Skip NodeNotFound", noNode: true, verdict: Skip, reason: v1alpha1.ReasonNodeNotFound, message: "node n0 does not exist"},
		{desc: "the policy does not exist: Skip PolicyNotFound", policies: []*Policy{policy(t, "other")},
			verdict: Skip, reason: v1alpha1.ReasonPolicyNotFound, message: "policy gpu does not exist or is invalid"},
		{desc: "no valid policy at all: Skip PolicyNotFound", policies: []*Policy{},
			verdict: Skip, reason: v1alpha1.ReasonPolicyNotFound},
		{desc: "the node opted out: Skip OptedOut", target: []nodeOpt{optedOut},
			verdict: Skip, reason: v1alpha1.ReasonOptedOut, message: "node n0 has the label kubemedic.io/remediation=disabled"},
		{desc: "a manual operation on an opted-out node: a human asked for it", op: manual("n0"), target: []nodeOpt{optedOut}, verdict: Start},

		// Attempt cap.
		{desc: "attempt cap reached: Skip and quarantine, counting any policy's and manual operations",
			policies: []*Policy{gpu(capAttempts(2, 24*time.Hour), nodeCooldown(0))},
			ops: []*v1alpha1.NodeOperation{
				done("prev-gpu", "n0", 20*time.Hour, 19*time.Hour, of("gpu", "e0", 0)),
				done("prev-manual", "n0", 2*time.Hour, time.Hour),
			},
			verdict: Skip, reason: v1alpha1.ReasonAttemptCapReached, quarantine: true,
			message: "policy gpu: 2 operations on the node in the last 24h0m0s (attemptCap 2): prev-gpu, prev-manual; quarantining"},
		{desc: "attempt cap: a start outside the window does not count",
			policies: []*Policy{gpu(capAttempts(2, 24*time.Hour), nodeCooldown(0))},
			ops: []*v1alpha1.NodeOperation{
				done("old", "n0", 25*time.Hour, 24*time.Hour+50*time.Minute),
				done("recent", "n0", 2*time.Hour, time.Hour),
			},
			verdict: Start},
		{desc: "attempt cap: a start exactly one window ago has left it",
			policies: []*Policy{gpu(capAttempts(1, time.Hour), nodeCooldown(0))},
			ops:      []*v1alpha1.NodeOperation{done("old", "n0", time.Hour, 50*time.Minute)},
			verdict:  Start},
		{desc: "attempt cap: a custom window",
			policies: []*Policy{gpu(capAttempts(1, 7*24*time.Hour), nodeCooldown(0))},
			ops:      []*v1alpha1.NodeOperation{done("last-week", "n0", 6*24*time.Hour, 6*24*time.Hour)},
			verdict:  Skip, reason: v1alpha1.ReasonAttemptCapReached, quarantine: true, message: "in the last 168h0m0s"},
		{desc: "attempt cap: dry-run, quarantine and never-started operations do not count",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour), nodeCooldown(0))},
			ops: []*v1alpha1.NodeOperation{
				done("dry", "n0", time.Hour, time.Hour, dryRunOp),
				done("quarantine", "n0", time.Hour, time.Hour, quarantineOp),
				op("never-started", "n0", phase(v1alpha1.PhaseSkipped)),
			},
			verdict: Start},
		{desc: "attempt cap: operations on other nodes do not count",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour), nodeCooldown(0))},
			ops:      []*v1alpha1.NodeOperation{done("elsewhere", "n1", time.Hour, time.Hour)},
			verdict:  Start},
		{desc: "attempt cap: the operation itself does not count",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour))},
			op:       waiting(running(v1alpha1.PhaseWaitingForBudget, ago(time.Minute))),
			verdict:  Start},
		{desc: "attempt cap comes before node busy",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour))},
			ops:      []*v1alpha1.NodeOperation{runningOn("busy", "n0")},
			verdict:  Skip, reason: v1alpha1.ReasonAttemptCapReached, quarantine: true},
		{desc: "attempt cap does not apply to a quarantine",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour), nodeCooldown(0))},
			op:       waiting(quarantineOp),
			ops:      []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, time.Hour)},
			verdict:  Start},
		{desc: "attempt cap of a policy that selects the node holds a manual operation",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour), nodeCooldown(0))},
			op:       manual("n0"),
			ops:      []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, time.Hour)},
			verdict:  Skip, reason: v1alpha1.ReasonAttemptCapReached, quarantine: true},
		{desc: "attempt cap of a policy that does not select the node does not hold a manual operation",
			policies: []*Policy{gpu(capAttempts(1, 24*time.Hour), nodeCooldown(0))},
			op:       manual("cpu-0"),
			ops:      []*v1alpha1.NodeOperation{done("prev", "cpu-0", time.Hour, time.Hour)},
			verdict:  Start},
		{desc: "attempt cap of another policy does not hold this policy's operation",
			policies: []*Policy{gpu(nodeCooldown(0)), policy(t, "strict", capAttempts(1, 24*time.Hour))},
			ops:      []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, time.Hour)},
			verdict:  Start},

		// Node busy.
		{desc: "another operation running on the node: Wait NodeBusy", ops: []*v1alpha1.NodeOperation{runningOn("busy", "n0")},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy, message: "operation busy is Running on the node"},
		{desc: "another operation cordoning the node: NodeBusy", ops: []*v1alpha1.NodeOperation{runningOn("busy", "n0", phase(v1alpha1.PhaseCordoning))},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy, message: "Cordoning"},
		{desc: "another operation verifying on the node: NodeBusy", ops: []*v1alpha1.NodeOperation{runningOn("busy", "n0", phase(v1alpha1.PhaseVerifying))},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy, message: "Verifying"},
		{desc: "another operation on the node reserved in the ledger: NodeBusy",
			ops: []*v1alpha1.NodeOperation{op("reserved", "n0", phase(v1alpha1.PhaseWaitingForBudget))}, reserved: []string{"reserved"},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy, message: "operation reserved is WaitingForBudget on the node"},
		{desc: "another operation waiting on the node, not reserved: Start",
			ops:     []*v1alpha1.NodeOperation{op("other", "n0", phase(v1alpha1.PhaseWaitingForBudget)), op("new", "n0")},
			verdict: Start},
		{desc: "a reserved operation that has finished does not hold the node",
			policies: []*Policy{gpu(nodeCooldown(0))},
			ops:      []*v1alpha1.NodeOperation{done("finished", "n0", time.Hour, time.Minute)}, reserved: []string{"finished"},
			verdict: Start},
		{desc: "the operation's own reservation does not make the node busy", reserved: []string{"waiting"}, verdict: Start},

		// Paused.
		{desc: "the policy is paused: Wait Paused", policies: []*Policy{gpu(paused)},
			verdict: Wait, reason: v1alpha1.ReasonPaused, message: "policy gpu: paused"},
		{desc: "a manual operation ignores paused policies", policies: []*Policy{gpu(paused)}, op: manual("n0"), verdict: Start},

		// Breaker.
		{desc: "the breaker is open in the policy status: Wait BreakerOpen", policies: []*Policy{gpu(breakerOpen)},
			verdict: Wait, reason: v1alpha1.ReasonBreakerOpen, message: "policy gpu: circuit breaker open: 4 unhealthy nodes, limit 3"},
		{desc: "the breaker closed in the status: Start", policies: []*Policy{gpu(breakerStatus(metav1.ConditionFalse, v1alpha1.ReasonBreakerWithinLimit, ""))}, verdict: Start},
		{desc: "a quarantine waits for an open breaker", policies: []*Policy{gpu(breakerOpen)}, op: waiting(quarantineOp),
			verdict: Wait, reason: v1alpha1.ReasonBreakerOpen},
		{desc: "a manual operation waits for the open breaker of a policy that selects the node", policies: []*Policy{gpu(breakerOpen)}, op: manual("n0"),
			verdict: Wait, reason: v1alpha1.ReasonBreakerOpen},

		// Node cooldown.
		{desc: "the node's last operation ended 10m ago: Wait NodeCooldown until 30m after it",
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, 10*time.Minute, of("gpu", "e0", 0))},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(20 * time.Minute),
			message: "policy gpu: node cooldown of 30m0s after operation prev, until 2026-03-04T12:20:00Z"},
		{desc: "the cooldown has passed exactly: Start",
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, 30*time.Minute)},
			verdict: Start},
		{desc: "a custom cooldown", policies: []*Policy{gpu(nodeCooldown(time.Hour))},
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, 45*time.Minute)},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(15 * time.Minute)},
		{desc: "a failed operation starts the cooldown too",
			ops:     []*v1alpha1.NodeOperation{op("prev", "n0", ran(v1alpha1.PhaseFailed, ago(time.Hour), ago(time.Minute)))},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(29 * time.Minute)},
		{desc: "the next step of the same policy and episode does not wait out the cooldown",
			op:      waiting(of("gpu", "e1", 1)),
			ops:     []*v1alpha1.NodeOperation{op("step0", "n0", of("gpu", "e1", 0), ran(v1alpha1.PhaseFailed, ago(10*time.Minute), ago(time.Minute)))},
			verdict: Start},
		{desc: "the same episode label from another policy does not lift the cooldown",
			ops:     []*v1alpha1.NodeOperation{op("theirs", "n0", of("other", "e1", 0), ran(v1alpha1.PhaseFailed, ago(10*time.Minute), ago(time.Minute)))},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(29 * time.Minute)},
		{desc: "the operation that ended last decides: the step before in the same episode",
			op: waiting(of("gpu", "e1", 1)),
			ops: []*v1alpha1.NodeOperation{
				done("other-episode", "n0", time.Hour, 40*time.Minute, of("gpu", "e0", 0)),
				op("step0", "n0", of("gpu", "e1", 0), ran(v1alpha1.PhaseFailed, ago(10*time.Minute), ago(time.Minute))),
			},
			verdict: Start},
		{desc: "the operation that ended last decides: another episode",
			op: waiting(of("gpu", "e1", 1)),
			ops: []*v1alpha1.NodeOperation{
				op("step0", "n0", of("gpu", "e1", 0), ran(v1alpha1.PhaseFailed, ago(time.Hour), ago(40*time.Minute))),
				done("manual", "n0", 20*time.Minute, 5*time.Minute),
			},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(25 * time.Minute), message: "after operation manual"},
		{desc: "a dry-run operation starts no cooldown",
			ops:     []*v1alpha1.NodeOperation{done("dry", "n0", time.Minute, time.Minute, dryRunOp)},
			verdict: Start},
		{desc: "an operation that never started starts no cooldown",
			ops:     []*v1alpha1.NodeOperation{op("skipped", "n0", phase(v1alpha1.PhaseSkipped), func(o *v1alpha1.NodeOperation) { o.Status.CompletionTime = &metav1.Time{Time: ago(time.Minute)} })},
			verdict: Start},
		{desc: "an operation on another node starts no cooldown here",
			ops:     []*v1alpha1.NodeOperation{done("elsewhere", "n1", time.Hour, time.Minute)},
			verdict: Start},
		{desc: "nodeCooldown 0: no cooldown", policies: []*Policy{gpu(nodeCooldown(0))},
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, time.Second)},
			verdict: Start},
		{desc: "a quarantine ignores the cooldown", op: waiting(quarantineOp),
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, time.Minute)},
			verdict: Start},
		{desc: "a manual operation waits out the cooldown of a policy that selects the node", op: manual("n0"),
			ops:     []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, 10*time.Minute)},
			verdict: Wait, reason: v1alpha1.ReasonNodeCooldown, next: now.Add(20 * time.Minute)},

		// Maintenance windows.
		{desc: "outside the maintenance windows: Wait until the next opens", policies: []*Policy{gpu(nights)},
			verdict: Wait, reason: v1alpha1.ReasonOutsideWindow, next: opensAt,
			message: "policy gpu: outside the maintenance windows; the next opens at 2026-03-04T21:00:00Z"},
		{desc: "an urgent operation ignores the windows", policies: []*Policy{gpu(nights)}, op: waiting(urgentOp), verdict: Start},
		{desc: "inside a window: Start", policies: []*Policy{gpu(windows(v1alpha1.MaintenanceWindow{Start: "11:00", End: "13:00", TimeZone: "UTC"}))}, verdict: Start},
		// A window that does not parse makes the policy invalid (Compile,
		// TestCompileRefusesBadWindows): its operations get PolicyNotFound.
		{desc: "a quarantine ignores the windows", policies: []*Policy{gpu(nights)}, op: waiting(quarantineOp), verdict: Start},

		// maxConcurrent.
		{desc: "maxConcurrent 1 with one operation running: Wait MaxConcurrent",
			ops:     []*v1alpha1.NodeOperation{runningOn("other", "n1")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "policy gpu: 1 of 1 operations running (maxConcurrent 1 of 10 nodes): other"},
		{desc: "maxConcurrent counts Cordoning, Draining, Running and Verifying", policies: []*Policy{gpu(maxConcurrent("4"))},
			ops: []*v1alpha1.NodeOperation{
				runningOn("c", "n1", phase(v1alpha1.PhaseCordoning)), runningOn("d", "n2", phase(v1alpha1.PhaseDraining)),
				runningOn("r", "n3"), runningOn("v", "n4", phase(v1alpha1.PhaseVerifying)),
			},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "4 of 4 operations running"},
		{desc: "maxConcurrent does not count waiting, pending or finished operations",
			ops: []*v1alpha1.NodeOperation{
				op("w", "n1", phase(v1alpha1.PhaseWaitingForBudget)), op("p", "n2", phase(v1alpha1.PhasePending)), op("new", "n3"),
				done("s", "n4", time.Hour, time.Hour), op("f", "n5", ran(v1alpha1.PhaseFailed, ago(time.Hour), ago(time.Hour))),
				op("k", "n6", phase(v1alpha1.PhaseSkipped)),
			},
			verdict: Start},
		{desc: "maxConcurrent counts operations reserved in the ledger",
			ops:      []*v1alpha1.NodeOperation{op("admitted", "n1", phase(v1alpha1.PhaseWaitingForBudget))},
			reserved: []string{"admitted"},
			verdict:  Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "1 of 1 operations running (maxConcurrent 1 of 10 nodes): admitted"},
		{desc: "maxConcurrent does not count finished operations still in the ledger",
			ops:      []*v1alpha1.NodeOperation{done("admitted", "n1", time.Hour, time.Hour)},
			reserved: []string{"admitted", "deleted-meanwhile"},
			verdict:  Start},
		{desc: "maxConcurrent counts only the nodes the policy selects",
			ops:     []*v1alpha1.NodeOperation{runningOn("on-cpu", "cpu-0"), runningOn("on-missing-node", "gone")},
			verdict: Start},
		{desc: "maxConcurrent counts other policies' and manual operations on the selected nodes", policies: []*Policy{gpu(maxConcurrent("2"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("theirs", "n1", of("other", "e9", 0)), runningOn("manual", "n2")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "2 of 2 operations running (maxConcurrent 2 of 10 nodes): manual, theirs"},
		{desc: "maxConcurrent 2 with one running: Start", policies: []*Policy{gpu(maxConcurrent("2"))},
			ops: []*v1alpha1.NodeOperation{runningOn("other", "n1")}, verdict: Start},
		{desc: "maxConcurrent 25% of 10 nodes is 2 (rounded down): one running, Start", policies: []*Policy{gpu(maxConcurrent("25%"))},
			ops: []*v1alpha1.NodeOperation{runningOn("a", "n1")}, verdict: Start},
		{desc: "maxConcurrent 25% of 10 nodes is 2: two running, Wait", policies: []*Policy{gpu(maxConcurrent("25%"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("a", "n1"), runningOn("b", "n2")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "2 of 2 operations running (maxConcurrent 25% of 10 nodes): a, b"},
		{desc: "maxConcurrent 5% of 10 nodes is at least 1: nothing running, Start", policies: []*Policy{gpu(maxConcurrent("5%"))}, verdict: Start},
		{desc: "maxConcurrent 5% of 10 nodes is at least 1: one running, Wait", policies: []*Policy{gpu(maxConcurrent("5%"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("a", "n1")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "1 of 1 operations running (maxConcurrent 5% of 10 nodes)"},
		{desc: "a maxConcurrent that is not a count or a percentage counts as 1", policies: []*Policy{gpu(maxConcurrent("lots"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("a", "n1")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "1 of 1 operations running (maxConcurrent lots of 10 nodes)"},
		{desc: "the message names at most three operations", policies: []*Policy{gpu(maxConcurrent("4"))},
			ops: []*v1alpha1.NodeOperation{
				runningOn("o1", "n1"), runningOn("o2", "n2"), runningOn("o3", "n3"), runningOn("o4", "n4"), runningOn("o5", "n5"),
			},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "5 of 4 operations running (maxConcurrent 4 of 10 nodes): o1, o2, o3, 2 more"},

		// Failure domains.
		{desc: "failure domain: one running in the same rack, Wait FailureDomainBudget", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "1"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("same-rack", "n1")},
			verdict: Wait, reason: v1alpha1.ReasonFailureDomain, message: "policy gpu: 1 of 1 operations running in rack=a (maxConcurrent 1 of 4 nodes): same-rack"},
		{desc: "failure domain: one running in another rack, Start", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "1"))},
			ops: []*v1alpha1.NodeOperation{runningOn("rack-b", "n4"), runningOn("no-rack", "n7")}, verdict: Start},
		{desc: "failure domain: nodes without the label form their own domain", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "1"))},
			op:      waiting(func(o *v1alpha1.NodeOperation) { o.Spec.NodeName = "n7" }),
			ops:     []*v1alpha1.NodeOperation{runningOn("no-rack", "n8")},
			verdict: Wait, reason: v1alpha1.ReasonFailureDomain, message: "1 of 1 operations running in rack=(no label) (maxConcurrent 1 of 3 nodes): no-rack"},
		{desc: "failure domain: a node without the label is not in a labelled domain", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "1"))},
			op:      waiting(func(o *v1alpha1.NodeOperation) { o.Spec.NodeName = "n7" }),
			ops:     []*v1alpha1.NodeOperation{runningOn("rack-a", "n1"), runningOn("rack-b", "n4")},
			verdict: Start},
		{desc: "failure domain 50% of a rack of 4 is 2: one running, Start", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "50%"))},
			ops: []*v1alpha1.NodeOperation{runningOn("a1", "n1")}, verdict: Start},
		{desc: "failure domain 50% of a rack of 4 is 2: two running, Wait", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "50%"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("a1", "n1"), runningOn("a2", "n2"), runningOn("b1", "n4")},
			verdict: Wait, reason: v1alpha1.ReasonFailureDomain, message: "2 of 2 operations running in rack=a (maxConcurrent 50% of 4 nodes): a1, a2"},
		{desc: "failure domain 10% of a rack of 3 is at least 1", policies: []*Policy{gpu(maxConcurrent("100%"), failureDomain("rack", "10%"))},
			op:      waiting(func(o *v1alpha1.NodeOperation) { o.Spec.NodeName = "n4" }),
			ops:     []*v1alpha1.NodeOperation{runningOn("b1", "n5")},
			verdict: Wait, reason: v1alpha1.ReasonFailureDomain, message: "1 of 1 operations running in rack=b (maxConcurrent 10% of 3 nodes)"},
		{desc: "maxConcurrent and the failure domain both full: the first names the reason", policies: []*Policy{gpu(failureDomain("rack", "1"))},
			ops:     []*v1alpha1.NodeOperation{runningOn("same-rack", "n1")},
			verdict: Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "(and 1 more limits)"},

		// Manual operations and several policies.
		{desc: "a manual operation is held to every policy that selects the node",
			policies: []*Policy{policy(t, "all", maxConcurrent("100%")), gpu()},
			op:       manual("n0"),
			ops:      []*v1alpha1.NodeOperation{runningOn("other", "n1")},
			verdict:  Wait, reason: v1alpha1.ReasonMaxConcurrent, message: "policy gpu: 1 of 1 operations running"},
		{desc: "a manual operation on a node no policy selects only waits for the node",
			op:      manual("cpu-0"),
			ops:     []*v1alpha1.NodeOperation{runningOn("o1", "n1"), runningOn("o2", "n2"), done("prev", "cpu-0", time.Hour, time.Minute)},
			verdict: Start},
		{desc: "a manual operation on a node no policy selects still waits for the node", op: manual("cpu-0"),
			ops:     []*v1alpha1.NodeOperation{runningOn("busy", "cpu-0")},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy},
		{desc: "a manual operation: the policies are checked in name order",
			policies: []*Policy{policy(t, "zz", nights), policy(t, "aa", nights)},
			op:       manual("n0"),
			verdict:  Wait, reason: v1alpha1.ReasonOutsideWindow, next: opensAt, message: "policy aa: outside the maintenance windows"},
		{desc: "a policy operation is held to its own policy only",
			policies: []*Policy{gpu(maxConcurrent("100%")), policy(t, "strict", maxConcurrent("1"), nights, paused)},
			ops:      []*v1alpha1.NodeOperation{runningOn("other", "n1")},
			verdict:  Start},
		{desc: "an operation whose policy no longer selects the node is still held to that policy",
			policies: []*Policy{gpu(nights)},
			op:       waiting(func(o *v1alpha1.NodeOperation) { o.Spec.NodeName = "cpu-0" }),
			verdict:  Wait, reason: v1alpha1.ReasonOutsideWindow, next: opensAt},

		// Quarantine.
		{desc: "a quarantine ignores maxConcurrent, the window and the cooldown",
			policies: []*Policy{gpu(nights, failureDomain("rack", "1"))},
			op:       waiting(quarantineOp),
			ops:      []*v1alpha1.NodeOperation{runningOn("o1", "n1"), done("prev", "n0", time.Hour, time.Minute)},
			verdict:  Start},
		{desc: "a quarantine waits for the node", op: waiting(quarantineOp),
			ops:     []*v1alpha1.NodeOperation{runningOn("busy", "n0")},
			verdict: Wait, reason: v1alpha1.ReasonNodeBusy},

		// Several limits.
		{desc: "several limits: the first names the reason, Next is when every timed one has passed",
			policies: []*Policy{gpu(nights)},
			ops:      []*v1alpha1.NodeOperation{done("prev", "n0", time.Hour, 10*time.Minute), runningOn("other", "n1")},
			verdict:  Wait, reason: v1alpha1.ReasonNodeCooldown, next: opensAt,
			message: "policy gpu: node cooldown of 30m0s after operation prev, until 2026-03-04T12:20:00Z (and 2 more limits)"},
		{desc: "several limits: node busy comes first",
			policies: []*Policy{gpu(paused, breakerOpen)},
			ops:      []*v1alpha1.NodeOperation{runningOn("busy", "n0")},
			verdict:  Wait, reason: v1alpha1.ReasonNodeBusy, message: "(and 3 more limits)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			nodes := fleet()
			o := tc.op
			if o == nil {
				o = waiting()
			}
			policies := tc.policies
			if policies == nil {
				policies = []*Policy{gpu()}
			}
			var target *corev1.Node
			for _, n := range nodes {
				if n.Name == o.Spec.NodeName {
					target = n
				}
			}
			require.NotNil(t, target, "the fleet has no node %s", o.Spec.NodeName)
			for _, f := range tc.target {
				f(target)
			}
			if tc.noNode {
				target = nil
			}
			reserved := map[string]bool{}
			for _, name := range tc.reserved {
				reserved[name] = true
			}
			ops := append([]*v1alpha1.NodeOperation{o}, tc.ops...)
			nodesBefore, opsBefore := deepCopyNodes(nodes), deepCopyOps(ops)

			a := Admit(AdmitInput{Op: o, Node: target, Policies: policies, Nodes: nodes, Ops: ops, Reserved: reserved, Now: now})

			require.Equal(t, tc.verdict.String(), a.Verdict.String(), a.Message)
			require.Equal(t, tc.reason, a.Reason, a.Message)
			require.Equal(t, tc.quarantine, a.Quarantine)
			require.True(t, tc.next.Equal(a.Next), "next: want %s, got %s", tc.next, a.Next)
			require.NotEmpty(t, a.Message)
			require.Contains(t, a.Message, tc.message)
			require.Equal(t, nodesBefore, nodes, "Admit changed a node")
			require.Equal(t, opsBefore, ops, "Admit changed an operation")
		})
	}
}

func TestRunning(t *testing.T) {
	for _, tc := range []struct {
		phase    v1alpha1.NodeOperationPhase
		reserved bool
		want     bool
	}{
		{phase: "", want: false},
		{phase: "", reserved: true, want: true},
		{phase: v1alpha1.PhasePending, want: false},
		{phase: v1alpha1.PhaseWaitingForBudget, want: false},
		{phase: v1alpha1.PhaseWaitingForBudget, reserved: true, want: true},
		{phase: v1alpha1.PhaseCordoning, want: true},
		{phase: v1alpha1.PhaseCapturing, want: true},
		{phase: v1alpha1.PhaseDraining, want: true},
		{phase: v1alpha1.PhaseRunning, want: true},
		{phase: v1alpha1.PhaseVerifying, want: true},
		{phase: v1alpha1.PhaseSucceeded, reserved: true, want: false},
		{phase: v1alpha1.PhaseFailed, reserved: true, want: false},
		{phase: v1alpha1.PhaseSkipped, reserved: true, want: false},
	} {
		desc := string(tc.phase)
		if tc.reserved {
			desc += " reserved"
		}
		t.Run(desc, func(t *testing.T) {
			require.Equal(t, tc.want, Running(op("o", "n0", phase(tc.phase)), map[string]bool{"o": tc.reserved}))
		})
	}
}

func TestVerdictString(t *testing.T) {
	require.Equal(t, "Wait", Wait.String())
	require.Equal(t, "Start", Start.String())
	require.Equal(t, "Skip", Skip.String())
}

func TestGPUAttemptCap(t *testing.T) {
	uuid := "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	faults := func(n int, bus string, age time.Duration) nodeOpt {
		return func(nd *corev1.Node) {
			h, _ := gpuwire.Parse(nd.Annotations[gpuwire.Annotation])
			for i := range n {
				h = gpuhistory.Add(h, gpuwire.Entry{Time: ago(age + time.Duration(i)*time.Minute), UUID: uuid, Bus: bus,
					Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidResetRequired, Xid: 48}}, now)
			}
			enc, err := h.Encode()
			require.NoError(t, err)
			if nd.Annotations == nil {
				nd.Annotations = map[string]string{}
			}
			nd.Annotations[gpuwire.Annotation] = enc
		}
	}
	corrupt := func(nd *corev1.Node) { nd.Annotations = map[string]string{gpuwire.Annotation: "{"} }
	capGPU := func(max int32) policyOpt {
		return func(p *v1alpha1.RemediationPolicy) {
			p.Spec.Safety.AttemptCap = &v1alpha1.AttemptCap{MaxAttempts: 100, Window: dur(24 * time.Hour), MaxFailuresPerGPU: &max}
		}
	}
	for _, tc := range []struct {
		desc    string
		node    *corev1.Node
		op      *v1alpha1.NodeOperation
		verdict Verdict
		message string
	}{
		{desc: "under the cap starts", node: node("n1", faults(2, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "at the cap excludes", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Skip,
			message: "policy p: GPU GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b (0000:3b:00.0) had 3 faults in the last 24h0m0s (attemptCap.maxFailuresPerGPU 3)"},
		{desc: "the card moved to another bus through a reboot still counts by UUID", node: node("n1", faults(3, "0000:86:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Skip},
		{desc: "faults older than the window do not count", node: node("n1", faults(3, "0000:3b:00.0", 25*time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "another GPU's faults do not count", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU("GPU-11111111-2222-3333-4444-555555555555", "0000:86:00.0")), verdict: Start},
		{desc: "an operation naming no GPU is not capped per GPU", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0)), verdict: Start},
		{desc: "the operation's own fault counts before the history holds it", node: node("n1", faults(2, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0"), trigger(gpuXidMessage, ago(time.Minute))), verdict: Skip,
			message: "had 3 faults"},
		{desc: "the operation's own fault, already recorded, counts once", node: node("n1", faults(3, "0000:3b:00.0", time.Hour)),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0"), trigger(gpuXidMessage, ago(time.Hour))), verdict: Skip,
			message: "had 3 faults"},
		{desc: "one incident raising three conditions within seconds counts once", node: node("n1", func(nd *corev1.Node) {
			h := gpuwire.History{}
			for i, c := range []string{v1alpha1.ConditionGPUXidError, v1alpha1.ConditionGPULost, v1alpha1.ConditionGPURecoveryRequired} {
				h = gpuhistory.Add(h, gpuwire.Entry{Time: ago(time.Hour - time.Duration(i)*5*time.Second), UUID: uuid, Fault: &gpuwire.Fault{Condition: c}}, now)
			}
			enc, err := h.Encode()
			require.NoError(t, err)
			nd.Annotations = map[string]string{gpuwire.Annotation: enc}
		}), op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "0000:3b:00.0")), verdict: Start},
		{desc: "failed GPU tests count toward the cap like the detectors' faults (issue 31)", node: node("n1", func(nd *corev1.Node) {
			h := gpuwire.History{}
			for _, age := range []time.Duration{5 * time.Hour, 2 * time.Hour} {
				h = gpuhistory.Add(h, gpuwire.Entry{Time: ago(age), UUID: uuid,
					Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUValidationFailed, Reason: v1alpha1.ReasonDCGMDiagFailed}}, now)
			}
			enc, err := h.Encode()
			require.NoError(t, err)
			nd.Annotations = map[string]string{gpuwire.Annotation: enc}
		}), op: op("op", "n1", of("p", "e", 0), onGPU(uuid, ""), func(o *v1alpha1.NodeOperation) {
			o.Spec.Trigger = &v1alpha1.TriggerCondition{Type: v1alpha1.ConditionGPUValidationFailed, Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonDCGMDiagFailed,
				Message: "dcgm failed on GPU " + uuid + " (memory): Memory test failed", LastTransitionTime: metav1.NewTime(ago(time.Minute))}
		}), verdict: Skip, message: "had 3 faults"},
		{desc: "an unreadable history is no evidence the GPU is fine", node: node("n1", corrupt),
			op: op("op", "n1", of("p", "e", 0), onGPU(uuid, "")), verdict: Skip, message: "cannot read node n1's GPU history"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			a := Admit(AdmitInput{Op: tc.op, Node: tc.node, Policies: []*Policy{policy(t, "p", capGPU(3))}, Nodes: []*corev1.Node{tc.node}, Now: now})
			require.Equal(t, tc.verdict, a.Verdict, a.Message)
			if tc.verdict == Skip {
				require.True(t, a.ExcludeGPU)
				require.False(t, a.Quarantine, "the GPU is excluded, not the node quarantined by admission itself")
				require.Equal(t, v1alpha1.ReasonGPUAttemptCapReached, a.Reason)
				require.Contains(t, a.Message, tc.message)
			}
		})
	}
}
