package plan

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// What an operation is and says, apart from its lifecycle (advance.go):
// what it does in words, its timeout and parameters, why its pod failed,
// and how long it is kept.

// Describe says what an operation does, for messages.
func Describe(op *v1alpha1.NodeOperation) string {
	if op.Spec.Quarantine {
		return "quarantine (cordon and taint " + v1alpha1.TaintQuarantined + ")"
	}
	s := ""
	switch {
	case op.Spec.Drain != nil:
		mode := v1alpha1.DrainEvict
		if op.Spec.Drain.Mode != "" {
			mode = op.Spec.Drain.Mode
		}
		s = fmt.Sprintf("cordon, drain (%s) and ", mode)
	case op.Spec.Cordon:
		s = "cordon and "
	}
	s += "run " + op.Spec.Operation
	if v := op.Spec.Validate; v != nil {
		s += ", then test the GPUs with " + v.Operation + " before the node serves again"
	}
	return s
}

// OperationTimeout bounds the Running phase: the operation's own timeout,
// else the template's, else the template default.
func OperationTimeout(op *v1alpha1.NodeOperation, tpl *v1alpha1.NodeOperationTemplate) time.Duration {
	switch {
	case op.Spec.Timeout != nil:
		return op.Spec.Timeout.Duration
	case tpl != nil && tpl.Spec.Timeout != nil:
		return tpl.Spec.Timeout.Duration
	}
	return policies.DefaultTemplateTimeout
}

// Retention is how long finished operations are kept: base, stretched to
// the longest attempt-cap window and node cooldown of any policy, which
// are counted from finished operations and would be forgotten otherwise.
func Retention(base time.Duration, pols []*Policy) time.Duration {
	keep := base
	for _, p := range pols {
		sf := p.Obj.Spec.Safety
		if sf.AttemptCap != nil && sf.AttemptCap.Window != nil {
			keep = max(keep, sf.AttemptCap.Window.Duration)
		}
		if sf.NodeCooldown != nil {
			keep = max(keep, sf.NodeCooldown.Duration)
		}
	}
	return keep
}

// Parameters extracts the template's parameters from the trigger message:
// each parameter's messageRegex's first group. A required parameter that
// does not match is an error naming the template, the parameter and the
// message.
func Parameters(tpl *v1alpha1.NodeOperationTemplate, op *v1alpha1.NodeOperation) ([]v1alpha1.TemplateEnvVar, error) {
	var out []v1alpha1.TemplateEnvVar
	for _, prm := range tpl.Spec.Parameters {
		re, err := regexp.Compile(prm.MessageRegex)
		if err != nil {
			return nil, fmt.Errorf("template %s: parameters[%s].messageRegex: %w", tpl.Name, prm.Name, err)
		}
		var m []string
		if op.Spec.Trigger != nil {
			m = re.FindStringSubmatch(op.Spec.Trigger.Message)
		}
		if len(m) < 2 || m[1] == "" {
			if prm.Required {
				src := "the operation has no trigger condition"
				if op.Spec.Trigger != nil {
					src = fmt.Sprintf("trigger message %q", op.Spec.Trigger.Message)
				}
				return nil, fmt.Errorf("template %s: required parameter %s: %s does not match %s", tpl.Name, prm.Name, src, prm.MessageRegex)
			}
			continue
		}
		out = append(out, v1alpha1.TemplateEnvVar{Name: prm.Name, Value: m[1]})
	}
	return out, nil
}

// PodFailure says why a pod failed, from its container states.
func PodFailure(pod *corev1.Pod) string {
	var parts []string
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil {
			s := fmt.Sprintf("container %s exited %d", cs.Name, term.ExitCode)
			if term.Reason != "" {
				s += " (" + term.Reason + ")"
			}
			if m := strings.TrimSpace(term.Message); m != "" {
				s += ": " + Truncate(m, 300)
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		if pod.Status.Message != "" {
			return pod.Status.Reason + " " + pod.Status.Message
		}
		return "no container status"
	}
	return strings.Join(parts, "; ")
}

// PodFinishedAt is when the pod's containers finished; zero if unknown.
func PodFinishedAt(pod *corev1.Pod) time.Time {
	var at time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(at) {
			at = term.FinishedAt.Time
		}
	}
	return at
}

// Truncate bounds s to n bytes, marking the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
