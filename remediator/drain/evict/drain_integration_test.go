package evict_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/drain"
	"github.com/kubemedic/kubemedic/remediator/drain/evict"
	"github.com/kubemedic/kubemedic/test/harness"
)

const (
	waitFor = 30 * time.Second
	tick    = 50 * time.Millisecond
)

// cluster is a control plane with kwok playing the kubelet. No
// kube-controller-manager runs, so the tests write PodDisruptionBudget status
// themselves, as the disruption controller would.
type cluster struct {
	t   *testing.T
	env *localcluster.Cluster
	ctx context.Context
}

// TestDrainOnRealAPIServer drains kwok nodes through the real eviction API:
// plain pods go, DaemonSet, mirror, finished, operation and skipped pods
// stay, and PodDisruptionBudgets block evictions until their status allows
// them, except for DeleteAfterTimeout pods after the timeout.
func TestDrainOnRealAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{Kwok: true})
	c := &cluster{t: t, env: env, ctx: log.IntoContext(t.Context(), testr.New(t))}
	nodes, err := env.CreateGPUNodes(c.ctx, 3, localcluster.NodeSpec{NamePrefix: "drain"})
	require.NoError(t, err)
	ev, err := evict.NewEvictor(env.Config, env.Scheme)
	require.NoError(t, err)

	t.Run("evict mode, blocked by a budget until it allows", func(t *testing.T) {
		c := c.sub(t)
		node, elsewhere := nodes[0].Name, nodes[1].Name

		web1 := c.pod(localcluster.PodSpec{Namespace: "default", Owner: localcluster.OwnerDeployment, OwnerName: "web", NodeName: node})
		web2 := c.pod(localcluster.PodSpec{Namespace: "default", Owner: localcluster.OwnerDeployment, OwnerName: "web", NodeName: node})
		trainer := c.pod(localcluster.PodSpec{Namespace: "train", Owner: localcluster.OwnerDeployment, OwnerName: "trainer", NodeName: node, GPUs: 8})
		c.pod(localcluster.PodSpec{Namespace: "train", Owner: localcluster.OwnerDeployment, OwnerName: "trainer", NodeName: elsewhere, GPUs: 8})
		dcgm := c.daemonSetPod("gpu-operator", "nvidia-dcgm-exporter", node)
		proxy := c.pod(localcluster.PodSpec{
			Namespace: "kube-system", Name: "kube-proxy-" + node, NodeName: node,
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "5b6c0d1e7f2a8c3d4e5f60718293a4b5"},
		})
		opPod := c.pod(localcluster.PodSpec{
			Namespace: "kubemedic-system", Name: "reset-gpu-" + node, NodeName: node,
			Labels: map[string]string{drain.LabelOperation: "reset-gpu-" + node},
		})
		debug := c.pod(localcluster.PodSpec{Namespace: "monitoring", Name: "node-debugger", NodeName: node})
		job := c.pod(localcluster.PodSpec{Namespace: "batch", Owner: localcluster.OwnerJob, OwnerName: "preprocess", NodeName: node})

		c.waitReady(web1, web2, trainer, dcgm, proxy, opPod, debug)
		c.waitPhase(job, corev1.PodSucceeded)
		pdb := c.budget("train", "trainer", localcluster.LabelAppName, "trainer")
		// The replica elsewhere is not Ready yet: no disruption allowed.
		c.setBudgetStatus(pdb, 2, 1, 0)

		spec := v1alpha1.DrainSpec{
			Timeout: &metav1.Duration{Duration: 10 * time.Minute},
			Mode:    v1alpha1.DrainEvict,
			Rules:   []v1alpha1.DrainRule{{Namespaces: []string{"monitoring"}, Mode: v1alpha1.DrainSkip}},
		}
		started := time.Now()

		d := c.plan(node, spec, started, started)
		require.ElementsMatch(t, []types.NamespacedName{key(web1), key(web2), key(trainer)}, d.Evict)
		require.Empty(t, d.Delete)
		require.Equal(t, 3, d.Remaining)
		require.Equal(t, 1, d.Skipped, "the monitoring pod")
		require.Equal(t, 4, d.Ignored, "DaemonSet, mirror, operation and finished Job pods")
		require.Equal(t, started.Add(10*time.Minute), d.Next)

		stopped, blocked, err := evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Equal(t, []string{key(trainer).String() + ": Cannot evict pod as it would violate the pod's disruption budget: " +
			"The disruption budget trainer needs 1 healthy pods and has 1 currently"}, blocked)
		require.ElementsMatch(t, []drain.Stopped{{Pod: key(web1), UID: web1.UID}, {Pod: key(web2), UID: web2.UID}}, stopped,
			"the evicted pods, not the blocked one")
		c.waitGone(web1, web2)
		require.Nil(t, c.get(trainer).DeletionTimestamp, "a refused eviction leaves the pod alone")

		// The next pass evicts the trainer again, and is refused again.
		d = c.plan(node, spec, started, started.Add(time.Minute))
		require.Equal(t, []types.NamespacedName{key(trainer)}, d.Evict)
		require.Equal(t, fmt.Sprintf("evicting 1 pod; 1 skipped; 4 ignored; waiting for %s", key(trainer)), d.Message)
		stopped, blocked, err = evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Len(t, blocked, 1)
		require.Empty(t, stopped)

		// Had the budget stayed shut until the timeout, the drain would fail.
		late := c.plan(node, spec, started, started.Add(10*time.Minute))
		require.True(t, late.Failed)
		require.Equal(t, "drain timed out after 10m0s: 1 pod left: "+key(trainer).String(), late.Message)
		require.Empty(t, late.Evict)

		t.Run("a pod under two budgets is blocked with the server's reason", func(t *testing.T) {
			c := c.sub(t)
			extra := c.budget("train", "trainer-extra", localcluster.LabelAppName, "trainer")
			c.setBudgetStatus(extra, 2, 2, 1)
			out, err := ev.Evict(c.ctx, key(trainer))
			require.NoError(t, err)
			require.Equal(t, evict.Outcome{
				Result:  evict.ResultBlocked,
				Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			}, out)
			require.NoError(t, c.env.Client.Delete(c.ctx, extra))
		})

		t.Run("a budget changed since its status was written blocks at once", func(t *testing.T) {
			c := c.sub(t)
			pdb = c.getBudget(pdb)
			pdb.Spec.MinAvailable = ptr.To(intstr.FromString("50%"))
			require.NoError(t, c.env.Client.Update(c.ctx, pdb))
			require.Greater(t, pdb.Generation, pdb.Status.ObservedGeneration)

			begin := time.Now()
			out, err := ev.Evict(c.ctx, key(trainer))
			require.NoError(t, err)
			// The server says Retry-After: 10; the Evictor does not sleep on it.
			require.Less(t, time.Since(begin), 5*time.Second)
			require.Equal(t, evict.Outcome{
				Result:  evict.ResultBlocked,
				Message: "Cannot evict pod as it would violate the pod's disruption budget: The disruption budget trainer is still being processed by the server.",
			}, out)
		})

		// The replica elsewhere became Ready: one disruption allowed.
		c.setBudgetStatus(pdb, 2, 2, 1)
		d = c.plan(node, spec, started, started.Add(2*time.Minute))
		stopped, blocked, err = evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Empty(t, blocked)
		require.Equal(t, []drain.Stopped{{Pod: key(trainer), UID: trainer.UID}}, stopped)
		pdb = c.getBudget(pdb)
		require.Equal(t, int32(0), pdb.Status.DisruptionsAllowed, "the eviction API spent the disruption")
		require.Contains(t, pdb.Status.DisruptedPods, trainer.Name, "and recorded the pod for the disruption controller")
		c.waitGone(trainer)

		d = c.plan(node, spec, started, started.Add(2*time.Minute))
		require.True(t, d.Done, d.Message)
		require.Equal(t, "drained; 1 skipped; 4 ignored", d.Message)
		require.True(t, d.Next.IsZero())
		for _, p := range []*corev1.Pod{dcgm, proxy, opPod, debug, job} {
			require.Nil(t, c.get(p).DeletionTimestamp, "%s was left alone", key(p))
		}
	})

	t.Run("delete after timeout bypasses the budget", func(t *testing.T) {
		c := c.sub(t)
		node := nodes[2].Name
		notebook := c.pod(localcluster.PodSpec{Namespace: "scratch", Owner: localcluster.OwnerDeployment, OwnerName: "notebook", NodeName: node, GPUs: 1})
		cache := c.pod(localcluster.PodSpec{Namespace: "scratch", Name: "cache-warmer", NodeName: node})
		c.waitReady(notebook, cache)
		pdb := c.budget("scratch", "notebook", localcluster.LabelAppName, "notebook")
		c.setBudgetStatus(pdb, 1, 1, 0)

		spec := v1alpha1.DrainSpec{Timeout: &metav1.Duration{Duration: time.Minute}, Mode: v1alpha1.DrainDeleteAfterTimeout}
		started := time.Now()

		d := c.plan(node, spec, started, started)
		require.Equal(t, []types.NamespacedName{key(cache), key(notebook)}, d.Evict)
		stopped, blocked, err := evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Len(t, blocked, 1)
		require.Contains(t, blocked[0], key(notebook).String()+": Cannot evict pod")
		require.Equal(t, []drain.Stopped{{Pod: key(cache), UID: cache.UID}}, stopped)
		c.waitGone(cache)

		d = c.plan(node, spec, started, started.Add(30*time.Second))
		require.Equal(t, []types.NamespacedName{key(notebook)}, d.Evict, "evicted again before the timeout")
		require.Empty(t, d.Delete)
		stopped, blocked, err = evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Len(t, blocked, 1)
		require.Empty(t, stopped)

		d = c.plan(node, spec, started, started.Add(time.Minute))
		require.Empty(t, d.Evict)
		require.Equal(t, []types.NamespacedName{key(notebook)}, d.Delete)
		require.Equal(t, started.Add(time.Minute+drain.DeleteGrace), d.Next)
		require.Equal(t, "deleting 1 pod after the 1m0s timeout; waiting for "+key(notebook).String(), d.Message)
		stopped, blocked, err = evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Empty(t, blocked)
		require.Equal(t, []drain.Stopped{{Pod: key(notebook), UID: notebook.UID, Deleted: true}}, stopped)
		c.waitGone(notebook)

		pdb = c.getBudget(pdb)
		require.Equal(t, int32(0), pdb.Status.DisruptionsAllowed, "a deletion does not go through the budget")
		require.Empty(t, pdb.Status.DisruptedPods)

		d = c.plan(node, spec, started, started.Add(time.Minute+time.Second))
		require.True(t, d.Done, d.Message)
	})

	t.Run("the eviction API ignores budgets for pods that have not started", func(t *testing.T) {
		c := c.sub(t)
		// Bound to a node no kubelet (and no kwok) serves: it stays Pending.
		p := c.pod(localcluster.PodSpec{Namespace: "pending", Owner: localcluster.OwnerDeployment, OwnerName: "stuck", NodeName: "no-such-node"})
		pdb := c.budget("pending", "stuck", localcluster.LabelAppName, "stuck")
		c.setBudgetStatus(pdb, 1, 0, 0)
		require.Equal(t, corev1.PodPending, c.get(p).Status.Phase)

		out, err := ev.Evict(c.ctx, key(p))
		require.NoError(t, err)
		require.Equal(t, evict.ResultEvicted, out.Result, "despite disruptionsAllowed 0")
		require.NotNil(t, c.get(p).DeletionTimestamp)

		// Evicting a pod that is already terminating goes through as well.
		out, err = ev.Evict(c.ctx, key(p))
		require.NoError(t, err)
		require.Equal(t, evict.ResultEvicted, out.Result)
	})

	t.Run("a pod replaced under the same name is left alone", func(t *testing.T) {
		c := c.sub(t)
		node := nodes[2].Name
		old := c.pod(localcluster.PodSpec{Namespace: "sts", Name: "web-0", NodeName: node})
		c.waitReady(old)
		d := c.plan(node, v1alpha1.DrainSpec{Mode: v1alpha1.DrainDeleteAfterTimeout}, time.Now(), time.Now())
		require.Equal(t, []types.NamespacedName{key(old)}, d.Evict)

		// Between the decision and the action the StatefulSet controller
		// recreated web-0 elsewhere.
		require.NoError(t, c.env.Client.Delete(c.ctx, old, client.GracePeriodSeconds(0)))
		c.waitGone(old)
		replacement := c.pod(localcluster.PodSpec{Namespace: "sts", Name: "web-0", NodeName: nodes[1].Name})
		c.waitReady(replacement)
		require.NotEqual(t, old.UID, replacement.UID)

		stopped, blocked, err := evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Empty(t, blocked)
		require.Empty(t, stopped, "the UID precondition failed: nothing was stopped")
		d.Delete, d.Evict = d.Evict, nil
		stopped, _, err = evict.Run(c.ctx, ev, d)
		require.NoError(t, err)
		require.Empty(t, stopped)
		require.Nil(t, c.get(replacement).DeletionTimestamp, "neither evicted nor deleted")
	})
}

