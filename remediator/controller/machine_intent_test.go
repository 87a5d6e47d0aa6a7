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
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
)

// The BMC power cycle asked once (issue 28): its intent is on the Node
// before the POST, and a pass that finds the intent without the answer
// asks again only when the evidence shows the first ask never reached
// the machine. Each test counts the stand-in's resets and fails at two.

// bmcSteps makes passes while the clock moves by step before each, and
// fails the test at any second reset.
func bmcSteps(t *testing.T, bmc *redfishtest.Server, clk *clocktesting.FakeClock, pass func() error, n int, step time.Duration) {
	t.Helper()
	for range n {
		clk.Step(step)
		require.NoError(t, pass())
		require.LessOrEqual(t, len(bmc.Resets()), 1, "the node was power-cycled twice: %+v", bmc.Resets())
	}
}

// kubeletReports moves the node's Ready heartbeat to the clock's time and
// its boot ID to bootID, as its kubelet does.
func kubeletReports(t *testing.T, c client.Client, clk *clocktesting.FakeClock, bootID string) {
	t.Helper()
	n := &corev1.Node{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "gpu-0"}, n))
	n.Status.NodeInfo.BootID = bootID
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(clk.Now())
		}
	}
	require.NoError(t, c.Status().Update(context.Background(), n))
}

func getOp(t *testing.T, c client.Client, op *v1alpha1.NodeOperation) *v1alpha1.NodeOperation {
	t.Helper()
	got := &v1alpha1.NodeOperation{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(op), got))
	return got
}

