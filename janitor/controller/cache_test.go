package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// notebookPodYAML is testdata/notebook-pod.yaml: a whole pod as the API
// server serves it (managed fields, an Istio sidecar, status).
func notebookPodYAML(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/notebook-pod.yaml")
	require.NoError(t, err)
	return raw
}

func notebookPod(t testing.TB) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	require.NoError(t, yaml.UnmarshalStrict(notebookPodYAML(t), p))
	return p
}

// TestStripPodFixture: what the cache keeps of a whole pod, field by field.
func TestStripPodFixture(t *testing.T) {
	full := notebookPod(t)
	require.NotEmpty(t, full.ManagedFields)
	full.Annotations["kubemedic.io/owner"] = "alice@example.com"
	full.Annotations["janitor/ttl"] = "7d"
	out, err := stripPod(full.DeepCopy())
	require.NoError(t, err)
	created := metav1.NewTime(time.Date(2026, 11, 20, 9, 14, 3, 0, time.UTC).Local()) // as metav1.Time decodes it
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "alice-nb-0", Namespace: "kubeflow-user-alice", UID: "0f3c9a4e-1b2d-4c5e-8f90-5a7b3c2d1e0f", ResourceVersion: "48211937",
			CreationTimestamp: created, Labels: full.Labels,
			Annotations:     map[string]string{"kubemedic.io/owner": "alice@example.com", "janitor/ttl": "7d", annotationGPUs: "1,0"},
			OwnerReferences: full.OwnerReferences,
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-a100-0417"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &created},
	}
	require.Equal(t, want, out)
	require.Nil(t, out.(*corev1.Pod).ManagedFields, "managed fields are never cached")
}

