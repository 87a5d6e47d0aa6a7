package controller

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// agreePolicies are the policies of the agreement test, in the cluster and
// in the file simulate reads. xid has every limit that admission checks on
// one node or across nodes; its breaker, stored open, is reset by the
// annotation, so its operations start only if the reconciler writes the
// breaker before it creates them. nfs trips its breaker.
const agreePolicies = `apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: xid
  annotations:
    kubemedic.io/reset-breaker: ticket-1
spec:
  nodeSelector:
    matchLabels:
      pool: gpu
  conditions:
  - type: GPUXidError
    reason: XidRebootRequired
    for: 5m
  steps:
  - name: reset
    operation: reset-gpu
  safety:
    maxUnhealthy: 2
    maxConcurrent: 2
    nodeCooldown: 1h
    attemptCap:
      maxAttempts: 2
      window: 24h
---
apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: nfs
spec:
  nodeSelector:
    matchLabels:
      pool: cpu
  conditions:
  - type: NFSMountUnhealthy
    for: 5m
  steps:
  - name: remount
    operation: reset-gpu
  safety:
    maxUnhealthy: 1
`

// agreeNamespace holds the admission ledger and the operation pods.
const agreeNamespace = "kubemedic-system"

// simPolicy is a policy block of simulate's output.
type simPolicy struct {
	nodes   string // the counts, as on the "nodes:" line
	breaker string // "OPEN TooManyUnhealthy", "closed ManualReset"
	// rows: node -> "create OPERATION: start" / "... wait REASON" /
	// "... skip REASON", or "hold REASON".
	rows map[string]string
}

var (
	simCreate  = regexp.MustCompile(`^create (\S+) \([^)]*\), (start now|wait: (\S+)|skip: (\S+))$`)
	simBreaker = regexp.MustCompile(`^  breaker:  (OPEN|closed), .*\): (\w+): `)
	simColumns = regexp.MustCompile(`\s{2,}`)
)

// parseSimulation reads the policy blocks of simulate's output.
func parseSimulation(t *testing.T, out string) map[string]*simPolicy {
	t.Helper()
	pols := map[string]*simPolicy{}
	var cur *simPolicy
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Policy "):
			cur = &simPolicy{rows: map[string]string{}}
			pols[strings.Fields(line)[1]] = cur
		case cur == nil:
		case strings.HasPrefix(line, "  nodes:    "):
			cur.nodes = strings.TrimPrefix(line, "  nodes:    ")
		case strings.HasPrefix(line, "  breaker:  "):
			m := simBreaker.FindStringSubmatch(line)
			require.NotNil(t, m, line)
			cur.breaker = m[1] + " " + m[2]
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "  NODE"):
			cols := simColumns.Split(strings.TrimSpace(line), -1)
			if len(cols) < 5 || !strings.Contains(cols[0], "-") {
				continue
			}
			cur.rows[cols[0]] = simDecision(cols[4])
		}
	}
	return pols
}

// simDecision is a DECISION column as the test compares it.
func simDecision(d string) string {
	m := simCreate.FindStringSubmatch(d)
	switch {
	case m == nil:
		return "hold " + d
	case m[2] == "start now":
		return "create " + m[1] + ": start"
	case m[3] != "":
		return "create " + m[1] + ": wait " + m[3]
	default:
		return "create " + m[1] + ": skip " + m[4]
	}
}

// opDecision is what the operation reconciler made of an operation, as
// simDecision writes it.
func opDecision(op *v1alpha1.NodeOperation) string {
	admitted := apimeta.FindStatusCondition(op.Status.Conditions, v1alpha1.OperationAdmitted)
	switch {
	case op.Status.Phase == v1alpha1.PhaseSkipped:
		reason, _, _ := strings.Cut(op.Status.Message, ":")
		return "create " + op.Name + ": skip " + reason
	case admitted == nil:
		return "create " + op.Name + ": not admitted (phase " + string(op.Status.Phase) + ")"
	case admitted.Status == metav1.ConditionTrue:
		return "create " + op.Name + ": start"
	default:
		return "create " + op.Name + ": wait " + admitted.Reason
	}
}