func (c *cluster) sub(t *testing.T) *cluster {
	return &cluster{t: t, env: c.env, ctx: log.IntoContext(t.Context(), testr.New(t))}
}

func key(p *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

func (c *cluster) pod(spec localcluster.PodSpec) *corev1.Pod {
	c.t.Helper()
	p, err := c.env.CreatePod(c.ctx, spec)
	require.NoError(c.t, err)
	return p
}

// daemonSetPod creates a DaemonSet and its pod on node, owned by it as the
// DaemonSet controller would make it. No controller runs to keep them in sync.
func (c *cluster) daemonSetPod(ns, name, node string) *corev1.Pod {
	c.t.Helper()
	_, err := c.env.Clientset.CoreV1().Namespaces().Create(c.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(c.t, err)
	}
	labels := map[string]string{"app": name}
	podSpec := corev1.PodSpec{Containers: []corev1.Container{{Name: "exporter", Image: "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04"}}}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec},
		},
	}
	require.NoError(c.t, c.env.Client.Create(c.ctx, ds))
	podSpec.NodeName = node
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name + "-x7k2p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: podSpec,
	}
	require.NoError(c.t, c.env.Client.Create(c.ctx, p))
	return p
}

// budget creates a PodDisruptionBudget with minAvailable 1 over the pods
// labelled k=v. Its status stays empty (observedGeneration 0) until
// setBudgetStatus writes it.
func (c *cluster) budget(ns, name, k, v string) *policyv1.PodDisruptionBudget {
	c.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{k: v}},
		},
	}
	require.NoError(c.t, c.env.Client.Create(c.ctx, pdb))
	return pdb
}