// TestStripPodKeepsDecisions: for pods in every state the janitor tells
// apart, the plan made from the stripped pod the cache holds is the plan
// made from the whole pod: every field a decision reads survives the
// transform.
func TestStripPodKeepsDecisions(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	notice := func(deadline time.Time) string {
		n := decide.Notice{Rule: decide.RuleIdle, Evidence: "GPU utilisation at most 1%", ClaimedAt: deadline.Add(-time.Hour), Claimer: "j",
			NoticedAt: deadline.Add(-time.Hour), Deadline: deadline, Sent: true, Channel: "D1", TS: "1.2", Recipient: "alice@example.com"}
		return n.Encode()
	}
	for _, tc := range []struct {
		desc string
		pct  float64 // every GPU's utilisation; negative: no series
		mut  func(p *corev1.Pod)
		want decide.Step // "": not in the plan (nothing to do or say, or not judged)
	}{
		{desc: "idle running notebook: notice", pct: 1, want: decide.StepNotify},
		{desc: "busy running notebook: nothing", pct: 80},
		{desc: "no metrics: Unknown, nothing", pct: -1, want: decide.StepNone},
		{desc: "stuck pending: the scheduler's condition is kept", pct: -1, want: decide.StepNotify, mut: func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
					Message: "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}}}
		}},
		{desc: "pending, scheduled a moment ago", pct: -1, mut: func(p *corev1.Pod) {
			p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
		}},
		{desc: "expired TTL on the pod", pct: 80, want: decide.StepNotify, mut: func(p *corev1.Pod) { p.Annotations["janitor/ttl"] = "1h" }},
		{desc: "invalid TTL: a problem, no expiry", pct: 80, want: decide.StepNone, mut: func(p *corev1.Pod) { p.Annotations["janitor/ttl"] = "3 days" }},
		{desc: "noticed, deadline passed, still idle: reclaim", pct: 1, want: decide.StepReclaim, mut: func(p *corev1.Pod) {
			p.Annotations[v1alpha1.AnnotationReclaimNotice] = notice(now.Add(-time.Minute))
		}},
		{desc: "noticed and snoozed by the owner", pct: 1, want: decide.StepConfirmSnooze, mut: func(p *corev1.Pod) {
			p.Annotations[v1alpha1.AnnotationReclaimNotice] = notice(now.Add(30 * time.Minute))
			p.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil] = now.Add(3 * time.Hour).Format(time.RFC3339)
		}},
		{desc: "noticed, then busy: cancel", pct: 80, want: decide.StepCancel, mut: func(p *corev1.Pod) {
			p.Annotations[v1alpha1.AnnotationReclaimNotice] = notice(now.Add(30 * time.Minute))
		}},
		{desc: "opted out where opt-out is not allowed: a problem", pct: 1, want: decide.StepNotify, mut: func(p *corev1.Pod) {
			p.Annotations[v1alpha1.AnnotationReclaim] = v1alpha1.ReclaimDisabled
		}},
		{desc: "owner on the pod (user ID)", pct: 1, want: decide.StepNotify, mut: func(p *corev1.Pod) { p.Annotations[notify.AnnotationOwner] = "U0BOB00002" }},
		{desc: "MIG instances", pct: 1, want: decide.StepNotify, mut: func(p *corev1.Pod) {
			r := p.Spec.Containers[0].Resources
			delete(r.Limits, resourceGPU)
			delete(r.Requests, resourceGPU)
			r.Limits["nvidia.com/mig-1g.10gb"], r.Requests["nvidia.com/mig-1g.10gb"] = resource.MustParse("2"), resource.MustParse("2")
		}},
		{desc: "part of kubemedic: exempt", pct: 1, mut: func(p *corev1.Pod) { p.Labels[LabelPartOf] = "kubemedic" }},
		{desc: "bare pod: deleted at the deadline", pct: 1, want: decide.StepNotify, mut: func(p *corev1.Pod) { p.OwnerReferences = nil }},
		{desc: "owner of another kind: unsupported", pct: 1, want: decide.StepUnsupportedOwner, mut: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", UID: "u-rc", Controller: ptr.To(true)}}
		}},
		{desc: "terminating: skipped", pct: 1, mut: func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }},
		{desc: "succeeded: skipped", pct: 1, mut: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		{desc: "no GPU: skipped", pct: 1, mut: func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				delete(p.Spec.Containers[i].Resources.Limits, resourceGPU)
				delete(p.Spec.Containers[i].Resources.Requests, resourceGPU)
			}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			full := notebookPod(t)
			if tc.mut != nil {
				tc.mut(full)
			}
			out, err := stripPod(full.DeepCopy())
			require.NoError(t, err)
			stripped := out.(*corev1.Pod)

			w1, m1 := GPURequests(full)
			w2, m2 := GPURequests(stripped)
			require.Equal(t, []int{w1, m1}, []int{w2, m2}, "GPU counts")
			if w1+m1 > 0 {
				// What the plan reads of a GPU pod, compared directly: a
				// pod with nothing to do is not in the plan.
				require.Equal(t, controllerUID(full.OwnerReferences), controllerUID(stripped.OwnerReferences))
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: full.Namespace, Annotations: map[string]string{"janitor/ttl": "30d"}}}
				require.Equal(t, podFacts(full, nil, ns), podFacts(stripped, nil, ns))
				require.Equal(t, exemption(full, nil, "kubemedic-system"), exemption(stripped, nil, "kubemedic-system"))
			}

			planFull, planStripped := planOf(t, full, tc.pct, now), planOf(t, stripped, tc.pct, now)
			require.Equal(t, planFull.Queries, planStripped.Queries)
			require.Equal(t, len(planFull.Pods), len(planStripped.Pods))
			if tc.want == "" {
				require.Empty(t, planFull.Pods, "nothing to do or say")
				return
			}
			require.Len(t, planFull.Pods, 1, "the pod is in the plan")
			a, b := planFull.Pods[0], planStripped.Pods[0]
			require.Same(t, full, a.Pod)
			require.Same(t, stripped, b.Pod)
			a.Pod, b.Pod = nil, nil
			require.Equal(t, a, b, "the same facts, verdict and decision")
			require.Equal(t, tc.want, a.Decision.Step, "%+v", a.Decision)
		})
	}
}

