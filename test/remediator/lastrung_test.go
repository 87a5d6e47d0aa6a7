package remediator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/rung"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
	"github.com/kubemedic/kubemedic/test/harness"
)

// Acceptance tests of the ladder's last rung: a clusterAPI, metal3 or
// redfish template asks the node's machine provider once — the real
// Cluster API and Metal3 CRDs on the API server, a Redfish stand-in for the
// BMC — and the test plays the provider's part (deleting and re-creating the
// node, changing its boot ID). Each test runs its own API server and kwok.

// The trigger of the last-rung policies.
const (
	lrCondition  = "MachineFault"
	lrFaultMsg   = "MachineFault: the node's GPUs stopped answering and resets did not help"
	lrHealthyMsg = "the node answers"
)

// lrMachineNS holds the Machines and BareMetalHosts.
const lrMachineNS = "machines"

// lrBMCHost and lrBMCPort are the protected node labels (a kubelet cannot
// set them) the redfish template reads the BMC's host and port from; a
// label value cannot hold a colon.
const (
	lrBMCHost = policies.ProtectedLabelPrefix + "kubemedic-bmc"
	lrBMCPort = policies.ProtectedLabelPrefix + "kubemedic-bmc-port"
)

// lrBMCLabels are the labels that point a node at a stand-in.
func lrBMCLabels(t *testing.T, url string) map[string]any {
	t.Helper()
	host, port, ok := strings.Cut(strings.TrimPrefix(url, "https://"), ":")
	require.True(t, ok, url)
	return map[string]any{lrBMCHost: host, lrBMCPort: port}
}

// lrWait bounds every wait for the remediator in these tests.
const lrWait = 30 * time.Second

// lrCluster starts the API server (with the Cluster API and Metal3 CRDs when
// thirdParty) and kwok, and creates the operation and machine namespaces.
func lrCluster(t *testing.T, thirdParty bool) *localcluster.Cluster {
	t.Helper()
	env := harness.Start(t, localcluster.Options{Kwok: true, KwokHeartbeat: 2 * time.Second, ThirdPartyCRDs: thirdParty})
	for _, ns := range []string{opNamespace, lrMachineNS} {
		require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	return env
}

func lrTemplate(t *testing.T, env *localcluster.Cluster, name string, spec v1alpha1.NodeOperationTemplateSpec) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}))
}

// lrPolicy is the ladder [operation, quarantine] on MachineFault for the
// named nodes: the operation cordons, and the quarantine ends a failed one.
// No node cooldown; the breaker never trips.
func lrPolicy(name, operation string, maxConcurrent intstr.IntOrString, nodes ...string) *v1alpha1.RemediationPolicy {
	all := intstr.FromString("100%")
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: nodes}}},
			Conditions: []v1alpha1.ConditionMatch{{Type: lrCondition, Status: corev1.ConditionTrue, For: dur(time.Second)}},
			Steps: []v1alpha1.RemediationStep{
				{Name: "last-rung", StepAction: v1alpha1.StepAction{Operation: operation, Cordon: true},
					HealthyFor: dur(time.Second), RecoveryTimeout: dur(lrWait)},
				{Name: "quarantine", StepAction: v1alpha1.StepAction{Quarantine: true}},
			},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &maxConcurrent, NodeCooldown: dur(0)},
		},
	}
}

func lrFault(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setCondition(t, env, node, lrCondition, corev1.ConditionTrue, v1alpha1.DetectReason, lrFaultMsg)
}

func lrHeal(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	setCondition(t, env, node, lrCondition, corev1.ConditionFalse, "MachineOK", lrHealthyMsg)
}

// lrStepOp waits for the operation of the step on the node and returns it
// once check passes on it.
func lrStepOp(t *testing.T, env *localcluster.Cluster, node, step string, check func(c *assert.CollectT, op *v1alpha1.NodeOperation)) *v1alpha1.NodeOperation {
	t.Helper()
	var found *v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var mine []v1alpha1.NodeOperation
		for _, op := range opsOnNode(c, env, node) {
			if op.Spec.Step == step {
				mine = append(mine, op)
			}
		}
		require.Len(c, mine, 1, "one %s operation on %s:%s", step, node, describeOps(env))
		check(c, &mine[0])
		found = &mine[0]
	}, lrWait, 200*time.Millisecond)
	return found
}

// lrAsked checks that the operation is Running with the machine request
// recorded.
func lrAsked(kind v1alpha1.MachineKind, target, action string) func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
	return func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
		require.Equal(c, v1alpha1.PhaseRunning, op.Status.Phase, op.Status.Message)
		r := op.Status.MachineRequest
		require.NotNil(c, r, "machineRequest")
		require.Equal(c, kind, r.Kind)
		require.Equal(c, target, r.Target)
		require.Contains(c, r.Action, action)
		require.False(c, r.Time.IsZero())
	}
}

