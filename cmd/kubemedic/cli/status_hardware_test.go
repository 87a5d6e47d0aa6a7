package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
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
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/gpuhistory"
)

const (
	gpuA = "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
	gpuB = "GPU-11111111-2222-3333-4444-555555555555"
	gpuC = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

	bus3b = "0000:3b:00.0"
	bus86 = "0000:86:00.0"
	busAf = "0000:af:00.0"
	bus18 = "0000:18:00.0"

	// badHistory is the one hand-written annotation: it does not parse.
	badHistory = `{"v":1,"entries":[{"time":"yesterday","fault":{"condition":"GPULost"}}]}`
)

// xidFault is an Xid fault d before statusNow.
func xidFault(d time.Duration, bus, uuid string, xid int) gpuwire.Entry {
	return gpuwire.Entry{Time: statusNow.Add(-d), Bus: bus, UUID: uuid,
		Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidResetRequired, Xid: xid}}
}

// eccFault is an ECC fault d before statusNow.
func eccFault(d time.Duration, bus, uuid, ecc string) gpuwire.Entry {
	return gpuwire.Entry{Time: statusNow.Add(-d), Bus: bus, UUID: uuid,
		Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPUMemoryUnhealthy, Reason: v1alpha1.ReasonRowRemapPending, ECC: ecc}}
}

// opDone is a NodeOperation of policy xid that ended d before statusNow.
func opDone(d time.Duration, bus, uuid, name, operation string, out gpuwire.Outcome) gpuwire.Entry {
	return gpuwire.Entry{Time: statusNow.Add(-d), Bus: bus, UUID: uuid,
		Operation: &gpuwire.Operation{Name: name, Policy: "xid", Step: 1, Operation: operation, Outcome: out}}
}

// history is the annotation the remediator would write after recording
// entries with gpuhistory.Add.
func history(t *testing.T, entries ...gpuwire.Entry) string {
	t.Helper()
	var h gpuwire.History
	for i, e := range entries {
		n := len(h.Entries)
		h = gpuhistory.Add(h, e, statusNow)
		require.Len(t, h.Entries, n+1, "entry %d was not added: %v", i, e.Validate())
	}
	s, err := h.Encode()
	require.NoError(t, err)
	return s
}

func withHistory(n corev1.Node, annotation string) corev1.Node {
	n.Annotations = map[string]string{gpuwire.Annotation: annotation, "other": "x"}
	return n
}

func hwTime(d time.Duration) metav1.Time { return metav1.NewTime(statusNow.Add(-d)) }

func hwXid(d time.Duration, xid int) *HardwareFault {
	return &HardwareFault{Time: hwTime(d), Condition: v1alpha1.ConditionGPUXidError, Reason: v1alpha1.ReasonXidResetRequired, Xid: xid}
}

func hwOp(d time.Duration, name, operation string, out gpuwire.Outcome) *HardwareOperation {
	return &HardwareOperation{Time: hwTime(d), Name: name, Policy: "xid", Step: 1, Operation: operation, Outcome: out}
}

// emptyHardware is the RMA list of a cluster without history, which a case
// edits.
func emptyHardware(edit func(*Hardware)) Hardware {
	hw := Hardware{Time: metav1.NewTime(statusNow), Server: "https://api.example:6443", Window: metav1.Duration{Duration: 24 * time.Hour},
		Attention: []string{}, GPUs: []GPUHardware{}}
	if edit != nil {
		edit(&hw)
	}
	return hw
}

