package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
	"github.com/kubemedic/kubemedic/test/metricstest"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// captureLogs sends controller-runtime's log of the manager (through
// the returned Logger, which the test passes on) and client-go's klog
// lines (leader election, informers) to a capture until the test ends.
func captureLogs(t *testing.T) (*testsupport.LogCapture, context.Context) {
	logs := &testsupport.LogCapture{}
	klog.SetLogger(logs.Logger().WithName("klog"))
	t.Cleanup(klog.ClearLogger)
	return logs, log.IntoContext(context.Background(), logs.Logger())
}

// requireNoErrorLines fails with every error-level line logged.
func requireNoErrorLines(t *testing.T, logs *testsupport.LogCapture) {
	t.Helper()
	if errs := logs.Errors(); len(errs) > 0 {
		t.Fatalf("%d error-level log lines:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// TestConflictIsRequeuedQuietly: the operation reconciler, run by a real
// controller-runtime controller on a real API server, loses its first
// status write to another writer that changed the operation in between:
// the API server answers 409 Conflict. The pass is requeued and the next
// one makes progress; the conflict is counted in
// kubemedic_remediation_conflicts_total{controller="nodeoperation"} and
// logged at V(1), and nothing is logged at error level (no "Reconciler
// error").
func TestConflictIsRequeuedQuietly(t *testing.T) {
	const ns = "kubemedic-conflict"
	env := apiServer(t, localcluster.Options{}, ns)
	logs, ctx := captureLogs(t)
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}}))
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "kubemedic/ops:1", SuccessCriterion: v1alpha1.SuccessPodSucceeded}}))

	mgr, err := ctrlmgr.New(env.Config, ctrlmgr.Options{Namespace: ns, Logger: logs.Logger()}, env.Scheme, CacheOptions(ns))
	require.NoError(t, err)
	require.NoError(t, SetupIndexes(ctx, mgr.GetFieldIndexer()))
	reg := prometheus.NewRegistry()
	m := NewMetrics(mgr.GetClient())
	require.NoError(t, m.Register(reg))

	// Another writer annotates the operation just before the reconciler's
	// first status write, which carries the resourceVersion it read.
	var bumped atomic.Bool
	racing := interceptor.NewClient(noWatch{mgr.GetClient()}, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, isOp := obj.(*v1alpha1.NodeOperation); isOp && bumped.CompareAndSwap(false, true) {
				other := &v1alpha1.NodeOperation{}
				require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), other))
				metav1.SetMetaDataAnnotation(&other.ObjectMeta, "example.com/touched", "by another writer")
				require.NoError(t, c.Update(ctx, other))
			}
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	r := testReconciler(racing, mgr.GetAPIReader(), ns, events.NewFakeRecorder(1000))
	r.Metrics = m
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named("nodeoperation").For(&v1alpha1.NodeOperation{}).
		Complete(ctrlmgr.QuietConflicts("nodeoperation", r, m.conflicts)))
	require.Equal(t, []string{"nodeoperation"}, metricstest.Series(t, reg, "kubemedic_remediation_conflicts_total", "controller"),
		"the series exists at zero before any conflict")

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-0", StepAction: v1alpha1.StepAction{Operation: "reset-gpu"}}}
	require.NoError(t, c.Create(ctx, op))
	require.Eventually(t, func() bool {
		got := &v1alpha1.NodeOperation{}
		return c.Get(ctx, client.ObjectKeyFromObject(op), got) == nil && got.Status.Phase == v1alpha1.PhaseRunning
	}, 30*time.Second, 50*time.Millisecond, "the operation goes on after its conflict")

	require.True(t, bumped.Load(), "the race was run")
	require.GreaterOrEqual(t, metricstest.Value(t, reg, "kubemedic_remediation_conflicts_total", map[string]string{"controller": "nodeoperation"}), 1.0)
	var quiet []string
	for _, e := range logs.Matching("Optimistic-concurrency conflict") {
		require.Equal(t, 1, e.Level, e.String())
		quiet = append(quiet, e.String())
	}
	require.NotEmpty(t, quiet, "the conflict is logged at debug")
	require.Contains(t, quiet[0], "the object has been modified", "it is the API server's 409")
	requireNoErrorLines(t, logs)
}

