package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/test/harness"
)

// simNow is the decision time of the unit tests.
var simNow = time.Date(2026, time.November, 21, 12, 0, 0, 0, time.UTC)

// xidMessage is how NPD writes a kubemedic-detect finding: the specific
// reason is the first word of the message.
const xidMessage = "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus"

// simPolicy is the policy of the simulate tests: fatal Xids, a reboot,
// maxConcurrent 2, no breaker to speak of.
const simPolicy = `apiVersion: kubemedic.io/v1alpha1
kind: NodeOperationTemplate
metadata:
  name: reboot
spec:
  successCriterion: NodeRebooted
  image: debian:bookworm-slim
---
apiVersion: kubemedic.io/v1alpha1
kind: RemediationPolicy
metadata:
  name: xid-reboot
spec:
  conditions:
  - type: GPUXidError
    reason: XidRebootRequired
    for: 5m
  steps:
  - name: reboot
    operation: reboot
    drain: {}
  safety:
    maxUnhealthy: "100%"
    maxConcurrent: 2
`

func xidNode(name string, since time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(simNow.Add(-48 * time.Hour))},
			{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason, Message: xidMessage, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

func healthyNode(name string) *corev1.Node {
	n := xidNode(name, simNow)
	n.Status.Conditions = n.Status.Conditions[:1]
	return n
}

func runningOp(name, node string) *v1alpha1.NodeOperation {
	return &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: node, StepAction: v1alpha1.StepAction{Operation: "reboot"}, Reason: "by hand"},
		Status:     v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseRunning},
	}
}

// loadSimPolicy loads simPolicy after edit, as the command does.
func loadSimPolicy(t *testing.T, edit func(string) string) []filePolicy {
	t.Helper()
	f := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(f, []byte(edit(simPolicy)), 0o644))
	pols, notes, problems := loadSimulatePolicies([]string{f})
	require.Empty(t, problems)
	require.Equal(t, []string{f + ":1: note: NodeOperationTemplate reboot ignored: simulate reads only RemediationPolicies from files, and everything else from the cluster"}, notes)
	require.Len(t, pols, 1)
	return pols
}

func same(s string) string { return s }

// opName is the name the policy gives the first operation of the episode
// of a node whose condition changed at since.
func opName(node string, since time.Time) string {
	m := plan.Match{Condition: corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, LastTransitionTime: metav1.NewTime(since)}}
	return plan.OperationName("xid-reboot", node, m.Episode(), 0)
}