// hardwareFleet is a cluster with something in every kind of row:
//
//   - gpu-a, quarantined: GPU A at 3b failing again and again (one fault
//     older than the window), GPU B at 86 with an old ECC fault, and a
//     failed reboot (node-wide);
//   - gpu-b: GPU C moved from 3b to af, and bus-only faults at 18;
//   - gpu-c: an annotation that does not parse;
//   - gpu-d: no annotation.
func hardwareFleet(t *testing.T) statusInput {
	return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{
		withHistory(node("gpu-c"), badHistory),
		node("gpu-d"),
		withHistory(node("gpu-b"), history(t,
			xidFault(10*time.Hour, bus3b, gpuC, 48),
			xidFault(5*time.Hour, bus18, "", 31),
			xidFault(time.Hour, busAf, gpuC, 48))),
		withHistory(quarantined(node("gpu-a"), nil), history(t,
			eccFault(40*time.Hour, bus86, gpuB, "VolatileDBE"),
			opDone(39*time.Hour, bus86, gpuB, "xid.gpu-a-0", "reset-gpu", gpuwire.Succeeded),
			xidFault(30*time.Hour, bus3b, gpuA, 79),
			xidFault(3*time.Hour, bus3b, gpuA, 79),
			opDone(170*time.Minute, bus3b, gpuA, "xid.gpu-a-1", "reset-gpu", gpuwire.Failed),
			xidFault(2*time.Hour, bus3b, gpuA, 79),
			opDone(time.Hour, "", "", "xid.gpu-a-2", "reboot", gpuwire.Failed))),
	}, Ops: []v1alpha1.NodeOperation{
		captureOp("xid.gpu-a-1", "gpu-a", &v1alpha1.GPUTarget{UUID: gpuA, BusID: bus3b}, 171*time.Minute),
		captureOp("xid.gpu-a-2", "gpu-a", nil, 61*time.Minute),
		captureOp("xid.gpu-a-3", "gpu-a", &v1alpha1.GPUTarget{UUID: gpuA, BusID: bus3b}, 30*time.Minute),
		captureOp("xid.gpu-b-0", "gpu-b", &v1alpha1.GPUTarget{UUID: gpuA, BusID: bus3b}, 30*time.Minute),
	}}
}

// hwBundle is captureOp's bundle as the RMA list shows it.
func hwBundle(node, name string, ago time.Duration) HardwareBundle {
	return HardwareBundle{Operation: name, Time: metav1.NewTime(statusNow.Add(-ago)), Key: node + "/" + name + ".tar.gz", SHA256: strings.Repeat("ab", 32), Stored: true}
}

// captureOp is an operation on node whose capture, ago, left a bundle.
func captureOp(name, node string, gpu *v1alpha1.GPUTarget, ago time.Duration) v1alpha1.NodeOperation {
	done := metav1.NewTime(statusNow.Add(-ago))
	return v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOperationSpec{NodeName: node},
		Status: v1alpha1.NodeOperationStatus{GPU: gpu, Diagnostics: &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured, CompletionTime: &done,
			Bundle: &v1alpha1.DiagnosticsBundle{Key: node + "/" + name + ".tar.gz", SHA256: strings.Repeat("ab", 32), Stored: true}}}}
}

const badHistoryNote = `node gpu-c: unreadable GPU history: decode kubemedic.io/gpu-history: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`