// planOf runs MakePlan on one pod with a cluster policy selecting every
// namespace, the pod's namespace (its owner annotated), its StatefulSet,
// and every GPU of the pod at pct percent (none when pct < 0).
func planOf(t *testing.T, pod *corev1.Pod, pct float64, now time.Time) *Plan {
	t.Helper()
	scheme, err := Scheme()
	require.NoError(t, err)
	objs := []client.Object{
		&v1alpha1.ClusterReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.ClusterReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{
			Idle:        &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: metav1.Duration{Duration: time.Hour}},
			MaxLifetime: &metav1.Duration{Duration: 1000 * time.Hour}, MaxPending: &metav1.Duration{Duration: time.Hour}}}},
		// Selects the notebook by its labels; tighter, so enforced.
		&v1alpha1.ReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeflow-user-alice", Name: "nb"}, Spec: v1alpha1.ReclaimPolicySpec{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"notebook-name": "alice-nb"}},
			ReclaimRules: v1alpha1.ReclaimRules{MaxLifetime: &metav1.Duration{Duration: 500 * time.Hour},
				GracePeriod: &metav1.Duration{Duration: 30 * time.Minute}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow-user-alice", Labels: map[string]string{"kubernetes.io/metadata.name": "kubeflow-user-alice"},
			Annotations: map[string]string{notify.AnnotationKubeflowOwner: "alice@example.com"}}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeflow-user-alice", Name: "alice-nb", UID: "7b1e4c52-8a0e-4f7e-9d2a-3c6f1b0e9a41"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	whole, mig := GPURequests(pod)
	src := stubSource{}
	if pct >= 0 {
		key := gpuutil.PodKey{Namespace: pod.Namespace, Name: pod.Name}
		for i := 0; i < whole+mig; i++ {
			src[key] = append(src[key], gpuutil.GPU{ID: "GPU-" + string(rune('a'+i)), MaxPercent: pct})
		}
	}
	p, err := MakePlan(context.Background(), PlanInput{Reader: c, Pods: []*corev1.Pod{pod}, Source: src, Now: now,
		NotifierReady: true, SelfNamespace: "kubemedic-system"})
	require.NoError(t, err)
	return p
}

// stubSource answers every query with the same GPUs.
type stubSource map[gpuutil.PodKey][]gpuutil.GPU

func (s stubSource) Fetch(_ context.Context, qs []gpuutil.Query, _ time.Time) map[gpuutil.Query]gpuutil.Result {
	out := map[gpuutil.Query]gpuutil.Result{}
	for _, q := range qs {
		out[q] = gpuutil.Result{Pods: s}
	}
	return out
}

// BenchmarkCachedPodSize reports the heap a GPU pod costs in the
// janitor's cache (bytes/pod) without and with the transform: 50,000 pods
// decoded from testdata/notebook-pod.yaml's JSON, each with its own name
// and UID, as an informer decodes them, then kept whole or stripped.
//
//	go test -run '^$' -bench CachedPodSize -benchtime 1x ./janitor/controller/
func BenchmarkCachedPodSize(b *testing.B) {
	const n = 50000
	raw, err := yaml.YAMLToJSON(notebookPodYAML(b))
	if err != nil {
		b.Fatal(err)
	}
	const name, uid = "alice-nb-0", "0f3c9a4e-1b2d-4c5e-8f90-5a7b3c2d1e0f"
	decode := func(i int) *corev1.Pod {
		j := bytes.ReplaceAll(raw, []byte(name), fmt.Appendf(nil, "nb%08d", i))
		j = bytes.ReplaceAll(j, []byte(uid), fmt.Appendf(nil, "0f3c9a4e-1b2d-4c5e-8f90-%012d", i))
		p := &corev1.Pod{}
		if err := json.Unmarshal(j, p); err != nil {
			b.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		desc      string
		transform func(any) (any, error)
	}{
		{"whole", func(o any) (any, error) { return o, nil }},
		{"managedFieldsStripped", cache.TransformStripManagedFields()},
		{"stripPod", stripPod},
	} {
		b.Run(tc.desc, func(b *testing.B) {
			for b.Loop() {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				store := make([]any, n)
				for i := range store {
					if store[i], err = tc.transform(decode(i)); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "bytes/pod")
				b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "MiB/50k-pods")
				runtime.KeepAlive(store)
			}
		})
	}
}
