package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/rung"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
)

// bmcOperation is a NodeOperation that power-cycles node gpu-0 (boot ID
// boot-1, Ready, its kubelet last heard from at now) through a BMC
// stand-in made with opts, on an API server with the namespace ns; host
// is the BMC's. The step's timeout is 20m.
func bmcOperation(t *testing.T, ns string, opts redfishtest.Options, now time.Time) (env *localcluster.Cluster, bmc *redfishtest.Server, node *corev1.Node, op *v1alpha1.NodeOperation, host string) {
	t.Helper()
	env = apiServer(t, localcluster.Options{}, ns)
	ctx := context.Background()
	c := env.Client
	opts.Username, opts.Password = "kubemedic", "marker-test-pw"
	bmc = redfishtest.New(t, opts)
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc"},
		Data: map[string][]byte{"username": []byte("kubemedic"), "password": []byte("marker-test-pw")}}))
	hostLabel, portLabel := policies.ProtectedLabelPrefix+"bmc", policies.ProtectedLabelPrefix+"bmc-port"
	host, port, ok := strings.Cut(strings.TrimPrefix(bmc.URL, "https://"), ":")
	require.True(t, ok, bmc.URL)
	node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{hostLabel: host, portLabel: port}}}
	require.NoError(t, c.Create(ctx, node))
	node.Status.NodeInfo.BootID = "boot-1"
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	require.NoError(t, c.Status().Update(ctx, node))
	require.NoError(t, c.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "power-cycle"},
		Spec: v1alpha1.NodeOperationTemplateSpec{SuccessCriterion: v1alpha1.SuccessNodeRebooted, Timeout: &metav1.Duration{Duration: 20 * time.Minute}, Redfish: &v1alpha1.RedfishAction{
			Address:           `https://{{ index .Labels "` + hostLabel + `" }}:{{ index .Labels "` + portLabel + `" }}`,
			CredentialsSecret: "bmc", ResetType: "PowerCycle", InsecureSkipVerify: true,
		}}}))
	op = &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec: v1alpha1.NodeOperationSpec{NodeName: "gpu-0", StepAction: v1alpha1.StepAction{Operation: "power-cycle"}}}
	require.NoError(t, c.Create(ctx, op))
	return env, bmc, node, op, host
}

// bmcReconciler makes passes of the operation reconciler over op at the
// clock's time: it writes through cl, writes the machine markers through
// markers, and reads the API server through reader. Its Redfish calls
// give up after 2s. rec holds the Events; p is its provider.
func bmcReconciler(cl, markers client.Client, reader client.Reader, ns string, op *v1alpha1.NodeOperation, clk *clocktesting.FakeClock) (pass func() error, rec *events.FakeRecorder, p *rung.Provider) {
	rec = events.NewFakeRecorder(100)
	r := testReconciler(cl, reader, ns, rec)
	r.Clock = clk
	p = &rung.Provider{Client: markers, Reader: reader, Namespace: ns, Clock: clk, Timeout: 2 * time.Second}
	r.Machines = p
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: op.Name}}
	return func() error {
		_, err := r.Reconcile(context.Background(), req)
		return err
	}, rec, p
}