// noWatch makes the manager's client, which reads from the cache, a
// client.WithWatch for interceptor.NewClient; nothing here watches.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("not a watching client")
}

// TestCleanShutdownLogsNoError starts the whole remediator (leader
// election with release on cancel, the policy, operation, stack health
// and diagnostics flush controllers, the Slack sender, the DeviceTaintRule
// check) on a real API server, lets it remediate a node, and cancels it:
// Start returns nil, and nothing was logged at error level, by the
// remediator, controller-runtime or client-go. On the way, the operation
// (a policy's, whose name has dots) runs a pod whose name is a DNS label,
// and the API server warns of none.
func TestCleanShutdownLogsNoError(t *testing.T) {
	const ns = "kubemedic-shutdown"
	env := apiServer(t, localcluster.Options{DRA: true}, ns)
	logs, ctx := captureLogs(t)
	c := env.Client
	slack := notifytest.New(t)
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "reset-gpu"},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "kubemedic/ops:1", SuccessCriterion: v1alpha1.SuccessPodSucceeded}}))
	require.NoError(t, c.Create(ctx, &v1alpha1.RemediationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "xid"},
		Spec: v1alpha1.RemediationPolicySpec{
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, For: &metav1.Duration{Duration: time.Minute}}},
			Steps:      []v1alpha1.RemediationStep{{Name: "reset", StepAction: v1alpha1.StepAction{Operation: "reset-gpu", Cordon: true}}},
			Safety:     v1alpha1.Safety{MaxUnhealthy: ptr.To(intstr.FromString("100%"))},
		}}))
	now := time.Now()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0.example.com"}}
	require.NoError(t, c.Create(ctx, node))
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(now.Add(-48 * time.Hour)), LastHeartbeatTime: metav1.NewTime(now)},
		{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue, Reason: v1alpha1.DetectReason,
			Message: "XidRebootRequired: Xid 79 on 0000:3b:00.0: GPU has fallen off the bus", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
	}
	require.NoError(t, c.Status().Update(ctx, node))

	reg := prometheus.NewRegistry()
	mgr, err := NewManager(ctx, env.Config, ManagerOptions{
		Options: Options{Namespace: ns, Retention: time.Hour, Registry: reg,
			Notifier:       notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: slack.URL()}),
			DefaultChannel: "#gpu-ops", StackHealth: &stackhealth.Options{}},
		LeaderElection: true, MetricsAddr: "0", ProbeAddr: "0", Logger: logs.Logger(),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("the manager stopped before it was elected: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not elected within 30s")
	}

	// Working: the operation's pod is created and waited for.
	var opName string
	require.Eventually(t, func() bool {
		var ops v1alpha1.NodeOperationList
		if c.List(ctx, &ops) != nil || len(ops.Items) != 1 {
			return false
		}
		opName = ops.Items[0].Name
		return ops.Items[0].Status.Phase == v1alpha1.PhaseRunning
	}, 30*time.Second, 50*time.Millisecond, "the node's operation runs")
	require.Contains(t, opName, ".", "an operation name with dots: its pod's is a DNS label all the same")
	got := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: opName}, got))
	require.Equal(t, plan.OperationPodName(got), got.Status.PodName)
	require.Empty(t, validation.IsDNS1123Label(got.Status.PodName), "pod %s", got.Status.PodName)
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.PodName}, pod), "the pod is where the status says")
	require.Equal(t, opName, pod.OwnerReferences[0].Name)
	// controller-runtime logs the API server's warnings; the one about the
	// pod's hostname ("must not contain dots") came with every operation pod.
	for _, e := range logs.Entries() {
		require.NotContains(t, e.Msg, "hostname", "an API server warning: %s", e)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a clean shutdown")
	case <-time.After(60 * time.Second):
		t.Fatal("the manager did not stop within 60s")
	}
	require.NotEmpty(t, logs.Matching("Stopping and waiting for leader election runnables"), "the log was captured through the shutdown")
	// The manager's last goroutines may log after Start returned.
	assert.Never(t, func() bool { return len(logs.Errors()) > 0 }, time.Second, 50*time.Millisecond)
	requireNoErrorLines(t, logs)
}