// lrSucceeded checks that the operation succeeded, its OperationSucceeded
// condition with the reason and a message containing msg.
func lrSucceeded(reason, msg string) func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
	return func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
		require.Equal(c, v1alpha1.PhaseSucceeded, op.Status.Phase, op.Status.Message)
		cond := findCond(op.Status.Conditions, v1alpha1.OperationSucceeded)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status)
		require.Equal(c, reason, cond.Reason)
		require.Contains(c, cond.Message, msg)
	}
}

// lrFailed checks that the operation failed with the reason, in its phase
// message and its OperationSucceeded condition.
func lrFailed(reason string, msg ...string) func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
	return func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
		require.Equal(c, v1alpha1.PhaseFailed, op.Status.Phase, op.Status.Message)
		require.True(c, strings.HasPrefix(op.Status.Message, reason+": "), op.Status.Message)
		cond := findCond(op.Status.Conditions, v1alpha1.OperationSucceeded)
		require.NotNil(c, cond)
		require.Equal(c, reason, cond.Reason)
		for _, m := range msg {
			require.Contains(c, op.Status.Message, m)
		}
	}
}

// lrQuarantined waits for the ladder's quarantine on the node.
func lrQuarantined(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	lrStepOp(t, env, node, "quarantine", func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
		require.True(c, op.Spec.Quarantine)
		require.Equal(c, v1alpha1.PhaseSucceeded, op.Status.Phase, op.Status.Message)
		require.True(c, hasTaint(getNode(c, env, node), v1alpha1.TaintQuarantined))
	})
}

// lrUncordoned waits until the operation's cordon is undone.
func lrUncordoned(t *testing.T, env *localcluster.Cluster, node string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := getNode(c, env, node)
		require.False(c, n.Spec.Unschedulable)
		require.NotContains(c, n.Annotations, v1alpha1.AnnotationCordonedBy)
	}, lrWait, 200*time.Millisecond)
}

func lrAnnotateNode(t *testing.T, env *localcluster.Cluster, node string, annotations map[string]any) {
	t.Helper()
	lrPatchNodeMeta(t, env, node, "annotations", annotations)
}

// lrLabelNode sets labels on a node.
func lrLabelNode(t *testing.T, env *localcluster.Cluster, node string, labels map[string]any) {
	t.Helper()
	lrPatchNodeMeta(t, env, node, "labels", labels)
}

func lrPatchNodeMeta(t *testing.T, env *localcluster.Cluster, node, field string, values map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{field: values}})
	require.NoError(t, err)
	_, err = env.Clientset.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, data, metav1.PatchOptions{})
	require.NoError(t, err)
}

// lrRecreateNode deletes the node and creates it again, changed by mutate
// (a providerID cannot be changed in place), and waits until kwok has made
// it Ready and its boot ID is set.
func lrRecreateNode(t *testing.T, env *localcluster.Cluster, name string, mutate func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	n := getNode(t, env, name)
	require.NoError(t, env.Clientset.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, lrWait, 100*time.Millisecond)
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: n.Labels, Annotations: n.Annotations}, Spec: n.Spec}
	fresh.Spec.Unschedulable, fresh.Spec.Taints = false, nil
	mutate(fresh)
	_, err := env.Clientset.CoreV1().Nodes().Create(ctx, fresh, metav1.CreateOptions{})
	require.NoError(t, err)
	// A create drops the status: the device plugin's resources come back.
	status, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable}})
	require.NoError(t, err)
	_, err = env.Clientset.CoreV1().Nodes().PatchStatus(ctx, name, status)
	require.NoError(t, err)
	require.NoError(t, env.WaitNodesReady(ctx, name))
	// kwok's node-initialize stage may patch the new node's status once
	// more from its own, older view, which has no boot ID: set it until it
	// stays (CI saw a machine request taken with an empty boot ID, whose
	// reboot then never counted).
	require.Eventually(t, func() bool {
		if getNode(t, env, name).Status.NodeInfo.BootID != "boot-1" {
			setBootID(t, env, name, "boot-1")
			return false
		}
		time.Sleep(time.Second)
		return getNode(t, env, name).Status.NodeInfo.BootID == "boot-1"
	}, lrWait, 100*time.Millisecond, "node %s keeps its boot ID", name)
}

// lrObject builds a namespaced unstructured object of the machine namespace.
func lrObject(apiVersion, kind, name string, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": lrMachineNS}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta, "spec": spec}}
}

// lrMachine is a Cluster API Machine of the "gpu" pool.
func lrMachine(name string) *unstructured.Unstructured {
	return lrObject("cluster.x-k8s.io/v1beta2", "Machine", name, map[string]any{"pool": "gpu", "cluster.x-k8s.io/cluster-name": "gpu"}, map[string]any{
		"clusterName":       "gpu",
		"bootstrap":         map[string]any{"dataSecretName": name + "-bootstrap"},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": name},
	})
}