// eventsWith returns the Events whose text holds every part.
func eventsWith(evs []string, parts ...string) []string {
	var out []string
next:
	for _, e := range evs {
		for _, p := range parts {
			if !strings.Contains(e, p) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// TestBMCResetOnceWhenTheAnswerIsLost: the BMC applies the power cycle
// and its answer is lost (a 500, or no answer before the client's
// timeout). The passes after it find the intent, and whatever the BMC
// and the node show, never reset the node a second time: the BMC's
// LastResetTime or PowerState record it at once; with neither (an old
// BMC that shows On again at once) the step holds, saying so, until the
// node comes back with a new boot ID.
func TestBMCResetOnceWhenTheAnswerIsLost(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		opts  redfishtest.Options
		lose  func(*redfishtest.Server)
		found string // the evidence that records it at once; "" holds until the node is back
	}{
		{desc: "500 after applying; LastResetTime moved",
			lose: func(s *redfishtest.Server) { s.ApplyThenFail(1) }, found: "the BMC says the system last came out of a reset at"},
		{desc: "no answer after applying; the BMC shows PoweringOff",
			opts: redfishtest.Options{PowerTransition: time.Minute, Systems: []redfishtest.System{{ID: "1", HideLastResetTime: true}}},
			lose: func(s *redfishtest.Server) { s.ApplyThenHang(1) }, found: "the BMC shows the system PoweringOff (On before the ask)"},
		{desc: "500 after applying; an old BMC shows On at once",
			opts: redfishtest.Options{Systems: []redfishtest.System{{ID: "1", HideLastResetTime: true}}},
			lose: func(s *redfishtest.Server) { s.ApplyThenFail(1) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			const ns = "kubemedic-lost"
			clk := clocktesting.NewFakeClock(time.Now())
			tc.opts.Now = clk.Now
			env, bmc, _, op, _ := bmcOperation(t, ns, tc.opts, clk.Now())
			c := env.Client
			pass, rec, _ := bmcReconciler(c, c, c, ns, op, clk)

			require.NoError(t, pass())
			clk.Step(time.Minute)
			tc.lose(bmc)
			require.Error(t, pass(), "the answer is lost")
			require.Len(t, bmc.Resets(), 1)
			require.NotEqual(t, 204, bmc.Resets()[0].Answer)
			require.Nil(t, getOp(t, c, op).Status.MachineRequest)
			recorded(rec)

			if tc.found != "" {
				require.NoError(t, pass())
				got := getOp(t, c, op)
				require.NotNil(t, got.Status.MachineRequest, got.Status.Message)
				require.Contains(t, got.Status.MachineRequest.Action, tc.found)
				require.Equal(t, "boot-1", got.Status.BootID)
				require.Len(t, eventsWith(recorded(rec), v1alpha1.EventMachineRequestFound, tc.found), 2, "told on the operation and the node")
				bmcSteps(t, bmc, clk, pass, 5, time.Minute)
			} else {
				// PowerState On, no LastResetTime, the same boot ID, and
				// the kubelet silent since the ask: it may be booting.
				bmcSteps(t, bmc, clk, pass, 6, time.Minute)
				got := getOp(t, c, op)
				require.Nil(t, got.Status.MachineRequest)
				require.Contains(t, got.Status.Message, "not asking "+bmc.URL)
				require.Contains(t, got.Status.Message, "for node gpu-0")
				require.Contains(t, got.Status.Message, "its kubelet has not reported since the ask")
				held := eventsWith(recorded(rec), "Warning "+v1alpha1.EventMachineRequestHeld, "node gpu-0", "may be booting")
				require.NotEmpty(t, held, "the hold is told, naming the node and what is missing")
				// The machine is back from the power cycle: recorded, and
				// the step succeeds (and, with no retention here, the
				// operation is deleted in the same pass).
				kubeletReports(t, c, clk, "boot-2")
				bmcSteps(t, bmc, clk, pass, 1, time.Second)
				evs := recorded(rec)
				require.Len(t, eventsWith(evs, v1alpha1.EventMachineRequestFound, "the node rebooted (boot ID boot-2, was boot-1)"), 2, "%v", evs)
				require.NotEmpty(t, eventsWith(evs, v1alpha1.EventOperationSucceeded, "boot ID boot-2, was boot-1"), "%v", evs)
			}
			require.Len(t, bmc.Resets(), 1, "the node was power-cycled twice")
		})
	}
}

// TestBMCResetOnceAfterACrashBetweenIntentAndAsk: the remediator writes
// the intent and dies before the POST. A new leader finds the intent and
// does not ask while the ask may still land, nor while the node's kubelet
// is silent (the BMC shows On; the machine may be booting); it asks once
// the kubelet reports on the same boot after that window, and then
// never again.
func TestBMCResetOnceAfterACrashBetweenIntentAndAsk(t *testing.T) {
	const ns = "kubemedic-crash"
	clk := clocktesting.NewFakeClock(time.Now())
	env, bmc, node, op, _ := bmcOperation(t, ns, redfishtest.Options{Now: clk.Now}, clk.Now())
	ctx := context.Background()
	c := env.Client

	died := errors.New("the remediator died after writing the intent")
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	dying := interceptor.NewClient(w, interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			require.NoError(t, err)
			if err := cl.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if strings.Contains(string(data), v1alpha1.AnnotationMachineResetIntent) {
				return died // written, and nothing after it happens
			}
			return nil
		},
	})
	old, _, _ := bmcReconciler(c, dying, c, ns, op, clk)
	require.NoError(t, old())
	clk.Step(time.Minute)
	require.ErrorIs(t, old(), died)
	require.Empty(t, bmc.Resets())
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	intent := node.Annotations[v1alpha1.AnnotationMachineResetIntent]
	require.Contains(t, intent, `"bootID":"boot-1"`)
	require.Contains(t, intent, `"powerState":"On"`)

	// A new leader.
	pass, rec, _ := bmcReconciler(c, c, c, ns, op, clk)
	bmcSteps(t, bmc, clk, pass, 1, time.Second)
	require.Empty(t, bmc.Resets(), "asked while the first ask may still land")
	require.Contains(t, getOp(t, c, op).Status.Message, "may still be landing")
	bmcSteps(t, bmc, clk, pass, 4, time.Minute)
	require.Empty(t, bmc.Resets(), "asked while the kubelet is silent")
	got := getOp(t, c, op)
	require.Contains(t, got.Status.Message, "for node gpu-0")
	require.Contains(t, got.Status.Message, "its kubelet has not reported since the ask")
	require.NotEmpty(t, eventsWith(recorded(rec), "Warning "+v1alpha1.EventMachineRequestHeld, "node gpu-0"))

	// The kubelet is alive on the same boot, well after the ask's window:
	// the ask never came.
	kubeletReports(t, c, clk, "boot-1")
	bmcSteps(t, bmc, clk, pass, 1, time.Second)
	require.Len(t, bmc.Resets(), 1, "asked again once the evidence shows the first ask never came")
	again := eventsWith(recorded(rec), v1alpha1.EventMachineRequested, "again", "node gpu-0 shows it never came")
	require.Len(t, again, 2, "told on the operation and the node")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	require.Contains(t, node.Annotations[v1alpha1.AnnotationMachineResetIntent], `"asks":2`)
	require.Equal(t, v1alpha1.MachineRequestMarker(got), node.Annotations[v1alpha1.AnnotationMachineRequestedBy])

	bmcSteps(t, bmc, clk, pass, 5, time.Minute)
	require.NotNil(t, getOp(t, c, op).Status.MachineRequest)
	kubeletReports(t, c, clk, "boot-2")
	bmcSteps(t, bmc, clk, pass, 1, time.Second)
	require.NotEmpty(t, eventsWith(recorded(rec), v1alpha1.EventOperationSucceeded, "boot ID boot-2, was boot-1"))
	require.Len(t, bmc.Resets(), 1)
}

