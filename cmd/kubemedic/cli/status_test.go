package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// fleetStatus is a status with something in every section.
func fleetStatus() Status {
	long := strings.Repeat("very long message ", 10)
	return emptyStatus(func(s *Status) {
		s.Attention = []string{"policy xid: breaker open: 4 unhealthy nodes, limit 2", "node gpu-q: quarantined"}
		s.NodeConditions = []NodeConditionStatus{{Node: "gpu-a", Condition: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
			Reason: v1alpha1.ReasonXidRebootRequired, Since: ago(2 * time.Hour), Message: long}}
		s.ActiveOperations = []PhaseGroup{{Phase: v1alpha1.PhaseRunning, Operations: []OperationStatus{
			{Name: "xid.gpu-a-0", Node: "gpu-a", Policy: "xid", Step: "reboot", Phase: v1alpha1.PhaseRunning, Created: ago(3 * time.Minute), Message: "pod running"},
			{Name: "by-hand", Node: "gpu-b", Step: "reboot", Phase: v1alpha1.PhaseRunning, Created: ago(time.Minute)}}}}
		s.Policies = []PolicyStatus{
			{Name: "xid", Budget: Budget{Active: 2, Limit: 3, MaxConcurrent: "30%"},
				Breaker: BreakerStatus{State: BreakerOpen, Reason: v1alpha1.ReasonBreakerTripped, Message: "4 unhealthy nodes, limit 2", Since: agoPtr(12 * time.Minute)},
				Window:  WindowStatus{Windows: 1, NextOpen: ptrTime(statusNow.Add(9 * time.Hour))}},
			{Name: "nfs", Paused: true, DryRun: true, Budget: Budget{Limit: 1, MaxConcurrent: "1"}, Breaker: BreakerStatus{State: BreakerClosed},
				Window: WindowStatus{Open: true}},
		}
		s.QuarantinedNodes = []QuarantinedNode{{Node: "gpu-q", Since: agoPtr(time.Hour), Unschedulable: true, Attempts: []OperationStatus{
			{Name: "xid.gpu-q-0", Policy: "xid", Step: "reset", Phase: v1alpha1.PhaseFailed, Finished: agoPtr(2 * time.Hour), Message: "pod failed"}}}}
		s.ReclaimNotices = []ReclaimNotice{{Namespace: "team-a", Pod: "nb-0", Owner: "email alice@example.com", State: NoticeNoticed,
			Rule: decide.RuleIdle, Evidence: "0% GPU use over 4h", Deadline: ptrTime(statusNow.Add(30 * time.Minute)), SnoozeUntil: ptrTime(statusNow.Add(48 * time.Hour))}}
		s.Validation = fleetValidation()
	})
}

// fleetValidation has a node in each state and two policies.
func fleetValidation() Validation {
	dcgm := func(res v1alpha1.ValidationResult, d time.Duration) *ValidationTestResult {
		return &ValidationTestResult{Result: res, Time: agoPtr(d), Test: "dcgm", GPUs: 8, Message: "dcgm passed on 8 GPU(s)"}
	}
	fail := dcgm(v1alpha1.ValidationFailed, time.Hour)
	fail.FailedGPUs, fail.Message = 1, "dcgm failed on GPU-2 (memory): memory test failed"
	return Validation{
		Policies: []ValidationPolicyStatus{
			{Name: "gpus", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2, Ready: metav1.ConditionTrue,
				Matched: 7, Validating: 1, Passed: 2, Failed: 1, Due: 1, Unvalidated: 2},
			{Name: "new-pool", Test: "validate-nccl", Ready: metav1.ConditionFalse, NotReady: "TemplateNotFound: NodeOperationTemplate validate-nccl does not exist"},
		},
		Counts: ValidationCounts{Failed: 1, WaitingForJoin: 1, Testing: 1, Due: 2, Passed: 1, NotTested: 1, NotSelected: 3},
		Nodes: []ValidatedNode{
			{Node: "gpu-f", Policy: "gpus", State: ValidationStateFailed, Unvalidated: true, Last: fail, Detail: "keeps the taint kubemedic.io/unvalidated until a test passes"},
			{Node: "gpu-j", Policy: "gpus", State: ValidationStateWaitingForJoin, Unvalidated: true, Detail: "waiting for its join test"},
			{Node: "gpu-t", Policy: "gpus", State: ValidationStateTesting, Last: dcgm(v1alpha1.ValidationPassed, 8*24*time.Hour), Preemptions: 2,
				Current: &ValidationTestRun{Mode: v1alpha1.ValidationBackground, Since: agoPtr(5 * time.Minute), Attempt: 2}, Detail: "preempted 2 times"},
			{Node: "gpu-l", Policy: "gpus", State: ValidationStateDue, Due: true, DueTime: agoPtr(24 * time.Hour), NextTime: ptrTime(statusNow.Add(40 * time.Minute)),
				Last: dcgm(v1alpha1.ValidationPassed, 8*24*time.Hour), Preemptions: 1, Detail: "preempted once"},
			{Node: "gpu-n", Policy: "gpus", State: ValidationStateDue, Due: true},
			{Node: "gpu-p", Policy: "gpus", State: ValidationStatePassed, DueTime: ptrTime(statusNow.Add(week - 2*time.Hour)), Last: dcgm(v1alpha1.ValidationPassed, 2*time.Hour)},
			{Node: "cpu-0", Policy: "gpus", State: ValidationStateNotTested, Detail: "no nvidia.com/* allocatable: not tested in the background"},
		},
	}
}