// lrHost is a Metal3 BareMetalHost.
func lrHost(name string) *unstructured.Unstructured {
	return lrObject("metal3.io/v1alpha1", "BareMetalHost", name, nil, map[string]any{
		"online":         true,
		"bootMACAddress": "00:11:22:33:44:55",
		"bmc":            map[string]any{"address": "redfish://10.0.0.1/redfish/v1/Systems/1", "credentialsName": name + "-bmc"},
	})
}

// lrHostOf is a BareMetalHost that names the node it runs, as an operator
// sets it for a node that names the host by annotation.
func lrHostOf(name, node string) *unstructured.Unstructured {
	h := lrHost(name)
	h.SetAnnotations(map[string]string{v1alpha1.AnnotationBareMetalHostNode: node})
	return h
}

// lrAnnotations reads an object's annotations; nil, false when it is gone.
func lrAnnotations(c require.TestingT, env *localcluster.Cluster, kind, name string) (map[string]string, bool) {
	obj := &unstructured.Unstructured{}
	switch kind {
	case "Machine":
		obj.SetGroupVersionKind(rung.MachineGVK)
	case "BareMetalHost":
		obj.SetGroupVersionKind(rung.BareMetalHostGVK)
	}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: lrMachineNS, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	require.NoError(c, err)
	return obj.GetAnnotations(), true
}