func TestSimulate(t *testing.T) {
	held := simNow.Add(-time.Hour)
	fresh := simNow.Add(-time.Minute)
	five := func() []*corev1.Node {
		return []*corev1.Node{xidNode("n1", held), xidNode("n2", held), xidNode("n3", held), xidNode("n4", fresh), healthyNode("n5")}
	}
	clusterPolicy := func(edit func(*v1alpha1.RemediationPolicy)) *v1alpha1.RemediationPolicy {
		p := loadSimPolicy(t, same)[0].Obj.DeepCopy()
		edit(p)
		return p
	}
	startNow := func(node string) string { return "create " + opName(node, held) + " (reboot), start now" }
	// A dry run's record has a name of its own, so that it never takes the
	// name of the real operation.
	dryStartNow := func(node string) string {
		m := plan.Match{Condition: corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, LastTransitionTime: metav1.NewTime(held)}}
		return "create " + plan.OperationName("xid-reboot", node, m.Episode()+"/dry-run", 0) + " (reboot), start now"
	}
	waitMax := func(node string) string { return "create " + opName(node, held) + " (reboot), wait: MaxConcurrent" }

	for _, tc := range []struct {
		desc     string
		edit     func(string) string
		state    clusterState
		decision map[string]string // node -> DECISION
		detail   map[string]string // node -> part of DETAIL
		breaker  string
	}{
		{
			desc:     "the third of three under maxConcurrent 2 waits",
			state:    clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": startNow("n1"), "n2": startNow("n2"), "n3": waitMax("n3"), "n4": plan.HoldNotHeldYet},
			detail: map[string]string{
				"n3": "policy xid-reboot: 2 of 2 operations running (maxConcurrent 2 of 5 nodes): " + opName("n1", held) + ", " + opName("n2", held),
				"n4": "becomes a target at 2026-11-21T12:04:00Z",
			},
			breaker: "closed",
		},
		{
			desc:     "a running manual operation takes a slot and holds its node",
			state:    clusterState{Nodes: five(), Ops: []*v1alpha1.NodeOperation{runningOp("by-hand", "n2")}, Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": startNow("n1"), "n2": plan.HoldInProgress, "n3": waitMax("n3"), "n4": plan.HoldNotHeldYet},
			detail:   map[string]string{"n2": "operation by-hand is Running", "n3": "2 of 2 operations running"},
			breaker:  "closed",
		},
		{
			desc: "the file's policy replaces the paused one in the cluster",
			state: clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true},
				Policies: []*v1alpha1.RemediationPolicy{clusterPolicy(func(p *v1alpha1.RemediationPolicy) { p.Spec.Paused = true })}},
			decision: map[string]string{"n1": startNow("n1"), "n2": startNow("n2"), "n3": waitMax("n3"), "n4": plan.HoldNotHeldYet},
			breaker:  "closed",
		},
		{
			desc:     "paused in the file",
			edit:     func(s string) string { return strings.Replace(s, "  safety:", "  paused: true\n  safety:", 1) },
			state:    clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": plan.HoldPaused, "n2": plan.HoldPaused, "n3": plan.HoldPaused, "n4": plan.HoldNotHeldYet},
			breaker:  "closed",
		},
		{
			desc:     "a higher-priority policy in the cluster wins the nodes",
			state:    clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true}, Policies: []*v1alpha1.RemediationPolicy{clusterPolicy(func(p *v1alpha1.RemediationPolicy) { p.Name, p.Spec.Priority = "gpu-lost", 800 })}},
			decision: map[string]string{"n1": plan.HoldOtherPolicy, "n2": plan.HoldOtherPolicy, "n3": plan.HoldOtherPolicy, "n4": plan.HoldNotHeldYet},
			detail:   map[string]string{"n1": "policy gpu-lost (priority 800) takes precedence"},
			breaker:  "closed",
		},
		{
			desc:     "the breaker opens",
			edit:     func(s string) string { return strings.Replace(s, `maxUnhealthy: "100%"`, "maxUnhealthy: 2", 1) },
			state:    clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": plan.HoldBreakerOpen, "n2": plan.HoldBreakerOpen, "n3": plan.HoldBreakerOpen, "n4": plan.HoldNotHeldYet},
			detail:   map[string]string{"n1": "circuit breaker open: 4 unhealthy nodes, limit 2: starting nothing new"},
			breaker:  "OPEN",
		},
		{
			desc: "a breaker reset by annotation lets the operations start although the stored status says open",
			edit: func(s string) string {
				s = strings.Replace(s, `maxUnhealthy: "100%"`, "maxUnhealthy: 2", 1)
				return strings.Replace(s, "  name: xid-reboot\n", "  name: xid-reboot\n  annotations:\n    kubemedic.io/reset-breaker: ticket-42\n", 1)
			},
			state: clusterState{Nodes: five(), Templates: map[string]bool{"reboot": true}, Policies: []*v1alpha1.RemediationPolicy{clusterPolicy(func(p *v1alpha1.RemediationPolicy) {
				p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.PolicyBreakerOpen, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBreakerTripped, Message: "4 unhealthy nodes, limit 2: starting nothing new"}}
			})}},
			decision: map[string]string{"n1": startNow("n1"), "n2": startNow("n2"), "n3": waitMax("n3"), "n4": plan.HoldNotHeldYet},
			breaker:  "closed",
		},
		{
			desc:     "the template is missing in the cluster",
			state:    clusterState{Nodes: five(), Templates: map[string]bool{}},
			decision: map[string]string{"n1": plan.HoldNotReady, "n2": plan.HoldNotReady, "n3": plan.HoldNotReady, "n4": plan.HoldNotHeldYet},
			breaker:  "closed",
		},
		{
			desc: "opted out and quarantined nodes",
			state: clusterState{Nodes: func() []*corev1.Node {
				ns := five()
				ns[0].Labels[v1alpha1.LabelRemediation] = v1alpha1.RemediationDisabled
				ns[1].Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule}}
				return ns
			}(), Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": plan.HoldOptedOut, "n2": plan.HoldQuarantined, "n3": startNow("n3"), "n4": plan.HoldNotHeldYet},
			breaker:  "closed",
		},
		{
			desc:     "dry run: every operation ends Skipped, so none takes a slot",
			edit:     func(s string) string { return strings.Replace(s, "  safety:", "  dryRun: true\n  safety:", 1) },
			state:    clusterState{Nodes: append(five(), xidNode("n6", held)), Templates: map[string]bool{"reboot": true}},
			decision: map[string]string{"n1": dryStartNow("n1"), "n2": dryStartNow("n2"), "n3": dryStartNow("n3"), "n4": plan.HoldNotHeldYet, "n6": dryStartNow("n6")},
			detail:   map[string]string{"n3": "dry run, recorded as Skipped: every safety limit passed"},
			breaker:  "closed",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			edit := tc.edit
			if edit == nil {
				edit = same
			}
			pols := loadSimPolicy(t, edit)
			before := len(tc.state.Ops)
			results, err := simulate(pols, tc.state, simNow)
			require.NoError(t, err)
			require.Len(t, results, 1)
			require.Len(t, tc.state.Ops, before, "simulate must not change its input")
			got := map[string]string{}
			for _, row := range results[0].Rows {
				got[row.Node] = row.Decision
				if d, ok := tc.detail[row.Node]; ok {
					require.Contains(t, row.Detail, d, row.Node)
				}
			}
			require.Equal(t, tc.decision, got)
			var out bytes.Buffer
			printSimulation(&out, results, simNow)
			require.Contains(t, out.String(), "  breaker:  "+tc.breaker+",")
		})
	}
}

