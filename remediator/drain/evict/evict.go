package evict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/remediator/drain"
)

// Result is what became of one eviction.
type Result string

const (
	// ResultEvicted means the API server accepted the eviction: the pod is
	// terminating (or, if it had not started, already deleted).
	ResultEvicted Result = "Evicted"
	// ResultGone means the pod was gone already, or had been replaced by a
	// pod with the same name and another UID.
	ResultGone Result = "Gone"
	// ResultBlocked means a PodDisruptionBudget refused the eviction for
	// now, or the pod is covered by several budgets, which the eviction API
	// does not support. Trying again later is the normal course.
	ResultBlocked Result = "Blocked"
)

// Outcome is the answer to one eviction.
type Outcome struct {
	Result Result
	// Message is the API server's reason when Result is ResultBlocked, e.g.
	// "Cannot evict pod as it would violate the pod's disruption budget: The
	// disruption budget trainer needs 2 healthy pods and has 2 currently".
	Message string
}

// Blocked reports whether a disruption budget refused the eviction.
func (o Outcome) Blocked() bool { return o.Result == ResultBlocked }

// Evictor evicts and deletes pods through the API server. It needs create
// on pods/eviction and delete on pods.
type Evictor struct {
	// Client is the controller-runtime client to post with. Its scheme must
	// know policy/v1. Make it from EvictionConfig (NewEvictor does), or a
	// budget the disruption controller has not processed yet stalls each
	// eviction for about 100 s; see EvictionConfig.
	Client client.Client
}

// Evict posts a policy/v1 Eviction for the pod. NotFound is success
// (ResultGone); a disruption budget's refusal is ResultBlocked with the
// server's message, not an error. Any other failure is an error naming the
// pod.
//
// With a Client not made from EvictionConfig, a budget whose status is
// behind its spec makes Evict take about 100 s (see EvictionConfig).
func (e *Evictor) Evict(ctx context.Context, pod types.NamespacedName) (Outcome, error) {
	return e.evict(ctx, pod, "")
}

// Delete deletes the pod with its default grace period, bypassing any
// disruption budget. NotFound is success.
func (e *Evictor) Delete(ctx context.Context, pod types.NamespacedName) error {
	_, err := e.delete(ctx, pod, "")
	return err
}

// evict evicts pod, only while its UID is uid when uid is set.
func (e *Evictor) evict(ctx context.Context, nn types.NamespacedName, uid types.UID) (Outcome, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}
	if uid != "" {
		eviction.DeleteOptions = &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))}
	}
	err := e.Client.SubResource("eviction").Create(ctx, pod, eviction)
	switch {
	case err == nil:
		return Outcome{Result: ResultEvicted}, nil
	case apierrors.IsNotFound(err), uid != "" && apierrors.IsConflict(err):
		// A conflict on the UID precondition: the pod we meant is gone and
		// another one took its name.
		return Outcome{Result: ResultGone}, nil
	}
	if msg, ok := budgetRefusal(err); ok {
		return Outcome{Result: ResultBlocked, Message: msg}, nil
	}
	return Outcome{}, fmt.Errorf("evict pod %s: %w", nn, err)
}

// delete deletes pod, only while its UID is uid when uid is set. deleted is
// true when the API server accepted the deletion, false when the pod was
// gone already (NotFound, or another UID under its name).
func (e *Evictor) delete(ctx context.Context, nn types.NamespacedName, uid types.UID) (deleted bool, err error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}
	var opts []client.DeleteOption
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	err = e.Client.Delete(ctx, pod, opts...)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err), uid != "" && apierrors.IsConflict(err):
		return false, nil
	}
	return false, fmt.Errorf("delete pod %s: %w", nn, err)
}

// budgetRefusal returns the server's message when err is the eviction API
// refusing because of PodDisruptionBudgets: 429 with a DisruptionBudget
// cause (no disruption allowed, or a budget the server has not processed
// yet), or 500 for a pod covered by several budgets. A 429 without that
// cause is the API server's own throttling and stays an error.
func budgetRefusal(err error) (string, bool) {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		return "", false
	}
	status := apiStatus.Status()
	switch status.Code {
	case http.StatusTooManyRequests:
		var causes []string
		for _, c := range causeList(status) {
			if c.Type == policyv1.DisruptionBudgetCause {
				causes = append(causes, c.Message)
			}
		}
		if len(causes) == 0 {
			return "", false
		}
		return strings.TrimSuffix(status.Message, ".") + ": " + strings.Join(causes, "; "), true
	case http.StatusInternalServerError:
		// The server says "This pod has more than one PodDisruptionBudget,
		// which the eviction subresource does not support."
		if strings.Contains(status.Message, "PodDisruptionBudget") {
			return status.Message, true
		}
	}
	return "", false
}

func causeList(s metav1.Status) []metav1.StatusCause {
	if s.Details == nil {
		return nil
	}
	return s.Details.Causes
}

var _ drain.Runner = (*Evictor)(nil)

// Run performs d's evictions and deletions through the API server; see the
// package-level Run. It makes *Evictor the drain.Runner the operation
// controller uses.
func (e *Evictor) Run(ctx context.Context, d drain.Decision) ([]drain.Stopped, []string, error) {
	return Run(ctx, e, d)
}

// Run performs a decision's evictions, then its deletions, each pod only
// while it has the UID in d.UIDs. It goes on past failures and returns the
// pods it stopped (evicted or deleted, in that order), the pods a disruption
// budget blocked ("ns/name: message") and the other failures aggregated. A
// blocked pod is not an error: drain.Plan evicts it again at the next pass.
// When ctx ends Run stops and returns its error with the others, and the
// pods it stopped until then.
//
// An eviction or deletion whose answer was lost (a timeout, a broken
// connection) is an error, not a stopped pod, even if the API server did
// act on it.
func Run(ctx context.Context, ev *Evictor, d drain.Decision) (stopped []drain.Stopped, blocked []string, err error) {
	logger := log.FromContext(ctx)
	var errs []error
	for _, nn := range d.Evict {
		if err := ctx.Err(); err != nil {
			return stopped, blocked, utilerrors.NewAggregate(append(errs, fmt.Errorf("evict pods: %w", err)))
		}
		logger.V(1).Info("Evicting pod", "pod", klog.KRef(nn.Namespace, nn.Name))
		out, err := ev.evict(ctx, nn, d.UIDs[nn])
		switch {
		case err != nil:
			errs = append(errs, err)
		case out.Blocked():
			logger.V(1).Info("Eviction blocked by a disruption budget", "pod", klog.KRef(nn.Namespace, nn.Name), "reason", out.Message)
			blocked = append(blocked, nn.String()+": "+out.Message)
		case out.Result == ResultEvicted:
			stopped = append(stopped, drain.Stopped{Pod: nn, UID: d.UIDs[nn]})
		}
	}
	for _, nn := range d.Delete {
		if err := ctx.Err(); err != nil {
			return stopped, blocked, utilerrors.NewAggregate(append(errs, fmt.Errorf("delete pods: %w", err)))
		}
		logger.Info("Deleting pod after the drain timeout", "pod", klog.KRef(nn.Namespace, nn.Name))
		deleted, err := ev.delete(ctx, nn, d.UIDs[nn])
		switch {
		case err != nil:
			errs = append(errs, err)
		case deleted:
			stopped = append(stopped, drain.Stopped{Pod: nn, UID: d.UIDs[nn], Deleted: true})
		}
	}
	return stopped, blocked, utilerrors.NewAggregate(errs)
}