// lrEventCount counts the Events with the reason about the object, a
// series by its count.
func lrEventCount(c require.TestingT, env *localcluster.Cluster, kind, name, reason string) int {
	var list eventsv1.EventList
	require.NoError(c, env.Client.List(context.Background(), &list))
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Kind != kind || e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// TestLastRungClusterAPI: the ladder's clusterAPI step asks the node's
// Machine to be replaced (cluster.x-k8s.io/remediate-machine, the marker,
// an Event) and succeeds when the node comes back under its name with a new
// UID, or when the Machine is gone. A node with no Machine of its own —
// none, one of another cluster or another node, or two claiming it — fails
// the step with MachineNotFound, nothing is asked, and the ladder
// quarantines it.
func TestLastRungClusterAPI(t *testing.T) {
	env := lrCluster(t, true)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "capi", 6)
	replaced, deleted, orphan, claimed, ghost, impostor := nodes[0], nodes[1], nodes[2], nodes[3], nodes[4], nodes[5]

	// The MachineHealthCheck that would act on the annotation, and the
	// Machines: the first node's linked by its annotations, the second's by
	// its nodeRef; the third node has none.
	require.NoError(t, env.Client.Create(ctx, lrObject("cluster.x-k8s.io/v1beta2", "MachineHealthCheck", "gpu-pool", nil, map[string]any{
		"clusterName": "gpu",
		"selector":    map[string]any{"matchLabels": map[string]any{"pool": "gpu"}},
	})))
	for _, name := range []string{"m-replaced", "m-deleted", "m-unrelated", "m-claim-a", "m-claim-b", "m-victim"} {
		require.NoError(t, env.Client.Create(ctx, lrMachine(name)))
	}
	lrAnnotateNode(t, env, replaced, map[string]any{"cluster.x-k8s.io/machine": "m-replaced", "cluster.x-k8s.io/cluster-namespace": lrMachineNS})
	// The fifth node names a Machine that is gone; another cluster's
	// namespace has one of that name, whose node has the same name too,
	// and a Machine of another cluster in the node's namespace claims it:
	// none of them is the node's.
	lrAnnotateNode(t, env, ghost, map[string]any{"cluster.x-k8s.io/machine": "m-ghost",
		"cluster.x-k8s.io/cluster-namespace": lrMachineNS, "cluster.x-k8s.io/cluster-name": "gpu"})
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other-cluster"}}))
	elsewhere, sibling := lrMachine("m-ghost"), lrMachine("m-sibling")
	elsewhere.SetNamespace("other-cluster")
	require.NoError(t, unstructured.SetNestedField(sibling.Object, "cpu", "spec", "clusterName"))
	for _, m := range []*unstructured.Unstructured{elsewhere, sibling} {
		require.NoError(t, env.Client.Create(ctx, m))
		require.NoError(t, unstructured.SetNestedField(m.Object, map[string]any{"nodeRef": map[string]any{"name": ghost}}, "status"))
		require.NoError(t, env.Client.Status().Update(ctx, m))
	}
	// The sixth node's annotation names another node's Machine.
	lrAnnotateNode(t, env, impostor, map[string]any{"cluster.x-k8s.io/machine": "m-victim", "cluster.x-k8s.io/cluster-namespace": lrMachineNS})
	for machine, node := range map[string]string{"m-deleted": deleted, "m-claim-a": claimed, "m-claim-b": claimed, "m-victim": "gpu-node-victim"} {
		m := lrMachine(machine)
		require.NoError(t, unstructured.SetNestedField(m.Object, map[string]any{"nodeRef": map[string]any{"name": node}}, "status"))
		require.NoError(t, env.Client.Status().Patch(ctx, m, client.Merge))
	}

	lrTemplate(t, env, "replace-machine", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessMachineReplaced, ClusterAPI: &v1alpha1.ClusterAPIAction{}, Timeout: dur(time.Minute)})
	createPolicy(t, env, lrPolicy("capi", "replace-machine", intstr.FromString("100%"), nodes...))
	rem := newRemediator(t, env)
	rem.start()
	for _, n := range nodes {
		lrFault(t, env, n)
	}

	// Both Machines are asked, once each, and the nodes are cordoned.
	ops := map[string]*v1alpha1.NodeOperation{}
	for node, machine := range map[string]string{replaced: "m-replaced", deleted: "m-deleted"} {
		op := lrStepOp(t, env, node, "last-rung", lrAsked(v1alpha1.MachineClusterAPI, "Machine "+lrMachineNS+"/"+machine, plan.AnnotationRemediateMachine))
		ops[node] = op
		require.Equal(t, "Machine "+lrMachineNS+"/"+machine, op.Status.MachineRequest.Target)
		require.Equal(t, op.Name, getNode(t, env, node).Annotations[v1alpha1.AnnotationCordonedBy])
		require.Contains(t, op.Status.Message, "waiting for the Machine to be replaced")
		a, ok := lrAnnotations(t, env, "Machine", machine)
		require.True(t, ok)
		require.Contains(t, a, plan.AnnotationRemediateMachine)
		require.Equal(t, v1alpha1.MachineRequestMarker(op), a[v1alpha1.AnnotationMachineRequestedBy])
		require.Equal(t, op.Name+"/"+string(op.UID), a[v1alpha1.AnnotationMachineRequestedBy], "the marker names the operation and its UID")
		require.Equal(t, v1alpha1.MachineRequestMarker(op), getNode(t, env, node).Annotations[v1alpha1.AnnotationMachineRequestedBy], "the Node is marked too")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Equal(c, 1, lrEventCount(c, env, "NodeOperation", op.Name, v1alpha1.EventMachineRequested))
		}, lrWait, 200*time.Millisecond)
	}
	a, _ := lrAnnotations(t, env, "Machine", "m-unrelated")
	require.Empty(t, a, "only the nodes' own Machines are asked")

	// The node without a Machine: MachineNotFound, naming the node, then
	// the quarantine.
	lrStepOp(t, env, orphan, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "no Cluster API Machine for node "+orphan))
	lrQuarantined(t, env, orphan)
	require.Nil(t, lrStepOp(t, env, orphan, "last-rung", func(*assert.CollectT, *v1alpha1.NodeOperation) {}).Status.MachineRequest)

	// The gone Machine's namesake in another namespace is not asked.
	lrStepOp(t, env, ghost, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "no Cluster API Machine for node "+ghost))
	lrQuarantined(t, env, ghost)
	for _, m := range []*unstructured.Unstructured{elsewhere, sibling} {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(m), m))
		require.Empty(t, m.GetAnnotations(), "another cluster's Machine %s/%s was asked", m.GetNamespace(), m.GetName())
	}

	// Another node's Machine is not asked for the sixth.
	lrStepOp(t, env, impostor, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "belongs to node gpu-node-victim"))
	lrQuarantined(t, env, impostor)
	a, _ = lrAnnotations(t, env, "Machine", "m-victim")
	require.Empty(t, a, "another node's Machine was asked")

	// Two Machines claim the fourth node: neither is asked.
	lrStepOp(t, env, claimed, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "2 Cluster API Machines claim node "+claimed, lrMachineNS+"/m-claim-a", lrMachineNS+"/m-claim-b"))
	lrQuarantined(t, env, claimed)
	for _, machine := range []string{"m-claim-a", "m-claim-b"} {
		a, _ := lrAnnotations(t, env, "Machine", machine)
		require.Empty(t, a, "Machine %s was asked", machine)
	}

	// Cluster API's part for the first Machine: its node is deleted and a
	// new one joins under the same name, Ready and healthy. The remediator
	// is down meanwhile so that it sees the successor (a new UID), not the
	// gap (no node, which counts as replaced too).
	rem.stop()
	oldUID := getNode(t, env, replaced).UID
	require.NoError(t, env.Clientset.CoreV1().Nodes().Delete(ctx, replaced, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.Clientset.CoreV1().Nodes().Get(ctx, replaced, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, lrWait, 100*time.Millisecond)
	fresh, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{NamePrefix: "capi", Start: 0})
	require.NoError(t, err)
	require.Equal(t, replaced, fresh[0].Name)
	require.NotEqual(t, oldUID, fresh[0].UID)
	lrHeal(t, env, replaced)
	rem.start()
	lrStepOp(t, env, replaced, "last-rung", lrSucceeded(v1alpha1.ReasonMachineReplaced, fmt.Sprintf("UID %s, was %s", fresh[0].UID, oldUID)))
	require.False(t, getNode(t, env, replaced).Spec.Unschedulable, "the successor is not cordoned")

	// The second Machine is deleted (its node stays, as a MachineSet that
	// reuses hosts leaves it): gone counts as replaced. And the pass that
	// asked lost its status write, so only the Node's marker says the
	// request was made: not MachineNotFound.
	rem.stop()
	o := ops[deleted]
	require.NoError(t, env.Client.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"status":{"machineRequest":null}}`))))
	require.Nil(t, getOp(t, env, o.Name).Status.MachineRequest)
	require.NoError(t, env.Client.Delete(ctx, lrMachine("m-deleted")))
	lrHeal(t, env, deleted)
	rem.start()
	lrStepOp(t, env, deleted, "last-rung", lrSucceeded(v1alpha1.ReasonMachineReplaced, "the Machine of node "+deleted+" is gone"))
	lrUncordoned(t, env, deleted)

	for _, node := range []string{replaced, deleted} {
		require.Len(t, opsOnNode(t, env, node), 1, "no quarantine after a replaced machine:%s", describeOps(env))
		require.Equal(t, 1, lrEventCount(t, env, "NodeOperation", ops[node].Name, v1alpha1.EventMachineRequested), "asked once")
	}
}

// TestLastRungMetal3: the metal3 step annotates the node's BareMetalHost
// reboot.metal3.io={"mode":"hard"} once — not again after a remediator
// restart, nor after a restart that lost the status write recording the
// request — and succeeds when the boot ID changes.
func TestLastRungMetal3(t *testing.T) {
	env := lrCluster(t, true)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "bmh", 2)
	node, claimer := nodes[0], nodes[1]
	require.NoError(t, env.Client.Create(ctx, lrHostOf("host-0", node)))
	lrAnnotateNode(t, env, node, map[string]any{v1alpha1.AnnotationBareMetalHost: lrMachineNS + "/host-0"})
	// Another node claims the same host by its own annotation, which its
	// kubelet could write: the host does not name it back.
	lrAnnotateNode(t, env, claimer, map[string]any{v1alpha1.AnnotationBareMetalHost: lrMachineNS + "/host-0"})
	lrTemplate(t, env, "power-cycle", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessNodeRebooted, Metal3: &v1alpha1.Metal3Action{Mode: "hard"}, Timeout: dur(time.Minute)})
	createPolicy(t, env, lrPolicy("bmh", "power-cycle", intstr.FromString("100%"), node, claimer))
	rem := newRemediator(t, env)
	rem.start()
	lrFault(t, env, claimer)
	lrStepOp(t, env, claimer, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "does not name the node back"))
	lrQuarantined(t, env, claimer)
	a, _ := lrAnnotations(t, env, "BareMetalHost", "host-0")
	require.NotContains(t, a, plan.AnnotationMetal3Reboot, "a claim the host does not confirm asks nothing")
	lrFault(t, env, node)

	op := lrStepOp(t, env, node, "last-rung", lrAsked(v1alpha1.MachineMetal3, "BareMetalHost "+lrMachineNS+"/host-0", plan.AnnotationMetal3Reboot))
	asked := op.Status.MachineRequest.Time
	a, ok := lrAnnotations(t, env, "BareMetalHost", "host-0")
	require.True(t, ok)
	require.Equal(t, `{"mode":"hard"}`, a[plan.AnnotationMetal3Reboot])
	require.Equal(t, v1alpha1.MachineRequestMarker(op), a[v1alpha1.AnnotationMachineRequestedBy])
	require.Contains(t, op.Status.Message, "waiting for the node to reboot (boot ID boot-1)")

	// Metal3 removes reboot.metal3.io once the host is back on; a
	// restarted remediator must not put it back.
	notAgain := func(why string) {
		t.Helper()
		require.Never(t, func() bool {
			a, _ := lrAnnotations(t, env, "BareMetalHost", "host-0")
			_, again := a[plan.AnnotationMetal3Reboot]
			return again
		}, 3*time.Second, 200*time.Millisecond, "the host was asked again %s", why)
	}
	removeReboot := func() {
		t.Helper()
		u := lrHost("host-0")
		u.Object = map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": map[string]any{"name": "host-0", "namespace": lrMachineNS}}
		require.NoError(t, env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot.metal3.io":null}}}`))))
	}
	rem.stop()
	removeReboot()
	rem.start()
	notAgain("after a restart")
	o := getOp(t, env, op.Name)
	require.Equal(t, v1alpha1.PhaseRunning, o.Status.Phase)
	require.NotNil(t, o.Status.MachineRequest)
	require.True(t, asked.Equal(&o.Status.MachineRequest.Time), "the request is the first one")

	// A pass that annotated the host but crashed before its status write:
	// the marker on the host records the request, which is not made again.
	rem.stop()
	require.NoError(t, env.Client.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"status":{"machineRequest":null}}`))))
	require.Nil(t, getOp(t, env, op.Name).Status.MachineRequest)
	rem.start()
	lrStepOp(t, env, node, "last-rung", lrAsked(v1alpha1.MachineMetal3, "BareMetalHost "+lrMachineNS+"/host-0", plan.AnnotationMetal3Reboot))
	notAgain("after a lost status write")

	setBootID(t, env, node, "boot-2")
	lrStepOp(t, env, node, "last-rung", func(c *assert.CollectT, op *v1alpha1.NodeOperation) {
		cond := findCond(op.Status.Conditions, v1alpha1.OperationSucceeded)
		require.NotNil(c, cond)
		require.Equal(c, v1alpha1.ReasonNodeRebooted, cond.Reason, op.Status.Message)
		require.Contains(c, cond.Message, "boot ID boot-2, was boot-1")
	})
	lrHeal(t, env, node)
	lrStepOp(t, env, node, "last-rung", lrSucceeded(v1alpha1.ReasonNodeRebooted, "boot ID boot-2"))
	lrUncordoned(t, env, node)
	require.Equal(t, 1, lrEventCount(t, env, "NodeOperation", op.Name, v1alpha1.EventMachineRequested), "asked once")
	require.Len(t, opsOnNode(t, env, node), 1, describeOps(env))
}

// lrPassword is the BMC password of the redfish test, looked for
// everywhere it must not be.
const lrPassword = "Zq7-lastrung-BMC-pw"

// TestLastRungRedfish: the redfish step resets the node's system through
// its BMC exactly once (a 503 first is retried), records the system URL and
// succeeds when the boot ID changes; a BMC that refuses the credentials
// fails the step at once with MachineRequestFailed, and the ladder
// quarantines the node. The password is in no Event, NodeOperation, Node
// or remediator log line.
func TestLastRungRedfish(t *testing.T) {
	logs := lrCaptureLogs(t)
	env := lrCluster(t, false)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "bmc", 3)
	good, refused, unknown := nodes[0], nodes[1], nodes[2]

	// Two BMCs with two systems each: the good one takes the Secret's
	// credentials, the other has another password.
	two := []redfishtest.System{{ID: "1"}, {ID: "2"}}
	bmc := redfishtest.New(t, redfishtest.Options{Systems: two, Username: "kubemedic", Password: lrPassword})
	other := redfishtest.New(t, redfishtest.Options{Systems: two, Username: "kubemedic", Password: "another-" + lrPassword})
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: "bmc-credentials"},
		Data: map[string][]byte{"username": []byte("kubemedic"), "password": []byte(lrPassword)}}))
	lrLabelNode(t, env, good, lrBMCLabels(t, bmc.URL))
	lrLabelNode(t, env, refused, lrBMCLabels(t, other.URL))
	lrTemplate(t, env, "bmc-reset", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessNodeRebooted, Timeout: dur(time.Minute),
		Redfish: &v1alpha1.RedfishAction{
			Address:           `https://{{ index .Labels "` + lrBMCHost + `" }}:{{ index .Labels "` + lrBMCPort + `" }}/`,
			CredentialsSecret: "bmc-credentials", System: "2", ResetType: "ForceRestart", InsecureSkipVerify: true,
		}})
	createPolicy(t, env, lrPolicy("bmc", "bmc-reset", intstr.FromString("100%"), good, refused, unknown))
	rem := newRemediator(t, env)
	rem.start()

	// The good BMC is busy at first: one 503, retried.
	bmc.FailNext(1)
	lrFault(t, env, good)
	op := lrStepOp(t, env, good, "last-rung", lrAsked(v1alpha1.MachineRedfish, bmc.URL+"/redfish/v1/Systems/2", "ResetType=ForceRestart"))
	resets := bmc.Resets()
	require.Len(t, resets, 1)
	require.Equal(t, "2", resets[0].System)
	require.Equal(t, "ForceRestart", resets[0].ResetType)
	require.Equal(t, redfishtest.AuthBasic, resets[0].Auth)
	require.Equal(t, 1, lrStatusCount(bmc, 503), "one 503, then the retry")
	require.Equal(t, v1alpha1.MachineRequestMarker(op), getNode(t, env, good).Annotations[v1alpha1.AnnotationMachineRequestedBy])
	require.Never(t, func() bool { return len(bmc.Resets()) != 1 }, 2*time.Second, 200*time.Millisecond, "reset again")

	// The wrong password: refused for good, failed at once (not at the
	// minute's timeout), never retried, and the ladder goes on.
	lrFault(t, env, refused)
	failed := lrStepOp(t, env, refused, "last-rung", lrFailed(v1alpha1.ReasonMachineRequestFailed, "401"))
	require.Less(t, failed.Status.CompletionTime.Sub(failed.Status.StartTime.Time), 15*time.Second, failed.Status.Message)
	require.Nil(t, failed.Status.MachineRequest)
	lrQuarantined(t, env, refused)
	require.Empty(t, other.Resets())
	unauthorized := lrStatusCount(other, 401)
	require.NotZero(t, unauthorized)
	require.Never(t, func() bool { return lrStatusCount(other, 401) != unauthorized }, 2*time.Second, 200*time.Millisecond, "asked again after a 401")

	// A node without the BMC labels: no BMC to ask. An address its own
	// kubelet could write (an annotation) is not read.
	lrAnnotateNode(t, env, unknown, map[string]any{"kubemedic.io/bmc-address": strings.TrimPrefix(bmc.URL, "https://")})
	lrFault(t, env, unknown)
	lrStepOp(t, env, unknown, "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "bmc-reset", "is the node's BMC label missing or empty?"))
	lrQuarantined(t, env, unknown)

	// The machine comes back.
	setBootID(t, env, good, "boot-2")
	lrHeal(t, env, good)
	lrStepOp(t, env, good, "last-rung", lrSucceeded(v1alpha1.ReasonNodeRebooted, "boot ID boot-2"))
	lrUncordoned(t, env, good)
	require.Len(t, bmc.Resets(), 1)

	// The password is nowhere but in the Secret.
	for _, what := range []client.ObjectList{&eventsv1.EventList{}, &corev1.EventList{}, &v1alpha1.NodeOperationList{}, &corev1.NodeList{}} {
		require.NoError(t, env.Client.List(ctx, what))
		data, err := json.Marshal(what)
		require.NoError(t, err)
		require.False(t, strings.Contains(string(data), lrPassword), "the password is in a %T:%s", what, lrLinesWith(string(data), lrPassword))
	}
	require.Positive(t, lrEventCount(t, env, "NodeOperation", failed.Name, v1alpha1.ReasonMachineRequestFailed))
	rem.stop()
	out := logs()
	require.Contains(t, out, "Advancing operation", "the remediator's log is captured")
	require.Contains(t, out, "503", "the retried error is logged")
	require.False(t, strings.Contains(out, lrPassword), "the password is in the log:%s", lrLinesWith(out, lrPassword))
}

