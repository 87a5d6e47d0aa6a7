package alertbridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

const historyConfig = `defaultRepo: acme/gpu-oncall
reopenWindow: 1h
nodeHistory: {enabled: true, maxOperations: 10}
`

// The bridge's service account as deploy/alertbridge binds it, and one
// that no binding names.
const (
	bridgeSA   = "system:serviceaccount:kubemedic-system:kubemedic-alertbridge"
	unboundSA  = "system:serviceaccount:kubemedic-system:nobody"
	rbacFile   = "../../deploy/alertbridge/rbac.yaml"
	historyFor = "gpu-7"
)

// quarantined is KubemedicNodeQuarantined as deploy/prometheus fires it.
func quarantined(node string) harness.PostableAlert {
	return harness.PostableAlert{
		Labels: map[string]string{"alertname": "KubemedicNodeQuarantined", "node": node, "severity": "warning"},
		Annotations: map[string]string{
			"summary":     "Node " + node + " is quarantined by kubemedic and handed to a person",
			"runbook_url": "https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#kubemedicnodequarantined",
		},
		StartsAt: time.Now().Add(-time.Minute),
	}
}

// applyBridgeRBAC creates the ClusterRole and ClusterRoleBinding of
// deploy/alertbridge/rbac.yaml as they are in the file.
func applyBridgeRBAC(t *testing.T, c client.Client) {
	t.Helper()
	data, err := os.ReadFile(rbacFile)
	require.NoError(t, err)
	docs := strings.Split(string(data), "\n---\n")
	require.Len(t, docs, 2, "%s: a ClusterRole and its binding", rbacFile)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &role))
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &binding))
	require.NoError(t, c.Create(context.Background(), &role))
	require.NoError(t, c.Create(context.Background(), &binding))
}

// kubeconfigAs writes a copy of the cluster's admin kubeconfig that
// impersonates user, so the bridge has exactly that user's rights.
func kubeconfigAs(t *testing.T, cl *localcluster.Cluster, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cl.Kubeconfig)
	require.NoError(t, err)
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// createOp creates a NodeOperation and sets its status, as the remediator
// leaves it.
func createOp(t *testing.T, c client.Client, op *v1alpha1.NodeOperation, st v1alpha1.NodeOperationStatus) *v1alpha1.NodeOperation {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, op))
	op.Status = st
	require.NoError(t, c.Status().Update(ctx, op))
	return op
}