func TestPrintStatus(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, fleetStatus())
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"kubemedic status of https://api.example:6443 at 2026-11-21T12:00:00Z\n",
		"ATTENTION (2):\n  policy xid: breaker open: 4 unhealthy nodes, limit 2\n  node gpu-q: quarantined\n",
		"\nNode conditions not OK (1)\n",
		"  gpu-a  GPUXidError  True    XidRebootRequired  120m  very long message very long message very long message ver...\n",
		"\nActive operations (2)\n  Running (2)\n",
		"    xid.gpu-a-0  gpu-a  xid/reboot     3m   pod running\n",
		"    by-hand      gpu-b  manual/reboot  60s  -\n",
		"  xid   2/3 (maxConcurrent 30%)  OPEN 12m  closed, opens 2026-11-21T21:00:00Z (in 9h)  no      no       TooManyUnhealthy: 4 unhealthy nodes, limit 2\n",
		"  nfs   0/1 (maxConcurrent 1)    Closed    any time                                    yes     yes      -\n",
		"\nQuarantined nodes (1)\n  gpu-q since 2026-11-21T11:00:00Z (60m), cordoned, 1 operations kept\n",
		"    xid.gpu-q-0  xid/reset    Failed  2026-11-21T10:00:00Z  pod failed\n",
		"  team-a/nb-0  email alice@example.com  Noticed  Idle  2026-11-21T12:30:00Z (in 30m)  2026-11-23T12:00:00Z (in 2d)  0% GPU use over 4h\n",
		// The GPU tests (issue 31): the policies, then each node, most pressing first.
		"\nValidation policies (2)\n",
		"  gpus      validate-dcgm  every 7d, 2 at once  7        1        2       1       1    2            True   -\n",
		"  new-pool  validate-nccl  join only            0        0        0       0       0    0            False  not ready: TemplateNotFound: NodeOperationTemplate valida...\n",
		"\nGPU tests of nodes (7: 1 failed, 1 waiting for their join test, 1 testing, 2 due, 1 passed, 1 not tested; 3 other nodes selected by no ValidationPolicy)\n",
		"  NODE   POLICY  VALIDATED  RESULT                     TESTING NOW               DUE                           TAINT        DETAIL\n",
		"  gpu-f  gpus    60m ago    Failed dcgm (1 of 8 GPUs)  -                         -                             unvalidated  dcgm failed on GPU-2 (memory): memory test failed; keeps ...\n",
		"  gpu-j  gpus    never      -                          -                         -                             unvalidated  waiting for its join test\n",
		"  gpu-t  gpus    8d ago     Passed                     Background 5m, attempt 2  -                             -            preempted 2 times\n",
		"  gpu-l  gpus    8d ago     Passed                     -                         overdue 24h, next try in 40m  -            preempted once\n",
		"  gpu-n  gpus    never      -                          -                         now (never tested)            -            -\n",
		"  gpu-p  gpus    120m ago   Passed                     -                         in 6d22h                      -            -\n",
		"  cpu-0  gpus    never      -                          -                         -                             -            no nvidia.com/* allocatable: not tested in the background\n",
	} {
		require.Contains(t, out, want)
	}
	require.Less(t, strings.Index(out, "\nRemediation policies"), strings.Index(out, "\nValidation policies"))
	require.Less(t, strings.Index(out, "\nGPU tests of nodes"), strings.Index(out, "\nQuarantined nodes"))
	doc, err := os.ReadFile("../../../docs/status.md")
	require.NoError(t, err)
	validation := out[strings.Index(out, "\nValidation policies"):strings.Index(out, "\nQuarantined nodes")]
	require.Contains(t, string(doc), validation, "docs/status.md shows these sections")

	b.Reset()
	printStatus(&b, emptyStatus(nil))
	require.Equal(t, `kubemedic status of https://api.example:6443 at 2026-11-21T12:00:00Z
OK: no breaker open, no node quarantined

Node conditions not OK (0)
  (none)

Active operations (0)
  (none)

Remediation policies (0)
  (none)

Validation policies (0)
  (none)

GPU tests of nodes (0)
  (none)

Quarantined nodes (0)
  (none)

Reclaim notices (0)
  (none)
`, b.String())
}