// lrLinesWith quotes the parts of s around each occurrence of sub, for a
// failure message.
func lrLinesWith(s, sub string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, sub)
		if i < 0 {
			return b.String()
		}
		fmt.Fprintf(&b, "\n  ...%s...", s[max(0, i-200):min(len(s), i+len(sub)+50)])
		s = s[i+len(sub):]
	}
}

// TestLastRungProviderNotInstalled: on an API server without Cluster API's
// and Metal3's CRDs, clusterAPI and metal3 steps fail at once with
// MachineNotFound saying the kind is not served, and the ladder goes on.
func TestLastRungProviderNotInstalled(t *testing.T) {
	env := lrCluster(t, false)
	nodes := gpuNodes(t, env, "bare", 2)
	lrAnnotateNode(t, env, nodes[1], map[string]any{v1alpha1.AnnotationBareMetalHost: lrMachineNS + "/host-0"})
	lrTemplate(t, env, "replace-machine", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessMachineReplaced, ClusterAPI: &v1alpha1.ClusterAPIAction{}, Timeout: dur(time.Minute)})
	lrTemplate(t, env, "power-cycle", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessNodeRebooted, Metal3: &v1alpha1.Metal3Action{}, Timeout: dur(time.Minute)})
	createPolicy(t, env, lrPolicy("capi", "replace-machine", intstr.FromString("100%"), nodes[0]))
	createPolicy(t, env, lrPolicy("bmh", "power-cycle", intstr.FromString("100%"), nodes[1]))
	rem := newRemediator(t, env)
	rem.start()
	for _, n := range nodes {
		lrFault(t, env, n)
	}
	for i, kind := range []string{"cluster.x-k8s.io/v1beta2 Machine", "metal3.io/v1alpha1 BareMetalHost"} {
		op := lrStepOp(t, env, nodes[i], "last-rung", lrFailed(v1alpha1.ReasonMachineNotFound, "does not serve "+kind))
		require.Less(t, op.Status.CompletionTime.Sub(op.Status.StartTime.Time), 15*time.Second, op.Status.Message)
		lrQuarantined(t, env, nodes[i])
	}
}

