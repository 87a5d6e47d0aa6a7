package controller

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func meta(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestTarget(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	notebook := schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Notebook"}
	ray := schema.GroupVersionKind{Group: "ray.io", Version: "v1", Kind: "RayCluster"}
	for _, tc := range []struct {
		desc  string
		chain []owner
		want  decide.Target
	}{
		{"bare pod", nil, decide.Target{Kind: decide.TargetPod, Name: "p"}},
		{"orphan whose controller is gone", []owner{{gvk: gvkJob}}, decide.Target{Kind: decide.TargetPod, Name: "p"}},
		{"job", []owner{{gvk: gvkJob, meta: meta("j")}}, decide.Target{Kind: decide.TargetJob, Name: "j"}},
		{"deployment", []owner{{gvk: gvkReplicaSet, meta: meta("rs")}, {gvk: gvkDeployment, meta: meta("d")}}, decide.Target{Kind: decide.TargetDeployment, Name: "d"}},
		{"bare replicaset", []owner{{gvk: gvkReplicaSet, meta: meta("rs")}}, decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "ReplicaSet", Name: "rs"}},
		{"statefulset", []owner{{gvk: gvkStatefulSet, meta: meta("ss")}}, decide.Target{Kind: decide.TargetStatefulSet, Name: "ss"}},
		{"notebook", []owner{{gvk: gvkStatefulSet, meta: meta("ss")}, {gvk: notebook, meta: meta("nb")}}, decide.Target{Kind: decide.TargetNotebook, Name: "nb", APIVersion: "kubeflow.org/v1"}},
		{"statefulset of another operator", []owner{{gvk: gvkStatefulSet, meta: meta("ss")}, {gvk: ray, meta: meta("r")}}, decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "RayCluster", Name: "r"}},
		{"unknown controller", []owner{{gvk: ray, meta: meta("r")}}, decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "RayCluster", Name: "r"}},
	} {
		t.Run(tc.desc, func(t *testing.T) { require.Equal(t, tc.want, target(pod, tc.chain)) })
	}
}

func TestExemption(t *testing.T) {
	pod := func(ns string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: labels}}
	}
	require.Contains(t, exemption(pod("team", nil), []owner{{gvk: gvkDaemonSet, meta: meta("dcgm")}}, "kubemedic-system"), "DaemonSet dcgm")
	require.Contains(t, exemption(pod("kubemedic-system", nil), nil, "kubemedic-system"), "kubemedic's namespace")
	require.Contains(t, exemption(pod("team", map[string]string{LabelPartOf: "kubemedic"}), nil, "kubemedic-system"), "part of kubemedic")
	require.Contains(t, exemption(pod("team", map[string]string{v1alpha1.LabelOperation: "op"}), nil, "kubemedic-system"), "node operation")
	require.Empty(t, exemption(pod("team", nil), nil, "kubemedic-system"))
}

func gpuPod(limits corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", Annotations: map[string]string{
			"janitor/ttl": "1d", "kubemedic.io/owner": "a@b.c", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Limits: limits}},
			{Name: "b", Image: "big", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("4")}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
}

func TestGPURequestsAndStrip(t *testing.T) {
	p := gpuPod(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), "nvidia.com/mig-1g.10gb": resource.MustParse("3")})
	w, m := GPURequests(p)
	require.Equal(t, 3, w)
	require.Equal(t, 3, m)
	out, err := stripPod(p)
	require.NoError(t, err)
	s := out.(*corev1.Pod)
	w2, m2 := GPURequests(s)
	require.Equal(t, []int{3, 3}, []int{w2, m2}, "the stripped pod keeps its GPU counts")
	require.Equal(t, map[string]string{"janitor/ttl": "1d", "kubemedic.io/owner": "a@b.c", annotationGPUs: "3,3"}, s.Annotations)
	require.Empty(t, s.Status.Conditions, "PodScheduled=True is not needed")
	require.Empty(t, s.Spec.Containers)

	// An unschedulable pod keeps its condition; a pod claiming the cache's
	// annotation in the API server is counted from its containers.
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes"}}
	p.Annotations[annotationGPUs] = "100,100"
	w, m = GPURequests(p)
	require.Equal(t, []int{3, 3}, []int{w, m})
	out, err = stripPod(p)
	require.NoError(t, err)
	s = out.(*corev1.Pod)
	require.Equal(t, "3,3", s.Annotations[annotationGPUs])
	require.Len(t, s.Status.Conditions, 1)

	cpu := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}}}}}
	out, err = stripPod(cpu)
	require.NoError(t, err)
	require.Nil(t, out.(*corev1.Pod).Labels, "a pod without GPUs keeps only its identity")
	require.Empty(t, out.(*corev1.Pod).Spec.Containers)
}

