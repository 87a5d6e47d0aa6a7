package remediator_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/controller"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/metricstest"
)

// Namespace of the operation pods in these tests.
const opNamespace = "kubemedic-system"

// Templates the kwok stages below act on, by the pod label the remediator
// sets: pods of opSucceed complete, pods of opFail fail, pods of opHang stay
// Running (the reboot template: the "reboot" is the test changing the boot ID).
const (
	opSucceed = "test-succeed"
	opFail    = "test-fail"
	opHang    = "test-hang"
	opDrain   = "test-drain-only"
)

// opStages complete or fail operation pods a second after kwok marks them
// Running, by their template label.
var opStages = []string{localcluster.OperationPodStage("kubemedic-op-succeed", opSucceed, true),
	localcluster.OperationPodStage("kubemedic-op-fail", opFail, false)}

// startCluster starts the API server and kwok with the operation stages,
// and creates the namespace and the test templates. with changes the
// options, e.g. to serve DRA or install other projects' CRDs.
func startCluster(t *testing.T, with ...func(*localcluster.Options)) *localcluster.Cluster {
	t.Helper()
	opts := localcluster.Options{Kwok: true, KwokHeartbeat: 2 * time.Second, KwokStages: opStages}
	for _, w := range with {
		w(&opts)
	}
	env := harness.Start(t, opts)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNamespace}}))
	for _, tpl := range []struct {
		name      string
		criterion v1alpha1.SuccessCriterion
	}{{opSucceed, v1alpha1.SuccessPodSucceeded}, {opFail, v1alpha1.SuccessPodSucceeded}, {opHang, v1alpha1.SuccessNodeRebooted}, {opDrain, v1alpha1.SuccessNone}} {
		obj := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: tpl.name},
			Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: tpl.criterion}}
		if tpl.criterion != v1alpha1.SuccessNone {
			obj.Spec.Image = "registry.example/kubemedic-test:1"
			obj.Spec.Command = []string{"/bin/true"}
			obj.Spec.Parameters = []v1alpha1.Parameter{{Name: "GPU_BUS_ID", MessageRegex: `([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9])`}}
		}
		require.NoError(t, env.Client.Create(ctx, obj))
	}
	return env
}

// remediator is an in-process remediator manager that a test can stop and
// start again.
type remediator struct {
	t      *testing.T
	env    *localcluster.Cluster
	opts   controller.ManagerOptions
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

func newRemediator(t *testing.T, env *localcluster.Cluster) *remediator {
	return &remediator{t: t, env: env, opts: controller.ManagerOptions{
		Options:     controller.Options{Namespace: opNamespace, Retention: time.Hour},
		MetricsAddr: "0", ProbeAddr: "0",
	}}
}

// start starts the manager and waits for its caches.
func (r *remediator) start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reg = prometheus.NewRegistry()
	o := r.opts
	o.Registry = r.reg
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := controller.NewManager(ctx, r.env.Config, o)
	require.NoError(r.t, err)
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	require.True(r.t, mgr.GetCache().WaitForCacheSync(syncCtx), "remediator cache sync")
	r.t.Cleanup(r.stop)
}

// stop stops the manager (like a crash: nothing is flushed) and waits.
func (r *remediator) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Logf("remediator stopped: %v", err)
		}
	case <-time.After(30 * time.Second):
		r.t.Errorf("remediator did not stop within 30s")
	}
	r.cancel = nil
}

// metric sums the samples of a metric whose labels include labels.
func (r *remediator) metric(name string, labels map[string]string) float64 {
	r.mu.Lock()
	reg := r.reg
	r.mu.Unlock()
	return metricstest.Value(r.t, reg, name, labels)
}

// gpuNodes creates n Ready kwok GPU nodes with a boot ID and returns their names.
func gpuNodes(t *testing.T, env *localcluster.Cluster, prefix string, n int, zones ...string) []string {
	t.Helper()
	ctx := context.Background()
	spec := localcluster.NodeSpec{NamePrefix: prefix, Zones: zones}
	nodes, err := env.CreateGPUNodes(ctx, n, spec)
	require.NoError(t, err)
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Name
	}
	require.NoError(t, env.WaitNodesReady(ctx, names...))
	for _, name := range names {
		setBootID(t, env, name, "boot-1")
	}
	return names
}

func setBootID(t *testing.T, env *localcluster.Cluster, node, bootID string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"nodeInfo":{"bootID":%q}}}`, bootID)
	_, err := env.Clientset.CoreV1().Nodes().PatchStatus(context.Background(), node, []byte(patch))
	require.NoError(t, err)
}

// setGPUs sets the node's allocatable nvidia.com/gpu (capacity stays 8), as
// the device plugin does when GPUs turn unhealthy.
func setGPUs(t *testing.T, env *localcluster.Cluster, node string, allocatable int) {
	t.Helper()
	q := resource.NewQuantity(int64(allocatable), resource.DecimalSI)
	patch := fmt.Sprintf(`{"status":{"allocatable":{"nvidia.com/gpu":%q}}}`, q.String())
	_, err := env.Clientset.CoreV1().Nodes().PatchStatus(context.Background(), node, []byte(patch))
	require.NoError(t, err)
}

func setCondition(t *testing.T, env *localcluster.Cluster, node, typ string, status corev1.ConditionStatus, reason, msg string) {
	t.Helper()
	require.NoError(t, env.SetNodeCondition(context.Background(), node, corev1.NodeCondition{
		Type: corev1.NodeConditionType(typ), Status: status, Reason: reason, Message: msg}))
}

func getOp(t *testing.T, env *localcluster.Cluster, name string) *v1alpha1.NodeOperation {
	t.Helper()
	op := &v1alpha1.NodeOperation{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, op))
	return op
}

func listOps(t require.TestingT, env *localcluster.Cluster) []v1alpha1.NodeOperation {
	var list v1alpha1.NodeOperationList
	require.NoError(t, env.Client.List(context.Background(), &list))
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) || list.Items[i].Name < list.Items[j].Name
	})
	return list.Items
}

func opsOnNode(t require.TestingT, env *localcluster.Cluster, node string) []v1alpha1.NodeOperation {
	var out []v1alpha1.NodeOperation
	for _, op := range listOps(t, env) {
		if op.Spec.NodeName == node {
			out = append(out, op)
		}
	}
	return out
}

func getNode(t require.TestingT, env *localcluster.Cluster, name string) *corev1.Node {
	n := &corev1.Node{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, n))
	return n
}

// eventReasons lists the reasons of the events.k8s.io Events about an object.
func eventReasons(t require.TestingT, env *localcluster.Cluster, kind, name string) []string {
	var list eventsv1.EventList
	require.NoError(t, env.Client.List(context.Background(), &list))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	sort.Strings(out)
	return out
}

// describeOps is a failure message listing every operation.
func describeOps(env *localcluster.Cluster) string {
	var list v1alpha1.NodeOperationList
	if err := env.Client.List(context.Background(), &list); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, op := range list.Items {
		fmt.Fprintf(&b, "\n  %s node=%s step=%s phase=%s msg=%q", op.Name, op.Spec.NodeName, op.Spec.Step, op.Status.Phase, op.Status.Message)
	}
	return b.String()
}

func createPolicy(t *testing.T, env *localcluster.Cluster, p *v1alpha1.RemediationPolicy) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), p))
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