// TestBMCResetOnceAfterALostStatusWrite: the pass that reset the node
// through its BMC and marked the Node loses its status write, and the
// remediator's cache has not seen the marker yet. The next pass reads the
// marker from the API server, records the request and does not reset the
// node a second time. (Reading the Node from the cache here, as before
// 413b11e, resets it twice, and this test fails.) The reset is told once,
// though the pass that made it wrote nothing.
func TestBMCResetOnceAfterALostStatusWrite(t *testing.T) {
	const ns = "kubemedic-marker"
	clk := clocktesting.NewFakeClock(time.Now())
	env, bmc, node, op, host := bmcOperation(t, ns, redfishtest.Options{Now: clk.Now}, clk.Now())
	ctx := context.Background()
	c := env.Client

	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	loseWrite, lost := losesOnce(func(o *v1alpha1.NodeOperation) bool { return o.Status.MachineRequest != nil })
	// The cache: it has not seen the marker on the Node; and the status
	// write recording the request is lost once.
	cached := interceptor.NewClient(ww, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := cl.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if n, isNode := obj.(*corev1.Node); isNode {
				delete(n.Annotations, v1alpha1.AnnotationMachineRequestedBy)
			}
			return nil
		},
		SubResourcePatch: loseWrite,
	})
	pass, rec, _ := bmcReconciler(cached, c, c, ns, op, clk)

	// The first pass admits the operation and writes that; the Events of
	// those steps are told before the request's.
	err = pass()
	require.NoError(t, err)
	require.Empty(t, bmc.Resets(), "the steps before the request are written first")
	require.NotEmpty(t, recorded(rec))

	err = pass()
	require.ErrorIs(t, err, lost)
	require.Len(t, bmc.Resets(), 1, "the second pass resets the node")
	got := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
	require.Nil(t, got.Status.MachineRequest, "the status write recording the request was lost")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	require.Equal(t, v1alpha1.MachineRequestMarker(got), node.Annotations[v1alpha1.AnnotationMachineRequestedBy], "the Node carries the marker")

	for range 3 {
		err = pass()
		require.NoError(t, err)
	}
	require.Len(t, bmc.Resets(), 1, "the node was power-cycled twice")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
	require.Equal(t, v1alpha1.PhaseRunning, got.Status.Phase, got.Status.Message)
	require.NotNil(t, got.Status.MachineRequest, "the request is recorded from the marker")
	require.Contains(t, got.Status.MachineRequest.Target, host)
	require.Equal(t, 2, told(recorded(rec), v1alpha1.EventMachineRequested), "one MachineRequested Event on the operation and one on the node")
}

// TestBMCResetOnceWhenTheAnswerCannotBeRecorded: the BMC accepts the
// power cycle, and then the Node's answer marker cannot be written.
// The reset is told at once; the next pass finds the intent written
// before the ask, reads the BMC (its LastResetTime moved) and records the
// reset without making it again. Before issue 28 the node was reset
// twice here.
func TestBMCResetOnceWhenTheAnswerCannotBeRecorded(t *testing.T) {
	const ns = "kubemedic-unmarked"
	clk := clocktesting.NewFakeClock(time.Now())
	env, bmc, node, op, _ := bmcOperation(t, ns, redfishtest.Options{Now: clk.Now}, clk.Now())
	ctx := context.Background()
	c := env.Client

	refused := errors.New("the API server refused the node patch")
	markers, refuse := refusingNodePatches(t, env, v1alpha1.AnnotationMachineRequestedBy)
	pass, rec, _ := bmcReconciler(c, markers, c, ns, op, clk)

	err := pass()
	require.NoError(t, err)
	recorded(rec)
	clk.Step(time.Minute) // the BMC's last reset, at its start, is a minute old
	refuse(refused)
	err = pass()
	require.ErrorIs(t, err, refused)
	require.Len(t, bmc.Resets(), 1)
	require.Equal(t, 2, told(recorded(rec), v1alpha1.EventMachineRequested), "the reset is told, though it is not recorded")
	got := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
	require.Nil(t, got.Status.MachineRequest)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	require.NotContains(t, node.Annotations, v1alpha1.AnnotationMachineRequestedBy)
	require.Contains(t, node.Annotations[v1alpha1.AnnotationMachineResetIntent], v1alpha1.MachineRequestMarker(got), "the intent was written before the ask")

	for range 3 {
		clk.Step(time.Minute)
		require.NoError(t, pass())
	}
	require.Len(t, bmc.Resets(), 1, "the node was power-cycled twice")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(op), got))
	require.NotNil(t, got.Status.MachineRequest, "recorded from the BMC's evidence")
	require.Contains(t, got.Status.MachineRequest.Action, "its answer was not recorded, and the BMC says the system last came out of a reset at")
	evs := recorded(rec)
	require.Equal(t, 2, told(evs, v1alpha1.EventMachineRequestFound), "found once, told on the operation and the node: %v", evs)
	require.Zero(t, told(evs, v1alpha1.EventMachineRequested), "not asked again")
}

// refusingNodePatches is a client whose Node patches fail, once each time
// refuse is called, when their patch carries the annotation key; others
// go through.
func refusingNodePatches(t *testing.T, env *localcluster.Cluster, key string) (c client.Client, refuse func(error)) {
	t.Helper()
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	var next error
	c = interceptor.NewClient(w, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isNode := obj.(*corev1.Node); isNode && next != nil {
				data, err := patch.Data(obj)
				require.NoError(t, err)
				if strings.Contains(string(data), key) {
					err, next = next, nil
					return err
				}
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
	})
	return c, func(err error) { next = err }
}