func TestPrintSimulation(t *testing.T) {
	held := simNow.Add(-time.Hour)
	pols := loadSimPolicy(t, same)
	st := clusterState{
		Nodes:     []*corev1.Node{xidNode("gpu-node-000", held), xidNode("gpu-node-001", held), xidNode("gpu-node-002", held), xidNode("gpu-node-003", simNow.Add(-time.Minute))},
		Ops:       []*v1alpha1.NodeOperation{runningOp("by-hand", "gpu-node-001")},
		Templates: map[string]bool{"reboot": true},
	}
	results, err := simulate(pols, st, simNow)
	require.NoError(t, err)
	var out bytes.Buffer
	printSimulation(&out, results, simNow)
	op0, op2 := opName("gpu-node-000", held), opName("gpu-node-002", held)
	want := `
Policy xid-reboot (` + pols[0].Source + `, new to the cluster)
  nodes:    4 selected, 4 unhealthy, 0 active operations, 0 quarantined
  breaker:  closed, limit 4 unhealthy (maxUnhealthy 100%): WithinLimit: 4 unhealthy nodes, limit 4
  creates:  2 operations (1 start now, 1 wait, 0 skipped); maxConcurrent 2
  next:     2026-11-21T12:04:00Z (in 4m), when the plan changes with nothing else changing

  NODE          CONDITION         REASON             SINCE                       DECISION                                                                 DETAIL
  gpu-node-000  GPUXidError=True  XidRebootRequired  2026-11-21T11:00:00Z (60m)  create ` + op0 + ` (reboot), start now            every safety limit passed
  gpu-node-001  GPUXidError=True  XidRebootRequired  2026-11-21T11:00:00Z (60m)  InProgress                                                               operation by-hand is Running
  gpu-node-002  GPUXidError=True  XidRebootRequired  2026-11-21T11:00:00Z (60m)  create ` + op2 + ` (reboot), wait: MaxConcurrent  policy xid-reboot: 2 of 2 operations running (maxConcurrent 2 of 4 nodes): by-hand, ` + op0 + `
  gpu-node-003  GPUXidError=True  XidRebootRequired  2026-11-21T11:59:00Z (60s)  NotHeldYet                                                               GPUXidError=True (XidRebootRequired) becomes a target at 2026-11-21T12:04:00Z
`
	require.Equal(t, want, out.String())
}