// TestPrintValidationAtScale: at 2,000 nodes the screen's GPU test table
// stays one screen: the most pressing 50 rows, the rest counted by state;
// records that cannot be read say Unknown, never a pass.
func TestPrintValidationAtScale(t *testing.T) {
	nodes := make([]corev1.Node, 0, 2000)
	var recs []v1alpha1.NodeValidation
	for i := range 2000 {
		name := fmt.Sprintf("gpu-%04d", i)
		nodes = append(nodes, gpuNode(name, map[string]string{"gpu": "true"}, nil))
		switch {
		case i%500 == 7:
			recs = append(recs, nval(name, "gpus", func(s *v1alpha1.NodeValidationStatus) {
				s.Last = &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, Test: "dcgm", CompletionTime: agoPtr(time.Hour), Message: "dcgm failed"}
			}))
		case i < 1960:
			recs = append(recs, nval(name, "gpus", func(s *v1alpha1.NodeValidationStatus) { s.Last = passed(time.Duration(i) * time.Minute) }))
		}
	}
	st := buildStatus(statusInput{Nodes: nodes, NodeValidations: recs, ValidationPolicies: []v1alpha1.ValidationPolicy{vpol("gpus", nil)}}, statusNow)
	var b bytes.Buffer
	printStatus(&b, st)
	out := b.String()
	require.Contains(t, out, "\nGPU tests of nodes (2000: 4 failed, 40 due, 1956 passed)\n")
	require.Contains(t, out, "  gpu-0007  gpus    60m ago    Failed dcgm  -            -                   -      dcgm failed\n", "failures come first")
	require.Contains(t, out, "  gpu-1999  gpus    never      -            -            now (never tested)  -      -\n")
	require.Contains(t, out, "  ... 1950 more: 1950 passed (-o json lists every node)\n")
	section := out[strings.Index(out, "\nGPU tests of nodes"):strings.Index(out, "\nQuarantined nodes")]
	require.Equal(t, 2+statusValidationRows+1+1, strings.Count(section, "\n"), "title, header, 50 rows, the rest counted:\n%s", section)
	require.Len(t, st.Validation.Nodes, 2000, "-o json lists every node")

	b.Reset()
	printStatus(&b, buildStatus(statusInput{Nodes: nodes, ValidationErr: errors.New("https://x:6443: list validationpolicies.kubemedic.io: forbidden")}, statusNow))
	out = b.String()
	require.Contains(t, out, "ATTENTION (1):\n  GPU validation unknown: https://x:6443: list validationpolicies.kubemedic.io: forbidden\n")
	require.Contains(t, out, "\nValidation policies: Unknown\n  https://x:6443: list validationpolicies.kubemedic.io: forbidden\n"+
		"\nGPU tests of nodes: Unknown (no record could be read: no node counts as validated)\n")
}

// TestStatusOutputFormats pins the field names of -o json (scripts read
// them) and checks that -o yaml says the same.
func TestStatusOutputFormats(t *testing.T) {
	st := fleetStatus()
	read := func(context.Context) (statusInput, error) { return statusInput{}, nil }
	var doc map[string]any
	for _, output := range []string{"json", "yaml"} {
		var out bytes.Buffer
		code, err := showStatus(context.Background(), read, fixedClock(statusNow), output, &out)
		require.NoError(t, err)
		require.Equal(t, ExitOK, code)
		var got map[string]any
		require.NoError(t, yaml.Unmarshal(out.Bytes(), &got), output)
		require.Equal(t, []string{"activeOperations", "attention", "nodeConditions", "policies", "quarantinedNodes", "reclaimNotices", "server", "time", "validation"},
			slices.Sorted(maps.Keys(got)), output)
		require.Equal(t, []any{}, got["policies"], "%s: an empty list is [], not null", output)
	}

	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &doc))
	pol := doc["policies"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"active": 2.0, "limit": 3.0, "maxConcurrent": "30%"}, pol["budget"])
	require.Equal(t, map[string]any{"state": "Open", "reason": "TooManyUnhealthy", "message": "4 unhealthy nodes, limit 2", "since": "2026-11-21T11:48:00Z"}, pol["breaker"])
	require.Equal(t, map[string]any{"windows": 1.0, "open": false, "nextOpen": "2026-11-21T21:00:00Z"}, pol["window"])
	notice := doc["reclaimNotices"].([]any)[0].(map[string]any)
	require.Equal(t, "2026-11-21T12:30:00Z", notice["deadline"])
	require.Equal(t, "2026-11-23T12:00:00Z", notice["snoozeUntil"])
	require.Equal(t, "email alice@example.com", notice["owner"])
	q := doc["quarantinedNodes"].([]any)[0].(map[string]any)
	require.Equal(t, "2026-11-21T10:00:00Z", q["attempts"].([]any)[0].(map[string]any)["finished"])
	val := doc["validation"].(map[string]any)
	require.Equal(t, []string{"counts", "nodes", "policies"}, slices.Sorted(maps.Keys(val)))
	require.Equal(t, map[string]any{"name": "gpus", "test": "validate-dcgm", "every": "168h0m0s", "maxConcurrent": 2.0, "suspended": false,
		"matched": 7.0, "validating": 1.0, "passed": 2.0, "failed": 1.0, "due": 1.0, "unvalidated": 2.0, "ready": "True"}, val["policies"].([]any)[0])
	require.Equal(t, map[string]any{"failed": 1.0, "waitingForJoinTest": 1.0, "unknown": 0.0, "testing": 1.0, "due": 2.0, "passed": 1.0, "notTested": 1.0, "notSelected": 3.0}, val["counts"])
	late := val["nodes"].([]any)[3].(map[string]any)
	require.Equal(t, map[string]any{"node": "gpu-l", "policy": "gpus", "state": "Due", "unvalidated": false, "due": true,
		"dueTime": "2026-11-20T12:00:00Z", "nextTime": "2026-11-21T12:40:00Z", "preemptions": 1.0, "detail": "preempted once",
		"last": map[string]any{"result": "Passed", "time": "2026-11-13T12:00:00Z", "test": "dcgm", "gpus": 8.0, "failedGPUs": 0.0, "message": "dcgm passed on 8 GPU(s)"}}, late)
	testing := val["nodes"].([]any)[2].(map[string]any)["current"]
	require.Equal(t, map[string]any{"mode": "Background", "since": "2026-11-21T11:55:00Z", "attempt": 2.0}, testing)
}