func (c *cluster) getBudget(pdb *policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	c.t.Helper()
	out := &policyv1.PodDisruptionBudget{}
	require.NoError(c.t, c.env.Client.Get(c.ctx, client.ObjectKeyFromObject(pdb), out))
	return out
}

// setBudgetStatus writes the status the disruption controller would for
// expected pods of which healthy are Ready, with allowed disruptions, for
// the budget's current generation.
func (c *cluster) setBudgetStatus(pdb *policyv1.PodDisruptionBudget, expected, healthy, allowed int32) {
	c.t.Helper()
	cur := c.getBudget(pdb)
	cond := metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now(),
	}
	if allowed == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	cur.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: cur.Generation,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     healthy - allowed,
		ExpectedPods:       expected,
		Conditions:         []metav1.Condition{cond},
	}
	if healthy == 0 {
		cur.Status.DesiredHealthy = 1
	}
	require.NoError(c.t, c.env.Client.Status().Update(c.ctx, cur))
}

func (c *cluster) get(p *corev1.Pod) *corev1.Pod {
	c.t.Helper()
	out := &corev1.Pod{}
	require.NoError(c.t, c.env.Client.Get(c.ctx, key(p), out))
	return out
}

// plan lists the pods bound to node, strips them to what the remediator's
// cache keeps, and plans.
func (c *cluster) plan(node string, spec v1alpha1.DrainSpec, started, now time.Time) drain.Decision {
	c.t.Helper()
	list, err := c.env.Clientset.CoreV1().Pods("").List(c.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(c.t, err)
	pods := make([]corev1.Pod, len(list.Items))
	for i, p := range list.Items {
		pods[i] = corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels, Annotations: p.Annotations,
				OwnerReferences: p.OwnerReferences, DeletionTimestamp: p.DeletionTimestamp,
			},
			Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
			Status: corev1.PodStatus{Phase: p.Status.Phase},
		}
	}
	d, err := drain.Plan(pods, spec, started, now)
	require.NoError(c.t, err)
	c.t.Logf("plan at +%s: %s", now.Sub(started), d.Message)
	return d
}

