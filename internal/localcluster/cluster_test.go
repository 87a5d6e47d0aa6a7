package localcluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

const migResource corev1.ResourceName = "nvidia.com/mig-3g.40gb"

func TestNewFailsClearlyWithoutBinaries(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(localcluster.EnvTestBin, empty)

	dir, err := localcluster.BinDir()
	require.NoError(t, err)
	require.Equal(t, empty, dir)

	env, err := localcluster.New(t.Context(), localcluster.Options{Kwok: true})
	require.Nil(t, env)
	require.ErrorContains(t, err, "run `make testbin`")
	for _, name := range []string{"etcd", "kube-apiserver", "kwok", "kwok-stages.yaml"} {
		require.ErrorContains(t, err, name)
	}
}

func TestBinDirFallsBackToTestbinScript(t *testing.T) {
	t.Setenv(localcluster.EnvTestBin, "")
	dir, err := localcluster.BinDir()
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(dir), dir)
	require.Contains(t, filepath.Base(dir), "kwok-", "directory name carries the versions: %s", dir)
}

// TestControlPlaneWithoutKwok covers what holds with the API server alone:
// CRDs, the kubeconfig, nodes that are Ready without kwok, NPD-style
// conditions, and starting kwok later.
func TestControlPlaneWithoutKwok(t *testing.T) {
	// Settings a developer may have for another envtest project must not
	// send the harness to their real cluster or to other binaries.
	t.Setenv("USE_EXISTING_CLUSTER", "true")
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	env := harness.Start(t, localcluster.Options{})
	ctx := t.Context()

	t.Run("CRDs are installed", func(t *testing.T) {
		var policies v1alpha1.RemediationPolicyList
		require.NoError(t, env.Client.List(ctx, &policies))
		var ops v1alpha1.NodeOperationList
		require.NoError(t, env.Client.List(ctx, &ops))
	})

	t.Run("kubeconfig authenticates kubemedic-admin as system:masters", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "kubemedic-admin", review.Status.UserInfo.Username)
		require.Contains(t, review.Status.UserInfo.Groups, "system:masters")
	})

	t.Run("nodes are Ready without kwok", func(t *testing.T) {
		nodes, err := env.CreateGPUNodes(ctx, 3, localcluster.NodeSpec{NamePrefix: "plain"})
		require.NoError(t, err)
		require.Len(t, nodes, 3)
		for _, n := range nodes {
			stored, err := env.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			require.NoError(t, err)
			require.True(t, localcluster.NodeReady(stored), "node %s: %+v", n.Name, stored.Status.Conditions)
			require.Len(t, stored.Status.Conditions, 5)
			require.Equal(t, "8", stored.Labels[localcluster.LabelGPUCount])
		}
		require.NoError(t, env.WaitNodesReady(ctx))
	})

	t.Run("conditions are set the way NPD sets them", func(t *testing.T) {
		const node, condType = "plain-000", "GPUXidError"
		backdated := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))

		require.NoError(t, env.SetNodeCondition(ctx, node, corev1.NodeCondition{
			Type: condType, Status: corev1.ConditionTrue, Reason: "Xid79",
			Message: "GPU has fallen off the bus", LastTransitionTime: backdated,
		}))
		first := condition(t, env, node, condType)
		require.Equal(t, corev1.ConditionTrue, first.Status)
		require.True(t, first.LastTransitionTime.Equal(&backdated), "explicit lastTransitionTime is kept: %s", first.LastTransitionTime)
		require.WithinDuration(t, time.Now(), first.LastHeartbeatTime.Time, 5*time.Second)

		// Same status again: only the heartbeat moves. Timestamps have
		// second precision, so repeat until a second has passed.
		testsupport.Eventually(t, "the heartbeat to advance", 10*time.Second, 200*time.Millisecond, func() bool {
			require.NoError(t, env.SetNodeCondition(ctx, node, corev1.NodeCondition{
				Type: condType, Status: corev1.ConditionTrue, Reason: "Xid79", Message: "GPU has fallen off the bus",
			}))
			c := condition(t, env, node, condType)
			require.True(t, c.LastTransitionTime.Equal(&backdated), "same status keeps lastTransitionTime: %s", c.LastTransitionTime)
			return c.LastHeartbeatTime.After(first.LastHeartbeatTime.Time)
		}, nil)

		before := time.Now().Truncate(time.Second)
		require.NoError(t, env.ClearNodeCondition(ctx, node, condType, "NoXid", "no Xid errors"))
		cleared := condition(t, env, node, condType)
		require.Equal(t, corev1.ConditionFalse, cleared.Status)
		require.Equal(t, "NoXid", cleared.Reason)
		require.Equal(t, "no Xid errors", cleared.Message)
		require.False(t, cleared.LastTransitionTime.Time.Before(before), "a status flip moves lastTransitionTime to now: %s", cleared.LastTransitionTime)

		stored, err := env.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, stored.Status.Conditions, 6, "the patch merges by type and keeps the kubelet's conditions")
		require.True(t, localcluster.NodeReady(stored))
	})

	t.Run("pods stay as created without kwok", func(t *testing.T) {
		pod, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "plain", Name: "bound", NodeName: "plain-001", GPUs: 1})
		require.NoError(t, err)
		require.Equal(t, corev1.PodPending, pod.Status.Phase)
		require.Equal(t, "plain-001", pod.Spec.NodeName)
	})

	t.Run("kwok started later manages new nodes", func(t *testing.T) {
		require.Zero(t, env.KwokPID())
		require.NoError(t, env.StartKwok(ctx))
		require.NotZero(t, env.KwokPID())
		nodes, err := env.CreateGPUNodes(ctx, 2, localcluster.NodeSpec{NamePrefix: "plain", Start: 3})
		require.NoError(t, err)
		require.Equal(t, "plain-003", nodes[0].Name)
		for _, n := range nodes {
			require.True(t, localcluster.NodeReady(&n))
			require.Equal(t, "KubeletReady", localcluster.FindNodeCondition(&n, corev1.NodeReady).Reason)
		}
	})
}