func TestQuarantineIssueListsNodeOperations(t *testing.T) {
	cl := harness.Start(t, localcluster.Options{})
	c := cl.Client
	applyBridgeRBAC(t, c)

	// gpu-7's ladder, created in this order with names that sort the other
	// way, so the issue's order can only come from the creation times.
	// The API server stamps whole seconds: each waits for the next second.
	at := func(min int) *metav1.Time {
		t := metav1.NewTime(time.Now().Add(time.Duration(min) * time.Minute))
		return &t
	}
	var prev time.Time
	step := func(name, policy, stepName, operation string, quarantine bool, st v1alpha1.NodeOperationStatus) {
		if !prev.IsZero() {
			time.Sleep(time.Until(prev.Add(time.Second)))
		}
		op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.NodeOperationSpec{NodeName: historyFor, Policy: policy, Step: stepName}}
		op.Spec.Operation, op.Spec.Quarantine = operation, quarantine
		prev = createOp(t, c, op, st).CreationTimestamp.Time
	}
	step("gpu-lost.gpu-7.c", "gpu-lost", "reset-gpu", "reset-gpu", false, v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseFailed,
		Message: "DrainFailed: pod train/db-0 not evicted: PodDisruptionBudget train/db allows 0 disruptions", StartTime: at(-50), CompletionTime: at(-40)})
	step("gpu-lost.gpu-7.b", "gpu-lost", "reboot", "reboot", false, v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseFailed,
		Message: "RecoveryTimeout: GPULost still True 10m0s after the reboot", StartTime: at(-39), CompletionTime: at(-20),
		GPU:            &v1alpha1.GPUTarget{UUID: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", BusID: "0000:3b:00.0"},
		Exclusion:      &v1alpha1.Exclusion{Method: v1alpha1.ExclusionCordon, Message: "cordoned the node: the operation acts on the whole node"},
		MachineRequest: &v1alpha1.MachineRequest{Kind: v1alpha1.MachineRedfish, Target: "https://10.0.0.5/redfish/v1/Systems/1", Action: "ComputerSystem.Reset ResetType=PowerCycle", Time: *at(-38)}})
	step("gpu-lost.gpu-7.a", "gpu-lost", "", "", true, v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseSucceeded,
		Message: "Quarantined: the ladder of policy gpu-lost ran out", StartTime: at(-19), CompletionTime: at(-19)})
	other := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "gpu-lost.gpu-9.a"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-9", Policy: "gpu-lost", Step: "reset-gpu"}}
	other.Spec.Operation = "reset-gpu"
	createOp(t, c, other, v1alpha1.NodeOperationStatus{Phase: v1alpha1.PhaseRunning, Message: "on another node"})

	t.Run("the bridge's RBAC lists the node's operations in order", func(t *testing.T) {
		w := newWorld(t, historyConfig, 1)
		w.kubeconfig = kubeconfigAs(t, cl, bridgeSA)
		w.startInProcess()
		w.fire(quarantined(historyFor))
		w.eventually(func() bool { return len(w.fake.Issues(repo)) == 1 }, 20*time.Second, "the quarantine files an issue")
		body := w.fake.Issues(repo)[0].Body
		require.Contains(t, body, "### Operation history on node `gpu-7`")
		require.Contains(t, body, "3 NodeOperations.")
		var idx []int
		for _, want := range []string{
			"| `gpu-lost.gpu-7.c` | gpu-lost | reset-gpu | reset-gpu | — | Failed |",
			"| `gpu-lost.gpu-7.b` | gpu-lost | reboot | reboot | GPU `GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b` at bus `0000:3b:00.0`<br>Exclusion: Cordon — cordoned the node: the operation acts on the whole node<br>Machine request: Redfish to `https://10.0.0.5/redfish/v1/Systems/1`: ComputerSystem.Reset ResetType=PowerCycle, at ",
			"| `gpu-lost.gpu-7.a` | gpu-lost | — | quarantine | — | Succeeded |",
		} {
			i := strings.Index(body, want)
			require.GreaterOrEqual(t, i, 0, "%q in\n%s", want, body)
			idx = append(idx, i)
		}
		require.True(t, idx[0] < idx[1] && idx[1] < idx[2], "oldest first:\n%s", body)
		require.Contains(t, body, "PodDisruptionBudget train/db allows 0 disruptions")
		require.NotContains(t, body, "gpu-lost.gpu-9.a", "another node's operation")
		require.Contains(t, body, "kubectl describe node gpu-7")
		require.NotContains(t, body, "could not be read")
	})

	t.Run("an API error says the history could not be read and files the issue", func(t *testing.T) {
		w := newWorld(t, historyConfig, 1)
		w.kubeconfig = kubeconfigAs(t, cl, unboundSA)
		w.startInProcess()
		w.fire(quarantined(historyFor))
		w.eventually(func() bool { return len(w.fake.Issues(repo)) == 1 }, 20*time.Second, "the quarantine files an issue anyway")
		body := w.fake.Issues(repo)[0].Body
		require.Contains(t, body, "**Unknown:** the NodeOperations could not be read at ")
		require.Contains(t, body, "forbidden")
		require.NotContains(t, body, "No NodeOperations")
		require.NotContains(t, body, "gpu-lost.gpu-7")
		require.Contains(t, body, `cannot list resource "nodeoperations" in API group "kubemedic.io" at the cluster scope`)
		require.NotContains(t, body, strings.TrimPrefix(cl.Config.Host, "https://"), "the API server's address stays out of the issue")
		require.Equal(t, float64(1), w.metric("kubemedic_alertbridge_node_history_reads_total", `result="error"`))
	})
}