func TestBuildHardware(t *testing.T) {
	cases := []struct {
		desc string
		in   func(t *testing.T) statusInput
		want Hardware
	}{{
		desc: "an empty cluster has empty lists, not null ones",
		in:   func(*testing.T) statusInput { return statusInput{} },
		want: emptyHardware(func(hw *Hardware) { hw.Server = "" }),
	}, {
		desc: "nodes without the annotation, or with an empty history, list nothing",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{node("gpu-a"), withHistory(node("gpu-b"), ""),
				withHistory(node("gpu-c"), history(t))}}
		},
		want: emptyHardware(nil),
	}, {
		desc: "two GPUs on one node: more failures in the window come first, whatever the total",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{withHistory(node("gpu-a"), history(t,
				xidFault(72*time.Hour, bus3b, gpuA, 79), xidFault(71*time.Hour, bus3b, gpuA, 79), xidFault(70*time.Hour, bus3b, gpuA, 79),
				xidFault(time.Hour, bus86, gpuB, 48),
				opDone(30*time.Minute, bus86, gpuB, "xid.gpu-a-0", "reset-gpu", gpuwire.Failed)))}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{
				{Node: "gpu-a", GPU: gpuB, UUID: gpuB, Bus: bus86, Faults: 1, FailuresInWindow: 2, LastFault: hwXid(time.Hour, 48),
					LastOperation: hwOp(30*time.Minute, "xid.gpu-a-0", "reset-gpu", gpuwire.Failed)},
				{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Bus: bus3b, Faults: 3, LastFault: hwXid(70*time.Hour, 79)},
			}
		}),
	}, {
		desc: "equal failures in the window: more faults first, then by node",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{
				withHistory(node("gpu-c"), history(t, xidFault(time.Hour, bus3b, gpuC, 79))),
				withHistory(node("gpu-b"), history(t, xidFault(time.Hour, bus3b, gpuB, 79))),
				withHistory(node("gpu-a"), history(t, xidFault(48*time.Hour, bus3b, gpuA, 79), xidFault(time.Hour, bus3b, gpuA, 79))),
			}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{
				{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Bus: bus3b, Faults: 2, FailuresInWindow: 1, LastFault: hwXid(time.Hour, 79)},
				{Node: "gpu-b", GPU: gpuB, UUID: gpuB, Bus: bus3b, Faults: 1, FailuresInWindow: 1, LastFault: hwXid(time.Hour, 79)},
				{Node: "gpu-c", GPU: gpuC, UUID: gpuC, Bus: bus3b, Faults: 1, FailuresInWindow: 1, LastFault: hwXid(time.Hour, 79)},
			}
		}),
	}, {
		desc: "a GPU moved to another bus is one row, at its last bus, with all its faults",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{withHistory(node("gpu-b"), history(t,
				xidFault(10*time.Hour, bus3b, gpuC, 48),
				opDone(9*time.Hour, bus3b, gpuC, "xid.gpu-b-0", "reset-gpu", gpuwire.Succeeded),
				xidFault(time.Hour, busAf, gpuC, 79)))}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{{Node: "gpu-b", GPU: gpuC, UUID: gpuC, Bus: busAf, Faults: 2, FailuresInWindow: 2, LastFault: hwXid(time.Hour, 79),
				LastOperation: hwOp(9*time.Hour, "xid.gpu-b-0", "reset-gpu", gpuwire.Succeeded)}}
		}),
	}, {
		desc: "bus-only entries join the one UUID seen at their bus, else are a GPU named by the bus",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{withHistory(node("gpu-a"), history(t,
				xidFault(3*time.Hour, bus3b, "", 79),
				opDone(2*time.Hour, bus3b, gpuA, "xid.gpu-a-0", "reset-gpu", gpuwire.Succeeded),
				eccFault(time.Hour, bus18, "", "VolatileDBE"),
				xidFault(30*time.Minute, bus18, "", 48)))}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{
				{Node: "gpu-a", GPU: bus18, Bus: bus18, Faults: 2, FailuresInWindow: 2, LastFault: hwXid(30*time.Minute, 48)},
				{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Bus: bus3b, Faults: 1, FailuresInWindow: 1, LastFault: hwXid(3*time.Hour, 79),
					LastOperation: hwOp(2*time.Hour, "xid.gpu-a-0", "reset-gpu", gpuwire.Succeeded)},
			}
		}),
	}, {
		desc: "entries that name no GPU are the row GPU node; its failures count node-wide faults and failed operations",
		in: func(t *testing.T) statusInput {
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{withHistory(node("gpu-a"), history(t,
				gpuwire.Entry{Time: statusNow.Add(-25 * time.Hour), Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPULost}},
				gpuwire.Entry{Time: statusNow.Add(-3 * time.Hour), Fault: &gpuwire.Fault{Condition: v1alpha1.ConditionGPULost}},
				opDone(2*time.Hour, "", "", "xid.gpu-a-0", "reboot", gpuwire.Failed),
				opDone(time.Hour, "", "", "xid.gpu-a-1", "reboot", gpuwire.Skipped)))}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{{Node: "gpu-a", GPU: GPUNodeWide, Faults: 2, FailuresInWindow: 2,
				LastFault:     &HardwareFault{Time: hwTime(3 * time.Hour), Condition: v1alpha1.ConditionGPULost},
				LastOperation: hwOp(time.Hour, "xid.gpu-a-1", "reboot", gpuwire.Skipped)}}
		}),
	}, {
		desc: "the fleet: an unreadable history first and under attention, then worst first; quarantine per node",
		in:   hardwareFleet,
		want: emptyHardware(func(hw *Hardware) {
			hw.Attention = []string{badHistoryNote}
			hw.GPUs = []GPUHardware{
				{Node: "gpu-c", GPU: GPUUnreadable, Notes: badHistoryNote},
				{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Bus: bus3b, Quarantined: true, Faults: 3, FailuresInWindow: 3, LastFault: hwXid(2*time.Hour, 79),
					LastOperation: hwOp(170*time.Minute, "xid.gpu-a-1", "reset-gpu", gpuwire.Failed),
					Bundles:       []HardwareBundle{hwBundle("gpu-a", "xid.gpu-a-1", 171*time.Minute), hwBundle("gpu-a", "xid.gpu-a-3", 30*time.Minute)}},
				{Node: "gpu-b", GPU: gpuC, UUID: gpuC, Bus: busAf, Faults: 2, FailuresInWindow: 2, LastFault: hwXid(time.Hour, 48)},
				{Node: "gpu-b", GPU: bus18, Bus: bus18, Faults: 1, FailuresInWindow: 1, LastFault: hwXid(5*time.Hour, 31)},
				{Node: "gpu-a", GPU: GPUNodeWide, Quarantined: true, FailuresInWindow: 1, LastOperation: hwOp(time.Hour, "xid.gpu-a-2", "reboot", gpuwire.Failed),
					Bundles: []HardwareBundle{hwBundle("gpu-a", "xid.gpu-a-2", 61*time.Minute)}},
				{Node: "gpu-a", GPU: gpuB, UUID: gpuB, Bus: bus86, Quarantined: true, Faults: 1,
					LastFault:     &HardwareFault{Time: hwTime(40 * time.Hour), Condition: v1alpha1.ConditionGPUMemoryUnhealthy, Reason: v1alpha1.ReasonRowRemapPending, ECC: "VolatileDBE"},
					LastOperation: hwOp(39*time.Hour, "xid.gpu-a-0", "reset-gpu", gpuwire.Succeeded)},
			}
		}),
	}, {
		desc: "banks without spare rows, from the gpu-memory check's message: on the GPU's line, or a line of their own",
		in: func(t *testing.T) statusInput {
			memory := func(n corev1.Node, msg string) corev1.Node {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.ConditionGPUMemoryUnhealthy,
					Status: corev1.ConditionFalse, Reason: "GPUMemoryHealthy", Message: msg})
				return n
			}
			return statusInput{Server: "https://api.example:6443", Nodes: []corev1.Node{
				memory(withHistory(node("gpu-a"), history(t, xidFault(time.Hour, bus3b, gpuA, 79))),
					"8 GPUs without memory faults (nvml); 3 banks without spare rows on 0000:3b:00.0 ("+gpuA+")"),
				memory(node("gpu-b"), "8 GPUs without memory faults (nvidia-smi); 1 banks without spare rows on 00000000:86:00.0 (+2 GPUs)"),
				memory(node("gpu-c"), "8 GPUs without memory faults (nvml)"),
			}}
		},
		want: emptyHardware(func(hw *Hardware) {
			hw.GPUs = []GPUHardware{
				{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Bus: bus3b, Faults: 1, FailuresInWindow: 1, LastFault: hwXid(time.Hour, 79),
					Notes: "3 banks without spare rows: the next uncorrectable error there is a remap failure"},
				{Node: "gpu-b", GPU: bus86, Bus: bus86,
					Notes: "1 banks without spare rows: the next uncorrectable error there is a remap failure (2 more GPUs of the node have such banks; kubectl describe node)"},
			}
		}),
	}}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.in(t)
			before, err := json.Marshal(in)
			require.NoError(t, err)
			got := buildHardware(in, 24*time.Hour, statusNow.Add(300*time.Millisecond))
			require.Equal(t, tc.want, got)
			after, err := json.Marshal(in)
			require.NoError(t, err)
			require.JSONEq(t, string(before), string(after), "buildHardware changed its input")
		})
	}

	// A wider window counts the old faults: GPU B's ECC fault is 40h old.
	hw := buildHardware(hardwareFleet(t), 48*time.Hour, statusNow)
	var rows []string
	for _, g := range hw.GPUs {
		rows = append(rows, fmt.Sprintf("%s %s %d/%d", g.Node, g.GPU, g.FailuresInWindow, g.Faults))
	}
	require.Equal(t, []string{"gpu-c ? 0/0", "gpu-a " + gpuA + " 4/3", "gpu-b " + gpuC + " 2/2", "gpu-a " + gpuB + " 1/1",
		"gpu-b " + bus18 + " 1/1", "gpu-a node 1/0"}, rows)
}