// simRun runs the CLI in-process.
func simRun(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func TestSimulateInputErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	good := write("good.yaml", simPolicy)
	bad := write("bad.yaml", strings.Replace(simPolicy, "maxConcurrent: 2", "maxConcurrent: two", 1))
	dup := write("dup.yaml", simPolicy+"---\n"+simPolicy[strings.Index(simPolicy, "apiVersion: kubemedic.io/v1alpha1\nkind: RemediationPolicy"):])
	templates := write("templates.yaml", simPolicy[:strings.Index(simPolicy, "---")])
	// A cluster that refuses connections: nothing listens on port 1.
	unreachable := write("kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context:
    cluster: c
    user: u
users:
- name: u
  user:
    token: t
current-context: c
`)
	for _, tc := range []struct {
		desc      string
		args      []string
		code      int
		stderrHas []string
	}{
		{desc: "no files", args: []string{"policy", "simulate"}, code: 2, stderrHas: []string{"no files given: use -f FILE or -f DIR"}},
		{desc: "bad --now", args: []string{"policy", "simulate", "-f", good, "--now", "yesterday"}, code: 2,
			stderrHas: []string{`--now: "yesterday" is not an RFC 3339 time`}},
		{desc: "invalid policy names file and line", args: []string{"policy", "simulate", "-f", bad}, code: 1,
			stderrHas: []string{bad + `:24: spec.safety.maxConcurrent: must be a count or a percentage like "20%", got "two"`, "1 problems; nothing simulated"}},
		{desc: "a policy twice", args: []string{"policy", "simulate", "-f", dup}, code: 1,
			stderrHas: []string{dup + `:29: metadata.name: Duplicate value: "xid-reboot": RemediationPolicy "xid-reboot" is also defined at ` + dup + ":9"}},
		{desc: "no policy in the files", args: []string{"policy", "simulate", "-f", templates}, code: 1,
			stderrHas: []string{templates + ":1: note: NodeOperationTemplate reboot ignored", templates + ": no RemediationPolicy to simulate"}},
		{desc: "missing file", args: []string{"policy", "simulate", "-f", filepath.Join(dir, "nope.yaml")}, code: 1,
			stderrHas: []string{filepath.Join(dir, "nope.yaml") + ": no such file or directory"}},
		{desc: "missing kubeconfig", args: []string{"policy", "simulate", "-f", good, "--kubeconfig", filepath.Join(dir, "nope")}, code: 1,
			stderrHas: []string{"kubemedic: load kubeconfig:"}},
		{desc: "unreachable cluster names the request", args: []string{"policy", "simulate", "-f", good, "--kubeconfig", unreachable}, code: 1,
			stderrHas: []string{"kubemedic: https://127.0.0.1:1: list nodes: "}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, out, errOut := simRun(tc.args...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Empty(t, out)
			for _, s := range tc.stderrHas {
				require.Contains(t, errOut, s)
			}
		})
	}
}

func TestReadOnlyTransport(t *testing.T) {
	called := 0
	rt := readOnlyTransport{roundTripFunc(func(*http.Request) (*http.Response, error) {
		called++
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		_, err := rt.RoundTrip(httptest.NewRequest(m, "https://cluster/api/v1/namespaces", nil))
		require.EqualError(t, err, "this command is read only: refusing "+m+" /api/v1/namespaces")
	}
	require.Zero(t, called)
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "https://cluster/api/v1/nodes", nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, called)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// snapshot is what simulate must leave unchanged: every kubemedic object by
// resourceVersion, and what an operation would change on the nodes.
func snapshot(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var ops v1alpha1.NodeOperationList
	require.NoError(t, c.List(ctx, &ops))
	for _, o := range ops.Items {
		out["NodeOperation/"+o.Name] = o.ResourceVersion + " " + string(o.Status.Phase)
	}
	var pols v1alpha1.RemediationPolicyList
	require.NoError(t, c.List(ctx, &pols))
	for _, p := range pols.Items {
		out["RemediationPolicy/"+p.Name] = p.ResourceVersion
	}
	var tpls v1alpha1.NodeOperationTemplateList
	require.NoError(t, c.List(ctx, &tpls))
	for _, p := range tpls.Items {
		out["NodeOperationTemplate/"+p.Name] = p.ResourceVersion
	}
	var nodes corev1.NodeList
	require.NoError(t, c.List(ctx, &nodes))
	for _, n := range nodes.Items {
		var taints []string
		for _, tt := range n.Spec.Taints {
			taints = append(taints, tt.ToString())
		}
		sort.Strings(taints)
		out["Node/"+n.Name] = strings.Join(append(taints, "unschedulable="+map[bool]string{true: "yes", false: "no"}[n.Spec.Unschedulable]), ",")
	}
	return out
}

// TestSimulateOnAPIServer is the acceptance test: the real API server with
// kwok nodes, a policy with maxConcurrent 2, five nodes with a held fatal
// Xid and one node busy with a running operation.
func TestSimulateOnAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{Kwok: true})
	ctx := context.Background()
	c := env.Client

	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reboot"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessNodeRebooted, Image: "debian:bookworm-slim"}}))
	nodes, err := env.CreateGPUNodes(ctx, 7, localcluster.NodeSpec{})
	require.NoError(t, err)
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	since := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	now := since.Add(time.Hour)
	for _, n := range names[:6] {
		require.NoError(t, env.SetNodeCondition(ctx, n, corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
			Reason: v1alpha1.DetectReason, Message: xidMessage, LastTransitionTime: metav1.NewTime(since)}))
	}
	busy := names[5]
	manual := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "manual-reboot"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: busy, StepAction: v1alpha1.StepAction{Operation: "reboot"}, Reason: "rebooted by hand"}}
	require.NoError(t, c.Create(ctx, manual))
	manual.Status.Phase = v1alpha1.PhaseRunning
	require.NoError(t, c.Status().Update(ctx, manual))

	// The cluster has the policy paused; the file's version replaces it.
	f := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(f, []byte(simPolicy), 0o644))
	pols, _, problems := loadSimulatePolicies([]string{f})
	require.Empty(t, problems)
	paused := pols[0].Obj.DeepCopy()
	paused.Spec.Paused = true
	require.NoError(t, c.Create(ctx, paused))

	before := snapshot(t, c)
	code, out, errOut := simRun("policy", "simulate", "-f", f, "--kubeconfig", env.Kubeconfig, "--now", now.Format(time.RFC3339))
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 0, code)
	require.Equal(t, before, snapshot(t, c), "simulate changed the cluster")
	var ops v1alpha1.NodeOperationList
	require.NoError(t, c.List(ctx, &ops))
	require.Len(t, ops.Items, 1, "simulate created operations")

	require.Contains(t, out, "Policy xid-reboot ("+f+":9, replaces the cluster's policy of that name)")
	require.Contains(t, out, "  nodes:    7 selected, 6 unhealthy, 0 active operations, 0 quarantined")
	require.Contains(t, out, "  breaker:  closed, limit 7 unhealthy (maxUnhealthy 100%): WithinLimit: 6 unhealthy nodes, limit 7")
	require.Contains(t, out, "  creates:  5 operations (1 start now, 4 wait, 0 skipped); maxConcurrent 2")
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "gpu-node-") {
			rows[f[0]] = line
		}
	}
	require.Len(t, rows, 6, "the healthy node is not listed")
	require.NotContains(t, rows, names[6])
	for i, n := range names[:5] {
		row := rows[n]
		require.Contains(t, row, "GPUXidError=True  XidRebootRequired  "+since.Format(time.RFC3339)+" (60m)")
		op := "create " + plan.OperationName("xid-reboot", n, plan.Match{Condition: corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, LastTransitionTime: metav1.NewTime(since)}}.Episode(), 0) + " (reboot), "
		if i == 0 {
			require.Contains(t, row, op+"start now", n)
			require.Contains(t, row, "every safety limit passed")
			continue
		}
		require.Contains(t, row, op+"wait: MaxConcurrent", n)
		require.Contains(t, row, "policy xid-reboot: 2 of 2 operations running (maxConcurrent 2 of 7 nodes): ")
		require.Contains(t, row, "manual-reboot")
	}
	require.Contains(t, rows[busy], "InProgress")
	require.Contains(t, rows[busy], "operation manual-reboot is Running")
	require.NotContains(t, out, "Paused")

	// The client refuses writes even where the API server would allow them.
	rc, _, err := newReadOnlyClient(env.Kubeconfig, "kubemedic-test")
	require.NoError(t, err)
	err = rc.(client.Writer).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "simulate-wrote-this"}})
	require.ErrorContains(t, err, "this command is read only: refusing POST /api/v1/namespaces")
}
