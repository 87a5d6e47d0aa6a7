package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// TestBuildNodeTestPod: a join test is bound to the node past every
// taint; a background test goes through the scheduler, pinned to the node,
// at the policy's priority class, tolerating only the node's serving
// taints. Both ask for every GPU, are owned by the node's record and are
// no operation pods (a drain evicts them).
func TestBuildNodeTestPod(t *testing.T) {
	pol := &v1alpha1.ValidationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1alpha1.ValidationPolicySpec{
		Validate:   v1alpha1.ValidateSpec{Operation: "validate-dcgm"},
		Background: &v1alpha1.BackgroundSpec{MaxConcurrent: 1, PriorityClassName: v1alpha1.DefaultBackgroundPriorityClass}}}
	tpl := &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: "validate-dcgm"}, Spec: v1alpha1.NodeOperationTemplateSpec{Image: "img", Command: []string{"/ko-app/kubemedic-validate"}}}
	rec := &v1alpha1.NodeValidation{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "rec-uid"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{Unschedulable: false, Taints: []corev1.Taint{
			{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
			{Key: v1alpha1.TaintUnvalidated, Effect: corev1.TaintEffectNoSchedule},
			{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute},
			{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule},
			{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}

	check := func(pod *corev1.Pod, name string) {
		t.Helper()
		require.Equal(t, name, pod.Name)
		require.Equal(t, "kubemedic", pod.Namespace)
		require.NotContains(t, pod.Labels, v1alpha1.LabelOperation, "a drain evicts a test like any pod")
		require.Equal(t, "pool", pod.Labels[v1alpha1.LabelValidationPolicy])
		require.Len(t, pod.OwnerReferences, 1)
		require.Equal(t, "NodeValidation", pod.OwnerReferences[0].Kind)
		require.EqualValues(t, "rec-uid", pod.OwnerReferences[0].UID)
		gpus := resource.MustParse("8")
		require.True(t, gpus.Equal(pod.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]))
		require.Equal(t, corev1.TerminationMessageReadFile, pod.Spec.Containers[0].TerminationMessagePolicy)
	}

	join := buildNodeTestPod(pol, tpl, rec, node, &plan.TestPod{Name: "n1-validate-1-1", Mode: v1alpha1.ValidationJoin, Attempt: 1}, "kubemedic")
	check(join, "n1-validate-1-1")
	require.Equal(t, "n1", join.Spec.NodeName, "bound past the join taint")
	require.Empty(t, join.Spec.PriorityClassName)

	bg := buildNodeTestPod(pol, tpl, rec, node, &plan.TestPod{Name: "n1-validate-2-1", Mode: v1alpha1.ValidationBackground, Attempt: 1}, "kubemedic")
	check(bg, "n1-validate-2-1")
	require.Empty(t, bg.Spec.NodeName, "through the scheduler")
	require.Equal(t, v1alpha1.DefaultBackgroundPriorityClass, bg.Spec.PriorityClassName)
	require.Equal(t, v1alpha1.BackgroundGracePeriod, *bg.Spec.TerminationGracePeriodSeconds)
	terms := bg.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Equal(t, []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}, terms[0].MatchFields)
	require.Equal(t, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}}, bg.Spec.Tolerations,
		"only the taint real pods tolerate there: not the join, quarantine or cordon taints, not a node being removed or not yet initialised, and nothing NoExecute")
}