// TestBMCNotAskedWhenTheIntentWriteFails: a pass whose intent cannot be
// written does not ask; the next one writes it and asks, once.
func TestBMCNotAskedWhenTheIntentWriteFails(t *testing.T) {
	const ns = "kubemedic-nointent"
	clk := clocktesting.NewFakeClock(time.Now())
	env, bmc, node, op, _ := bmcOperation(t, ns, redfishtest.Options{Now: clk.Now}, clk.Now())
	ctx := context.Background()
	c := env.Client
	refused := errors.New("the API server refused the node patch")
	markers, refuse := refusingNodePatches(t, env, v1alpha1.AnnotationMachineResetIntent)
	pass, rec, _ := bmcReconciler(c, markers, c, ns, op, clk)

	require.NoError(t, pass())
	refuse(refused)
	require.ErrorIs(t, pass(), refused)
	require.Empty(t, bmc.Resets(), "asked without its intent recorded")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	require.NotContains(t, node.Annotations, v1alpha1.AnnotationMachineResetIntent)
	require.Zero(t, told(recorded(rec), v1alpha1.EventMachineRequested))

	bmcSteps(t, bmc, clk, pass, 4, time.Second)
	require.Len(t, bmc.Resets(), 1)
	require.NotNil(t, getOp(t, c, op).Status.MachineRequest)
	require.Equal(t, 2, told(recorded(rec), v1alpha1.EventMachineRequested))
}

// TestBMCNotPostedAsksAtOnce: a reset that failed before its POST (the
// BMC busy on the service root of the reset's walk, after the state
// before it was read) removes its intent, so the next pass asks at once
// instead of holding for evidence; the node is reset once.
func TestBMCNotPostedAsksAtOnce(t *testing.T) {
	const ns = "kubemedic-notposted"
	clk := clocktesting.NewFakeClock(time.Now())
	env, bmc, node, op, _ := bmcOperation(t, ns, redfishtest.Options{Now: clk.Now}, clk.Now())
	ctx := context.Background()
	c := env.Client
	pass, rec, p := bmcReconciler(c, c, c, ns, op, clk)
	require.NoError(t, pass())
	busy := true
	p.Reset = func(ctx context.Context, r redfish.Request) (redfish.Result, error) {
		if busy {
			busy = false
			bmc.FailNext(1)
		}
		return redfish.Reset(ctx, r)
	}
	err := pass()
	require.Error(t, err)
	require.Contains(t, err.Error(), "read service root")
	require.Empty(t, bmc.Resets())
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(node), node))
	require.NotContains(t, node.Annotations, v1alpha1.AnnotationMachineResetIntent, "a reset never posted leaves no intent")
	require.Zero(t, told(recorded(rec), v1alpha1.EventMachineRequestHeld))

	bmcSteps(t, bmc, clk, pass, 1, time.Second)
	require.Len(t, bmc.Resets(), 1, "asked at once")
	require.NotNil(t, getOp(t, c, op).Status.MachineRequest)
	bmcSteps(t, bmc, clk, pass, 3, time.Minute)
}
