package render_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/alertmanager/template"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden history files in testdata/")

var readAt = time.Date(2026, 11, 21, 14, 30, 0, 0, time.UTC)

// historyOp is an operation on node created minutes before readAt.
func historyOp(name, node string, minutes int, mut ...func(*v1alpha1.NodeOperation)) v1alpha1.NodeOperation {
	op := v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(readAt.Add(-time.Duration(minutes) * time.Minute))},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: node, Policy: "gpu-lost", Step: "reset-gpu"},
	}
	op.Spec.Operation = "reset-gpu"
	for _, m := range mut {
		m(&op)
	}
	return op
}

func phase(p v1alpha1.NodeOperationPhase, msg string, startMin, endMin int) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) {
		op.Status.Phase, op.Status.Message = p, msg
		if startMin > 0 {
			t := metav1.NewTime(readAt.Add(-time.Duration(startMin) * time.Minute))
			op.Status.StartTime = &t
		}
		if endMin > 0 {
			t := metav1.NewTime(readAt.Add(-time.Duration(endMin) * time.Minute))
			op.Status.CompletionTime = &t
		}
	}
}

// ladder is gpu-7's ladder as the remediator leaves it: a reset whose drain
// failed, a reboot that did not bring the GPU back, the quarantine; and an
// operation on another node.
func ladder() []v1alpha1.NodeOperation {
	return []v1alpha1.NodeOperation{
		historyOp("gpu-lost.gpu-7.5f2c-2", "gpu-7", 20, func(op *v1alpha1.NodeOperation) {
			op.Spec.Step, op.Spec.Operation, op.Spec.Quarantine = "", "", true
		}, phase(v1alpha1.PhaseSucceeded, "Quarantined: the ladder of policy gpu-lost ran out", 20, 20)),
		historyOp("gpu-lost.gpu-7.5f2c-0", "gpu-7", 95, phase(v1alpha1.PhaseFailed,
			"DrainFailed: pod train/db-0 | not evicted:\nPodDisruptionBudget train/db allows 0 disruptions", 94, 64)),
		historyOp("gpu-lost.gpu-9.aaaa-0", "gpu-9", 50, phase(v1alpha1.PhaseRunning, "Running reset-gpu", 49, 0)),
		historyOp("gpu-lost.gpu-7.5f2c-1", "gpu-7", 60, func(op *v1alpha1.NodeOperation) {
			op.Spec.Step, op.Spec.Operation = "reboot", "reboot"
		}, phase(v1alpha1.PhaseFailed, "RecoveryTimeout: node condition GPULost still True 10m0s after the operation succeeded", 59, 25)),
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./alertbridge/render -run History -update writes it")
	require.Equal(t, string(want), got)
}

func TestHistorySectionGolden(t *testing.T) {
	manual := historyOp("maintenance-gpu-7", "gpu-7", 200, func(op *v1alpha1.NodeOperation) {
		op.Spec.Policy, op.Spec.Step, op.Spec.Operation, op.Spec.DryRun = "", "", "restart-kubelet", true
	})
	for _, tc := range []struct {
		name   string
		hs     []render.NodeHistory
		more   int
		maxOps int
	}{
		{name: "history-ladder", hs: []render.NodeHistory{{Node: "gpu-7", Operations: append(ladder(), manual)}}, maxOps: 10},
		{name: "history-left-out", hs: []render.NodeHistory{{Node: "gpu-7", Operations: append(ladder(), manual)}}, maxOps: 2},
		{name: "history-unreadable", hs: []render.NodeHistory{{Node: "gpu-7",
			Err: errors.New(`nodeoperations.kubemedic.io is forbidden: User "system:serviceaccount:kubemedic-system:kubemedic-alertbridge" cannot list resource "nodeoperations"`)}}, maxOps: 10},
		{name: "history-none", hs: []render.NodeHistory{{Node: "gpu-9"}}, maxOps: 10},
		{name: "history-two-nodes", hs: []render.NodeHistory{{Node: "gpu-7", Operations: ladder()}, {Node: "gpu-9", Operations: ladder()}}, more: 3, maxOps: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, render.HistorySection(tc.hs, tc.more, tc.maxOps, readAt))
		})
	}
}