// TestKwokCluster covers a cluster whose nodes and pods kwok plays.
func TestKwokCluster(t *testing.T) {
	const heartbeat = time.Second
	// No CRDs: this test is about nodes and pods, and starts faster without.
	env := harness.Start(t, localcluster.Options{CRDDir: "-", Kwok: true, KwokHeartbeat: heartbeat})
	ctx := t.Context()

	t.Run("GPU nodes", func(t *testing.T) {
		start := time.Now()
		nodes, err := env.CreateGPUNodes(ctx, 16, localcluster.NodeSpec{MIGEvery: 4})
		require.NoError(t, err)
		t.Logf("16 nodes created and Ready in %s", time.Since(start).Round(time.Millisecond))
		require.Len(t, nodes, 16)

		ips := map[string]bool{}
		for i, n := range nodes {
			require.Equal(t, fmt.Sprintf("gpu-node-%03d", i), n.Name)
			require.True(t, localcluster.NodeReady(&n), "kwok makes node %s Ready: %+v", n.Name, n.Status.Conditions)
			require.Equal(t, "KubeletReady", localcluster.FindNodeCondition(&n, corev1.NodeReady).Reason, "Ready comes from kwok")

			zone := []string{"zone-a", "zone-b"}[i%2]
			l := n.Labels
			require.Equal(t, n.Name, l[corev1.LabelHostname])
			require.Equal(t, "linux", l[corev1.LabelOSStable])
			require.Equal(t, "p5.48xlarge", l[corev1.LabelInstanceTypeStable])
			require.Equal(t, zone, l[corev1.LabelTopologyZone])
			require.Equal(t, fmt.Sprintf("%s-rack-%d", zone, (i/2)%2+1), l[localcluster.RackLabel])
			require.Equal(t, "8", l[localcluster.LabelGPUCount])
			require.Equal(t, "NVIDIA-H100-80GB-HBM3", l[localcluster.LabelGPUProduct])
			require.Equal(t, localcluster.KwokNodeAnnotationValue, n.Annotations[localcluster.KwokNodeAnnotation])

			_, err := uuid.Parse(n.Status.NodeInfo.BootID)
			require.NoError(t, err, "bootID is a UUID")
			require.Equal(t, localcluster.KubeletVersion, n.Status.NodeInfo.KubeletVersion)
			require.NotEmpty(t, n.Status.NodeInfo.KernelVersion)
			require.False(t, ips[internalIP(n)], "InternalIP %s is unique", internalIP(n))
			ips[internalIP(n)] = true

			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
				require.Contains(t, n.Status.Capacity, res)
				require.Contains(t, n.Status.Allocatable, res)
				c, a := n.Status.Capacity[res], n.Status.Allocatable[res]
				require.LessOrEqual(t, a.Cmp(c), 0, "%s allocatable %s <= capacity %s", res, a.String(), c.String())
			}

			gpus, mig := n.Status.Allocatable[localcluster.ResourceGPU], n.Status.Allocatable[migResource]
			if i%4 == 3 {
				require.Equal(t, "mixed", l[localcluster.LabelMIGStrategy], "node %s is a MIG node", n.Name)
				require.Equal(t, int64(4), gpus.Value())
				require.Equal(t, int64(8), mig.Value())
				require.True(t, n.Status.Capacity[migResource].Equal(mig))
			} else {
				require.NotContains(t, l, localcluster.LabelMIGStrategy)
				require.Equal(t, int64(8), gpus.Value())
				require.NotContains(t, n.Status.Allocatable, migResource)
			}
			require.True(t, n.Status.Capacity[localcluster.ResourceGPU].Equal(gpus))
		}

		testsupport.Eventually(t, "kwok to keep the node lease", 10*time.Second, 100*time.Millisecond, func() bool {
			_, err := env.Clientset.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "gpu-node-000", metav1.GetOptions{})
			return err == nil
		}, nil)
	})

	t.Run("pods", func(t *testing.T) {
		bare, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "bare", NodeName: "gpu-node-000", GPUs: 1})
		require.NoError(t, err)
		requireGPURequest(t, bare, localcluster.ResourceGPU, 1)
		require.Empty(t, bare.OwnerReferences)

		jobPod, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "train-0", OwnerName: "train", NodeName: "gpu-node-001", GPUs: 2, Owner: localcluster.OwnerJob})
		require.NoError(t, err)
		requireGPURequest(t, jobPod, localcluster.ResourceGPU, 2)
		job, err := env.Clientset.BatchV1().Jobs("team-a").Get(ctx, "train", metav1.GetOptions{})
		require.NoError(t, err)
		requireControllerRef(t, jobPod, "batch/v1", "Job", job.Name, string(job.UID))
		require.Equal(t, "train", jobPod.Labels[localcluster.LabelJobName])
		require.Equal(t, string(job.UID), jobPod.Labels[localcluster.LabelJobControllerID])
		require.Equal(t, corev1.RestartPolicyNever, jobPod.Spec.RestartPolicy)

		web := localcluster.PodSpec{Namespace: "team-b", OwnerName: "web", NodeName: "gpu-node-002", Owner: localcluster.OwnerDeployment, Labels: map[string]string{"tier": "frontend"}}
		web1, err := env.CreatePod(ctx, web)
		require.NoError(t, err)
		web2, err := env.CreatePod(ctx, web)
		require.NoError(t, err)
		require.NotEqual(t, web1.Name, web2.Name)
		require.Empty(t, web1.Spec.Containers[0].Resources.Limits)
		require.NotContains(t, web1.Spec.Containers[0].Resources.Requests, localcluster.ResourceGPU)
		require.Equal(t, "frontend", web1.Labels["tier"])
		rsName := web1.OwnerReferences[0].Name
		require.True(t, strings.HasPrefix(web1.Name, rsName+"-"), "pod %s is named after its ReplicaSet %s", web1.Name, rsName)
		rs, err := env.Clientset.AppsV1().ReplicaSets("team-b").Get(ctx, rsName, metav1.GetOptions{})
		require.NoError(t, err)
		requireControllerRef(t, web1, "apps/v1", "ReplicaSet", rs.Name, string(rs.UID))
		requireControllerRef(t, web2, "apps/v1", "ReplicaSet", rs.Name, string(rs.UID))
		dep, err := env.Clientset.AppsV1().Deployments("team-b").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, rs.OwnerReferences, 1)
		require.Equal(t, "Deployment", rs.OwnerReferences[0].Kind)
		require.Equal(t, dep.UID, rs.OwnerReferences[0].UID)
		require.Equal(t, int32(2), *dep.Spec.Replicas, "two pods, two replicas")
		require.Equal(t, int32(2), *rs.Spec.Replicas)
		require.Equal(t, rs.Labels[localcluster.LabelPodTemplateHash], web1.Labels[localcluster.LabelPodTemplateHash])
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(web1.Labels)), "the ReplicaSet selects its pod")

		migPod, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "mig", NodeName: "gpu-node-003", MIGProfile: string(migResource)})
		require.NoError(t, err)
		requireGPURequest(t, migPod, migResource, 1)
		require.NotContains(t, migPod.Spec.Containers[0].Resources.Requests, localcluster.ResourceGPU)

		pending, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "pending", GPUs: 8})
		require.NoError(t, err)

		// kwok's pod-ready stage runs bound pods, pod-complete then
		// finishes those owned by a Job.
		waitPhase(t, env, bare, corev1.PodRunning)
		waitPhase(t, env, web1, corev1.PodRunning)
		waitPhase(t, env, web2, corev1.PodRunning)
		waitPhase(t, env, migPod, corev1.PodRunning)
		waitPhase(t, env, jobPod, corev1.PodSucceeded)

		running, err := env.Clientset.CoreV1().Pods("team-a").Get(ctx, "bare", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, running.Status.PodIP)
		prefix := netip.MustParsePrefix("10.128.0.0/24") // gpu-node-000's pod CIDR
		require.True(t, prefix.Contains(netip.MustParseAddr(running.Status.PodIP)), "pod IP %s from its node's CIDR", running.Status.PodIP)

		stillPending, err := env.Clientset.CoreV1().Pods("team-a").Get(ctx, pending.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodPending, stillPending.Status.Phase, "no scheduler binds an unbound pod")
		require.Empty(t, stillPending.Spec.NodeName)
	})

	t.Run("NPD conditions survive kwok heartbeats", func(t *testing.T) {
		const node, condType = "gpu-node-004", "GPUXidError"
		require.NoError(t, env.SetNodeCondition(ctx, node, corev1.NodeCondition{
			Type: condType, Status: corev1.ConditionTrue, Reason: "Xid79", Message: "GPU has fallen off the bus",
		}))
		ours := condition(t, env, node, condType)

		heartbeats := map[time.Time]bool{}
		testsupport.Eventually(t, "kwok to heartbeat the node at least twice", 20*heartbeat, 100*time.Millisecond, func() bool {
			n, err := env.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			require.NoError(t, err)
			got := localcluster.FindNodeCondition(n, condType)
			require.NotNil(t, got, "kwok's heartbeat removed the NPD condition: %+v", n.Status.Conditions)
			require.Equal(t, *ours, *got, "kwok's heartbeat changed the NPD condition")
			require.True(t, localcluster.NodeReady(n))
			heartbeats[localcluster.FindNodeCondition(n, corev1.NodeReady).LastHeartbeatTime.Time] = true
			return len(heartbeats) >= 3
		}, func() string { return fmt.Sprintf("saw %d distinct heartbeats", len(heartbeats)) })

		require.NoError(t, env.ClearNodeCondition(ctx, node, condType, "NoXid", "no Xid errors"))
		require.Equal(t, corev1.ConditionFalse, condition(t, env, node, condType).Status)
	})

	t.Run("Stop kills kwok", func(t *testing.T) {
		pid := env.KwokPID()
		require.NotZero(t, pid)
		require.NoError(t, syscall.Kill(pid, 0), "kwok runs before Stop")

		require.NoError(t, env.Stop())
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "kwok (pid %d) is gone after Stop", pid)
		require.Zero(t, env.KwokPID())
		_, err := os.Stat(env.Kubeconfig)
		require.True(t, errors.Is(err, os.ErrNotExist), "kubeconfig removed: %v", err)
		require.NoError(t, env.Stop(), "Stop is idempotent")

		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = env.Clientset.CoreV1().Namespaces().Get(stopCtx, "default", metav1.GetOptions{})
		require.Error(t, err, "the API server is down")
	})
}

