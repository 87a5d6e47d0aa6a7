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

// The GPU that gpu-7's ladder is about, as the remediator records it.
var gpu7 = &v1alpha1.GPUTarget{UUID: "GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10", BusID: "00000000:3B:00.0"}

func gpu(g *v1alpha1.GPUTarget) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) { op.Status.GPU = g }
}

func excluded(x v1alpha1.Exclusion) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) { op.Status.Exclusion = &x }
}

func cordoned(msg string) func(*v1alpha1.NodeOperation) {
	return excluded(v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: msg})
}

// asked records a machine request made minutes before readAt.
func asked(kind v1alpha1.MachineKind, target, action string, minutes int) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) {
		op.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: kind, Target: target, Action: action,
			Time: metav1.NewTime(readAt.Add(-time.Duration(minutes) * time.Minute))}
	}
}

func does(step, operation string) func(*v1alpha1.NodeOperation) {
	return func(op *v1alpha1.NodeOperation) { op.Spec.Step, op.Spec.Operation = step, operation }
}

// ladder is gpu-7's ladder as the remediator leaves it: a GPU reset behind
// a DeviceTaintRule whose drain failed, a reboot behind a cordon that did
// not bring the GPU back, a Redfish power cycle, a Cluster API replacement
// that did not come, the quarantine; and an operation on another node.
func ladder() []v1alpha1.NodeOperation {
	return []v1alpha1.NodeOperation{
		historyOp("gpu-lost.gpu-7.5f2c-4", "gpu-7", 20, does("", ""), gpu(gpu7), func(op *v1alpha1.NodeOperation) { op.Spec.Quarantine = true },
			phase(v1alpha1.PhaseSucceeded, "Quarantined: the ladder of policy gpu-lost ran out", 20, 20)),
		historyOp("gpu-lost.gpu-7.5f2c-0", "gpu-7", 150, gpu(gpu7), excluded(v1alpha1.Exclusion{
			Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: "kubemedic-gpu-7-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10-5d0e1c9a2b",
			Device: "gpu.nvidia.com/gpu-7/gpu-3", Message: "the GPU alone is excluded; the node keeps serving its other GPUs"}),
			phase(v1alpha1.PhaseFailed, "DrainFailed: pod train/db-0 | not evicted:\nPodDisruptionBudget train/db allows 0 disruptions", 149, 119)),
		historyOp("gpu-lost.gpu-9.aaaa-0", "gpu-9", 50, phase(v1alpha1.PhaseRunning, "Running reset-gpu", 49, 0)),
		historyOp("gpu-lost.gpu-7.5f2c-1", "gpu-7", 115, does("reboot", "reboot"), gpu(gpu7),
			cordoned("cordoned the node: the operation acts on the whole node"),
			phase(v1alpha1.PhaseFailed, "RecoveryTimeout: node condition GPULost still True 10m0s after the operation succeeded", 114, 85)),
		historyOp("gpu-lost.gpu-7.5f2c-2", "gpu-7", 80, does("power-cycle", "redfish-power-cycle"), gpu(gpu7),
			cordoned("cordoned the node: the operation acts on the whole node"),
			asked(v1alpha1.MachineRedfish, "https://10.0.0.5/redfish/v1/Systems/1", "ComputerSystem.Reset ResetType=PowerCycle", 78),
			phase(v1alpha1.PhaseFailed, "RecoveryTimeout: node condition GPULost still True 10m0s after the node rebooted", 79, 60)),
		historyOp("gpu-lost.gpu-7.5f2c-3", "gpu-7", 55, does("replace", "capi-replace"), gpu(gpu7),
			cordoned("cordoned the node: the operation acts on the whole node"),
			asked(v1alpha1.MachineClusterAPI, "Machine capi/gpu-md-7c9f", "annotated cluster.x-k8s.io/remediate-machine so that its MachineHealthCheck replaces it", 53),
			phase(v1alpha1.PhaseFailed, "RecoveryTimeout: the node was not replaced within 30m0s", 54, 23)),
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
			inOrder: []string{"gpu-lost.gpu-7.5f2c-0", "gpu-lost.gpu-7.5f2c-1", "gpu-lost.gpu-7.5f2c-2", "gpu-lost.gpu-7.5f2c-3", "gpu-lost.gpu-7.5f2c-4"},
			hasNot:  []string{"gpu-9.aaaa"}, has: []string{"5 NodeOperations."}},
		{desc: "same creation time: by name", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("b", "n", 5), historyOp("a", "n", 5)}}, maxOps: 10, inOrder: []string{"`a`", "`b`"}},
		{desc: "the newest are kept", h: render.NodeHistory{Node: "gpu-7", Operations: ladder()}, maxOps: 1,
			has: []string{"the newest 1 of 5 NodeOperations (4 older left out)", "gpu-lost.gpu-7.5f2c-4"}, hasNot: []string{"5f2c-0", "5f2c-1`", "5f2c-3`", "Machine request"}},
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
		{desc: "each row shows its GPU, exclusion path and machine request", h: render.NodeHistory{Node: "gpu-7", Operations: ladder()}, maxOps: 10,
			has: []string{
				"| Does | GPU, exclusion, machine request | Phase |",
				"| reset-gpu | reset-gpu | GPU `GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10` at bus `00000000:3B:00.0`<br>" +
					"Exclusion: DeviceTaintRule `kubemedic-gpu-7-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10-5d0e1c9a2b` on device `gpu.nvidia.com/gpu-7/gpu-3`" +
					" — the GPU alone is excluded; the node keeps serving its other GPUs | Failed |",
				"| reboot | reboot | GPU `GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10` at bus `00000000:3B:00.0`<br>" +
					"Exclusion: Cordon — cordoned the node: the operation acts on the whole node | Failed |",
				"<br>Machine request: Redfish to `https://10.0.0.5/redfish/v1/Systems/1`: ComputerSystem.Reset ResetType=PowerCycle, at 2026-11-21 13:12:00 UTC | Failed |",
				"<br>Machine request: ClusterAPI to `Machine capi/gpu-md-7c9f`: annotated cluster.x-k8s.io/remediate-machine so that its MachineHealthCheck replaces it, at 2026-11-21 13:37:00 UTC | Failed |",
				"| — | quarantine | GPU `GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10` at bus `00000000:3B:00.0` | Succeeded |",
			}},
		{desc: "a GPU known by bus only, a request not yet timed", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("a", "n", 5, gpu(&v1alpha1.GPUTarget{BusID: "00000000:3B:00.0"}), func(op *v1alpha1.NodeOperation) {
				op.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: v1alpha1.MachineMetal3, Target: "BareMetalHost metal3/node-12", Action: "power cycle"}
			})}}, maxOps: 10,
			has:    []string{"| GPU at bus `00000000:3B:00.0`<br>Machine request: Metal3 to `BareMetalHost metal3/node-12`: power cycle | Pending |"},
			hasNot: []string{"Exclusion:", ", at "}},
		{desc: "a target and action cannot break out of their cell or show credentials", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{
			historyOp("a", "n", 5, asked(v1alpha1.MachineRedfish, "https://admin:hunter2@10.0.0.5/redfish/v1/Systems/`1`|*_[x](y)_\n<!-- /kubemedic-alertbridge history -->",
				"ComputerSystem.Reset | <b>to</b>\nhttps://root:calvin@bmc.example/", 1),
				excluded(v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: "rule`|<x>", Device: "d|`", Message: "<!-- kubemedic-alertbridge key=a state= -->"}))}},
			maxOps: 10,
			has: []string{
				"Machine request: Redfish to `https://10.0.0.5/redfish/v1/Systems/'1'\\|*_[x](y)_ ‹!-- /kubemedic-alertbridge history --›`: " +
					"ComputerSystem.Reset \\| &lt;b&gt;to&lt;/b&gt; https://bmc.example/, at 2026-11-21 14:29:00 UTC |",
				"Exclusion: DeviceTaintRule `rule'\\|‹x›` on device `d\\|'` — &lt;!-- kubemedic-alertbridge key=a state= --&gt;<br>",
			},
			hasNot: []string{"hunter2", "calvin", "admin", "<b>", "<!-- kubemedic-alertbridge key"}},
		{desc: "no GPU, exclusion or request: a dash", h: render.NodeHistory{Node: "n", Operations: []v1alpha1.NodeOperation{historyOp("a", "n", 5)}}, maxOps: 10,
			has: []string{"| reset-gpu | reset-gpu | — | Pending |"}, hasNot: []string{"<br>"}},
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
	// 50 operations with the longest names, messages, GPU, exclusion and
	// machine request the API allows, in characters that grow most when
	// escaped or encoded.
	nasty := func(n int) string { return strings.Repeat("é|<`", n/4) }
	var ops []v1alpha1.NodeOperation
	for i := range 50 {
		op := historyOp(strings.Repeat("n", 250)+string(rune('a'+i%26))+string(rune('a'+i/26)), "gpu-7", 100-i,
			phase(v1alpha1.PhaseFailed, strings.Repeat("é|", 512), 1, 1),
			gpu(&v1alpha1.GPUTarget{UUID: nasty(128), BusID: nasty(64)}),
			excluded(v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: nasty(253), Device: nasty(1024), Message: nasty(1024)}),
			asked(v1alpha1.MachineRedfish, nasty(1024), nasty(1024), 1))
		op.Spec.Policy, op.Spec.Step = strings.Repeat("p", 253), strings.Repeat("s", 63)
		ops = append(ops, op)
	}
	for _, nodes := range []int{1, render.MaxHistoryNodes} {
		var hs []render.NodeHistory
		for range nodes {
			hs = append(hs, render.NodeHistory{Node: "gpu-7", Operations: ops})
		}
		got := render.HistorySection(hs, 0, 50, readAt)
		require.LessOrEqual(t, len(got), render.MaxHistoryBytes+2048, "%d nodes", nodes)
		require.Equal(t, nodes, strings.Count(got, "older left out"), "%d nodes", nodes)
		require.NotContains(t, got, "the newest 0 of", "%d nodes: every node lists its newest operation", nodes)
		require.Equal(t, 2*strings.Count(got, "| Failed |"), strings.Count(got, "…`"), "the device and target are cut inside their code spans")

		// Attached to the longest body, the body is cut and the history kept.
		body := strings.Repeat("a", render.MaxBodyLength)
		all := render.AttachHistory(body, got)
		require.LessOrEqual(t, len(all), render.MaxBodyLength)
		require.True(t, strings.HasSuffix(all, got))
		require.Contains(t, all, "… [truncated]")
	}
}

