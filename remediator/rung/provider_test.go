package rung_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/rung"
	"github.com/kubemedic/kubemedic/test/harness"
)

const machineNS = "machines"

var replaceMachine = &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "replace-machine"},
	Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessMachineReplaced, ClusterAPI: &v1alpha1.ClusterAPIAction{}}}

// asker is the operation on node that asks its Machine; its request
// marker is v1alpha1.MachineRequestMarker(asker(node)).
func asker(node string) *v1alpha1.NodeOperation {
	return &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "replace-" + node, UID: types.UID("uid-replace-" + node)},
		Spec: v1alpha1.NodeOperationSpec{NodeName: node}}
}

// capiCluster starts an API server that serves Cluster API's Machine, with
// the Machines' namespace.
func capiCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts kube-apiserver and etcd; skipped in -short mode")
	}
	env := harness.Start(t, localcluster.Options{ThirdPartyCRDs: true})
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machineNS}}))
	return env
}

// capiNode creates a Node with the annotations.
func capiNode(t *testing.T, c client.Client, name string, annotations map[string]string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	require.NoError(t, c.Create(context.Background(), n))
	return n
}

// capiMachine creates a Cluster API Machine whose status.nodeRef names
// node ("" for none).
func capiMachine(t *testing.T, c client.Client, name, node string) {
	t.Helper()
	ctx := context.Background()
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rung.MachineGVK.GroupVersion().String(), "kind": rung.MachineGVK.Kind,
		"metadata": map[string]any{"name": name, "namespace": machineNS},
		"spec": map[string]any{
			"clusterName":       "gpu",
			"bootstrap":         map[string]any{"dataSecretName": name + "-bootstrap"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": name},
		},
	}}
	require.NoError(t, c.Create(ctx, m))
	if node != "" {
		require.NoError(t, unstructured.SetNestedField(m.Object, map[string]any{"nodeRef": map[string]any{"name": node}}, "status"))
		require.NoError(t, c.Status().Update(ctx, m))
	}
}

// TestObserveMarkedNode: a Node that carries an operation's request
// marker, with no Machine of its own, reads as asked and replaced (Gone)
// only when no Machine of it exists. A Machine kind not served, two
// Machines claiming the node, or a Machine of another node are not a
// replacement: those stay Missing, and the step fails MachineNotFound
// instead of passing for a machine Cluster API replaced.
func TestObserveMarkedNode(t *testing.T) {
	ctx := context.Background()
	env := capiCluster(t)
	c := env.Client
	p := &rung.Provider{Client: c, Reader: c}
	names := func(node, machine string) map[string]string {
		return map[string]string{"cluster.x-k8s.io/machine": machine, "cluster.x-k8s.io/cluster-namespace": machineNS,
			v1alpha1.AnnotationMachineRequestedBy: v1alpha1.MachineRequestMarker(asker(node))}
	}
	capiMachine(t, c, "m-claim-a", "claimed")
	capiMachine(t, c, "m-claim-b", "claimed")
	capiMachine(t, c, "m-victim", "victim")

	for _, tc := range []struct {
		desc, node  string
		annotations map[string]string
		gone        bool
		missing     string
	}{
		{desc: "no Machine exists: asked, and the Machine gone is the replacement", node: "absent",
			annotations: names("absent", "m-absent"), gone: true},
		{desc: "two Machines claim the node: not a replacement", node: "claimed",
			annotations: names("claimed", "m-claimed"), missing: "2 Cluster API Machines claim node claimed"},
		{desc: "the annotation names another node's Machine: not a replacement", node: "impostor",
			annotations: names("impostor", "m-victim"), missing: "belongs to node victim"},
		{desc: "another operation's marker: not this one's request", node: "other",
			annotations: names("someone-else", "m-other"), missing: "no Cluster API Machine for node other"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := capiNode(t, c, tc.node, tc.annotations)
			got, err := p.Observe(ctx, replaceMachine, asker(tc.node), n)
			require.NoError(t, err)
			require.Equal(t, tc.gone, got.Gone, "%+v", got)
			require.Equal(t, tc.gone, got.Requested, "%+v", got)
			if tc.gone {
				require.Equal(t, "Machine "+machineNS+"/"+tc.annotations["cluster.x-k8s.io/machine"], got.Target)
				require.Empty(t, got.Missing)
			} else {
				require.Contains(t, got.Missing, tc.missing)
			}
		})
	}

	t.Run("Cluster API not served: not a replacement", func(t *testing.T) {
		bare := harness.Start(t, localcluster.Options{})
		n := capiNode(t, bare.Client, "unserved", names("unserved", "m-unserved"))
		got, err := (&rung.Provider{Client: bare.Client, Reader: bare.Client}).Observe(ctx, replaceMachine, asker("unserved"), n)
		require.NoError(t, err)
		require.False(t, got.Gone, "%+v", got)
		require.False(t, got.Requested, "%+v", got)
		require.Contains(t, got.Missing, "does not serve cluster.x-k8s.io/v1beta2 Machine")
	})
}

// TestRequestWhenTheNodeMarkFails: the Node's marker is a second record
// of a Machine request, best effort. When it cannot be written, the
// Machine is still asked and marked, and Request succeeds, so that the
// pass goes on to write the request into the operation's status.
func TestRequestWhenTheNodeMarkFails(t *testing.T) {
	ctx := context.Background()
	env := capiCluster(t)
	c := env.Client
	capiMachine(t, c, "m-0", "gpu-0")
	n := capiNode(t, c, "gpu-0", nil)

	refused := errors.New("the API server refused the node patch")
	nodePatches := 0
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	writer := interceptor.NewClient(w, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isNode := obj.(*corev1.Node); isNode {
				nodePatches++
				return refused
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	p := &rung.Provider{Client: writer, Reader: c}
	op := asker("gpu-0")

	seen, err := p.Observe(ctx, replaceMachine, op, n)
	require.NoError(t, err)
	require.Equal(t, "Machine "+machineNS+"/m-0", seen.Target)
	require.False(t, seen.Requested)

	require.NoError(t, p.Request(ctx, replaceMachine, op, n), "a failed Node mark does not fail the request")
	require.Equal(t, 1, nodePatches, "the Node mark was tried")
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(rung.MachineGVK)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: machineNS, Name: "m-0"}, m))
	require.Contains(t, m.GetAnnotations(), plan.AnnotationRemediateMachine)
	require.Equal(t, v1alpha1.MachineRequestMarker(op), m.GetAnnotations()[v1alpha1.AnnotationMachineRequestedBy])
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(n), n))
	require.NotContains(t, n.Annotations, v1alpha1.AnnotationMachineRequestedBy)

	// The Machine's own marker still says it was asked: a retry records
	// the request and asks nothing more.
	again, err := p.Observe(ctx, replaceMachine, op, n)
	require.NoError(t, err)
	require.True(t, again.Requested)
	require.False(t, again.Gone)
}
