package bridge_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const historyConfig = baseConfig + `
nodeHistory: {enabled: true, maxOperations: 10}
`

// fakeOps is a NodeOperations with canned operations or an error. With
// hang set it does not answer until hang is closed and ignores its context,
// like a stuck API server behind a client that does not honour deadlines.
type fakeOps struct {
	mu    sync.Mutex
	ops   []v1alpha1.NodeOperation
	err   error
	hang  chan struct{}
	calls [][]string
}

func (f *fakeOps) NodeOperations(ctx context.Context, nodes []string) ([]v1alpha1.NodeOperation, error) {
	f.mu.Lock()
	f.calls = append(f.calls, nodes)
	ops, err, hang := f.ops, f.err, f.hang
	f.mu.Unlock()
	if hang != nil {
		<-hang
	}
	return ops, err
}

func (f *fakeOps) set(ops []v1alpha1.NodeOperation, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops, f.err = ops, err
}

func (f *fakeOps) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func nodeOp(name, node string, created time.Time, p v1alpha1.NodeOperationPhase, msg string) v1alpha1.NodeOperation {
	op := v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: node, Policy: "gpu-lost", Step: "reset-gpu"},
		Status:     v1alpha1.NodeOperationStatus{Phase: p, Message: msg},
	}
	op.Spec.Operation = "reset-gpu"
	return op
}

func withOps(ops bridge.NodeOperations, timeout time.Duration, clk *skewClock) func(*bridge.Options) {
	return func(o *bridge.Options) {
		o.NodeOperations, o.NodeHistoryTimeout = ops, timeout
		if clk != nil {
			o.Clock = clk
		}
	}
}

func TestNodeHistoryFiledCarriedAndRefreshedOnReopen(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	reset := nodeOp("gpu-lost.gpu-7.a", "gpu-7", t0, v1alpha1.PhaseFailed, "DrainFailed: PodDisruptionBudget train/db")
	reset.Status.GPU = &v1alpha1.GPUTarget{UUID: "GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10", BusID: "00000000:3B:00.0"}
	reset.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionDeviceTaintRule, DeviceTaintRule: "kubemedic-gpu-7-3f2a-5d0e1c9a2b"}
	cycle := nodeOp("gpu-lost.gpu-7.b", "gpu-7", t0.Add(30*time.Minute), v1alpha1.PhaseFailed, "RecoveryTimeout")
	cycle.Status.Exclusion = &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon}
	cycle.Status.MachineRequest = &v1alpha1.MachineRequest{Kind: v1alpha1.MachineRedfish, Target: "https://root:calvin@10.0.0.5/redfish/v1/Systems/1",
		Action: "ComputerSystem.Reset ResetType=PowerCycle", Time: metav1.NewTime(t0.Add(31 * time.Minute))}
	ops := &fakeOps{ops: []v1alpha1.NodeOperation{
		nodeOp("gpu-lost.gpu-7.c", "gpu-7", t0.Add(time.Hour), v1alpha1.PhaseSucceeded, "Quarantined"),
		reset, cycle,
		nodeOp("gpu-lost.gpu-9.a", "gpu-9", t0, v1alpha1.PhaseRunning, "on another node"),
	}}
	// The ladder each row shows: the GPU, how it was kept away, what was asked of the BMC.
	ladder := []string{
		"| GPU `GPU-3f2a9c1e-0b7d-4c55-9e21-6a8d2f4b7c10` at bus `00000000:3B:00.0`<br>Exclusion: DeviceTaintRule `kubemedic-gpu-7-3f2a-5d0e1c9a2b` | Failed |",
		"| Exclusion: Cordon<br>Machine request: Redfish to `https://10.0.0.5/redfish/v1/Systems/1`: ComputerSystem.Reset ResetType=PowerCycle, at 2026-11-21 08:31:00 UTC | Failed |",
	}
	clk := &skewClock{}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, clk))
	e.fake.SetClock(clk)

	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	require.Contains(t, is.Body, "### Operation history on node `gpu-7`")
	a, b, c := strings.Index(is.Body, "gpu-lost.gpu-7.a"), strings.Index(is.Body, "gpu-lost.gpu-7.b"), strings.Index(is.Body, "gpu-lost.gpu-7.c")
	require.True(t, a > 0 && b > a && c > b, "oldest first:\n%s", is.Body)
	require.NotContains(t, is.Body, "gpu-9")
	require.Contains(t, is.Body, "DrainFailed: PodDisruptionBudget train/db")
	for _, l := range ladder {
		require.Contains(t, is.Body, l)
	}
	require.NotContains(t, is.Body, "calvin", "no BMC credentials in an issue")
	require.Equal(t, [][]string{{"gpu-7"}}, ops.calls)
	require.Equal(t, float64(1), e.metric("kubemedic_alertbridge_node_history_reads_total", map[string]string{"result": "ok"}))

	// Resolve: the body is rewritten and keeps the history it was filed
	// with, without reading again (even across a restart, from GitHub).
	e.restart()
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", true)))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	require.Equal(t, ghclient.StateClosed, is.State)
	require.Contains(t, is.Body, "### Resolved")
	require.Contains(t, is.Body, "gpu-lost.gpu-7.a")
	for _, l := range ladder {
		require.Contains(t, is.Body, l, "carried over with the section")
	}
	require.Equal(t, 1, strings.Count(is.Body, "### Operation history"))
	require.Equal(t, 1, ops.callCount(), "a resolve does not read the history")

	// Fires again within the reopen window: the reopen comment and the body
	// list the history as it is now.
	ops.set(append(ops.ops, nodeOp("manual-gpu-7", "gpu-7", t0.Add(2*time.Hour), v1alpha1.PhaseFailed, "restart-kubelet failed")), nil)
	clk.Advance(10 * time.Minute)
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	is = onlyIssue(t, e.fake, repo)
	require.Equal(t, ghclient.StateOpen, is.State)
	require.Contains(t, is.Body, "manual-gpu-7")
	require.Equal(t, 1, strings.Count(is.Body, "### Operation history"))
	comments := e.fake.Comments(repo, is.Number)
	last := comments[len(comments)-1]
	require.Contains(t, last, "Reopening.")
	require.Contains(t, last, "### Operation history on node `gpu-7`")
	require.Contains(t, last, "manual-gpu-7")
	require.Equal(t, 2, ops.callCount())
}

