package demo

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestTimelineBackgroundTests: the timeline follows a background test pod
// from its start on the node's free GPUs to its preemption (the API
// server's DisruptionTarget, or the pod gone before it ended) and records
// the pod bound on its GPUs after it; a test that ended with a result, or
// that the remediator replaced after no answer, is no preemption, and a
// test still waiting for GPUs is not printed at all.
func TestTimelineBackgroundTests(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	test := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{v1alpha1.LabelValidationPolicy: "demo-gpu-validation", v1alpha1.LabelTemplate: validateTemplate}},
			Spec:   corev1.PodSpec{NodeName: node, PriorityClassName: v1alpha1.DefaultBackgroundPriorityClass},
			Status: corev1.PodStatus{Phase: phase}}
	}
	job := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: workloadNS, Name: "train-whole-n1-x", UID: "uid-job"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpuResource: resource.MustParse("8")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}

	for _, tc := range []struct {
		desc string
		// the pods of each poll, and the NodeValidation of n1 at the end
		polls [][]client.Object
		nv    *v1alpha1.NodeValidation
		want  []Preemption // Test, Node, Reason, Pod
		lines []string
	}{
		{desc: "waiting for GPUs: nothing", polls: [][]client.Object{{test("t1", "", corev1.PodPending)}, {}}},
		{desc: "preempted by the scheduler, the job bound after",
			polls: [][]client.Object{
				{test("t1", "n1", corev1.PodRunning)},
				{func() client.Object {
					p := test("t1", "n1", corev1.PodRunning)
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "default-scheduler: preempting to accommodate a higher priority pod"}}
					return p
				}()},
				{job},
			},
			want:  []Preemption{{Test: "t1", Node: "n1", Reason: "PreemptionByScheduler", Pod: workloadNS + "/" + job.Name}},
			lines: []string{"testing", "background GPU test of n1 started", "preempted", "PreemptionByScheduler", "bound to n1, on the GPUs of background test t1"}},
		{desc: "gone between two polls, the job bound in the same poll",
			polls: [][]client.Object{{test("t1", "n1", corev1.PodRunning)}, {job}},
			want:  []Preemption{{Test: "t1", Node: "n1", Pod: workloadNS + "/" + job.Name}},
			lines: []string{"the pod is gone before it ended", "bound to n1"}},
		{desc: "ended with a result and deleted between two polls",
			polls: [][]client.Object{{test("t1", "n1", corev1.PodRunning)}, {}},
			nv:    &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1alpha1.NodeValidationStatus{Last: &v1alpha1.ValidationStatus{PodName: "t1", Result: v1alpha1.ValidationPassed}}}},
		{desc: "replaced after no answer",
			polls: [][]client.Object{{test("t1", "n1", corev1.PodRunning)}, {test("t2", "n1", corev1.PodPending)}},
			nv:    &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1alpha1.NodeValidationStatus{Current: &v1alpha1.ValidationStatus{PodName: "t2", Attempt: 2}}}},
		{desc: "succeeded, then gone",
			polls: [][]client.Object{{test("t1", "n1", corev1.PodRunning)}, {test("t1", "n1", corev1.PodSucceeded)}, {}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out bytes.Buffer
			tl := &Timeline{Out: &out, start: time.Now(), pods: map[types.UID]*podState{}, lastNode: map[string]string{}, stopped: map[types.UID]string{},
				evictions: map[types.UID][]eviction{}, cordoned: map[string]string{}, tests: map[types.UID]*testState{}}
			for i, objs := range tc.polls {
				if i == len(tc.polls)-1 && tc.nv != nil {
					objs = append(objs, tc.nv)
				}
				tl.Kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
				require.NoError(t, tl.pollPods(t.Context()))
			}
			var got []Preemption
			for _, p := range tl.Preemptions() {
				got = append(got, Preemption{Test: p.Test, Node: p.Node, Reason: p.Reason, Pod: p.Pod})
			}
			require.Equal(t, tc.want, got, out.String())
			for _, l := range tc.lines {
				require.Contains(t, out.String(), l)
			}
			if len(tc.lines) == 0 {
				require.NotContains(t, out.String(), "preempted", "no preemption line")
			}
		})
	}
}
