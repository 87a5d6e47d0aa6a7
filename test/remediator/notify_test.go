package remediator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestDrainNotifiesOwners: a GPULost fault drains a node running a bare pod
// and a Deployment's pod of a namespace owned by alice, and a pod nobody
// owns. Alice gets one direct message per stopped pod, each its own thread,
// naming the pod, the node, the condition and reason, the policy, what
// becomes of the workload and the GitHub issue on the Node; nobody hears
// about the pod without an owner. A pod that stays Terminating through
// several drain passes is not announced twice. A manual NodeOperation on
// another node tells the owner named on the pod itself, with the issue on
// the operation (which wins over the node's).
func TestDrainNotifiesOwners(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	slack := notifytest.New(t)
	const aliceID = "U0ALICE001"
	slack.AddUser(aliceID, "alice@example.com")

	nodes := gpuNodes(t, env, "notify", 2)
	faulty, planned := nodes[0], nodes[1]
	const nodeIssue = "https://github.com/acme/gpu-fleet/issues/42"
	const opIssue = "https://github.com/acme/gpu-fleet/issues/43"
	annotateNode(t, env, faulty, nodeIssue)
	annotateNode(t, env, planned, nodeIssue)

	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-a", Annotations: map[string]string{notify.AnnotationOwner: "alice@example.com"}}}))
	notebook, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "notebook", NodeName: faulty, GPUs: 1})
	require.NoError(t, err)
	web, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Owner: localcluster.OwnerDeployment, OwnerName: "web", NodeName: faulty})
	require.NoError(t, err)
	orphan, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "scratch", Name: "orphan", NodeName: faulty})
	require.NoError(t, err)
	// The notebook stays Terminating until the test lets it go, so that the
	// drain looks at it again in later passes.
	const hold = "kubemedic.test/hold"
	patchFinalizers(t, env, notebook, []string{hold})

	createPolicy(t, env, gpuLostPolicy("gpu-lost-notify", opDrain, time.Minute))
	rem := newRemediator(t, env)
	rem.opts.Notifier = notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: slack.URL()})
	rem.start()

	setGPUs(t, env, faulty, 7)
	setCondition(t, env, faulty, v1alpha1.ConditionGPULost, corev1.ConditionTrue, v1alpha1.DetectReason,
		"GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0")

	// Both of alice's pods are stopped and announced; the notebook is held.
	slack.WaitMessages(t, 2, 60*time.Second)
	var op v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, faulty)
		require.Len(c, ops, 1)
		op = ops[0]
		require.Equal(c, v1alpha1.PhaseDraining, op.Status.Phase, describeOps(env))
		require.Contains(c, op.Status.Message, "1 terminating")
	}, 30*time.Second, 200*time.Millisecond)
	// Several drain passes (one every 5 s) see the terminating notebook:
	// none announces it again.
	require.Never(t, func() bool { return len(slack.Messages()) > 2 }, 12*time.Second, 200*time.Millisecond,
		"a pod is announced once, however many passes wait for it")
	patchFinalizers(t, env, notebook, nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op.Name)
		require.NotEqual(c, v1alpha1.PhaseDraining, o.Status.Phase, describeOps(env))
		require.NotNil(c, findCond(o.Status.Conditions, v1alpha1.OperationDrained))
		require.Equal(c, metav1.ConditionTrue, findCond(o.Status.Conditions, v1alpha1.OperationDrained).Status)
	}, 30*time.Second, 200*time.Millisecond)
	require.False(t, podExists(t, env, "scratch", orphan.Name), "the pod without an owner was drained too")

	msgs := slack.Messages()
	require.Len(t, msgs, 2, "one message per stopped pod with an owner: %+v", msgs)
	byPod := map[string]notifytest.Posted{}
	for _, m := range msgs {
		for _, p := range []*corev1.Pod{notebook, web, orphan} {
			if strings.Contains(m.Text, p.Namespace+"/"+p.Name+" ") {
				_, dup := byPod[p.Name]
				require.False(t, dup, "two messages about %s", p.Name)
				byPod[p.Name] = m
			}
		}
	}
	require.NotContains(t, byPod, orphan.Name, "nobody to tell about the pod without an owner")
	for _, p := range []*corev1.Pod{notebook, web} {
		m, ok := byPod[p.Name]
		require.True(t, ok, "no message about %s: %+v", p.Name, msgs)
		require.Equal(t, slack.DMChannel(aliceID), m.Channel, "a DM to the namespace owner's email")
		require.Equal(t, aliceID, m.User)
		require.Empty(t, m.ThreadTS, "each pod's message starts its own thread")
		for _, want := range []string{
			fmt.Sprintf("Your pod team-a/%s on node %s was stopped because the node reported GPULost (GPUCountMismatch), by policy gpu-lost-notify: evicted at ", p.Name, faulty),
			"Follow the repair: kubectl get nodeoperation " + op.Name + " or " + nodeIssue,
		} {
			require.Contains(t, m.Text, want)
		}
		blocks := string(m.Blocks)
		require.Contains(t, blocks, `"type":"header"`)
		require.Contains(t, blocks, "GPUCountMismatch: 7 of 8 GPUs; missing 0000:3b:00.0", "the condition's message")
		require.Contains(t, blocks, "acme/gpu-fleet#42", "the issue linked")
		require.Contains(t, blocks, nodeIssue)
		require.Contains(t, blocks, "recipient from the namespace annotation kubemedic.io/owner")
	}
	require.Contains(t, byPod[web.Name].Text, "Its controller, ReplicaSet "+web.OwnerReferences[0].Name+", will recreate it on another node.")
	require.Contains(t, byPod[notebook.Name].Text, "A bare pod is not recreated: submit it again.")

	// A manual NodeOperation for planned work on the other node.
	batch, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-b", Name: "batch-0", NodeName: planned,
		Annotations: map[string]string{notify.AnnotationOwner: aliceID}})
	require.NoError(t, err)
	manual := &v1alpha1.NodeOperation{
		ObjectMeta: metav1.ObjectMeta{Name: "firmware-" + planned, Annotations: map[string]string{v1alpha1.AnnotationGitHubIssue: opIssue}},
		Spec:       v1alpha1.NodeOperationSpec{NodeName: planned, StepAction: v1alpha1.StepAction{Operation: opDrain, Drain: &v1alpha1.DrainSpec{Timeout: dur(time.Minute)}}, Reason: "NVSwitch firmware update"},
	}
	require.NoError(t, env.Client.Create(ctx, manual))
	msgs = slack.WaitMessages(t, 3, 60*time.Second)
	m := msgs[2]
	require.Equal(t, slack.DMChannel(aliceID), m.Channel, "a DM to the user ID on the pod")
	require.Empty(t, m.ThreadTS)
	require.Contains(t, m.Text, fmt.Sprintf("Your pod team-b/%s on node %s was stopped because of planned work on the node: NVSwitch firmware update, by a manual NodeOperation: evicted at ", batch.Name, planned))
	require.Contains(t, m.Text, opIssue, "the operation's issue")
	require.NotContains(t, m.Text, nodeIssue, "wins over the node's")
	require.Contains(t, string(m.Blocks), "recipient from the pod annotation kubemedic.io/owner")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, float64(3), rem.metric("kubemedic_remediation_notifications_total", map[string]string{"result": "sent"}))
	}, 10*time.Second, 200*time.Millisecond)
	require.Equal(t, float64(0), rem.metric("kubemedic_remediation_notifications_total", map[string]string{"result": "failed"}))
	require.Equal(t, float64(0), rem.metric("kubemedic_remediation_notifications_total", map[string]string{"result": "dropped"}))
	require.Len(t, slack.Messages(), 3)
}