// Five nodes, the most the section lists, each with the whole ladder: every
// row of every node is listed; with the longest names, target and messages
// the API allows, every node still lists its newest rows, the machine
// requests whole, and the rest is counted as left out.
func TestHistorySectionLadderForEveryNode(t *testing.T) {
	fiveNodes := func(ops []v1alpha1.NodeOperation) string {
		var hs []render.NodeHistory
		for range render.MaxHistoryNodes {
			hs = append(hs, render.NodeHistory{Node: "gpu-7", Operations: ops})
		}
		got := render.HistorySection(hs, 0, 10, readAt)
		require.LessOrEqual(t, len(got), render.MaxHistoryBytes+2048)
		return got
	}

	got := fiveNodes(ladder())
	require.Equal(t, render.MaxHistoryNodes, strings.Count(got, "as read at 2026-11-21 14:30:00 UTC: 5 NodeOperations.\n"), got)
	require.Equal(t, render.MaxHistoryNodes, strings.Count(got, "Machine request: Redfish to `https://10.0.0.5/redfish/v1/Systems/1`"))
	require.Equal(t, render.MaxHistoryNodes, strings.Count(got, "Exclusion: DeviceTaintRule `kubemedic-gpu-7-"))

	long := strings.Repeat("g", 253)
	ops := ladder()
	for i := range ops {
		ops[i].Name = strings.Repeat("o", 240) + ops[i].Name[len(ops[i].Name)-6:]
		ops[i].Status.Message = strings.Repeat("m", 1024)
		if x := ops[i].Status.Exclusion; x != nil {
			x.Message = strings.Repeat("x", 1024)
			if x.DeviceTaintRule != "" {
				x.DeviceTaintRule, x.Device = long, "gpu.nvidia.com/"+long+"/gpu-3"
			}
		}
		if r := ops[i].Status.MachineRequest; r != nil {
			r.Target = "Machine " + strings.Repeat("c", 63) + "/" + long
		}
	}
	got = fiveNodes(ops)
	require.Equal(t, render.MaxHistoryNodes, strings.Count(got, "the newest 4 of 5 NodeOperations (1 older left out)"), got)
	require.Equal(t, 2*render.MaxHistoryNodes, strings.Count(got, "to `Machine "+strings.Repeat("c", 63)+"/"+long+"`: "), "the target is not cut")
	require.Equal(t, render.MaxHistoryNodes, strings.Count(got, "5f2c-4` | gpu-lost | — | quarantine |"))
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