// waitReady waits until kwok reports the pods Running and Ready: the
// eviction API checks budgets only for Running pods, and lets unready ones
// go when the budget has enough healthy pods.
func (c *cluster) waitReady(pods ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range pods {
		require.EventuallyWithT(c.t, func(ct *assert.CollectT) {
			got := c.get(p)
			assert.Equal(ct, corev1.PodRunning, got.Status.Phase, "pod %s", key(p))
			ready := false
			for _, cond := range got.Status.Conditions {
				ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
			}
			assert.True(ct, ready, "pod %s Ready", key(p))
		}, waitFor, tick)
	}
}

func (c *cluster) waitPhase(p *corev1.Pod, phase corev1.PodPhase) {
	c.t.Helper()
	require.EventuallyWithT(c.t, func(ct *assert.CollectT) {
		assert.Equal(ct, phase, c.get(p).Status.Phase, "pod %s", key(p))
	}, waitFor, tick)
}

// waitGone waits until the pods are deleted: kwok removes pods once they
// have a deletionTimestamp, as a kubelet does after stopping them.
func (c *cluster) waitGone(pods ...*corev1.Pod) {
	c.t.Helper()
	for _, p := range pods {
		require.EventuallyWithT(c.t, func(ct *assert.CollectT) {
			err := c.env.Client.Get(c.ctx, key(p), &corev1.Pod{})
			assert.True(ct, apierrors.IsNotFound(err), "pod %s gone: %v", key(p), err)
		}, waitFor, tick)
	}
}