// requireSameJSON compares as -o json writes: times read back from JSON
// are in time.Local.
func requireSameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

func TestRunStatusExitCodes(t *testing.T) {
	quarantinedNode := quarantined(node("gpu-q"), nil)
	cases := []struct {
		desc       string
		in         statusInput
		err        error
		output     string
		code       int
		stdout     string
		stderrWant string
	}{
		{desc: "a healthy fleet exits 0", in: statusInput{Nodes: []corev1.Node{node("gpu-a")}}, code: ExitOK, stdout: "OK: no breaker open"},
		{desc: "a quarantined node exits 1", in: statusInput{Nodes: []corev1.Node{quarantinedNode}}, code: ExitInvalid, stdout: "ATTENTION (1):\n  node gpu-q: quarantined"},
		{desc: "an open breaker exits 1, also with -o json", output: "json", code: ExitInvalid, stdout: `"policy xid: breaker open: 3 unhealthy nodes, limit 1"`,
			in: statusInput{Policies: []v1alpha1.RemediationPolicy{policy("xid", func(p *v1alpha1.RemediationPolicy) {
				p.Status.Conditions[1].Status, p.Status.Conditions[1].Message = metav1.ConditionTrue, "3 unhealthy nodes, limit 1"
			})}}},
		{desc: "records of the GPU tests that cannot be read exit 1; the rest is shown", code: ExitInvalid,
			in:     statusInput{Nodes: []corev1.Node{quarantinedNode}, ValidationErr: errors.New("https://x:6443: list nodevalidations.kubemedic.io: forbidden")},
			stdout: "ATTENTION (2):\n  node gpu-q: quarantined\n  GPU validation unknown: https://x:6443: list nodevalidations.kubemedic.io: forbidden\n"},
		{desc: "a failed request exits 1 and is named", err: errors.New("https://x:6443: list nodeoperations.kubemedic.io: forbidden"), code: ExitInvalid,
			stderrWant: "kubemedic status: https://x:6443: list nodeoperations.kubemedic.io: forbidden\n"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			read := func(context.Context) (statusInput, error) { return tc.in, tc.err }
			var out, errOut bytes.Buffer
			code := runStatus(context.Background(), read, fixedClock(statusNow), nil, statusOptions{Output: tc.output, Interval: time.Second}, &out, &errOut)
			require.Equal(t, tc.code, code)
			require.Contains(t, out.String(), tc.stdout)
			require.Equal(t, tc.stderrWant, errOut.String())
		})
	}
}

// TestStatusWatch steps a fake clock: each tick reads and shows the status
// again, a failed read is reported and the watch goes on, and it ends (exit
// 0) when its context does. A buffer is no terminal: nothing clears it.
func TestStatusWatch(t *testing.T) {
	clk := testingclock.NewFakeClock(statusNow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := make(chan int, 10)
	var mu sync.Mutex
	n := 0
	read := func(context.Context) (statusInput, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		reads <- n
		if n == 2 {
			return statusInput{}, errors.New("list nodes: connection refused")
		}
		return statusInput{Server: fmt.Sprintf("read-%d", n)}, nil
	}
	var out, errOut syncBuffer
	done := make(chan int)
	go func() {
		done <- runStatus(ctx, read, clk, clk, statusOptions{Watch: true, Interval: 2 * time.Second}, &out, &errOut)
	}()
	next := func(what string, ch chan int) int {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch did not %s within 10s", what)
			return 0
		}
	}
	require.Equal(t, 1, next("read", reads))
	for want := 2; want <= 3; want++ {
		require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "the watch waits on its ticker")
		clk.Step(2 * time.Second)
		require.Equal(t, want, next("read again on a tick", reads))
	}
	cancel()
	require.Equal(t, ExitOK, next("end with its context", done))
	require.Equal(t, 2, strings.Count(out.String(), "kubemedic status of read-"))
	require.Contains(t, out.String(), "kubemedic status of read-3 at")
	require.Equal(t, "kubemedic status: list nodes: connection refused (retrying every 2s)\n", errOut.String())
	require.NotContains(t, out.String(), "\x1b[", "cleared a screen that is not a terminal")

	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f), "a regular file")
	require.False(t, isTerminal(&out), "a buffer")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStatusUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"status", "-o", "xml"}, ExitUsage, `kubemedic: -o: "xml" is not json or yaml`},
		{[]string{"status", "--interval", "0s"}, ExitUsage, "kubemedic: --interval: 0s is not a positive duration"},
		{[]string{"status", "--watch", "--now", "2026-11-21T12:00:00Z"}, ExitUsage, "kubemedic: --now and --watch exclude each other"},
		{[]string{"status", "--now", "noon"}, ExitUsage, `kubemedic: --now: "noon" is not an RFC 3339 time`},
		{[]string{"status", "--window", "48h"}, ExitUsage, "kubemedic: --window needs --hardware"},
		{[]string{"status", "--hardware", "--window", "0s"}, ExitUsage, "kubemedic: --window: 0s is not a positive duration such as 24h"},
		{[]string{"status", "--hardware", "-o", "xml"}, ExitUsage, `kubemedic: -o: "xml" is not json or yaml`},
		{[]string{"status", "nodes"}, ExitUsage, `kubemedic: unknown command "nodes" for "kubemedic status"`},
		{[]string{"status", "--kubeconfig", missing}, ExitInvalid, "kubemedic status: load kubeconfig: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := simRun(tc.args...)
			require.Equal(t, tc.code, code, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, tc.stderr)
		})
	}
}