func TestNodeHistoryUnreadableStillFiles(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ops  *fakeOps
		want string
	}{
		{desc: "API error", ops: &fakeOps{err: errors.New(`list nodeoperations: nodeoperations.kubemedic.io is forbidden`)},
			want: "could not be read at "},
		{desc: "no answer, context ignored", ops: &fakeOps{hang: make(chan struct{})}, want: "no answer from the Kubernetes API within 200ms"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t, historyConfig, withOps(tc.ops, 200*time.Millisecond, nil))
			if tc.ops.hang != nil {
				t.Cleanup(func() { close(tc.ops.hang) }) // before the env stops, should a check below fail
			}
			start := time.Now()
			require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
			e.settle()
			require.Less(t, time.Since(start), 5*time.Second, "the read is bounded")
			is := onlyIssue(t, e.fake, repo)
			require.Contains(t, is.Body, "**Unknown:** the NodeOperations could not be read")
			require.Contains(t, is.Body, tc.want)
			require.NotContains(t, is.Body, "No NodeOperations")
			require.Equal(t, float64(1), e.metric("kubemedic_alertbridge_node_history_reads_total", map[string]string{"result": "error"}))
			if tc.ops.hang == nil {
				return
			}
			// The diagnostics loop reads the open issue's node too; its read
			// is bounded the same way, so the bridge still stops.
			require.Eventually(t, func() bool { return tc.ops.callCount() >= 2 }, 5*time.Second, 20*time.Millisecond)
			stopped := make(chan struct{})
			go func() { e.stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("the bridge did not stop: a NodeOperations read that ignores its context holds it")
			}
		})
	}
}

func TestNodeHistoryOnlyForNodes(t *testing.T) {
	ops := &fakeOps{}
	e := newEnv(t, historyConfig, withOps(ops, time.Second, nil))
	require.Equal(t, http.StatusOK, e.post(group("gpu-oncall", map[string]string{"alertname": "KubemedicRemediationBreakerOpen", "policy": "gpu-lost"},
		alert{fp: "fp-breaker"})))
	e.settle()
	is := onlyIssue(t, e.fake, repo)
	require.NotContains(t, is.Body, "Operation history")
	require.Zero(t, ops.callCount())
}

func TestNodeHistoryOffByDefault(t *testing.T) {
	ops := &fakeOps{}
	e := newEnv(t, baseConfig, withOps(ops, time.Second, nil))
	require.Equal(t, http.StatusOK, e.post(gpuLost("gpu-7", false)))
	e.settle()
	require.NotContains(t, onlyIssue(t, e.fake, repo).Body, "Operation history")
	require.Zero(t, ops.callCount(), "not enabled in the config: never read")
}

func TestNodeHistoryEnabledNeedsKubernetes(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte(historyConfig))
	require.NoError(t, err)
	j, err := journal.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer j.Close()
	_, err = bridge.New(bridge.Options{Config: cfg, Journal: j, GitHub: ghclient.NewDryRun(nil, nil), Auth: bridge.Auth{Insecure: true}})
	require.ErrorContains(t, err, "nodeHistory is enabled but the bridge has no Kubernetes access")
}