// hardwareScreen is the screen of hardwareFleet; docs/status.md shows it.
const hardwareScreen = `kubemedic status --hardware of https://api.example:6443 at 2026-11-21T12:00:00Z
ATTENTION (1):
  node gpu-c: unreadable GPU history: decode kubemedic.io/gpu-history: parsing time "yesterday" as "2006-01-02T15:04:05...

GPU history (6 rows, 3 nodes), worst first: failures in the last 24h, then faults
  NODE   GPU                                       BUS           QUARANTINED  FAULTS  FAILURES/24h  LAST FAULT                                                   LAST OPERATION                              EVIDENCE                        NOTES
  gpu-c  ?                                         -             no           0       0             -                                                            -                                           -                               node gpu-c: unreadable GPU history: decode kubemedic.io/g...
  gpu-a  GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b  0000:3b:00.0  yes          3       3             GPUXidError/XidResetRequired Xid 79, 120m ago                reset-gpu Failed (xid.gpu-a-1), 170m ago    2 bundles, newest: xid.gpu-a-3  -
  gpu-b  GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee  0000:af:00.0  no           2       2             GPUXidError/XidResetRequired Xid 48, 60m ago                 -                                           -                               -
  gpu-b  0000:18:00.0                              0000:18:00.0  no           1       1             GPUXidError/XidResetRequired Xid 31, 5h ago                  -                                           -                               -
  gpu-a  node                                      -             yes          0       1             -                                                            reboot Failed (xid.gpu-a-2), 60m ago        1 bundle: xid.gpu-a-2           -
  gpu-a  GPU-11111111-2222-3333-4444-555555555555  0000:86:00.0  yes          1       0             GPUMemoryUnhealthy/RowRemapPending ECC VolatileDBE, 40h ago  reset-gpu Succeeded (xid.gpu-a-0), 39h ago  -                               -
`