func TestPodFacts(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	p := gpuPod(nil)
	p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: " 0/3 nodes are available ", LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Minute))}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: map[string]string{"janitor/expires": "2026-12-01"}}}
	job := meta("train")
	job.Annotations = map[string]string{"janitor/ttl": "2w"}
	f := podFacts(p, []owner{{gvk: gvkJob, meta: job}}, ns)
	require.Equal(t, 1, f.WholeGPUs)
	require.Equal(t, &decide.Unschedulable{Since: now.Add(-30 * time.Minute), Message: "0/3 nodes are available"}, f.Unschedulable)
	require.Equal(t, []decide.ExpirySource{
		{Object: "pod p", Created: now.Add(-time.Hour), TTL: "1d"},
		{Object: "Job train", TTL: "2w"},
		{Object: "namespace team", Expires: "2026-12-01"},
	}, f.Expiry)
}

func TestNoticeMessageSaysWhatWhenHow(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pp := &PodPlan{Pod: gpuPod(nil), Rules: policies.Reclaim{GracePeriod: time.Hour, MaxSnooze: 24 * time.Hour, AllowOptOut: true,
		Policies: []string{"ClusterReclaimPolicy/reclaim-default"}, Description: "GPUs are shared"}}
	pp.Facts.WholeGPUs = 1
	d := decide.Decision{Rule: decide.RuleIdle, Evidence: "GPU utilisation at most 2% over the last 4h on 1 GPU (threshold 5%)",
		Target: decide.Target{Kind: decide.TargetJob, Name: "train"}, Deadline: now.Add(time.Hour)}
	m := noticeMessage(pp, d, false, false)
	for _, want := range []string{"team/p", "2026-11-25T13:00:00Z", "delete Job train and its pods", "at most 2%",
		"kubectl annotate pod -n team p --overwrite kubemedic.io/reclaim-snooze-until=2026-11-26T13:00:00Z"} {
		require.Contains(t, m.Text, want)
	}
	require.NotEmpty(t, m.Blocks)
	require.Contains(t, noticeMessage(pp, d, true, false).Text, "dry run: nothing will be changed")
	require.Contains(t, reclaimedText(pp, decide.Decision{Rule: decide.RuleIdle, Target: decide.Target{Kind: decide.TargetDeployment, Name: "web"}}, "scaled"),
		"kubectl scale deployment -n team web")
}

func TestStripMeta(t *testing.T) {
	ann := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}", "janitor/ttl": "1d", "kubemedic.io/owner": "a@b.c", "owner": "k@f.org"}
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "d", Annotations: maps.Clone(ann), ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := stripMeta(m)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"janitor/ttl": "1d", "kubemedic.io/owner": "a@b.c"}, out.(*metav1.PartialObjectMetadata).Annotations)
	require.Nil(t, out.(*metav1.PartialObjectMetadata).ManagedFields)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: maps.Clone(ann)}}
	out, err = stripMeta(ns)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"janitor/ttl": "1d", "kubemedic.io/owner": "a@b.c", "owner": "k@f.org"}, out.(*corev1.Namespace).Annotations,
		"a namespace keeps Kubeflow's owner")
}
