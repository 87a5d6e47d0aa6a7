package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/test/metricstest"
)

// TestRuleKeeper, on an API server that serves DRA: a GPU's rule follows
// the GPU when the driver republishes the node's devices under other names
// (a reboot), is deleted when its device is a new card or its node is
// gone, and stays while the node publishes nothing. Each change is an
// Event on the node, and each verdict is counted.
func TestRuleKeeper(t *testing.T) {
	env := apiServer(t, localcluster.Options{DRA: true})
	ctx := context.Background()
	c := env.Client
	const driver = "gpu.example.com"
	uuid := func(i int) string { return fmt.Sprintf("GPU-00000000-0000-4000-8000-%012x", i) }
	bad, gone, quiet := uuid(1), uuid(20), uuid(30)
	for _, n := range []string{"gpu-0", "gpu-1", "gpu-2"} {
		require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	// publish replaces node's slice with one of the given generation whose
	// device gpu-i is GPU uuids[i].
	publish := func(node string, gen int64, uuids ...string) {
		t.Helper()
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}}
		err := c.Get(ctx, client.ObjectKeyFromObject(s), s)
		require.NoError(t, client.IgnoreNotFound(err))
		s.Spec = resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}}
		for i, u := range uuids {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: ptr.To(u)}}})
		}
		if apierrors.IsNotFound(err) {
			require.NoError(t, c.Create(ctx, s))
		} else {
			require.NoError(t, c.Update(ctx, s))
		}
	}
	exclude := func(node string, device int, uuid string, permanent bool) {
		t.Helper()
		r := devicetaint.Rule(devicetaint.Device{Driver: driver, Pool: node, Name: fmt.Sprintf("gpu-%d", device)}, node, uuid, "op-"+node, "XidResetRequired")
		if permanent {
			r.Annotations[devicetaint.AnnotationPermanent] = "op-" + node
		}
		require.NoError(t, devicetaint.Apply(ctx, c, c, r))
	}
	rule := func(node, uuid string) *resourcev1beta2.DeviceTaintRule {
		t.Helper()
		r := &resourcev1beta2.DeviceTaintRule{}
		err := c.Get(ctx, client.ObjectKey{Name: devicetaint.RuleName(node, uuid)}, r)
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return r
	}
	recorder := events.NewFakeRecorder(100)
	m := NewMetrics(c)
	reg := prometheus.NewRegistry()
	require.NoError(t, m.Register(reg))
	clk := clocktesting.NewFakeClock(time.Now())
	k := &ruleKeeper{Client: c, Reader: c, Recorder: recorder, Metrics: m, Clock: clk}
	drained := func() []string { return recorded(recorder) }
	count := func(v string) float64 {
		return metricstest.Value(t, reg, "kubemedic_remediation_gpu_exclusion_checks_total", map[string]string{"verdict": v})
	}

	// gpu-0's GPU 1 is excluded for good; gpu-1's GPU 20 for a repair;
	// gpu-2 has a rule but its driver has published nothing.
	publish("gpu-0", 1, uuid(0), bad, uuid(2), uuid(3))
	publish("gpu-1", 1, uuid(21), gone)
	exclude("gpu-0", 1, bad, true)
	exclude("gpu-1", 1, gone, false)
	exclude("gpu-2", 0, quiet, false)
	require.NoError(t, k.checkAll(ctx))
	require.Equal(t, float64(2), count("Keep"))
	require.Equal(t, float64(1), count("Unknown"), "gpu-2 publishes nothing")
	require.Empty(t, drained(), "nothing changed, nothing told")
	before := rule("gpu-0", bad).ResourceVersion

	// gpu-0 rebooted and its driver numbered the GPUs again: the bad one
	// is gpu-3 now, and gpu-1 is a healthy GPU.
	publish("gpu-0", 2, uuid(0), uuid(3), uuid(2), bad)
	require.NoError(t, k.checkAll(ctx))
	r := rule("gpu-0", bad)
	require.Equal(t, "gpu-3", *r.Spec.DeviceSelector.Device, "the rule follows its GPU")
	require.NotEqual(t, before, r.ResourceVersion)
	require.Equal(t, "op-gpu-0", r.Annotations[devicetaint.AnnotationPermanent], "a permanent rule stays permanent")
	require.Equal(t, float64(1), count("Move"))
	ev := drained()
	require.Len(t, ev, 1, ev)
	require.Contains(t, ev[0], "Normal "+v1alpha1.EventGPUExclusionMoved+" ")
	require.Contains(t, ev[0], "is device "+driver+"/gpu-0/gpu-3 now, was "+driver+"/gpu-0/gpu-1")
	require.NoError(t, k.checkAll(ctx))
	require.Equal(t, float64(1), count("Move"), "moved once")

	// gpu-1's Node is deleted (a machine replaced, or only its Node
	// object): its rule stays, with the time it was first seen gone.
	require.NoError(t, c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}))
	// gpu-0's bad card was swapped for a new one in the same slot.
	publish("gpu-0", 3, uuid(0), uuid(3), uuid(2), uuid(40))
	require.NoError(t, k.checkAll(ctx))
	require.Nil(t, rule("gpu-0", bad), "a rule whose device is a new card is deleted, permanent or not")
	r = rule("gpu-1", gone)
	require.NotNil(t, r, "a Node deleted is not its GPU gone: the rule stays")
	require.Equal(t, clk.Now().UTC().Format(time.RFC3339), r.Annotations[devicetaint.AnnotationNodeGoneSince])
	require.NotNil(t, rule("gpu-2", quiet), "missing evidence never releases a rule")
	require.Equal(t, float64(1), count("Release"))
	ev = drained()
	require.Len(t, ev, 1, "one Event, on the node that is still there: %v", ev)
	require.Contains(t, ev[0], "Warning "+v1alpha1.EventGPUExclusionReleased+" ")
	require.Contains(t, ev[0], "device "+driver+"/gpu-0/gpu-3 is GPU "+uuid(40)+" now, not "+bad)
	require.True(t, strings.Contains(ev[0], "gpu-history"), "the note says where the GPU's record stays: %s", ev[0])

	// The node comes back under its name within the grace (it
	// re-registered), with the same GPUs: the record goes, the rule stays.
	require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}))
	clk.Step(time.Hour)
	require.NoError(t, k.checkAll(ctx))
	r = rule("gpu-1", gone)
	require.NotNil(t, r)
	require.NotContains(t, r.Annotations, devicetaint.AnnotationNodeGoneSince)

	// Gone again, for good: released after the grace, not before.
	require.NoError(t, c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}))
	require.NoError(t, k.checkAll(ctx))
	clk.Step(devicetaint.NodeGoneGrace - time.Minute)
	require.NoError(t, k.checkAll(ctx))
	require.NotNil(t, rule("gpu-1", gone), "not before the grace")
	clk.Step(time.Minute)
	require.NoError(t, k.checkAll(ctx))
	require.Nil(t, rule("gpu-1", gone), "released after the grace")
	require.Equal(t, float64(2), count("Release"))
	require.Empty(t, drained(), "no node to tell")
	require.Equal(t, float64(0), count("Error"))

	// The node's slices cannot be read: an error naming the node, counted,
	// and the rule left as it is (never read as "nothing published").
	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	refused := errors.New("the API server is away")
	failing := interceptor.NewClient(ww, interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, slices := list.(*resourcev1.ResourceSliceList); slices {
				return refused
			}
			return cl.List(ctx, list, opts...)
		},
	})
	before = rule("gpu-2", quiet).ResourceVersion
	err = (&ruleKeeper{Client: c, Reader: failing, Recorder: recorder, Metrics: m, Clock: clk}).checkAll(ctx)
	require.ErrorContains(t, err, "the rules of 1 of 1 nodes could not be checked")
	require.Equal(t, float64(1), count("Error"))
	require.Equal(t, before, rule("gpu-2", quiet).ResourceVersion, "an unread node's rule is not touched")
}