// TestReadStatus reads through a client: pods come as metadata, and a
// failed list names its request and the server.
func TestReadStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	objs := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb-0", Annotations: map[string]string{v1alpha1.AnnotationReclaimNotice: "{}"}}},
		&v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "op"}, Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-a"}},
		&v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "xid"}},
		&v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}},
		&v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a"}, Spec: v1alpha1.NodeValidationSpec{NodeName: "gpu-a"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	in, err := readStatus(context.Background(), c, "https://x:6443")
	require.NoError(t, err)
	require.Equal(t, "https://x:6443", in.Server)
	require.Len(t, in.Nodes, 1)
	require.Len(t, in.Ops, 1)
	require.Len(t, in.Policies, 1)
	require.Len(t, in.Pods, 1)
	require.Equal(t, "{}", in.Pods[0].Annotations[v1alpha1.AnnotationReclaimNotice])
	require.Len(t, in.ValidationPolicies, 1)
	require.Len(t, in.NodeValidations, 1)
	require.NoError(t, in.ValidationErr)

	for _, failing := range []client.ObjectList{&corev1.NodeList{}, &v1alpha1.NodeOperationList{}, &v1alpha1.RemediationPolicyList{}, &metav1.PartialObjectMetadataList{}} {
		what := fmt.Sprintf("%T", failing)
		c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if fmt.Sprintf("%T", list) == what {
					return errors.New("forbidden")
				}
				return c.List(ctx, list, opts...)
			}}).Build()
		_, err := readStatus(context.Background(), c, "https://x:6443")
		want := map[string]string{"*v1.NodeList": "nodes", "*v1alpha1.NodeOperationList": "nodeoperations.kubemedic.io",
			"*v1alpha1.RemediationPolicyList": "remediationpolicies.kubemedic.io", "*v1.PartialObjectMetadataList": "pods"}[what]
		require.EqualError(t, err, "https://x:6443: list "+want+": forbidden", what)
	}

	// The GPU tests' records are one section's evidence: a failed list
	// makes that section Unknown, and the rest is still read.
	for _, failing := range []client.ObjectList{&v1alpha1.ValidationPolicyList{}, &v1alpha1.NodeValidationList{}} {
		what := fmt.Sprintf("%T", failing)
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if fmt.Sprintf("%T", list) == what {
					return errors.New("forbidden")
				}
				return c.List(ctx, list, opts...)
			}}).Build()
		in, err := readStatus(context.Background(), c, "https://x:6443")
		require.NoError(t, err, what)
		require.Len(t, in.Nodes, 1, what)
		want := map[string]string{"*v1alpha1.ValidationPolicyList": "validationpolicies.kubemedic.io", "*v1alpha1.NodeValidationList": "nodevalidations.kubemedic.io"}[what]
		require.EqualError(t, in.ValidationErr, "https://x:6443: list "+want+": forbidden", what)
		require.Empty(t, in.ValidationPolicies, what)
		require.Empty(t, in.NodeValidations, what)
	}
}