func condition(t *testing.T, env *localcluster.Cluster, node, condType string) *corev1.NodeCondition {
	t.Helper()
	n, err := env.Clientset.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	c := localcluster.FindNodeCondition(n, corev1.NodeConditionType(condType))
	require.NotNil(t, c, "node %s has condition %s: %+v", node, condType, n.Status.Conditions)
	return c
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func requireGPURequest(t *testing.T, pod *corev1.Pod, res corev1.ResourceName, n int64) {
	t.Helper()
	r := pod.Spec.Containers[0].Resources
	want := *resource.NewQuantity(n, resource.DecimalSI)
	req, lim := r.Requests[res], r.Limits[res]
	require.True(t, req.Equal(want), "%s request %s, want %d", res, req.String(), n)
	require.True(t, lim.Equal(want), "%s limit %s, want %d", res, lim.String(), n)
	require.Contains(t, pod.Spec.Tolerations, corev1.Toleration{Key: string(localcluster.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}

func requireControllerRef(t *testing.T, pod *corev1.Pod, apiVersion, kind, name, uid string) {
	t.Helper()
	require.Len(t, pod.OwnerReferences, 1)
	ref := pod.OwnerReferences[0]
	require.Equal(t, apiVersion, ref.APIVersion)
	require.Equal(t, kind, ref.Kind)
	require.Equal(t, name, ref.Name)
	require.Equal(t, uid, string(ref.UID))
	require.NotNil(t, ref.Controller)
	require.True(t, *ref.Controller)
	require.NotNil(t, ref.BlockOwnerDeletion)
	require.True(t, *ref.BlockOwnerDeletion)
}

func waitPhase(t *testing.T, env *localcluster.Cluster, pod *corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	var last corev1.PodPhase
	what := fmt.Sprintf("pod %s/%s to reach %s", pod.Namespace, pod.Name, phase)
	testsupport.Eventually(t, what, 15*time.Second, 100*time.Millisecond, func() bool {
		p, err := env.Clientset.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		last = p.Status.Phase
		return last == phase
	}, func() string { return fmt.Sprintf("last phase %s", last) })
}

// KwokSkipPodsLabeled: kwok's pod-ready Stage leaves the labelled pods bound
// and Pending, and still runs the others.
func TestKwokSkipPodsLabeled(t *testing.T) {
	const skip = "kubemedic.io/bench-workload"
	env := harness.Start(t, localcluster.Options{Kwok: true, KwokSkipPodsLabeled: skip})
	ctx := t.Context()
	_, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{})
	require.NoError(t, err)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}))
	run, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "run", NodeName: "gpu-node-000"})
	require.NoError(t, err)
	left, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "team-a", Name: "left", NodeName: "gpu-node-000", Labels: map[string]string{skip: "true"}})
	require.NoError(t, err)
	waitPhase(t, env, run, corev1.PodRunning)
	got, err := env.Clientset.CoreV1().Pods("team-a").Get(ctx, left.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "gpu-node-000", got.Spec.NodeName, "bound")
	require.Equal(t, corev1.PodPending, got.Status.Phase, "kwok leaves the labelled pod alone")
}
