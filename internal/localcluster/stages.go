package localcluster

import (
	"fmt"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// OperationPodStage is a kwok Stage (for Options.KwokStages) that ends the
// kubemedic operation pods of one NodeOperationTemplate a second after kwok
// marks them Running: Succeeded with exit code 0, or Failed with exit code 1.
// kwok selects them by the template label the remediator sets.
func OperationPodStage(name, template string, succeed bool) string {
	phase, code, reason := "Succeeded", 0, "Completed"
	if !succeed {
		phase, code, reason = "Failed", 1, "Error"
	}
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: %s
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.labels["%s"]'
      operator: 'In'
      values: ['%s']
  delay:
    durationMilliseconds: 1000
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: %d
            finishedAt: {{ $now | Quote }}
            reason: %s
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: %s
`, name, v1alpha1.LabelTemplate, template, code, reason, phase)
}