// TestDrainNoticesOutliveARestart: the remediator that drains a node
// claims its first message and is stopped while Slack hangs on it, like a
// crash between the eviction and the message. A new remediator sends the
// message nobody holds at once, the claimed one once the claim expired
// (3 minutes on the remediators' clock), and each exactly once: the
// messages owed live in the NodeOperation, not in the process.
func TestDrainNoticesOutliveARestart(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	slack := notifytest.New(t)
	slack.AddUser("U0ALICE001", "alice@example.com")
	node := gpuNodes(t, env, "restart", 1)[0]
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-r", Annotations: map[string]string{notify.AnnotationOwner: "alice@example.com"}}}))
	for _, name := range []string{"p0", "p1"} {
		_, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-r", Name: name, NodeName: node})
		require.NoError(t, err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	hung := &hangingSlack{posts: make(chan string, 10)}
	first := newRemediator(t, env)
	first.opts.Clock, first.opts.Notifier = clk, hung
	first.start()

	op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "restart-" + node},
		Spec: v1alpha1.NodeOperationSpec{NodeName: node, StepAction: v1alpha1.StepAction{Operation: opDrain, Drain: &v1alpha1.DrainSpec{Timeout: dur(time.Minute)}}, Reason: "planned"}}
	require.NoError(t, env.Client.Create(ctx, op))
	select {
	case text := <-hung.posts:
		require.Contains(t, text, "team-r/p0 ")
	case <-time.After(60 * time.Second):
		t.Fatalf("the first remediator sent nothing: %s", describeOps(env))
	}
	first.stop()
	require.Equal(t, []string{"p0=Claimed", "p1=Owed"}, noticeStates(getOp(t, env, op.Name)))

	second := newRemediator(t, env)
	second.opts.Clock, second.opts.Notifier = clk, notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: slack.URL()})
	second.start()
	msgs := slack.WaitMessages(t, 1, 30*time.Second)
	require.Contains(t, msgs[0].Text, "team-r/p1 ", "the message nobody holds goes at once")
	require.Never(t, func() bool { return len(slack.Messages()) > 1 }, 2*time.Second, 100*time.Millisecond,
		"the first remediator's claim holds until it expires")

	clk.Step(3*time.Minute + time.Second)
	// Any change to the operation makes the next pass (the pass after the
	// claim expired comes by itself, 3 minutes of real time later).
	patch := []byte(`{"metadata":{"annotations":{"kubemedic.test/poke":"1"}}}`)
	require.NoError(t, env.Client.Patch(ctx, &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: op.Name}}, client.RawPatch(types.MergePatchType, patch)))
	msgs = slack.WaitMessages(t, 2, 30*time.Second)
	require.Contains(t, msgs[1].Text, "team-r/p0 ")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []string{"p0=Sent", "p1=Sent"}, noticeStates(getOp(t, env, op.Name)))
	}, 30*time.Second, 200*time.Millisecond)
	require.Never(t, func() bool { return len(slack.Messages()) > 2 }, 2*time.Second, 100*time.Millisecond, "each told once")
}

// hangingSlack is a Slack that never answers: Post waits for its context.
type hangingSlack struct{ posts chan string }

func (h *hangingSlack) Post(ctx context.Context, _ notify.Recipient, _ *notify.Thread, msg notify.Message) (notify.Thread, error) {
	h.posts <- msg.Text
	<-ctx.Done()
	return notify.Thread{}, ctx.Err()
}

func noticeStates(op *v1alpha1.NodeOperation) []string {
	var out []string
	for _, n := range op.Status.OwnerNotices {
		out = append(out, n.Name+"="+string(n.State))
	}
	return out
}

func annotateNode(t *testing.T, env *localcluster.Cluster, node, issue string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationGitHubIssue, issue)
	_, err := env.Clientset.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func patchFinalizers(t *testing.T, env *localcluster.Cluster, pod *corev1.Pod, finalizers []string) {
	t.Helper()
	p := &corev1.Pod{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p))
	orig := p.DeepCopy()
	p.Finalizers = finalizers
	require.NoError(t, env.Client.Patch(context.Background(), p, client.MergeFrom(orig)))
}