// TestStatusOnAPIServer is the acceptance test: a real API server with a
// node whose Xid condition NPD wrote, a quarantined node with its failed
// attempts, a policy whose breaker is open, a running operation and a pod
// with a reclaim notice. Status exits 1 and says why; once the breaker
// closes and the quarantine is lifted it exits 0. It also runs as
// `kubectl medic status` through a kubectl-medic link on the PATH.
func TestStatusOnAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	c := env.Client

	nodes, err := env.CreateGPUNodes(ctx, 3, localcluster.NodeSpec{})
	require.NoError(t, err)
	sick, quar, healthy := nodes[0].Name, nodes[1].Name, nodes[2].Name
	since := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	require.NoError(t, env.SetNodeCondition(ctx, sick, corev1.NodeCondition{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
		Reason: v1alpha1.DetectReason, Message: xidMessage, LastTransitionTime: metav1.NewTime(since)}))
	require.NoError(t, env.SetNodeCondition(ctx, healthy, corev1.NodeCondition{Type: v1alpha1.ConditionGPULost, Status: corev1.ConditionFalse,
		Reason: "GPUsOK", Message: "8 of 8 GPUs"}))

	n := &corev1.Node{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: quar}, n))
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: since}})
	require.NoError(t, c.Update(ctx, n))

	newOp := func(name, node, step string, phase v1alpha1.NodeOperationPhase, msg string) {
		t.Helper()
		o := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.NodeOperationSpec{NodeName: node, Policy: "xid", Step: step, StepAction: v1alpha1.StepAction{Operation: "reboot"}}}
		require.NoError(t, c.Create(ctx, o))
		o.Status.Phase, o.Status.Message = phase, msg
		if phase.Finished() {
			o.Status.CompletionTime = &metav1.Time{Time: since}
		}
		require.NoError(t, c.Status().Update(ctx, o))
	}
	newOp("xid.quar-0", quar, "reset", v1alpha1.PhaseFailed, "pod failed: exit 1")
	newOp("xid.quar-1", quar, "reboot", v1alpha1.PhaseFailed, "condition did not clear within 10m")
	newOp("xid.sick-0", sick, "reset", v1alpha1.PhaseRunning, "pod xid.sick-0 running")

	pol := policy("xid", nil)
	pol.Status = v1alpha1.RemediationPolicyStatus{}
	require.NoError(t, c.Create(ctx, &pol))
	pol.Status = v1alpha1.RemediationPolicyStatus{MatchedNodes: 3, UnhealthyNodes: 2, ActiveOperations: 1, QuarantinedNodes: 1,
		Conditions: []metav1.Condition{{Type: v1alpha1.PolicyBreakerOpen, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBreakerTripped,
			Message: "2 unhealthy nodes, limit 1", LastTransitionTime: metav1.NewTime(since)}}}
	require.NoError(t, c.Status().Update(ctx, &pol))

	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
	deadline := since.Add(2 * time.Hour)
	notice := &decide.Notice{Rule: decide.RuleIdle, Evidence: "0% GPU use over 4h", NoticedAt: since, Deadline: deadline, Sent: true, Recipient: "email alice@example.com"}
	require.NoError(t, c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nb-0", Annotations: map[string]string{v1alpha1.AnnotationReclaimNotice: notice.Encode()}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/nb:1"}}}}))

	// The GPU tests (issue 31): a ValidationPolicy over every node and the
	// nodes' records, as the remediator writes them (the status
	// subresource): healthy passed an hour ago, sick's background test
	// runs (preempted once before), the quarantined node failed, and a new
	// node registered with the join taint has no record yet.
	joining, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{NamePrefix: "new-node"})
	require.NoError(t, err)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: joining[0].Name}, n))
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule})
	require.NoError(t, c.Update(ctx, n))
	vp := &v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}, Spec: v1alpha1.ValidationPolicySpec{
		Validate:   v1alpha1.ValidateSpec{Operation: "validate-dcgm"},
		Background: &v1alpha1.BackgroundSpec{Every: metav1.Duration{Duration: week}, MaxConcurrent: 2}}}
	require.NoError(t, c.Create(ctx, vp))
	vp.Status = v1alpha1.ValidationPolicyStatus{ObservedGeneration: vp.Generation, Matched: 4, Validating: 1, Passed: 1, Failed: 1, Unvalidated: 1,
		Conditions: []metav1.Condition{{Type: v1alpha1.PolicyReady, Status: metav1.ConditionTrue, Reason: "TemplateFound",
			Message: "tests with NodeOperationTemplate validate-dcgm", LastTransitionTime: metav1.NewTime(since)}}}
	require.NoError(t, c.Status().Update(ctx, vp))
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: since.Add(d)} }
	newRecord := func(node string, status v1alpha1.NodeValidationStatus) {
		t.Helper()
		n := &corev1.Node{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: node}, n))
		r := &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: v1alpha1.NodeValidationSpec{NodeName: node, NodeUID: string(n.UID), Policy: "gpus"}}
		require.NoError(t, c.Create(ctx, r))
		r.Status = status
		require.NoError(t, c.Status().Update(ctx, r))
	}
	newRecord(healthy, v1alpha1.NodeValidationStatus{Mode: v1alpha1.ValidationBackground, NextTime: at(week),
		Last: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed, Template: "validate-dcgm", Test: "dcgm", StartTime: at(-10 * time.Minute),
			CompletionTime: at(0), Message: "dcgm passed on 8 GPU(s)"}})
	newRecord(sick, v1alpha1.NodeValidationStatus{Mode: v1alpha1.ValidationBackground, Preemptions: 1,
		Current: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Template: "validate-dcgm", Attempt: 1, PodName: sick + "-validate-1-1", StartTime: at(40 * time.Minute)}})
	newRecord(quar, v1alpha1.NodeValidationStatus{Mode: v1alpha1.ValidationBackground, NextTime: at(week),
		Last: &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, Template: "validate-dcgm", Test: "dcgm", CompletionTime: at(-time.Hour),
			Message: "dcgm failed on GPU-2 (memory)", GPUs: []v1alpha1.ValidationGPU{{UUID: "GPU-1", Verdict: "Pass"}, {UUID: "GPU-2", Verdict: "Fail", Failed: []string{"memory"}}}}})

	// The command as a script runs it.
	code, out, errOut := simRun("status", "-o", "json", "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, ExitInvalid, code)
	require.Empty(t, errOut)
	var st Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, []string{"policy xid: breaker open: 2 unhealthy nodes, limit 1", "node " + quar + ": quarantined"}, st.Attention)
	requireSameJSON(t, []NodeConditionStatus{{Node: sick, Condition: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
		Reason: v1alpha1.ReasonXidRebootRequired, Since: metav1.NewTime(since), Message: xidMessage}}, st.NodeConditions)
	require.Len(t, st.ActiveOperations, 1)
	require.Equal(t, v1alpha1.PhaseRunning, st.ActiveOperations[0].Phase)
	require.Len(t, st.ActiveOperations[0].Operations, 1)
	active := st.ActiveOperations[0].Operations[0]
	require.Equal(t, []string{"xid.sick-0", sick, "xid", "reset", "pod xid.sick-0 running"}, []string{active.Name, active.Node, active.Policy, active.Step, active.Message})
	require.Len(t, st.Policies, 1)
	p := st.Policies[0]
	require.Equal(t, BreakerOpen, p.Breaker.State)
	require.Equal(t, Budget{Active: 1, Limit: 1, MaxConcurrent: "1"}, p.Budget)
	require.Equal(t, WindowStatus{Open: true}, p.Window)
	require.Len(t, st.QuarantinedNodes, 1)
	q := st.QuarantinedNodes[0]
	require.Equal(t, quar, q.Node)
	require.True(t, q.Unschedulable)
	requireSameJSON(t, metav1.NewTime(since), q.Since)
	var attempts []string
	for _, a := range q.Attempts {
		attempts = append(attempts, fmt.Sprintf("%s %s %s %s", a.Name, a.Step, a.Phase, a.Message))
		requireSameJSON(t, metav1.NewTime(since), a.Finished)
	}
	require.Equal(t, []string{"xid.quar-0 reset Failed pod failed: exit 1", "xid.quar-1 reboot Failed condition did not clear within 10m"}, attempts)
	requireSameJSON(t, []ReclaimNotice{{Namespace: "team-a", Pod: "nb-0", Owner: "email alice@example.com", State: NoticeNoticed, Rule: decide.RuleIdle,
		Evidence: "0% GPU use over 4h", Deadline: &metav1.Time{Time: deadline}}}, st.ReclaimNotices)

	require.Equal(t, []ValidationPolicyStatus{{Name: "gpus", Test: "validate-dcgm", Every: &metav1.Duration{Duration: week}, MaxConcurrent: 2,
		Matched: 4, Validating: 1, Passed: 1, Failed: 1, Unvalidated: 1, Ready: metav1.ConditionTrue}}, st.Validation.Policies)
	require.Equal(t, ValidationCounts{Failed: 1, WaitingForJoin: 1, Testing: 1, Passed: 1}, st.Validation.Counts)
	var states []string
	for _, vn := range st.Validation.Nodes {
		states = append(states, vn.Node+" "+vn.State)
	}
	require.Equal(t, []string{quar + " Failed", joining[0].Name + " WaitingForJoinTest", sick + " Testing", healthy + " Passed"}, states)

	// The screen, at a fixed time: an hour after since.
	code, out, errOut = simRun("status", "--now", since.Add(time.Hour).Format(time.RFC3339), "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, ExitInvalid, code, errOut)
	for _, want := range []string{
		"\nValidation policies (1)\n  NAME  TEST           BACKGROUND           MATCHED  TESTING  PASSED  FAILED  DUE  UNVALIDATED  READY  DETAIL\n" +
			"  gpus  validate-dcgm  every 7d, 2 at once  4        1        1       1       0    1            True   -\n",
		"\nGPU tests of nodes (4: 1 failed, 1 waiting for their join test, 1 testing, 1 passed)\n",
		"  NODE          POLICY  VALIDATED  RESULT                     TESTING NOW     DUE       TAINT        DETAIL\n" +
			"  " + quar + "  gpus    120m ago   Failed dcgm (1 of 2 GPUs)  -               -         -            dcgm failed on GPU-2 (memory)\n" +
			"  " + joining[0].Name + "  gpus    never      -                          -               -         unvalidated  waiting for its join test\n" +
			"  " + sick + "  gpus    never      -                          Background 20m  -         -            preempted once\n" +
			"  " + healthy + "  gpus    60m ago    Passed                     -               in 6d23h  -            -\n\n",
	} {
		require.Contains(t, out, want)
	}

	// As a kubectl plugin: kubectl finds kubectl-medic on the PATH and
	// passes the exit status through.
	kubectl := harness.Tool(t, "kubectl")
	bin := harness.GoBuild(t, "./cmd/kubemedic")
	pathDir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(pathDir, "kubectl-medic")))
	cmd := exec.Command(kubectl, "medic", "status", "--kubeconfig", env.Kubeconfig)
	cmd.Env = append(os.Environ(), "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var pout, perr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &pout, &perr
	err = cmd.Run()
	t.Logf("kubectl medic status:\n%s\nstderr:\n%s", pout.String(), perr.String())
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitInvalid, ee.ExitCode())
	require.Contains(t, pout.String(), "ATTENTION (2):")
	require.Contains(t, pout.String(), "  team-a/nb-0  email alice@example.com  Noticed  Idle")

	// Close the breaker and lift the quarantine: status exits 0.
	pol.Status.Conditions[0].Status, pol.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonBreakerWithinLimit
	require.NoError(t, c.Status().Update(ctx, &pol))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: quar}, n))
	n.Spec.Taints = nil
	require.NoError(t, c.Update(ctx, n))
	code, out, errOut = simRun("status", "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "OK: no breaker open, no node quarantined\n")
	require.Contains(t, out, "\nQuarantined nodes (0)\n")

	// --hardware: no history yet, then the sick node's GPU history; an
	// unreadable history on another node exits 1 and names it.
	code, out, errOut = simRun("status", "--hardware", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "No node has a GPU history (the kubemedic.io/gpu-history annotation, which the remediator writes).\n")
	annotate := func(name, history string) {
		t.Helper()
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: name}, n))
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[gpuwire.Annotation] = history
		require.NoError(t, c.Update(ctx, n))
	}
	annotate(sick, history(t, xidFault(2*time.Hour, bus3b, gpuA, 79), opDone(time.Hour, bus3b, gpuA, "xid.sick-0", "reset-gpu", gpuwire.Failed)))
	code, out, errOut = simRun("status", "--hardware", "-o", "json", "--now", statusNow.Format(time.RFC3339), "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, ExitOK, code, errOut)
	var hw Hardware
	require.NoError(t, json.Unmarshal([]byte(out), &hw))
	requireSameJSON(t, []GPUHardware{{Node: sick, GPU: gpuA, UUID: gpuA, Bus: bus3b, Faults: 1, FailuresInWindow: 2, LastFault: hwXid(2*time.Hour, 79),
		LastOperation: hwOp(time.Hour, "xid.sick-0", "reset-gpu", gpuwire.Failed)}}, hw.GPUs)
	annotate(healthy, badHistory)
	code, out, errOut = simRun("status", "--hardware", "--kubeconfig", env.Kubeconfig)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, ExitInvalid, code, errOut)
	require.Contains(t, out, "ATTENTION (1):\n  node "+healthy+": unreadable GPU history: decode kubemedic.io/gpu-history: ")
	require.Contains(t, out, "  "+sick+"  "+gpuA+"  0000:3b:00.0  no  ")
}