// lrStatusCount counts the stand-in's answers with the HTTP status.
func lrStatusCount(s *redfishtest.Server, status int) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Status == status {
			n++
		}
	}
	return n
}

// TestLastRungBudget: machine operations count against maxConcurrent like
// any other: with two nodes faulty and maxConcurrent 1, the second waits
// (MaxConcurrent) untouched while the first host is asked, and is asked
// once the first succeeds.
func TestLastRungBudget(t *testing.T) {
	env := lrCluster(t, true)
	ctx := context.Background()
	nodes := gpuNodes(t, env, "budget", 2)
	host := map[string]string{}
	for i, n := range nodes {
		host[n] = fmt.Sprintf("host-%d", i)
		require.NoError(t, env.Client.Create(ctx, lrHostOf(host[n], n)))
	}
	// One host is named by the node's annotation, the other by the
	// providerID CAPM3 writes.
	lrAnnotateNode(t, env, nodes[0], map[string]any{v1alpha1.AnnotationBareMetalHost: lrMachineNS + "/" + host[nodes[0]]})
	lrRecreateNode(t, env, nodes[1], func(n *corev1.Node) {
		n.Spec.ProviderID = "metal3://" + lrMachineNS + "/" + host[nodes[1]] + "/m3m-1"
	})
	lrTemplate(t, env, "power-cycle", v1alpha1.NodeOperationTemplateSpec{
		SuccessCriterion: v1alpha1.SuccessNodeRebooted, Metal3: &v1alpha1.Metal3Action{}, Timeout: dur(time.Minute)})
	createPolicy(t, env, lrPolicy("budget", "power-cycle", intstr.FromInt32(1), nodes...))
	rem := newRemediator(t, env)
	rem.start()
	for _, n := range nodes {
		lrFault(t, env, n)
	}

	var first, second string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := listOps(c, env)
		require.Len(c, ops, 2, describeOps(env))
		running := slices.IndexFunc(ops, func(o v1alpha1.NodeOperation) bool { return o.Status.Phase == v1alpha1.PhaseRunning })
		require.NotEqual(c, -1, running, describeOps(env))
		waiting := 1 - running
		require.NotNil(c, ops[running].Status.MachineRequest)
		require.Equal(c, v1alpha1.PhaseWaitingForBudget, ops[waiting].Status.Phase, describeOps(env))
		cond := findCond(ops[waiting].Status.Conditions, v1alpha1.OperationAdmitted)
		require.NotNil(c, cond)
		require.Equal(c, v1alpha1.ReasonMaxConcurrent, cond.Reason)
		first, second = ops[running].Spec.NodeName, ops[waiting].Spec.NodeName
	}, lrWait, 200*time.Millisecond)
	a, _ := lrAnnotations(t, env, "BareMetalHost", host[first])
	require.Equal(t, `{"mode":"hard"}`, a[plan.AnnotationMetal3Reboot], "the default mode")
	require.Never(t, func() bool {
		a, _ := lrAnnotations(t, env, "BareMetalHost", host[second])
		_, rebooted := a[plan.AnnotationMetal3Reboot]
		_, marked := a[v1alpha1.AnnotationMachineRequestedBy]
		return rebooted || marked || getNode(t, env, second).Spec.Unschedulable
	}, 2*time.Second, 200*time.Millisecond, "the waiting node's host is asked or the node cordoned")

	setBootID(t, env, first, "boot-2")
	lrHeal(t, env, first)
	lrStepOp(t, env, first, "last-rung", lrSucceeded(v1alpha1.ReasonNodeRebooted, "boot ID boot-2"))
	op := lrStepOp(t, env, second, "last-rung", lrAsked(v1alpha1.MachineMetal3, "BareMetalHost "+lrMachineNS+"/"+host[second], plan.AnnotationMetal3Reboot))
	a, _ = lrAnnotations(t, env, "BareMetalHost", host[second])
	require.Equal(t, v1alpha1.MachineRequestMarker(op), a[v1alpha1.AnnotationMachineRequestedBy])
}

