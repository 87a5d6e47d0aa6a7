package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "kubemedic.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&RemediationPolicy{}, &RemediationPolicyList{},
		&NodeOperationTemplate{}, &NodeOperationTemplateList{},
		&NodeOperation{}, &NodeOperationList{},
		&ClusterReclaimPolicy{}, &ClusterReclaimPolicyList{},
		&ReclaimPolicy{}, &ReclaimPolicyList{},
		&ValidationPolicy{}, &ValidationPolicyList{},
		&NodeValidation{}, &NodeValidationList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
