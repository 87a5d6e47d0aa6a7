package drain

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// Runner performs a drain decision: the seam between the operation
// controller and the API server's eviction and pod deletion, as
// evict.EvictionConfig is the seam to the transport. *evict.Evictor is the
// real one. It is declared here, beside Decision, so that the controller
// and the planner depend on the decision's package and not on a client.
type Runner interface {
	// Run performs d's evictions, then its deletions, each pod only while
	// it has the UID in d.UIDs, and returns the pods it stopped, the pods a
	// disruption budget blocked ("ns/name: message") and the other failures
	// aggregated, as evict.Run does.
	Run(ctx context.Context, d Decision) (stopped []Stopped, blocked []string, err error)
}

// Stopped is a pod that a Runner stopped: the API server accepted its
// eviction or its deletion in that call. A pod that was gone already, or
// that a budget refused, is not one.
type Stopped struct {
	// Pod is the pod's namespace and name.
	Pod types.NamespacedName
	// UID is the UID the eviction or deletion was conditioned on (from
	// Decision.UIDs; empty when the decision had none).
	UID types.UID
	// Deleted is true for a pod deleted after the drain timeout, bypassing
	// its disruption budgets; false for an eviction.
	Deleted bool
}