// TestSimulateAgreesWithTheControllers runs `kubemedic policy simulate` on a
// cluster state, then the real reconcilers on the same state: the policy
// reconciler for each policy, and the operation reconciler's admission for
// each operation it created, in the order simulate assumes (node name). The
// operations created, and which start, wait (and for what) or are skipped,
// must be those simulate printed, as must the status the policy reconciler
// writes.
func TestSimulateAgreesWithTheControllers(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	c := env.Client
	now := time.Now().UTC().Truncate(time.Second)
	held, fresh := now.Add(-time.Hour), now.Add(-time.Minute)

	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agreeNamespace}}))
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessPodSucceeded, Image: "registry.example/reset:1", Command: []string{"/bin/true"}}}))

	file := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(file, []byte(agreePolicies), 0o644))
	docs, problems := policies.LoadFiles(file)
	require.Empty(t, problems)
	for _, d := range docs {
		pol := d.Object.(*v1alpha1.RemediationPolicy)
		require.NoError(t, c.Create(ctx, pol))
		if pol.Name == "xid" {
			// Tripped before; the annotation resets it.
			pol.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PolicyBreakerOpen, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonBreakerTripped, Message: "7 unhealthy nodes, limit 2: starting nothing new", LastTransitionTime: metav1.NewTime(held)}}
			require.NoError(t, c.Status().Update(ctx, pol))
		}
	}

	xid := corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason,
		Message: "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus", LastTransitionTime: metav1.NewTime(held)}
	freshXid := xid
	freshXid.LastTransitionTime = metav1.NewTime(fresh)
	nfs := corev1.NodeCondition{Type: v1alpha1.ConditionNFSMountUnhealthy, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason,
		Message: "MountHung: /data: stat did not return within 5s", LastTransitionTime: metav1.NewTime(held)}
	gpu := map[string]string{"pool": "gpu"}
	for _, n := range []struct {
		name   string
		labels map[string]string
		cond   *corev1.NodeCondition
	}{
		{"gpu-0", gpu, &xid},      // starts
		{"gpu-1", gpu, &xid},      // waits: its last operation ended 10 minutes ago
		{"gpu-2", gpu, &xid},      // skipped: two operations today
		{"gpu-3", gpu, &xid},      // busy with a running operation, which takes a slot
		{"gpu-4", gpu, &xid},      // waits: maxConcurrent
		{"gpu-5", gpu, &xid},      // waits: maxConcurrent
		{"gpu-6", gpu, &freshXid}, // not held yet
		{"gpu-7", gpu, nil},       // healthy
		{"gpu-8", map[string]string{"pool": "gpu", v1alpha1.LabelRemediation: v1alpha1.RemediationDisabled}, &xid},
		{"cpu-0", map[string]string{"pool": "cpu"}, &nfs},
		{"cpu-1", map[string]string{"pool": "cpu"}, &nfs},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: n.labels}}
		require.NoError(t, c.Create(ctx, node))
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastTransitionTime: metav1.NewTime(now.Add(-48 * time.Hour)), LastHeartbeatTime: metav1.NewTime(now)}}
		if n.cond != nil {
			node.Status.Conditions = append(node.Status.Conditions, *n.cond)
		}
		require.NoError(t, c.Status().Update(ctx, node))
	}
	for _, o := range []struct {
		name, node  string
		phase       v1alpha1.NodeOperationPhase
		start, done time.Duration // ago; done 0: not finished
	}{
		{"gpu-1-earlier", "gpu-1", v1alpha1.PhaseSucceeded, 20 * time.Minute, 10 * time.Minute},
		{"gpu-2-first", "gpu-2", v1alpha1.PhaseSucceeded, 5 * time.Hour, 4 * time.Hour},
		{"gpu-2-second", "gpu-2", v1alpha1.PhaseFailed, 3 * time.Hour, 2 * time.Hour},
		{"gpu-3-by-hand", "gpu-3", v1alpha1.PhaseRunning, 5 * time.Minute, 0},
	} {
		op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: o.name},
			Spec: v1alpha1.NodeOperationSpec{NodeName: o.node, Reason: "by hand"}}
		op.Spec.Operation = "reset-gpu"
		require.NoError(t, c.Create(ctx, op))
		op.Status.Phase = o.phase
		op.Status.StartTime = &metav1.Time{Time: now.Add(-o.start)}
		if o.done != 0 {
			op.Status.CompletionTime = &metav1.Time{Time: now.Add(-o.done)}
		}
		require.NoError(t, c.Status().Update(ctx, op))
	}
	existing := map[string]bool{}
	for _, op := range listAllOps(t, c) {
		existing[op.Name] = true
	}

	// Simulate.
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"policy", "simulate", "-f", file, "--kubeconfig", env.Kubeconfig, "--now", now.Format(time.RFC3339)}, &out, &errOut)
	t.Logf("simulate:\n%s%s", out.String(), errOut.String())
	require.Equal(t, cli.ExitOK, code)
	sim := parseSimulation(t, out.String())
	require.Len(t, sim, 2)
	// What simulate must have seen, lest the test compare nothing: every
	// kind of decision.
	require.Equal(t, map[string]string{"gpu-0": "start", "gpu-1": "wait NodeCooldown", "gpu-2": "skip AttemptCapReached",
		"gpu-3": "hold InProgress", "gpu-4": "wait MaxConcurrent", "gpu-5": "wait MaxConcurrent", "gpu-6": "hold NotHeldYet",
		"gpu-8": "hold OptedOut"}, withoutNames(sim["xid"].rows))
	require.Equal(t, "closed ManualReset", sim["xid"].breaker)
	require.Equal(t, "OPEN TooManyUnhealthy", sim["nfs"].breaker)

	// The controllers, on the same state, at the same time.
	clk := clocktesting.NewFakePassiveClock(now)
	metrics := NewMetrics(c)
	recorder := events.NewFakeRecorder(100)
	pr := &PolicyReconciler{Client: c, Recorder: recorder, Clock: clk, Metrics: metrics}
	for _, name := range []string{"xid", "nfs"} {
		_, err := pr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err, name)
	}
	var created []v1alpha1.NodeOperation
	for _, op := range listAllOps(t, c) {
		if !existing[op.Name] {
			created = append(created, op)
		}
	}
	sort.Slice(created, func(i, j int) bool { return created[i].Spec.NodeName < created[j].Spec.NodeName })
	or := &OperationReconciler{Client: c, Reader: c, Recorder: recorder, Clock: clk, Metrics: metrics, Namespace: agreeNamespace,
		ledger: &ledger{client: c, reader: c, namespace: agreeNamespace}}
	for _, op := range created {
		_, err := or.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: op.Name}})
		require.NoError(t, err, op.Name)
	}

	for _, name := range []string{"xid", "nfs"} {
		pol := &v1alpha1.RemediationPolicy{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, pol))
		got := map[string]string{}
		for _, op := range created {
			if op.Spec.Policy == name {
				latest := &v1alpha1.NodeOperation{}
				require.NoError(t, c.Get(ctx, client.ObjectKey{Name: op.Name}, latest))
				got[op.Spec.NodeName] = opDecision(latest)
			}
		}
		require.Equal(t, creates(sim[name].rows), got, "policy %s: simulate's operations and admissions, then the controllers'", name)

		st := pol.Status
		require.Equal(t, fmt.Sprintf("%d selected, %d unhealthy, %d active operations, %d quarantined",
			st.MatchedNodes, st.UnhealthyNodes, st.ActiveOperations, st.QuarantinedNodes), sim[name].nodes, "policy %s: counts", name)
		b := apimeta.FindStatusCondition(st.Conditions, v1alpha1.PolicyBreakerOpen)
		require.NotNil(t, b)
		state := map[metav1.ConditionStatus]string{metav1.ConditionTrue: "OPEN", metav1.ConditionFalse: "closed"}[b.Status]
		require.Equal(t, sim[name].breaker, state+" "+b.Reason, "policy %s: breaker", name)
	}
}

// creates are the rows of operations created.
func creates(rows map[string]string) map[string]string {
	out := map[string]string{}
	for node, d := range rows {
		if strings.HasPrefix(d, "create ") {
			out[node] = d
		}
	}
	return out
}

// withoutNames is rows with the verdicts only: "start", "wait REASON", ...
func withoutNames(rows map[string]string) map[string]string {
	out := map[string]string{}
	for node, d := range rows {
		if _, verdict, ok := strings.Cut(d, ": "); ok && strings.HasPrefix(d, "create ") {
			d = verdict
		}
		out[node] = d
	}
	return out
}

func listAllOps(t *testing.T, c client.Reader) []v1alpha1.NodeOperation {
	t.Helper()
	var list v1alpha1.NodeOperationList
	require.NoError(t, c.List(context.Background(), &list))
	return list.Items
}
