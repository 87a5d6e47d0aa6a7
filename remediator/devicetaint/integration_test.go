package devicetaint_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/test/harness"
)

const driver = "gpu.example.com"

// TestDeviceTaintRuleOnOneGPU publishes a ResourceSlice of eight GPUs for a
// kwok node, finds the bad one by UUID and taints it alone, against a real
// kube-apiserver serving DeviceTaintRule.
func TestDeviceTaintRuleOnOneGPU(t *testing.T) {
	env := harness.Start(t, localcluster.Options{Kwok: true, DRA: true, CRDDir: "-"})
	ctx := t.Context()

	served, err := devicetaint.Served(env.Clientset.Discovery())
	require.NoError(t, err)
	require.True(t, served)

	nodes, err := env.CreateGPUNodes(ctx, 2, localcluster.NodeSpec{})
	require.NoError(t, err)
	node := nodes[0].Name
	uuid := func(n, i int) string { return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", n, i) }
	for n, nd := range nodes {
		var uuids []string
		for i := range 8 {
			uuids = append(uuids, uuid(n, i))
		}
		_, err := env.CreateGPUResourceSlice(ctx, nd.Name, driver, uuids)
		require.NoError(t, err)
	}

	var slices resourcev1.ResourceSliceList
	require.NoError(t, env.Client.List(ctx, &slices))
	require.Len(t, slices.Items, 2)
	bad := uuid(0, 5)
	dev, err := devicetaint.Find(slices.Items, node, bad)
	require.NoError(t, err)
	require.Equal(t, devicetaint.Device{Driver: driver, Pool: node, Name: "gpu-5", UUID: bad}, dev)

	var before corev1.Node
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: node}, &before))

	rule := devicetaint.Rule(dev, node, bad, "replace-gpu-abcde", "XID 79: GPU has fallen off the bus")
	require.NoError(t, devicetaint.Apply(ctx, env.Client, env.Client, rule))

	var got resourcev1beta2.DeviceTaintRule
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: devicetaint.RuleName(node, bad)}, &got))
	require.Equal(t, &resourcev1beta2.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(node), Device: ptr.To("gpu-5")}, got.Spec.DeviceSelector)
	require.Equal(t, devicetaint.TaintKey, got.Spec.Taint.Key)
	require.Equal(t, "XID-79-GPU-has-fallen-off-the-bus", got.Spec.Taint.Value)
	require.Equal(t, resourcev1beta2.DeviceTaintEffectNoSchedule, got.Spec.Taint.Effect)
	require.Equal(t, node, got.Labels[devicetaint.LabelNode])
	require.Equal(t, bad, got.Labels[devicetaint.LabelGPUUUID])
	require.Equal(t, "replace-gpu-abcde", got.Annotations[devicetaint.AnnotationOperation])

	// Applying again, with the UUID in another form, changes nothing.
	require.NoError(t, devicetaint.Apply(ctx, env.Client, env.Client, devicetaint.Rule(dev, node, bad[len("GPU-"):], "replace-gpu-abcde", "XID 79: GPU has fallen off the bus")))
	var again resourcev1beta2.DeviceTaintRule
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&got), &again))
	require.Equal(t, got.ResourceVersion, again.ResourceVersion, "a second Apply of the same rule must not write")

	// A new reason updates the rule in place; the taint's timeAdded stays.
	require.NoError(t, devicetaint.Apply(ctx, env.Client, env.Client, devicetaint.Rule(dev, node, bad, "replace-gpu-fghij", "row remap failure")))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(&got), &again))
	require.Equal(t, "row-remap-failure", again.Spec.Taint.Value)
	require.Equal(t, "replace-gpu-fghij", again.Annotations[devicetaint.AnnotationOperation])
	require.Equal(t, got.Spec.Taint.TimeAdded, again.Spec.Taint.TimeAdded)

	// One rule exists, and the node stays schedulable: the Node object is
	// not touched at all.
	var rules resourcev1beta2.DeviceTaintRuleList
	require.NoError(t, env.Client.List(ctx, &rules, client.MatchingLabels{devicetaint.LabelManagedBy: devicetaint.ManagedBy}))
	require.Len(t, rules.Items, 1)
	var n corev1.Node
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: node}, &n))
	require.False(t, n.Spec.Unschedulable)
	require.Equal(t, before.Spec, n.Spec)

	removed, err := devicetaint.Remove(ctx, env.Client, env.Client, node, bad)
	require.NoError(t, err)
	require.True(t, removed)
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(&got), &again)
	require.True(t, apierrors.IsNotFound(err), "rule still there after Remove: %v", err)
	removed, err = devicetaint.Remove(ctx, env.Client, env.Client, node, bad)
	require.NoError(t, err, "removing a removed rule is fine")
	require.True(t, removed)

	// A permanent rule (the per-GPU cap) is kept by a repair.
	perm := devicetaint.Rule(dev, node, bad, "capped-op", "GPUAttemptCapReached")
	perm.Annotations[devicetaint.AnnotationPermanent] = "capped-op"
	require.NoError(t, devicetaint.Apply(ctx, env.Client, env.Client, perm))
	removed, err = devicetaint.Remove(ctx, env.Client, env.Client, node, bad)
	require.NoError(t, err)
	require.False(t, removed)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: devicetaint.RuleName(node, bad)}, &got), "a permanent rule stays")
}

func TestServedWithoutDRA(t *testing.T) {
	env := harness.Start(t, localcluster.Options{CRDDir: "-"})
	served, err := devicetaint.Served(env.Clientset.Discovery())
	require.NoError(t, err)
	require.False(t, served)
}
