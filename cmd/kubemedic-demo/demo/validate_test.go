package demo

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// examplePolicies loads policies/examples and finds the template of the
// demo's tests there.
func examplePolicies(t *testing.T) ([]*policies.Document, *v1alpha1.NodeOperationTemplate) {
	t.Helper()
	docs, problems := policies.LoadFiles("../../../policies/examples")
	require.Empty(t, problems)
	for _, d := range docs {
		if tpl, ok := d.Object.(*v1alpha1.NodeOperationTemplate); ok && tpl.Name == validateTemplate {
			return docs, tpl
		}
	}
	t.Fatalf("policies/examples has no NodeOperationTemplate %s", validateTemplate)
	return nil, nil
}

// TestValidatePlay: the simulator's GPU test is the real kubemedic-validate
// with the template's own arguments on DCGM's real output: it passes every
// GPU of a healthy node, and on a silent-gpu node fails exactly the silent
// GPU, by UUID, in DCGM's memory test, with DCGM's warning.
func TestValidatePlay(t *testing.T) {
	_, tpl := examplePolicies(t)
	w := &World{opts: Options{RepoRoot: "../../..", Dir: t.TempDir()}, silent: map[string]int{"gpu-node-014": silentGPU}}
	pod := func(node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test-" + node},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "validate", Command: tpl.Spec.Command, Args: tpl.Spec.Args}}}}
	}

	ok, msg := w.validate(t.Context(), pod("gpu-node-004"))
	r, err := validation.Decode(msg)
	require.NoError(t, err, msg)
	require.True(t, ok, msg)
	require.Equal(t, validation.VerdictPass, r.Verdict, r.Reason)
	require.Len(t, r.GPUs, simGPUsPerNode)
	require.Equal(t, gpuUUID("gpu-node-004", 7), r.GPUs[7].UUID)

	ok, msg = w.validate(t.Context(), pod("gpu-node-014"))
	r, err = validation.Decode(msg)
	require.NoError(t, err, msg)
	require.False(t, ok, "kubemedic-validate exits non-zero on a failure")
	require.Equal(t, validation.VerdictFail, r.Verdict)
	require.Equal(t, []string{gpuUUID("gpu-node-014", silentGPU)}, validation.Failing(r))
	for _, g := range r.GPUs {
		if g.Verdict == validation.VerdictFail {
			require.Equal(t, []string{"GPU Memory"}, g.Failed)
			require.Contains(t, g.Detail, "A memory mismatch was detected on GPU 0")
		}
	}
	require.Contains(t, r.Reason, "GPU Memory")
	require.Contains(t, r.Tool, "DCGM 3.1.0")
}

// TestDemoValidationPolicies: the demo's policies for proof of health load
// and validate with the examples; gpu-xid-reset-validated is the one
// ladder on a silent-gpu node (it outranks every other policy that acts on
// its Xid or on GPUValidationFailed, and selects only the nodes the fault
// labels), tests both repairs with the template the simulator plays, and
// the ValidationPolicy tests the device-plugin nodes in the background
// with a budget, at the shipped PriorityClass.
func TestDemoValidationPolicies(t *testing.T) {
	examples, tpl := examplePolicies(t)
	silent, problems := policies.Load(silentPolicyFile, silentPolicy)
	require.Empty(t, problems)
	vals, problems := policies.Load(validationPolicyFile, validationPolicy)
	require.Empty(t, problems)
	require.Empty(t, policies.ValidateSet(append(append(append([]*policies.Document(nil), examples...), silent...), vals...)))

	require.Len(t, silent, 1)
	p := silent[0].Object.(*v1alpha1.RemediationPolicy)
	require.Equal(t, map[string]string{LabelFault: "silent-gpu"}, p.Spec.NodeSelector.MatchLabels)
	var types []string
	for _, c := range p.Spec.Conditions {
		types = append(types, c.Type)
	}
	require.ElementsMatch(t, []string{v1alpha1.ConditionGPUXidError, v1alpha1.ConditionGPUValidationFailed}, types)
	for _, d := range examples {
		rp, ok := d.Object.(*v1alpha1.RemediationPolicy)
		if !ok {
			continue
		}
		for _, c := range rp.Spec.Conditions {
			if c.Type == v1alpha1.ConditionGPUValidationFailed || c.Type == v1alpha1.ConditionGPUXidError && c.Reason != v1alpha1.ReasonXidRebootRequired {
				require.Greater(t, p.Spec.Priority, rp.Spec.Priority, "%s acts on %s too", rp.Name, c.Type)
			}
		}
	}
	var steps []string
	for _, s := range p.Spec.Steps {
		steps = append(steps, s.Name)
		if !s.Quarantine {
			require.NotNil(t, s.Validate, "step %s is tested before the uncordon", s.Name)
			require.Equal(t, validateTemplate, s.Validate.Operation)
		}
	}
	require.Equal(t, []string{"reset-gpu", "reboot", "quarantine"}, steps)

	require.Len(t, vals, 1)
	vp := vals[0].Object.(*v1alpha1.ValidationPolicy)
	require.Equal(t, validateTemplate, vp.Spec.Validate.Operation)
	require.NotNil(t, vp.Spec.Join)
	require.False(t, vp.Spec.Join.TaintNewNodes, "the nodes of the demo's world joined before the policy")
	require.Equal(t, "true", vp.Spec.NodeSelector.MatchLabels[labelDevicePlugin], "not the DRA nodes")
	b := vp.Spec.Background
	require.NotNil(t, b)
	require.Equal(t, v1alpha1.DefaultBackgroundPriorityClass, b.PriorityClassName)
	require.LessOrEqual(t, b.MaxConcurrent, int32(2))
	sped, _, err := speedUp(vp, DefaultSpeed)
	require.NoError(t, err)
	require.Equal(t, "30s", sped.(*v1alpha1.ValidationPolicy).Spec.Background.RetryAfter.Duration.String())
	// A background test the simulator holds must end before its timeout,
	// or every one no pod preempts would be no answer.
	require.Less(t, backgroundTestDuration, policies.ValidateTimeout(&vp.Spec.Validate, tpl))
}