// BenchmarkRuleKeeperPass times one check of every kubemedic
// DeviceTaintRule on a real API server: 500 nodes of 8 GPUs, one rule each
// (a node GET and a ResourceSlice LIST per node, one LIST of the rules).
// The pass runs once a minute; docs/last-rung.md has the numbers.
//
//	go test ./remediator/controller -run '^$' -bench RuleKeeperPass
func BenchmarkRuleKeeperPass(b *testing.B) {
	env := apiServer(b, localcluster.Options{DRA: true})
	ctx := context.Background()
	c := env.Client
	const nodes, driver = 500, "gpu.example.com"
	for i := range nodes {
		node := fmt.Sprintf("gpu-%04d", i)
		require.NoError(b, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		var uuids []string
		for j := range 8 {
			uuids = append(uuids, fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", i, j))
		}
		_, err := env.CreateGPUResourceSlice(ctx, node, driver, uuids)
		require.NoError(b, err)
		require.NoError(b, c.Create(ctx, devicetaint.Rule(devicetaint.Device{Driver: driver, Pool: node, Name: "gpu-3"}, node, uuids[3], "op", "XidResetRequired")))
	}
	m := NewMetrics(c)
	reg := prometheus.NewRegistry()
	require.NoError(b, m.Register(reg))
	k := &ruleKeeper{Client: c, Reader: c, Recorder: events.NewFakeRecorder(10), Metrics: m, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	for b.Loop() {
		require.NoError(b, k.checkAll(ctx))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/nodes/1000, "ms/node")
	require.Equal(b, float64(nodes*b.N), metricstest.Value(b, reg, "kubemedic_remediation_gpu_exclusion_checks_total", map[string]string{"verdict": "Keep"}))
}
