package plan

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// PodName is the one way kubemedic names a pod it makes for an object
// (an operation, a node's flush): name and suffix, as a DNS label.
//
// A pod's name is its hostname, so it must be an RFC 1123 label (lower-case
// alphanumerics and '-', at most 63 characters, no dots); the API server
// warns of any other name ("a DNS label is recommended: [must not contain
// dots]"), and NodeOperation names, "policy.node.hash-step", have dots.
// The name must also be deterministic, so that a retry of the create (a
// lost status write, a restart, a second leader) meets AlreadyExists
// instead of running the pod twice, and unique per name.
//
// So: name+suffix when that is a DNS label already (a pod made before
// keeps its name); else a readable prefix of name, with every character
// that is not a lower-case alphanumeric or '-' made '-', then '-', 8 hex
// digits of the SHA-256 of the whole name, and suffix. suffix must be
// '-' and lower-case alphanumerics, a few characters long.
func PodName(name, suffix string) string {
	if full := name + suffix; len(validation.IsDNS1123Label(full)) == 0 {
		return full
	}
	hash := shortHash(name)
	keep := validation.DNS1123LabelMaxLength - len(suffix) - 1 - len(hash)
	prefix := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			return r
		case 'A' <= r && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, name)
	prefix = strings.Trim(prefix[:min(len(prefix), max(keep, 0))], "-")
	if prefix == "" {
		return hash + suffix
	}
	return prefix + "-" + hash + suffix
}

// OperationPodName is the pod that runs an operation's template.
func OperationPodName(op *v1alpha1.NodeOperation) string { return PodName(op.Name, "") }

// CapturePodName is the pod that captures an operation's diagnostics: one
// name, so that a second creation fails AlreadyExists instead of capturing
// twice.
func CapturePodName(op *v1alpha1.NodeOperation) string { return PodName(op.Name, "-diag") }
