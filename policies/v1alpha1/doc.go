// Package v1alpha1 holds the kubemedic.io/v1alpha1 API: the custom resources
// that ops write (RemediationPolicy, NodeOperationTemplate, ClusterReclaimPolicy,
// ReclaimPolicy) and the audit record the remediator keeps (NodeOperation).
//
// The OpenAPI markers and CEL rules here are the first line of validation and
// run in the API server; policies.Validate covers what they cannot (regexes
// that must compile, time zones, references between objects). The types must
// never carry behaviour beyond small pure helpers: controllers and the CLI
// live elsewhere. The CRDs under deploy/crds and zz_generated.deepcopy.go are
// generated from this package with `make generate`; never edit them by hand.
//
// +kubebuilder:object:generate=true
// +groupName=kubemedic.io
package v1alpha1