// An operation whose capture kept a bundle says so, and where, ahead of
// its message; one that captured nothing is as before. One that excluded
// a GPU instead of cordoning the node says which, first.
func TestOperationStatusDiagnostics(t *testing.T) {
	op := v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "xid.gpu-a-0"}, Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-a"},
		Status: v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseRunning, Message: "waiting for pod"}}
	require.Empty(t, operationStatus(&op).Diagnostics)
	require.Equal(t, "waiting for pod", withDiagnostics(operationStatus(&op)))
	op.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsPartial,
		Bundle: &v1alpha1.DiagnosticsBundle{Key: "gpu-a/xid.gpu-a-0.tar.gz", Stored: true}}
	require.Equal(t, "diagnostics Partial gpu-a/xid.gpu-a-0.tar.gz; waiting for pod", withDiagnostics(operationStatus(&op)))
	op.Status.Diagnostics.Bundle.Stored = false
	require.Equal(t, "Partial gpu-a/xid.gpu-a-0.tar.gz (in the node's spool)", operationStatus(&op).Diagnostics)
	op.Status.Diagnostics = &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsFailed}
	op.Status.Message = ""
	require.Equal(t, "diagnostics Failed", withDiagnostics(operationStatus(&op)))
	op.Status.Diagnostics = nil
	op.Status.Message = "waiting for pod"
	op.Status.GPU = &v1alpha1.GPUTarget{UUID: "GPU-8f2c0b1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b", BusID: "0000:3b:00.0"}
	op.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: "cordoned the node: the step drains the node"}
	require.Empty(t, operationStatus(&op).ExcludedGPU, "a cordon is the usual path, not repeated")
	op.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: "kubemedic-gpu-a-8f2c-1a2b3c4d5e", Device: "gpu.nvidia.com/gpu-a/gpu-3"}
	require.Equal(t, "excluded GPU-8f2c0b1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b by DeviceTaintRule kubemedic-gpu-a-8f2c-1a2b3c4d5e; waiting for pod", withDiagnostics(operationStatus(&op)))
}
