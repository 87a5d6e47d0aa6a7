package controller

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

func fixtureNode(t *testing.T) *corev1.Node {
	t.Helper()
	data, err := os.ReadFile("testdata/kwok-gpu-node.json")
	require.NoError(t, err)
	n := &corev1.Node{}
	require.NoError(t, json.Unmarshal(data, n))
	return n
}

// The cache keeps what the remediator reads and drops the rest; strings
// that repeat across nodes are one copy.
func TestStripNode(t *testing.T) {
	strip := stripNode(newInterner())
	orig := fixtureNode(t)
	orig.Spec.Unschedulable = true
	orig.Spec.ProviderID = "metal3://metal3/gpu-node-000/uid"
	orig.Status.Capacity["nvidia.com/mig-3g.40gb"] = orig.Status.Capacity["nvidia.com/gpu"]
	got, err := strip(orig.DeepCopy())
	require.NoError(t, err)
	n := got.(*corev1.Node)

	// Kept as they were.
	require.Equal(t, orig.Name, n.Name)
	require.Equal(t, orig.UID, n.UID)
	require.Equal(t, orig.ResourceVersion, n.ResourceVersion)
	require.Equal(t, orig.Labels, n.Labels)
	require.Equal(t, orig.Annotations, n.Annotations)
	require.True(t, equality.Semantic.DeepEqual(orig.Status.Conditions, n.Status.Conditions), "conditions, heartbeats included")
	require.Equal(t, orig.Spec.Taints, n.Spec.Taints)
	require.True(t, n.Spec.Unschedulable)
	require.Equal(t, orig.Spec.ProviderID, n.Spec.ProviderID, "the Metal3 rung reads it")
	require.Equal(t, orig.Status.NodeInfo.BootID, n.Status.NodeInfo.BootID)
	require.NotEmpty(t, n.Status.NodeInfo.BootID)
	// Only the GPU resources of capacity and allocatable.
	require.ElementsMatch(t, []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}, keys(n.Status.Capacity))
	require.ElementsMatch(t, []corev1.ResourceName{"nvidia.com/gpu"}, keys(n.Status.Allocatable))
	require.True(t, orig.Status.Capacity["nvidia.com/gpu"].Equal(n.Status.Capacity["nvidia.com/gpu"]))
	// Dropped.
	require.NotEmpty(t, orig.Status.Addresses)
	require.Empty(t, n.Status.Addresses)
	require.Empty(t, n.Status.NodeInfo.KubeletVersion)
	require.Empty(t, n.Spec.PodCIDR)
	require.Zero(t, n.Status.DaemonEndpoints.KubeletEndpoint.Port)

	// A second node shares the first one's repeated strings.
	other := fixtureNode(t)
	other.Name, other.Labels["kubernetes.io/hostname"] = "gpu-node-001", "gpu-node-001"
	got2, err := strip(other)
	require.NoError(t, err)
	n2 := got2.(*corev1.Node)
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	require.True(t, same(n.Labels["nvidia.com/gpu.product"], n2.Labels["nvidia.com/gpu.product"]), "label value")
	require.True(t, same(n.Status.Conditions[0].Message, n2.Status.Conditions[0].Message), "condition message")
	require.True(t, same(string(n.Status.Conditions[0].Type), string(n2.Status.Conditions[0].Type)), "condition type")
	require.Equal(t, reflect.ValueOf(n.Status.Allocatable).Pointer(), reflect.ValueOf(n2.Status.Allocatable).Pointer(), "equal GPU resources are one map")
	require.NotEqual(t, reflect.ValueOf(n.Status.Capacity).Pointer(), reflect.ValueOf(n2.Status.Capacity).Pointer(), "the first node has a MIG resource more")
	require.False(t, same(n.Labels["kubernetes.io/hostname"], n2.Labels["kubernetes.io/hostname"]))
	require.Equal(t, "gpu-node-001", n2.Labels["kubernetes.io/hostname"])

	// Not a node: passed through.
	pod := &corev1.Pod{}
	p, err := strip(pod)
	require.NoError(t, err)
	require.Same(t, pod, p)
}

func keys(l corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for k := range l {
		out = append(out, k)
	}
	return out
}

func TestInternerForgetsWhenFull(t *testing.T) {
	in := newInterner()
	in.mu.Lock()
	defer in.mu.Unlock()
	a := in.get(string([]byte("zone-a")))
	require.True(t, unsafe.StringData(a) == unsafe.StringData(in.get(string([]byte("zone-a")))), "one copy")
	long := string(make([]byte, internLongest+1))
	require.Equal(t, long, in.get(long))
	require.NotContains(t, in.m, long, "long strings are not kept")
	for i := range internMax {
		in.get(string(rune(0x10000 + i)))
	}
	require.LessOrEqual(t, len(in.m), internMax)
	require.Equal(t, "zone-a", in.get("zone-a"), "a copy handed out before stays valid")
	require.Equal(t, "zone-a", a)
}