func TestPrintHardware(t *testing.T) {
	var b bytes.Buffer
	printHardware(&b, buildHardware(hardwareFleet(t), 24*time.Hour, statusNow))
	t.Log("\n" + b.String())
	require.Equal(t, hardwareScreen, b.String())
	doc, err := os.ReadFile("../../../docs/status.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), "$ kubemedic status --hardware\n"+hardwareScreen+"```\n", "docs/status.md shows this screen")

	b.Reset()
	printHardware(&b, emptyHardware(nil))
	require.Equal(t, "kubemedic status --hardware of https://api.example:6443 at 2026-11-21T12:00:00Z\n"+
		"No node has a GPU history (the kubemedic.io/gpu-history annotation, which the remediator writes).\n", b.String())

	// The window names the count's column; a fault ahead of this clock is "in".
	b.Reset()
	printHardware(&b, emptyHardware(func(hw *Hardware) {
		hw.Window.Duration = 7 * 24 * time.Hour
		hw.GPUs = []GPUHardware{{Node: "gpu-a", GPU: gpuA, UUID: gpuA, Faults: 1, FailuresInWindow: 1,
			LastFault: &HardwareFault{Time: metav1.NewTime(statusNow.Add(time.Minute)), Condition: v1alpha1.ConditionGPUMemoryUnhealthy, ECC: "RowRemapFailed"}}}
	}))
	require.Contains(t, b.String(), "\nGPU history (1 rows, 1 nodes), worst first: failures in the last 7d, then faults\n")
	require.Contains(t, b.String(), "  NODE   GPU                                       BUS  QUARANTINED  FAULTS  FAILURES/7d  LAST FAULT                                     LAST OPERATION  EVIDENCE  NOTES\n")
	require.Contains(t, b.String(), "  gpu-a  "+gpuA+"  -    no           1       1            GPUMemoryUnhealthy ECC RowRemapFailed, in 60s  -               -         -\n")
}

// TestHardwareOutputFormats pins the field names of --hardware -o json
// (scripts read them) and checks that -o yaml says the same.
func TestHardwareOutputFormats(t *testing.T) {
	in := hardwareFleet(t)
	read := func(context.Context) (statusInput, error) { return in, nil }
	var docs []map[string]any
	for _, output := range []string{"json", "yaml"} {
		var out bytes.Buffer
		code, err := showHardware(context.Background(), read, fixedClock(statusNow), output, 24*time.Hour, &out)
		require.NoError(t, err)
		require.Equal(t, ExitInvalid, code, "an unreadable history")
		var got map[string]any
		require.NoError(t, yaml.Unmarshal(out.Bytes(), &got), output)
		docs = append(docs, got)
	}
	require.Equal(t, docs[0], docs[1], "json and yaml say the same")
	doc := docs[0]
	require.Equal(t, []string{"attention", "gpus", "server", "time", "window"}, slices.Sorted(maps.Keys(doc)))
	require.Equal(t, "24h0m0s", doc["window"])
	require.Equal(t, "2026-11-21T12:00:00Z", doc["time"])
	require.Equal(t, []any{badHistoryNote}, doc["attention"])
	gpus := doc["gpus"].([]any)
	require.Len(t, gpus, 6)
	require.Equal(t, map[string]any{"node": "gpu-c", "gpu": "?", "quarantined": false, "faults": 0.0, "failuresInWindow": 0.0, "notes": badHistoryNote}, gpus[0])
	require.Equal(t, map[string]any{"node": "gpu-a", "gpu": gpuA, "uuid": gpuA, "bus": bus3b, "quarantined": true, "faults": 3.0, "failuresInWindow": 3.0,
		"lastFault":     map[string]any{"time": "2026-11-21T10:00:00Z", "condition": "GPUXidError", "reason": "XidResetRequired", "xid": 79.0},
		"lastOperation": map[string]any{"time": "2026-11-21T09:10:00Z", "name": "xid.gpu-a-1", "policy": "xid", "step": 1.0, "operation": "reset-gpu", "outcome": "Failed"},
		"bundles": []any{
			map[string]any{"operation": "xid.gpu-a-1", "time": "2026-11-21T09:09:00Z", "key": "gpu-a/xid.gpu-a-1.tar.gz", "sha256": strings.Repeat("ab", 32), "stored": true},
			map[string]any{"operation": "xid.gpu-a-3", "time": "2026-11-21T11:30:00Z", "key": "gpu-a/xid.gpu-a-3.tar.gz", "sha256": strings.Repeat("ab", 32), "stored": true}},
		"notes": ""}, gpus[1])
	require.Equal(t, map[string]any{"time": "2026-11-19T20:00:00Z", "condition": "GPUMemoryUnhealthy", "reason": "RowRemapPending", "ecc": "VolatileDBE"},
		gpus[5].(map[string]any)["lastFault"])

	var out bytes.Buffer
	read = func(context.Context) (statusInput, error) { return statusInput{}, nil }
	code, err := showHardware(context.Background(), read, fixedClock(statusNow), "json", time.Hour, &out)
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)
	require.JSONEq(t, `{"time":"2026-11-21T12:00:00Z","server":"","window":"1h0m0s","attention":[],"gpus":[]}`, out.String())
}

func TestRunStatusHardwareExitCodes(t *testing.T) {
	fine := func(t *testing.T) statusInput {
		return statusInput{Nodes: []corev1.Node{withHistory(quarantined(node("gpu-a"), nil), history(t, xidFault(time.Hour, bus3b, gpuA, 79)))},
			Policies: []v1alpha1.RemediationPolicy{policy("xid", func(p *v1alpha1.RemediationPolicy) {
				p.Status.Conditions[1].Status = metav1.ConditionTrue
			})}}
	}
	bad := func(*testing.T) statusInput {
		return statusInput{Nodes: []corev1.Node{withHistory(node("gpu-c"), badHistory)}}
	}
	for _, tc := range []struct {
		desc   string
		in     func(*testing.T) statusInput
		err    error
		output string
		code   int
		stdout string
		stderr string
	}{
		{desc: "histories that parse exit 0, even with a quarantined node and an open breaker", in: fine, code: ExitOK,
			stdout: "  gpu-a  " + gpuA + "  0000:3b:00.0  yes          1       1             GPUXidError/XidResetRequired Xid 79, 60m ago  -               -         -\n"},
		{desc: "no history exits 0 and says where history comes from", in: func(*testing.T) statusInput { return statusInput{} }, code: ExitOK,
			stdout: "No node has a GPU history (the kubemedic.io/gpu-history annotation, which the remediator writes).\n"},
		{desc: "an unreadable history exits 1 and is under attention", in: bad, code: ExitInvalid,
			stdout: "ATTENTION (1):\n  node gpu-c: unreadable GPU history: decode kubemedic.io/gpu-history: parsing time"},
		{desc: "an unreadable history exits 1 with -o json", in: bad, output: "json", code: ExitInvalid, stdout: `"gpu": "?",`},
		{desc: "a failed request exits 1 and is named", in: func(*testing.T) statusInput { return statusInput{} }, err: errors.New("https://x:6443: list nodes: forbidden"),
			code: ExitInvalid, stderr: "kubemedic status: https://x:6443: list nodes: forbidden\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := tc.in(t)
			read := func(context.Context) (statusInput, error) { return in, tc.err }
			var out, errOut bytes.Buffer
			code := runStatus(context.Background(), read, fixedClock(statusNow), nil,
				statusOptions{Output: tc.output, Interval: time.Second, Hardware: true, Window: 24 * time.Hour}, &out, &errOut)
			t.Log("\n" + out.String())
			require.Equal(t, tc.code, code)
			require.Contains(t, out.String(), tc.stdout)
			require.NotContains(t, out.String(), "Remediation policies", "the fleet screen")
			require.Equal(t, tc.stderr, errOut.String())
		})
	}
}

// TestStatusHardwareWatch: --watch shows the RMA list too; a watch whose
// context has ended shows it once and exits 0, also over an unreadable
// history.
func TestStatusHardwareWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	read := func(context.Context) (statusInput, error) {
		return statusInput{Server: "read-1", Nodes: []corev1.Node{withHistory(node("gpu-c"), badHistory)}}, nil
	}
	var out, errOut bytes.Buffer
	code := runStatus(ctx, read, fixedClock(statusNow), testingclock.NewFakeClock(statusNow), statusOptions{Watch: true, Interval: time.Second, Hardware: true, Window: time.Hour}, &out, &errOut)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out.String(), "kubemedic status --hardware of read-1 at 2026-11-21T12:00:00Z\nATTENTION (1):\n")
	require.Empty(t, errOut.String())
}

// readHardware lists nodes only: a forbidden NodeOperation list does not
// matter, a forbidden node list is named.
func TestReadHardware(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	forbid := func(what client.ObjectList) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if fmt.Sprintf("%T", list) != fmt.Sprintf("%T", what) {
				return c.List(ctx, list, opts...)
			}
			return errors.New("forbidden")
		}}
	}
	n := withHistory(node("gpu-a"), badHistory)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&n).WithInterceptorFuncs(forbid(&v1alpha1.NodeOperationList{})).Build()
	in, err := readHardware(context.Background(), c, "https://x:6443")
	require.NoError(t, err)
	require.Equal(t, "https://x:6443", in.Server)
	require.Len(t, in.Nodes, 1)
	require.Equal(t, badHistory, in.Nodes[0].Annotations[gpuwire.Annotation])
	require.EqualError(t, in.OpsErr, "https://x:6443: list nodeoperations: forbidden", "the bundles are extra evidence: their read fails soft")
	require.Contains(t, buildHardware(in, 24*time.Hour, statusNow).Attention, "diagnostics bundles unknown: https://x:6443: list nodeoperations: forbidden")

	c = fake.NewClientBuilder().WithScheme(scheme).WithObjects(&n).WithInterceptorFuncs(forbid(&corev1.NodeList{})).Build()
	_, err = readHardware(context.Background(), c, "https://x:6443")
	require.EqualError(t, err, "https://x:6443: list nodes: forbidden")
}