func TestHistorySection(t *testing.T) {
	long := strings.Repeat("x", 1024)
	for _, tc := range []struct {
		desc    string
		h       render.NodeHistory
		maxOps  int
		has     []string
		hasNot  []string
		inOrder []string
	}{
		{desc: "oldest first, other nodes ignored", h: render.NodeHistory{Node: "gpu-7", Operations: ladder()}, maxOps: 10,
			inOrder: []string{"gpu-lost.gpu-7.5f2c-0", "gpu-lost.gpu-7.5f2c-1", "gpu-lost.gpu-7.5f2c-2"}, hasNot: []string{"gpu-9.aaaa"},
			has: []string{"3 NodeOperations."}},
		{desc: "same creation time: by name", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("b", "n", 5), historyOp("a", "n", 5)}}, maxOps: 10, inOrder: []string{"`a`", "`b`"}},
		{desc: "the newest are kept", h: render.NodeHistory{Node: "gpu-7", Operations: ladder()}, maxOps: 1,
			has: []string{"the newest 1 of 3 NodeOperations (2 older left out)", "gpu-lost.gpu-7.5f2c-2"}, hasNot: []string{"5f2c-0", "5f2c-1`"}},
		{desc: "message cut", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("a", "n", 5, phase(v1alpha1.PhaseFailed, long, 0, 0))}}, maxOps: 10,
			has: []string{strings.Repeat("x", render.MaxHistoryMessage-1) + "…"}, hasNot: []string{strings.Repeat("x", render.MaxHistoryMessage)}},
		{desc: "no phase yet is Pending", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{historyOp("a", "n", 5)}}, maxOps: 10,
			has: []string{"| Pending |"}},
		{desc: "an error is Unknown, never none", h: render.NodeHistory{Node: "n", Err: errors.New("context deadline exceeded")}, maxOps: 10,
			has: []string{"**Unknown:** the NodeOperations could not be read at 2026-11-21 14:30:00 UTC: context deadline exceeded"}, hasNot: []string{"No NodeOperations", "| Operation |"}},
		{desc: "a message cannot close the section or open HTML", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("a", "n", 5, phase(v1alpha1.PhaseFailed, "<!-- /kubemedic-alertbridge history --> <b>", 0, 0))}}, maxOps: 10,
			has: []string{"&lt;!-- /kubemedic-alertbridge history --&gt; &lt;b&gt;"}},
		{desc: "a label value that is no node name never reaches the shell lines", h: render.NodeHistory{Node: "gpu-7'; rm -rf /"}, maxOps: 10,
			has: []string{`awk 'NR==1 || $2=="NODE"'`, "kubectl describe node NODE\n"}, hasNot: []string{"describe node gpu-7"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := render.HistorySection([]render.NodeHistory{tc.h}, 0, tc.maxOps, readAt)
			for _, s := range tc.has {
				require.Contains(t, got, s)
			}
			for _, s := range tc.hasNot {
				require.NotContains(t, got, s)
			}
			last := -1
			for _, s := range tc.inOrder {
				i := strings.Index(got, s)
				require.Greater(t, i, last, "%s out of order in\n%s", s, got)
				last = i
			}
			require.Equal(t, 1, strings.Count(got, "<!-- /kubemedic-alertbridge history -->"))
		})
	}
}

func TestHistorySectionBounded(t *testing.T) {
	// 50 operations with the longest names and messages the API allows.
	var ops []v1alpha1.NodeOperation
	for i := range 50 {
		op := historyOp(strings.Repeat("n", 250)+string(rune('a'+i%26))+string(rune('a'+i/26)), "gpu-7", 100-i,
			phase(v1alpha1.PhaseFailed, strings.Repeat("é|", 512), 1, 1))
		op.Spec.Policy, op.Spec.Step = strings.Repeat("p", 253), strings.Repeat("s", 63)
		ops = append(ops, op)
	}
	hs := []render.NodeHistory{{Node: "gpu-7", Operations: ops}}
	got := render.HistorySection(hs, 0, 50, readAt)
	require.LessOrEqual(t, len(got), render.MaxHistoryBytes+2048)
	require.Contains(t, got, "older left out")

	// Attached to the longest body, the body is cut and the history kept.
	body := strings.Repeat("a", render.MaxBodyLength)
	all := render.AttachHistory(body, got)
	require.LessOrEqual(t, len(all), render.MaxBodyLength)
	require.True(t, strings.HasSuffix(all, got))
	require.Contains(t, all, "… [truncated]")
}

func TestHistoryOfRoundTrip(t *testing.T) {
	section := render.HistorySection([]render.NodeHistory{{Node: "gpu-7", Operations: ladder()}}, 0, 10, readAt)
	body := "### Firing: KubemedicNodeQuarantined on `gpu-7`\n\nsome text\n"
	withHistory := render.AttachHistory(body, section)
	require.Equal(t, body+section, withHistory)
	require.Equal(t, section, render.HistoryOf(withHistory))
	require.Equal(t, section, render.HistoryOf(withHistory+"<!-- kubemedic-alertbridge key=abc state=def -->\n"), "the marker follows it")
	// A rewrite carries it over unchanged.
	require.Equal(t, section, render.HistoryOf(render.AttachHistory("### Resolved\n", render.HistoryOf(withHistory))))

	require.Empty(t, render.HistoryOf(body))
	require.Empty(t, render.HistoryOf(body+"<!-- kubemedic-alertbridge history -->\nno end"))
	require.Equal(t, body, render.AttachHistory(body, ""))
}

func TestHistoryNodes(t *testing.T) {
	alerts := func(nodes ...string) *payload.Message {
		m := &payload.Message{}
		for _, n := range nodes {
			m.Alerts = append(m.Alerts, template.Alert{Labels: template.KV{"alertname": "KubemedicNodeQuarantined", "node": n}})
		}
		return m
	}
	for _, tc := range []struct {
		desc string
		msg  *payload.Message
		want []string
		more int
	}{
		{desc: "one node", msg: alerts("gpu-7", "gpu-7"), want: []string{"gpu-7"}},
		{desc: "no node label", msg: &payload.Message{Data: template.Data{Alerts: template.Alerts{{Labels: template.KV{"alertname": "X"}}}}}},
		{desc: "sorted, unique, empty ignored", msg: alerts("gpu-9", "", "gpu-7", "gpu-9"), want: []string{"gpu-7", "gpu-9"}},
		{desc: "capped", msg: alerts("a", "b", "c", "d", "e", "f", "g"), want: []string{"a", "b", "c", "d", "e"}, more: 2},
		{desc: "nil", msg: nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, more := render.HistoryNodes(tc.msg)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.more, more)
		})
	}
}
