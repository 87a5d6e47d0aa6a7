package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestOpCommentsInOrder: the comments an issue is owed come oldest end
// first, a capture before its own operation's test, each with its own id;
// a capture without a stored bundle and a test without a verdict owe none.
func TestOpCommentsInOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	at := func(m int) *metav1.Time { tm := metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)); return &tm }
	bundle := func(m int) *v1alpha1.DiagnosticsStatus {
		return &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured, CompletionTime: at(m),
			Bundle: &v1alpha1.DiagnosticsBundle{Key: "k", Stored: true, URL: "https://s3.example.com/k"}}
	}
	op := func(uid string, diag *v1alpha1.DiagnosticsStatus, v *v1alpha1.ValidationStatus) v1alpha1.NodeOperation {
		o := v1alpha1.NodeOperation{Status: v1alpha1.NodeOperationStatus{Diagnostics: diag, Validation: v}}
		o.UID = k8stypes.UID("uid-" + uid)
		return o
	}
	ops := []v1alpha1.NodeOperation{
		op("a", bundle(1), &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationFailed, CompletionTime: at(30)}),
		op("b", bundle(10), &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationPassed, CompletionTime: at(20)}),
		op("c", &v1alpha1.DiagnosticsStatus{Result: v1alpha1.DiagnosticsCaptured, CompletionTime: at(0),
			Bundle: &v1alpha1.DiagnosticsBundle{Key: "spooled"}}, &v1alpha1.ValidationStatus{Result: v1alpha1.ValidationValidating, Attempt: 2}),
	}
	var ids []string
	for _, c := range opComments(ops) {
		ids = append(ids, c.id())
	}
	require.Equal(t, []string{"uid-a", "uid-b", "uid-b/validation", "uid-a/validation"}, ids)
}