// lrLog receives the controller-runtime log of the remediators in this test
// binary while a test captures it (lrCaptureLogs), and drops it otherwise,
// as controller-runtime does when no logger is set. controller-runtime takes
// only the first SetLogger, so it is set when the binary starts.
var lrLog = &logCapture{}

func init() { ctrllog.SetLogger(logr.New(&captureSink{c: lrLog})) }

// lrCaptureLogs captures the log until the returned function is called
// (or the test ends) and returns what was logged.
func lrCaptureLogs(t *testing.T) func() string {
	lrLog.mu.Lock()
	lrLog.on = true
	lrLog.b.Reset()
	lrLog.mu.Unlock()
	stop := func() string {
		lrLog.mu.Lock()
		defer lrLog.mu.Unlock()
		lrLog.on = false
		return lrLog.b.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

type logCapture struct {
	mu sync.Mutex
	on bool
	b  strings.Builder
}

func (l *logCapture) enabled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.on
}

// captureSink writes every line, at every verbosity, with its values
// printed by fmt (%+v), so that a secret in any value shows.
type captureSink struct {
	c    *logCapture
	name string
	kv   []any
}

func (s *captureSink) Init(logr.RuntimeInfo) {}

func (s *captureSink) Enabled(int) bool { return s.c.enabled() }

func (s *captureSink) Info(_ int, msg string, kv ...any) { s.write(nil, msg, kv) }

func (s *captureSink) Error(err error, msg string, kv ...any) { s.write(err, msg, kv) }

func (s *captureSink) write(err error, msg string, kv []any) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if !s.c.on {
		return
	}
	fmt.Fprintf(&s.c.b, "%s: %s err=%v %+v %+v\n", s.name, msg, err, s.kv, kv)
}

func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, name: s.name, kv: append(slices.Clip(s.kv), kv...)}
}

func (s *captureSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &captureSink{c: s.c, name: name, kv: s.kv}
}
