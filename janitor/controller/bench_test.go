package controller

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// allBusy answers every query with every pod at 50 %.
type allBusy struct{ pods []*corev1.Pod }

func (s allBusy) Fetch(_ context.Context, qs []gpuutil.Query, _ time.Time) map[gpuutil.Query]gpuutil.Result {
	out := map[gpuutil.Query]gpuutil.Result{}
	for _, q := range qs {
		r := gpuutil.Result{Pods: make(map[gpuutil.PodKey][]gpuutil.GPU, len(s.pods))}
		for i := range s.pods {
			r.Pods[gpuutil.PodKey{Namespace: s.pods[i].Namespace, Name: s.pods[i].Name}] = []gpuutil.GPU{{ID: "GPU-x", MaxPercent: 50}}
		}
		out[q] = r
	}
	return out
}

// BenchmarkMakePlan decides 50,000 busy GPU pods (StatefulSet-owned, 8 per
// workload, 100 namespaces) with the stripped pods the cache holds: the
// janitor's per-cycle cost outside the cache and Prometheus.
func BenchmarkMakePlan(b *testing.B) {
	const pods, perWorkload, namespaces = 50000, 8, 100
	scheme, err := Scheme()
	if err != nil {
		b.Fatal(err)
	}
	objs := []client.Object{&v1alpha1.ClusterReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.ClusterReclaimPolicySpec{
		ReclaimRules: v1alpha1.ReclaimRules{Idle: &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: metav1.Duration{Duration: time.Hour}},
			MaxLifetime: &metav1.Duration{Duration: 1000 * time.Hour}}}}}
	for n := 0; n < namespaces; n++ {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", n),
			Annotations: map[string]string{"kubemedic.io/owner": "alice@example.com"}}})
	}
	start := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	var list []*corev1.Pod
	for i := 0; i < pods; i++ {
		ns, ss := fmt.Sprintf("ns-%d", i%namespaces), fmt.Sprintf("ss-%d", i/perWorkload)
		uid := types.UID(fmt.Sprintf("uid-%s", ss))
		if i%perWorkload == 0 {
			objs = append(objs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ss, UID: uid}})
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", ss, i%perWorkload), UID: types.UID(fmt.Sprint(i)),
			Labels: map[string]string{"app": ss}, CreationTimestamp: start,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: ss, UID: uid, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start}}
		stripped, _ := stripPod(p)
		list = append(list, stripped.(*corev1.Pod))
	}
	for i := 0; i < len(list); i += perWorkload {
		// the StatefulSets of the same namespace as their pods
		objs[1+namespaces+i/perWorkload].(*appsv1.StatefulSet).Namespace = list[i].Namespace
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	in := PlanInput{Reader: c, Pods: list, Source: allBusy{list}, Now: time.Now(), NotifierReady: true, SelfNamespace: "kubemedic-system"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := MakePlan(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Queries) != 1 {
			b.Fatalf("%d queries", len(p.Queries))
		}
	}
}

// BenchmarkStrippedPodSize reports the heap a GPU pod costs in the
// janitor's cache (bytes/pod), the most of its memory at scale.
func BenchmarkStrippedPodSize(b *testing.B) {
	const n = 20000
	start := metav1.NewTime(time.Now())
	mk := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-12", Name: fmt.Sprintf("trainer-abcde-%d", i),
			UID: types.UID(fmt.Sprintf("0f3c9a4e-1b2d-4c5e-8f90-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: start,
			Labels:          map[string]string{"app": "trainer", "controller-revision-hash": "trainer-5d8f", "statefulset.kubernetes.io/pod-name": "trainer-0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "trainer", UID: "u", Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "gpu-node-0001", Containers: []corev1.Container{{Name: "c", Image: "img",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("4")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start}}}}
	}
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		store := make([]any, n)
		for i := range store {
			store[i], _ = stripPod(mk(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "bytes/pod")
		runtime.KeepAlive(store)
	}
}
